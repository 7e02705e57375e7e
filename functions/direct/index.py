"""Lambda entry point for direct invocation by agent runtimes (no API Gateway)."""

from memvault.handlers.direct import handler

__all__ = ["handler"]
