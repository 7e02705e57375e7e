"""Long-term memory: commands a caller sends and the records the service returns.

Bounds follow the API contract (docs/api.md, "Long-term memory").
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memvault_wire.types import (
    AgentRole,
    CanonicalKey,
    Confidence,
    DeletionId,
    ExternalId,
    MemoryId,
    Reference,
    RequestId,
    ScopeKey,
    ScopeValue,
    SubjectId,
    Tag,
)

MAX_CONTENT_CHARS = 4000
MAX_TTL_SECONDS = 365 * 86_400
#: Writes in one ``POST .../memories/batch`` (DynamoDB's own batch size).
MAX_BATCH_WRITES = 25


class MemoryKind(StrEnum):
    EPISODIC = "episodic"
    SEMANTIC = "semantic"
    PROCEDURAL = "procedural"


class SourceType(StrEnum):
    USER_STATEMENT = "user_statement"
    USER_CONFIRMED = "user_confirmed"
    TOOL_RESULT = "tool_result"
    MODEL_INFERRED = "model_inferred"
    HUMAN_REVIEW = "human_review"


class Sensitivity(StrEnum):
    PUBLIC = "public"
    INTERNAL = "internal"
    PII = "pii"
    #: Accepted by the parser only so that the policy can refuse it with ``secret_detected``.
    SECRET = "secret"  # noqa: S105 - a class name, not a password

    @property
    def rank(self) -> int:
        return _SENSITIVITY_RANK[self]


_SENSITIVITY_RANK = {
    Sensitivity.PUBLIC: 0,
    Sensitivity.INTERNAL: 1,
    Sensitivity.PII: 2,
    Sensitivity.SECRET: 3,
}


class MemoryStatus(StrEnum):
    CANDIDATE = "candidate"
    ACTIVE = "active"
    SUPERSEDED = "superseded"
    EXPIRED = "expired"
    DELETED = "deleted"


class IndexStatus(StrEnum):
    PENDING = "pending"
    INDEXED = "indexed"
    FAILED = "failed"


#: Where a turn may sit in its conversation (``source.turn``).
MAX_TURN = 1_000_000_000


class Source(BaseModel):
    """Where a memory came from: what kind of source, a reference to it, and, for a
    memory taken from a conversation, the conversation (``thread``) and its place in it
    (``turn``). Recall ranks the neighbouring turns of a strong match up with it: the
    answer to a question often sits one turn after the words that match it."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    type: SourceType
    ref: Reference | None = None
    thread: Reference | None = None
    turn: int | None = Field(default=None, ge=0, le=MAX_TURN, strict=True)

    @model_validator(mode="after")
    def _turn_needs_thread(self) -> Source:
        if self.turn is not None and self.thread is None:
            raise ValueError("source.turn is a position in a conversation: set source.thread too")
        return self

    def neighbours(self) -> tuple[tuple[str, int], tuple[str, int]] | None:
        """The (thread, turn) keys of the turns just before and after this one."""
        if self.thread is None or self.turn is None:
            return None
        return (self.thread, self.turn - 1), (self.thread, self.turn + 1)


def _no_blank(value: str) -> str:
    if not value.strip():
        raise ValueError("must contain more than whitespace")
    return value


#: Which embedding models read a text where a deployment has one per language (locally,
#: e5-small-v2 and bge-small-zh-v1.5): ``auto`` detects it (Chinese when the text holds
#: two Han characters), ``en`` or ``zh`` names it. Nothing changes where one model reads
#: every language (Titan V2).
Language = Literal["auto", "en", "zh"]


class MemoryWrite(BaseModel):
    """The body of ``POST /v1/subjects/{subject_id}/memories``."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    request_id: RequestId
    kind: MemoryKind
    canonical_key: CanonicalKey | None = None
    content: str = Field(min_length=1, max_length=MAX_CONTENT_CHARS)
    tags: list[Tag] = Field(default_factory=list, max_length=20)
    scope: dict[ScopeKey, ScopeValue] = Field(default_factory=dict, max_length=10)
    source: Source
    sensitivity: Sensitivity = Sensitivity.INTERNAL
    consent: bool = Field(default=False, strict=True)
    ttl_seconds: int | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS, strict=True)
    confidence: Confidence | None = Field(default=None, ge=0.0, le=1.0, strict=True)
    visibility: list[AgentRole] = Field(default_factory=list, max_length=20)
    artifact_id: ExternalId | None = Field(default=None, max_length=64)
    #: Optional compare-and-set for a canonical key: the version the caller last saw.
    expected_version: int | None = Field(default=None, ge=1, strict=True)
    #: The content's language for the embedders (:data:`Language`).
    language: Language = "auto"

    _content_not_blank = field_validator("content")(_no_blank)

    @model_validator(mode="after")
    def _expected_version_needs_key(self) -> MemoryWrite:
        if self.expected_version is not None and self.canonical_key is None:
            raise ValueError("expected_version applies only to a write with a canonical_key")
        return self

    def fingerprint_payload(self) -> dict[str, Any]:
        """What must match for a retry to count as the same request."""
        payload = self.model_dump(mode="json", exclude={"request_id"})
        # Unset conversation fields leave the fingerprint as it was before they existed,
        # so that a request retried across an upgrade still replays.
        for name in ("thread", "turn"):
            if payload["source"].get(name) is None:
                payload["source"].pop(name, None)
        if payload["language"] == "auto":
            del payload["language"]
        return payload


class MemoryBatchWrite(BaseModel):
    """The body of ``POST /v1/subjects/{subject_id}/memories/batch``: up to
    :data:`MAX_BATCH_WRITES` writes, each with its own ``request_id``, each committed or
    refused on its own exactly as ``POST .../memories`` would."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    memories: list[MemoryWrite] = Field(min_length=1, max_length=MAX_BATCH_WRITES)

    @model_validator(mode="after")
    def _one_request_per_id(self) -> MemoryBatchWrite:
        # Two writes under one request_id would make the second a replay (or a 409) of the
        # first, depending on their order: refused before anything is written.
        first: dict[str, int] = {}
        for i, write in enumerate(self.memories):
            if write.request_id in first:
                raise ValueError(
                    f"memories {first[write.request_id]} and {i} share a request_id; "
                    "give each write its own"
                )
            first[write.request_id] = i
        return self


