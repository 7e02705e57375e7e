"""What the index holds: one document per version chain, versioned from the table's truth.

The index is a derived copy (docs/architecture.md, invariant 7). Each chain (one fact's versions)
has at most one document, whose id is the chain id. Its OpenSearch *external version*
is computed from the memory version and where that version stands in its life::

    external_version = memory_version * STAGES + stage

Stages only move forward for one stored version (candidate/active -> superseded ->
deleted -> purged -> removed), and a newer memory version always outranks every stage
of an older one. So whatever order the stream delivers events in, duplicated or late,
the index keeps the newest state: a stale write is refused by the version check.

A chain that is superseded, deleted, purged or expired is not deleted from the index:
it is overwritten by a *tombstone document* (ids and version, no content, no vector).
OpenSearch forgets a deleted document's version after ``index.gc_deletes`` (60 s), after
which a late INSERT could bring the memory back; a tombstone never forgets.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

from memvault_wire.memory import MemoryStatus, Sensitivity


class Stage(IntEnum):
    CANDIDATE = 1
    ACTIVE = 2
    SUPERSEDED = 3
    EXPIRED = 4
    DELETED = 5
    PURGED = 6
    REMOVED = 7


STAGES = 8
LIVE_STAGES = frozenset({Stage.CANDIDATE, Stage.ACTIVE})
_BY_STATUS = {
    MemoryStatus.CANDIDATE.value: Stage.CANDIDATE,
    MemoryStatus.ACTIVE.value: Stage.ACTIVE,
    MemoryStatus.SUPERSEDED.value: Stage.SUPERSEDED,
    MemoryStatus.EXPIRED.value: Stage.EXPIRED,
    MemoryStatus.DELETED.value: Stage.DELETED,
}


def external_version(memory_version: int, stage: Stage) -> int:
    return memory_version * STAGES + int(stage)


def sensitivity_rank(value: str) -> int:
    return Sensitivity(value).rank


@dataclass(frozen=True)
class IndexDocument:
    """The searchable copy of one chain's current version (a live stage)."""

    chain_id: str
    memory_id: str
    tenant_id: str
    subject_id: str
    kind: str
    status: str
    canonical_key: str | None
    content: str
    tags: tuple[str, ...]
    scope: dict[str, str]
    sensitivity: str
    visibility: tuple[str, ...]
    source_type: str
    confidence: float | None
    memory_version: int
    subject_epoch: int
    valid_from: str
    expires_at: str
    created_at: str
    content_hash: str
    embedding: list[float] | None = None
    model_id: str | None = None
    model_version: str | None = None
    #: The Chinese model's vector, for a memory that holds Chinese (``search.language``)
    #: where the deployment has that model; absent otherwise.
    embedding_zh: list[float] | None = None
    #: The language its writer named (``auto``: detected from the content); not stored
    #: in the index, it only decides which models embed the document.
    language: str = "auto"

    def scope_pairs(self) -> list[str]:
        return [f"{k}={v}" for k, v in sorted(self.scope.items())]

    def body(self) -> dict[str, Any]:
        """The document as stored in OpenSearch (and in the embedded index)."""
        body = {
            "doc_type": "memory",
            "chain_id": self.chain_id,
            "memory_id": self.memory_id,
            "tenant_id": self.tenant_id,
            "subject_id": self.subject_id,
            "kind": self.kind,
            "status": self.status,
            "canonical_key": self.canonical_key,
            "key_text": (self.canonical_key or "").replace("-", " ").replace("_", " "),
            "content": self.content,
            "tags": list(self.tags),
            "scope": self.scope_pairs(),
            "sensitivity": self.sensitivity,
            "sensitivity_rank": sensitivity_rank(self.sensitivity),
            "visibility": list(self.visibility),
            "visible_to_all": not self.visibility,
            "source_type": self.source_type,
            "confidence": self.confidence,
            "memory_version": self.memory_version,
            "subject_epoch": self.subject_epoch,
            "valid_from": self.valid_from,
            "expires_at": self.expires_at,
            "created_at": self.created_at,
            "content_hash": self.content_hash,
            "embedding": self.embedding,
            "model_id": self.model_id,
            "model_version": self.model_version,
        }
        if self.embedding_zh is not None:
            body["embedding_zh"] = self.embedding_zh
        return body


