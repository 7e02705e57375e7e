"""Lambda authorizer for API Gateway: verifies the caller's JWT."""

from memvault.handlers.authorizer import handler

__all__ = ["handler"]
