"""Lambda entry point for the purge pipeline's tasks (Step Functions invokes one per step)."""

from memvault.purge.handler import lambda_handler as handler

__all__ = ["handler"]