@dataclass(frozen=True)
class IndexOp:
    """One change to the index, derived from one stream record (or one table item)."""

    chain_id: str
    tenant_id: str
    subject_id: str
    memory_id: str
    memory_version: int
    stage: Stage
    #: Present for live stages; the embedding is filled in by the indexer.
    document: IndexDocument | None = None
    #: Where the record came from (the stream sequence number), for failure reports.
    origin: str | None = field(default=None, compare=False)

    @property
    def doc_id(self) -> str:
        return self.chain_id

    @property
    def version(self) -> int:
        return external_version(self.memory_version, self.stage)

    @property
    def live(self) -> bool:
        return self.stage in LIVE_STAGES

    def tombstone_body(self) -> dict[str, Any]:
        """Ids only: what stays of a chain that is no longer recallable."""
        return {
            "doc_type": "tombstone",
            "chain_id": self.chain_id,
            "memory_id": self.memory_id,
            "tenant_id": self.tenant_id,
            "subject_id": self.subject_id,
            "status": self.stage.name.lower(),
            "memory_version": self.memory_version,
        }

    def body(self) -> dict[str, Any]:
        if self.document is not None and self.live:
            return self.document.body()
        return self.tombstone_body()


def _is_memory_version(item: dict[str, Any]) -> bool:
    return item.get("type") in ("memory", "memory-tombstone")


def op_from_images(
    event_name: str, new: dict[str, Any] | None, old: dict[str, Any] | None
) -> IndexOp | None:
    """The index change one stream record calls for; ``None`` when it concerns no memory
    version or changes nothing the index holds (such as the indexer's own status write)."""
    if event_name == "REMOVE":
        if not old or not _is_memory_version(old) or "version" not in old:
            return None
        return _op(old, Stage.REMOVED, document=False)
    if not new or not _is_memory_version(new):
        return None
    stage = _stage_of(new)
    if stage is Stage.PURGED:
        # The purge keeps ids only; the version comes from the image before it.
        source = old if old and "version" in old else new
        if "version" not in source or "tenant_id" not in source:
            return None
        return _op({**source, **new}, Stage.PURGED, document=False)
    if stage is None:
        return None
    if event_name == "MODIFY" and old and _stage_of(old) == stage:
        return None  # same stage: bookkeeping only (index status, artifact refs)
    return _op(new, stage, document=stage in LIVE_STAGES)


def _stage_of(item: dict[str, Any]) -> Stage | None:
    if item.get("type") == "memory-tombstone":
        return Stage.PURGED
    return _BY_STATUS.get(str(item.get("status")))


def op_from_item(item: dict[str, Any]) -> IndexOp | None:
    """The index change that brings a document in line with a table item (rebuilds).

    A deleted chain's head gives a tombstone, so that a rebuilt index refuses a late
    stream record of that chain just as the old one did."""
    if item.get("type") == "chain":
        if item.get("state") == "live" or "current_version" not in item:
            return None
        return IndexOp(
            chain_id=item["chain_id"],
            tenant_id=item["tenant_id"],
            subject_id=item["subject_id"],
            memory_id=item["current_memory_id"],
            memory_version=int(item["current_version"]),
            stage=Stage.PURGED,
        )
    if not _is_memory_version(item):
        return None
    stage = _stage_of(item)
    if stage is None or "version" not in item or "tenant_id" not in item:
        return None
    return _op(item, stage, document=stage in LIVE_STAGES)


def _op(item: dict[str, Any], stage: Stage, *, document: bool) -> IndexOp:
    doc = None
    if document:
        doc = IndexDocument(
            chain_id=item["chain_id"],
            memory_id=item["memory_id"],
            tenant_id=item["tenant_id"],
            subject_id=item["subject_id"],
            kind=item["kind"],
            status=item["status"],
            canonical_key=item.get("canonical_key"),
            content=item["content"],
            tags=tuple(item.get("tags") or ()),
            scope=dict(item.get("scope") or {}),
            sensitivity=item["sensitivity"],
            visibility=tuple(item.get("visibility") or ()),
            source_type=item["source_type"],
            confidence=item.get("confidence"),
            memory_version=int(item["version"]),
            subject_epoch=int(item.get("subject_epoch", 0)),
            valid_from=item["valid_from"],
            expires_at=item["expires_at"],
            created_at=item["created_at"],
            content_hash=item["content_hash"],
            language=item.get("language", "auto"),
        )
    return IndexOp(
        chain_id=item["chain_id"],
        tenant_id=item["tenant_id"],
        subject_id=item["subject_id"],
        memory_id=item["memory_id"],
        memory_version=int(item["version"]),
        stage=stage,
        document=doc,
    )
