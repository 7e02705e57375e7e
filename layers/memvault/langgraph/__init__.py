"""A LangGraph checkpointer on memvault's run state: :class:`MemvaultSaver`.

Needs the ``langgraph`` extra (``pip install 'memvault[langgraph]'``); ``import
memvault`` never loads this package.
"""

from __future__ import annotations

from memvault.langgraph.saver import CheckpointConflict, MemvaultSaver, ThreadForked

__all__ = ["CheckpointConflict", "MemvaultSaver", "ThreadForked"]
