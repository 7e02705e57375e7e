"""The change feed: what the indexer and other consumers read, whatever the store.

On AWS the memory table's DynamoDB stream carries the changes (the Lambda event source
hands the indexer stream records, turned into ``Change`` by the DynamoDB adapter);
locally a transactional outbox, written in the same SQLite transaction as the change,
carries them. Images are plain records in the memory codec's field names (``type``,
``memory_id``, ``status``...), never a store's wire format.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


class ChangeKind(StrEnum):
    INSERT = "INSERT"
    MODIFY = "MODIFY"
    REMOVE = "REMOVE"


@dataclass(frozen=True)
class Change:
    """One change of one stored record, as the change feed delivers it."""

    #: The logical table (``memory``...).
    table: str
    kind: ChangeKind
    new: Mapping[str, Any] | None
    old: Mapping[str, Any] | None
    #: The feed's position of this change (a stream sequence number, an outbox sequence):
    #: what a consumer reports back to be retried from.
    position: str = ""
    #: A removal made by the store's own expiry (DynamoDB TTL, the local sweeper), not by
    #: a caller.
    service_delete: bool = False
    extra: Mapping[str, Any] = field(default_factory=dict)


class ChangeFeed(Protocol):
    """A durable, ordered feed with a consumer cursor (the local outbox)."""

    def read(self, consumer: str, limit: int) -> list[Change]:
        """The next changes after the consumer's cursor, oldest first."""
        ...

    def acknowledge(self, consumer: str, position: str) -> None:
        """Move the consumer's cursor past ``position`` (everything up to it is done)."""
        ...

    def prune(self) -> int:
        """Drop changes every consumer has acknowledged; returns how many went."""
        ...
