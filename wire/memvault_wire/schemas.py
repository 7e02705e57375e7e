"""Response models of the HTTP API (request bodies are the domain commands themselves)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memvault_wire.memory import (
    CopyState,
    DeletionJob,
    DeletionScope,
    DeletionState,
    IndexStatus,
    Memory,
    MemoryKind,
    MemoryStatus,
    Sensitivity,
    Source,
)
from memvault_wire.recall import Conflict, MatchReason, Provenance, RecallResult
from memvault_wire.run import Checkpoint


class ErrorDetail(BaseModel):
    model_config = ConfigDict(defer_build=True)

    code: str
    message: str
    details: dict[str, Any] = Field(default_factory=dict)


class ErrorBody(BaseModel):
    model_config = ConfigDict(defer_build=True)

    error: ErrorDetail


class MemoryOut(BaseModel):
    model_config = ConfigDict(from_attributes=True, defer_build=True)

    memory_id: str
    subject_id: str
    kind: MemoryKind
    canonical_key: str | None
    content: str
    tags: list[str]
    scope: dict[str, str]
    source: Source
    sensitivity: Sensitivity
    consent: bool
    confidence: float | None
    visibility: list[str]
    status: MemoryStatus
    version: int
    supersedes_id: str | None
    valid_from: datetime
    created_at: datetime
    updated_at: datetime
    expires_at: datetime
    index_status: IndexStatus
    embedding_model: str | None
    artifact_id: str | None

    @classmethod
    def of(cls, memory: Memory) -> MemoryOut:
        return cls.model_validate(memory)


class BatchItemOut(BaseModel):
    """One write of a batch, in the order sent: ``status`` is what ``POST .../memories``
    would have answered for it (201 with the memory, ``replayed`` when its request_id had
    already written it; otherwise the error status with ``error``)."""

    model_config = ConfigDict(defer_build=True)

    status: int
    replayed: bool = False
    memory: MemoryOut | None = None
    error: ErrorDetail | None = None


class MemoryBatchOut(BaseModel):
    """The answer to ``POST .../memories/batch``: every write's own outcome, and counts."""

    model_config = ConfigDict(defer_build=True)

    items: list[BatchItemOut]
    written: int
    replayed: int
    refused: int


class MemoryListOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    items: list[MemoryOut]
    next_token: str | None


class HistoryOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    memory_id: str
    versions: list[MemoryOut]


class ExportGap(BaseModel):
    """Something held about the subject that the export does not hold, and how to read it."""

    model_config = ConfigDict(defer_build=True)

    what: str
    why: str
    read_with: str


#: What the export leaves out: it holds the long-term memories (every version the
#: reader's history would show); the rest is read by id, each route under the reader's
#: own ceiling and visibility.
EXPORT_GAPS: tuple[dict[str, str], ...] = (
    dict(
        what="sessions",
        why="session memory is short-lived working state; no route lists a subject's sessions",
        read_with="GET /v1/subjects/{subject_id}/sessions/{session_id}",
    ),
    dict(
        what="runs",
        why="run state (checkpoints, operations, events) is read per run; no route lists a "
        "subject's runs",
        read_with="GET /v1/runs/{run_id}",
    ),
    dict(
        what="artifacts",
        why="artifact metadata and bytes are read per artifact; the memories that reference "
        "one carry its artifact_id",
        read_with="GET /v1/subjects/{subject_id}/artifacts/{artifact_id}",
    ),
    dict(
        what="recall_traces",
        why="a recall's trace is read by its recall_id; a memory's trace names the recalls "
        "that served it",
        read_with="GET /v1/subjects/{subject_id}/memories/{memory_id}/trace",
    ),
    dict(
        what="feedback",
        why="feedback on recalled memories is listed apart",
        read_with="GET /v1/subjects/{subject_id}/feedback",
    ),
)


class ExportOut(BaseModel):
    """The subject's long-term memories this reader may read; ``not_included`` says what
    else is held about the subject and where to read it."""

    model_config = ConfigDict(defer_build=True)

    subject_id: str
    exported_at: str
    memories: list[MemoryOut]
    not_included: list[ExportGap] = Field(
        default_factory=lambda: [ExportGap(**gap) for gap in EXPORT_GAPS]
    )


class CopyEventOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    status: CopyState
    at: datetime
    reason: str | None


class CopyOut(BaseModel):
    copy_: str = Field(alias="copy", serialization_alias="copy")
    status: CopyState
    updated_at: datetime
    reason: str | None
    attempts: int
    history: list[CopyEventOut]

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True, defer_build=True)


class DeletionOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    deletion_id: str
    subject_id: str
    scope: DeletionScope
    status: DeletionState
    requested_at: datetime
    completed_at: datetime | None
    copies: list[CopyOut]

    @classmethod
    def of(cls, job: DeletionJob) -> DeletionOut:
        return cls(
            deletion_id=job.deletion_id,
            subject_id=job.subject_id,
            scope=job.scope,
            status=job.status,
            requested_at=job.requested_at,
            completed_at=job.completed_at,
            copies=[
                CopyOut(
                    copy_=c.name,
                    status=c.status,
                    updated_at=c.updated_at,
                    reason=c.reason,
                    attempts=c.attempts,
                    history=[
                        CopyEventOut(status=e.status, at=e.at, reason=e.reason) for e in c.history
                    ],
                )
                for c in job.copies
            ],
        )


class HealthOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    status: str
    version: str
    dependencies: dict[str, str]


class SessionEnded(BaseModel):
    model_config = ConfigDict(defer_build=True)

    session_id: str
    deleted_items: int


class EventOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    event_id: str
    duplicate: bool
    applied: bool
    checkpoint: Checkpoint


class RunEventOut(BaseModel):
    """An event receipt: what arrived and what it did. The payload is never stored (only
    its hash, which is not listed either), so it is never returned."""

    model_config = ConfigDict(from_attributes=True, defer_build=True)

    event_id: str
    type: str
    received_at: datetime
    applied: bool = Field(description="whether the event changed the run")
    version: int = Field(
        description="the run's version once the event was handled (the one it wrote, "
        "when it applied)"
    )


class RunEventListOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    items: list[RunEventOut]
    next_token: str | None


class RecalledItemOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    memory: MemoryOut
    score: float
    why: MatchReason
    provenance: Provenance


class RecallOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    items: list[RecalledItemOut]
    conflicts: list[Conflict]
    notice: str
    embedding_model: str | None
    #: This recall's trace (``GET /v1/recalls/{recall_id}``); feedback names it.
    recall_id: str | None = None

    @classmethod
    def of(cls, result: RecallResult) -> RecallOut:
        return cls(
            recall_id=result.recall_id,
            items=[
                RecalledItemOut(
                    memory=MemoryOut.of(i.memory),
                    score=i.score,
                    why=i.why,
                    provenance=i.provenance,
                )
                for i in result.items
            ],
            conflicts=result.conflicts,
            notice=result.notice,
            embedding_model=result.embedding_model,
        )
