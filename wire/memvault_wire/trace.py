"""Traces and feedback as the API shows them: ids, versions, counts, reasons, timings."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memvault_wire.memory import MemoryPatch

Verdict = Literal["wrong", "outdated", "irrelevant", "helpful"]
RECALL_ID = r"^rcl_[0-9a-f]{32}$"
#: The longest feedback note: a reason, not a second memory.
MAX_NOTE_CHARS = 500
NAME = r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}$"


class FeedbackRequest(BaseModel):
    """The body of ``POST /v1/subjects/{subject_id}/feedback``."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    recall_id: str | None = Field(default=None, pattern=RECALL_ID)
    run_id: str | None = Field(default=None, pattern=NAME)
    memory_id: str = Field(pattern=r"^mem_[0-9a-f]{32}$")
    verdict: Verdict
    #: Why, in a few words ("moved to Berlin in May"). Shown to every reader of the
    #: subject's feedback, so it may hold no personal data or credential (422): what the
    #: memory should say goes in ``correction``, which is classified like any write.
    note: str | None = Field(default=None, min_length=1, max_length=MAX_NOTE_CHARS)
    #: A correction of the memory, applied by compare-and-set like ``PATCH``; it names
    #: this feedback as what prompted it.
    correction: MemoryPatch | None = None

    @model_validator(mode="after")
    def _names_a_recall_or_run(self) -> FeedbackRequest:
        if self.recall_id is None and self.run_id is None:
            raise ValueError("feedback names the recall_id (or the run_id) it is about")
        return self


class DroppedOut(BaseModel):
    """A candidate re-validation dropped, of a memory the reader may read now (one it may
    not is only counted, in ``dropped_withheld``)."""

    model_config = ConfigDict(defer_build=True)

    chain_id: str | None
    memory_id: str | None
    reason: str


class ServedOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    memory_id: str
    chain_id: str
    version: int
    rank: int


class RecallTraceOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    recall_id: str
    subject_id: str
    at: datetime
    expires_at: datetime
    caller: str
    run_id: str | None
    task_id: str | None
    query_hash: str | None
    mode: str
    limit: int
    origin: str
    filters: dict[str, Any]
    candidates: dict[str, int]
    dropped: list[DroppedOut]
    #: Dropped candidates of memories the reader may not read now: counted, never named
    #: or explained (a reason such as ``ceiling`` would tell it that a hidden fact holds
    #: the key or words it recalled).
    dropped_withheld: int = 0
    below_floor: int
    returned: list[ServedOut]
    #: Returned items left out because the reader may not read them now.
    withheld: int = 0
    embedding_model: str | None
    index_version: str | None
    timings: dict[str, float]


class FeedbackOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    feedback_id: str
    subject_id: str
    at: datetime
    expires_at: datetime
    actor: str
    verdict: str
    memory_id: str
    chain_id: str
    version: int | None
    recall_id: str | None
    run_id: str | None
    correction_memory_id: str | None
    correction_version: int | None
    note: str | None = None


class FeedbackListOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    items: list[FeedbackOut]


class ServedByOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    recall_id: str
    rank: int
    at: datetime
    run_id: str | None
    task_id: str | None


class TraceVersionOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    memory_id: str
    version: int
    status: str
    created_by: str
    created_at: datetime
    expires_at: datetime
    supersedes_id: str | None
    source_type: str
    index_status: str
    embedding_model: str | None
    served_by: list[ServedByOut]


class TraceEventOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    event_id: str
    at: datetime
    action: str
    actor: str
    memory_id: str | None
    version: int | None
    deletion_id: str | None
    detail: dict[str, Any] | None


class LastUseOut(BaseModel):
    model_config = ConfigDict(defer_build=True)

    at: datetime
    recall_id: str
    memory_id: str
    version: int
    run_id: str | None
    task_id: str | None


class MemoryTraceOut(BaseModel):
    """Why a memory exists, who wrote it, its versions and index status, its last use,
    the recalls that served each version, feedback, and where its deletion has reached."""

    model_config = ConfigDict(defer_build=True)

    memory_id: str
    chain_id: str
    state: Literal["live", "deleted"]
    current_version: int
    versions: list[TraceVersionOut]
    events: list[TraceEventOut]
    last_used: LastUseOut | None
    feedback: list[FeedbackOut]
    deletion: dict[str, Any] | None
