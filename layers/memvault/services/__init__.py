"""Domain services: the rules of memvault, over ports for storage, time and ids."""
