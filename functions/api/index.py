"""Lambda entry point behind API Gateway: every route of the HTTP API."""

from memvault.api.app import lambda_handler as handler

__all__ = ["handler"]
