"""LangGraph adapters on memvault: :class:`MemvaultSaver`, a checkpointer on run state, and
:class:`MemvaultStore`, a long-term store on governed memory.

Needs the ``langgraph`` extra (``pip install 'memvault-client[langgraph]'``); ``import
memvault_client`` never loads this package.
"""

from __future__ import annotations

from memvault_client.langgraph.saver import (
    CheckpointConflict,
    CheckpointWithheld,
    MemvaultSaver,
    ThreadForked,
)
from memvault_client.langgraph.store import MemvaultStore, StoreValueError

__all__ = [
    "CheckpointConflict",
    "CheckpointWithheld",
    "MemvaultSaver",
    "MemvaultStore",
    "StoreValueError",
    "ThreadForked",
]