class MemoryPatch(BaseModel):
    """The body of ``PATCH .../memories/{memory_id}``: a correction, as a new version.

    The fact's identity (kind, canonical key, scope) cannot change; write a new fact.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    expected_version: int = Field(ge=1, strict=True)
    content: str | None = Field(default=None, min_length=1, max_length=MAX_CONTENT_CHARS)
    tags: list[Tag] | None = Field(default=None, max_length=20)
    source: Source | None = None
    sensitivity: Sensitivity | None = None
    consent: bool | None = Field(default=None, strict=True)
    ttl_seconds: int | None = Field(default=None, ge=1, le=MAX_TTL_SECONDS, strict=True)
    confidence: Confidence | None = Field(default=None, ge=0.0, le=1.0, strict=True)
    visibility: list[AgentRole] | None = Field(default=None, max_length=20)
    #: Confirming a candidate: the only status a caller may set.
    status: Literal["active"] | None = None
    #: The feedback (``fbk_...``) or recall (``rcl_...``) that prompted this correction;
    #: it must be the same subject's. Recorded in the audit trail, changes nothing else.
    prompted_by: str | None = Field(default=None, pattern=r"^(fbk|rcl)_[0-9a-f]{32}$")
    language: Language | None = None

    @field_validator("content")
    @classmethod
    def _content_not_blank(cls, value: str | None) -> str | None:
        return None if value is None else _no_blank(value)

    @model_validator(mode="after")
    def _changes_something(self) -> MemoryPatch:
        if not self.model_fields_set - {"expected_version", "prompted_by"}:
            raise ValueError("a correction must change at least one field")
        return self


class Memory(BaseModel):
    """One version of a memory, as stored and as returned."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    memory_id: MemoryId
    tenant_id: str
    subject_id: SubjectId
    chain_id: str
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
    valid_from: datetime
    expires_at: datetime
    supersedes_id: str | None
    content_hash: str
    index_status: IndexStatus
    embedding_model: str | None
    artifact_id: str | None
    request_id: str | None
    created_by: str
    created_at: datetime
    updated_at: datetime
    subject_epoch: int
    #: As written (``auto`` unless the writer named it).
    language: Language = "auto"

    def is_live(self, now: datetime) -> bool:
        """Current, not tombstoned by status, and unexpired (subject epoch checked apart)."""
        return (
            self.status in (MemoryStatus.ACTIVE, MemoryStatus.CANDIDATE) and now < self.expires_at
        )

    def public_view(self) -> dict[str, Any]:
        """The memory as the API returns it: no internal bookkeeping fields."""
        return self.model_dump(
            mode="json",
            exclude={"tenant_id", "chain_id", "request_id", "subject_epoch", "created_by"},
        )


class DeletionState(StrEnum):
    REQUESTED = "REQUESTED"
    BLOCKED = "BLOCKED"
    PURGING = "PURGING"
    COMPLETED = "COMPLETED"
    FAILED = "FAILED"


class CopyState(StrEnum):
    PENDING = "PENDING"
    DONE = "DONE"
    FAILED = "FAILED"
    NOT_APPLICABLE = "NOT_APPLICABLE"


class DeletionScope(StrEnum):
    MEMORY = "memory"
    SUBJECT = "subject"
    ARTIFACT = "artifact"


class CopyEvent(BaseModel):
    """One attempt at clearing a copy, or a change of its state (ids and reasons only)."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    status: CopyState
    at: datetime
    reason: str | None = None


class CopyStatus(BaseModel):
    # ``copy`` is the contract's field name; in Python it would shadow BaseModel.copy.
    model_config = ConfigDict(
        frozen=True, populate_by_name=True, serialize_by_alias=True, defer_build=True
    )

    name: str = Field(alias="copy")
    status: CopyState
    updated_at: datetime
    reason: str | None = None
    #: Attempts made at this copy so far (a retried step counts each try).
    attempts: int = 0
    history: list[CopyEvent] = Field(default_factory=list)


class DeletionJob(BaseModel):
    model_config = ConfigDict(frozen=True, defer_build=True)

    deletion_id: DeletionId
    tenant_id: str
    subject_id: str
    scope: DeletionScope
    #: The chain tombstoned (memory scope) or the subject epoch retired (subject scope).
    target: str
    status: DeletionState
    requested_by: str
    requested_at: datetime
    completed_at: datetime | None
    copies: list[CopyStatus]

    def public_view(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude={"tenant_id", "target"})


class MemoryPage(BaseModel):
    model_config = ConfigDict(defer_build=True)

    items: list[Memory]
    next_token: str | None = None
