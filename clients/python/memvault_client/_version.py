"""The client packages' version (memvault-client)."""

__version__ = "0.1.0"
