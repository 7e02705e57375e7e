"""The trace store's records: a recall's trace (ids, counts, versions, reasons and timings,
never memory content or query text), the "served by" link that ties a memory chain's
version to a recall that returned it, and feedback on a recall. The store's port is
``memvault.storage.ports.traces``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from memvault_wire.trace import FeedbackOut, LastUseOut, RecallTraceOut, ServedByOut


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
    #: The subject's epoch re-validation judged every candidate under (None when nothing
    #: was read back). A forget of that epoch removes the trace whenever it was made: a
    #: recall that overlapped the forget may have served what the forget removes.
    subject_epoch: int | None = None


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
    #: The recall's ``subject_epoch``.
    subject_epoch: int | None = None


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
    #: The caller's reason, as sent (checked for personal data and credentials).
    note: str | None = None
    #: The subject's epoch when the memory was judged readable: a forget of that epoch
    #: removes the feedback whenever it was given.
    subject_epoch: int | None = None


def recall_trace_out(t: RecallTrace, readable: set[str] | None = None) -> RecallTraceOut:
    """The trace as the API shows it. ``readable``: the memory ids the reader may read;
    others are withheld (counted, never named)."""
    data = asdict(t)
    data.pop("tenant_id")
    data.pop("subject_epoch")  # bookkeeping for the purge, not shown
    if readable is not None:
        data["returned"] = [r for r in data["returned"] if r["memory_id"] in readable]
        data["withheld"] = len(t.returned) - len(data["returned"])
        shown = [d for d in data["dropped"] if d["memory_id"] in readable]
        data["dropped_withheld"] = len(data["dropped"]) - len(shown)
        data["dropped"] = shown
    return RecallTraceOut.model_validate(data)


def feedback_out(f: Feedback) -> FeedbackOut:
    data = asdict(f)
    data.pop("tenant_id")
    data.pop("subject_epoch")
    return FeedbackOut.model_validate(data)


def served_by_out(link: ServedLink) -> ServedByOut:
    return ServedByOut(
        recall_id=link.recall_id,
        rank=link.rank,
        at=link.at,
        run_id=link.run_id,
        task_id=link.task_id,
    )


def last_use_out(link: ServedLink) -> LastUseOut:
    return LastUseOut(
        at=link.at,
        recall_id=link.recall_id,
        memory_id=link.memory_id,
        version=link.version,
        run_id=link.run_id,
        task_id=link.task_id,
    )
