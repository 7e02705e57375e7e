"""The write policy: what may become a memory, and how it is classified."""
