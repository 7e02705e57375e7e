"""Keeping the search index in step with the memory table (stream consumer and rebuilds)."""
