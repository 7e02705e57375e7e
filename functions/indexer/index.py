"""Lambda entry point on the memory table's stream: keeps the search index in step."""

from memvault.storage.dynamodb.stream_handler import lambda_handler as handler

__all__ = ["handler"]
