"""The trace store's port: recall traces, the "served by" links that tie a memory chain's
versions to the recalls that returned them, and feedback on recalls.

Ids, counts, versions, reasons and timings only: never memory content, never query text
(a recall trace keeps a salted hash of the query at most). Every record has its own
expiry (``MEMVAULT_TRACE_RETENTION_DAYS``); adapters check it on read, since DynamoDB
TTL deletes lazily and the embedded store's sweeper runs on its own schedule.

Layout (both adapters): one partition per (tenant, subject), sort keys
``RECALL#<recall_id>``, ``SERVED#<chain_id>#<time>#<recall_id>`` and
``FEEDBACK#<time>#<feedback_id>``. A recall is one write of its trace and one link per
returned chain (one batch); "last use" of a chain is its newest link.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class DroppedCandidate:
    chain_id: str
    memory_id: str | None
    reason: str


@dataclass(frozen=True)
class ServedItem:
    """A memory version a recall returned, at its rank (1 = first)."""

    memory_id: str
    chain_id: str
    version: int
    rank: int


@dataclass(frozen=True)
class RecallTrace:
    recall_id: str
    tenant_id: str
    subject_id: str
    at: datetime
    expires_at: datetime
    #: The caller (principal) and, when it said so, the run or task the recall was for.
    caller: str
    run_id: str | None = None
    task_id: str | None = None
    #: Salted hash of the query (equal queries of a tenant hash equal), never the text.
    query_hash: str | None = None
    mode: str = "hybrid"
    limit: int = 10
    #: The hard filters: kinds, tag and scope counts, ceiling, agent role (no values).
    filters: Mapping[str, Any] = field(default_factory=dict)
    #: Candidates per source: exact_key, keyword, vector, fused.
    candidates: Mapping[str, int] = field(default_factory=dict)
    dropped: tuple[DroppedCandidate, ...] = ()
    #: Candidates the table allowed that the relevance floor left out.
    below_floor: int = 0
    returned: tuple[ServedItem, ...] = ()
    embedding_model: str | None = None
    index_version: str | None = None
    timings: Mapping[str, float] = field(default_factory=dict)
    #: ``context`` when working-memory assembly made the recall.
    origin: str = "recall"


@dataclass(frozen=True)
class ServedLink:
    """One recall that returned a version of a chain (the chain's "served by" list)."""

    chain_id: str
    recall_id: str
    memory_id: str
    version: int
    rank: int
    at: datetime
    run_id: str | None = None
    task_id: str | None = None


@dataclass(frozen=True)
class Feedback:
    feedback_id: str
    tenant_id: str
    subject_id: str
    at: datetime
    expires_at: datetime
    actor: str
    verdict: str
    memory_id: str
    chain_id: str
    #: The version the feedback is about (the one the recall served, when it named one).
    version: int | None = None
    recall_id: str | None = None
    run_id: str | None = None
    #: The version a correction sent with the feedback made, if any.
    correction_memory_id: str | None = None
    correction_version: int | None = None


class TraceStore(Protocol):
    def record_recall(self, trace: RecallTrace) -> None:
        """The trace and one served link per returned item: one batch, not atomic (a
        lost link makes "last use" older, never wrong about content)."""
        ...

    def recall(
        self, tenant_id: str, subject_id: str, recall_id: str, now: datetime
    ) -> RecallTrace | None: ...

    def served(
        self, tenant_id: str, subject_id: str, chain_id: str, now: datetime, limit: int = 50
    ) -> list[ServedLink]:
        """Newest first."""
        ...

    def add_feedback(self, feedback: Feedback) -> None: ...

    def feedback(
        self,
        tenant_id: str,
        subject_id: str,
        now: datetime,
        *,
        chain_id: str | None = None,
        limit: int = 100,
    ) -> list[Feedback]:
        """Newest first; only the chain's when ``chain_id`` is given."""
        ...

    def forget_subject(self, tenant_id: str, subject_id: str, before: datetime) -> int:
        """Remove every trace, link and feedback of the subject made by ``before``."""
        ...

    def forget_chain(self, tenant_id: str, subject_id: str, chain_id: str) -> int:
        """Remove the chain's served links and the feedback about it (recall traces keep
        the ids they returned until they expire)."""
        ...
