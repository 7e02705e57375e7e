"""Scheduled: sweeps uncommitted uploads and finishes unfinished deletions."""

from memvault.handlers.sweeper import handler

__all__ = ["handler"]
