"""Lambda entry point behind API Gateway: every route of the HTTP API."""

from memvault.handlers.api import handler

__all__ = ["handler"]
