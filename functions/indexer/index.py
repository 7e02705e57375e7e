"""Lambda entry point on the memory table's stream: keeps the search index in step."""

from memvault.handlers.indexer import handler

__all__ = ["handler"]
