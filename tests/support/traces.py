"""A recall trace and feedback to store in tests of the trace store (ids, counts and
timings only)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

from memvault.models.trace_records import DroppedCandidate, Feedback, RecallTrace, ServedItem

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def a_trace(recall_id: str, at: datetime = NOW, **kw: Any) -> RecallTrace:
    """Tenant ``t1``, subject ``u1``: returned ``chn_b`` and ``chn_c``, dropped ``chn_a``;
    ``kw`` replaces any field."""
    base = RecallTrace(
        recall_id=recall_id,
        tenant_id="t1",
        subject_id="u1",
        at=at,
        expires_at=at + timedelta(days=30),
        caller="agent:planner",
        run_id="run-1",
        task_id=None,
        query_hash="ab" * 16,
        filters={"kinds": ["semantic"], "tags": 1, "max_sensitivity": "internal"},
        candidates={"exact_key": 0, "keyword": 3, "vector": 4, "fused": 5},
        dropped=(DroppedCandidate("chn_a", "mem_a", "deleted"),),
        returned=(ServedItem("mem_b", "chn_b", 2, 1), ServedItem("mem_c", "chn_c", 1, 2)),
        embedding_model="hashing@1",
        index_version="memories--hashing",
        timings={"embed": 1.5, "total": 3.25},
    )
    return replace(base, **kw)


def a_feedback(fid: str, at: datetime = NOW, chain_id: str = "chn_b", **kw: Any) -> Feedback:
    """A ``wrong`` verdict on ``mem_b`` (version 2) that ``rcl_1`` served; ``kw`` replaces
    any field."""
    return replace(
        Feedback(
            feedback_id=fid,
            tenant_id="t1",
            subject_id="u1",
            at=at,
            expires_at=at + timedelta(days=30),
            actor="user:u1",
            verdict="wrong",
            memory_id="mem_b",
            chain_id=chain_id,
            version=2,
            recall_id="rcl_1",
        ),
        **kw,
    )
