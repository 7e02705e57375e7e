"""Lambda entry point for the purge pipeline's tasks (one per Step Functions state)."""

from memvault.handlers.purge import handler

__all__ = ["handler"]
