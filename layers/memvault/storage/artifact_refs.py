"""Moved to ``memvault.storage.dynamodb.artifacts.add_reference`` (the DynamoDB adapter
of the artifact store); this name stays until the memory and run stores import it from
there."""

from __future__ import annotations

from memvault.storage.dynamodb.artifacts import add_reference

__all__ = ["add_reference"]
