"""Recall's search index: documents derived from the memory table, and its adapters."""
