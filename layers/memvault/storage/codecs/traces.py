"""The trace store's records as plain items, shared by both adapters: sort keys, and
each record to and from a JSON-able dict (ids, counts, versions, timings only)."""

from __future__ import annotations

from typing import Any

from memvault.clock import iso, parse_iso
from memvault.models.trace_records import (
    DroppedCandidate,
    Feedback,
    RecallTrace,
    ServedItem,
    ServedLink,
)

RECALL = "RECALL#"
SERVED = "SERVED#"
FEEDBACK = "FEEDBACK#"


def traces_pk(tenant_id: str, subject_id: str) -> str:
    """``~`` cannot appear in a subject id, so this never meets ``<tenant>#<subject>``."""
    return f"{tenant_id}#~traces#{subject_id}"


def recall_sk(recall_id: str) -> str:
    return f"{RECALL}{recall_id}"


def served_prefix(chain_id: str) -> str:
    return f"{SERVED}{chain_id}#"


def served_sk(link: ServedLink) -> str:
    return f"{served_prefix(link.chain_id)}{iso(link.at)}#{link.recall_id}"


def judged_by(item: dict[str, Any], epoch: int | None) -> bool:
    """Whether a stored trace or link comes from a recall judged under a subject epoch up
    to ``epoch`` (never, when either is unknown)."""
    held = item.get("subject_epoch")
    return epoch is not None and held is not None and int(held) <= epoch


def feedback_sk(fb: Feedback) -> str:
    return f"{FEEDBACK}{iso(fb.at)}#{fb.feedback_id}"


def recall_item(t: RecallTrace) -> dict[str, Any]:
    return {
        "recall_id": t.recall_id,
        "tenant_id": t.tenant_id,
        "subject_id": t.subject_id,
        "at": iso(t.at),
        "expires_at": iso(t.expires_at),
        "caller": t.caller,
        "run_id": t.run_id,
        "task_id": t.task_id,
        "query_hash": t.query_hash,
        "mode": t.mode,
        "limit": t.limit,
        "filters": dict(t.filters),
        "candidates": dict(t.candidates),
        "dropped": [[d.chain_id, d.memory_id, d.reason] for d in t.dropped],
        "below_floor": t.below_floor,
        "returned": [[s.memory_id, s.chain_id, s.version, s.rank] for s in t.returned],
        "embedding_model": t.embedding_model,
        "index_version": t.index_version,
        "timings": {k: float(v) for k, v in t.timings.items()},
        "origin": t.origin,
        "subject_epoch": t.subject_epoch,
    }


def recall_from(i: dict[str, Any]) -> RecallTrace:
    return RecallTrace(
        recall_id=i["recall_id"],
        tenant_id=i["tenant_id"],
        subject_id=i["subject_id"],
        at=parse_iso(i["at"]),
        expires_at=parse_iso(i["expires_at"]),
        caller=i["caller"],
        run_id=i.get("run_id"),
        task_id=i.get("task_id"),
        query_hash=i.get("query_hash"),
        mode=i.get("mode", "hybrid"),
        limit=int(i.get("limit", 10)),
        filters=i.get("filters") or {},
        candidates={k: int(v) for k, v in (i.get("candidates") or {}).items()},
        dropped=tuple(DroppedCandidate(c, m, r) for c, m, r in i.get("dropped") or []),
        below_floor=int(i.get("below_floor", 0)),
        returned=tuple(ServedItem(m, c, int(v), int(r)) for m, c, v, r in i.get("returned") or []),
        embedding_model=i.get("embedding_model"),
        index_version=i.get("index_version"),
        timings={k: float(v) for k, v in (i.get("timings") or {}).items()},
        origin=i.get("origin", "recall"),
        subject_epoch=i.get("subject_epoch"),
    )


def links(t: RecallTrace) -> list[ServedLink]:
    return [
        ServedLink(
            chain_id=s.chain_id,
            recall_id=t.recall_id,
            memory_id=s.memory_id,
            version=s.version,
            rank=s.rank,
            at=t.at,
            run_id=t.run_id,
            task_id=t.task_id,
            subject_epoch=t.subject_epoch,
        )
        for s in t.returned
    ]


def link_item(link: ServedLink, expires_at: str) -> dict[str, Any]:
    return {
        "chain_id": link.chain_id,
        "recall_id": link.recall_id,
        "memory_id": link.memory_id,
        "version": link.version,
        "rank": link.rank,
        "at": iso(link.at),
        "expires_at": expires_at,
        "run_id": link.run_id,
        "task_id": link.task_id,
        "subject_epoch": link.subject_epoch,
    }


def link_from(i: dict[str, Any]) -> ServedLink:
    return ServedLink(
        chain_id=i["chain_id"],
        recall_id=i["recall_id"],
        memory_id=i["memory_id"],
        version=int(i["version"]),
        rank=int(i["rank"]),
        at=parse_iso(i["at"]),
        run_id=i.get("run_id"),
        task_id=i.get("task_id"),
        subject_epoch=i.get("subject_epoch"),
    )


def feedback_item(fb: Feedback) -> dict[str, Any]:
    return {
        "feedback_id": fb.feedback_id,
        "tenant_id": fb.tenant_id,
        "subject_id": fb.subject_id,
        "at": iso(fb.at),
        "expires_at": iso(fb.expires_at),
        "actor": fb.actor,
        "verdict": fb.verdict,
        "memory_id": fb.memory_id,
        "chain_id": fb.chain_id,
        "version": fb.version,
        "recall_id": fb.recall_id,
        "run_id": fb.run_id,
        "correction_memory_id": fb.correction_memory_id,
        "correction_version": fb.correction_version,
        "note": fb.note,
        "subject_epoch": fb.subject_epoch,
    }


def feedback_from(i: dict[str, Any]) -> Feedback:
    return Feedback(
        feedback_id=i["feedback_id"],
        tenant_id=i["tenant_id"],
        subject_id=i["subject_id"],
        at=parse_iso(i["at"]),
        expires_at=parse_iso(i["expires_at"]),
        actor=i["actor"],
        verdict=i["verdict"],
        memory_id=i["memory_id"],
        chain_id=i["chain_id"],
        version=None if i.get("version") is None else int(i["version"]),
        recall_id=i.get("recall_id"),
        run_id=i.get("run_id"),
        correction_memory_id=i.get("correction_memory_id"),
        correction_version=None
        if i.get("correction_version") is None
        else int(i["correction_version"]),
        note=i.get("note"),
        subject_epoch=i.get("subject_epoch"),
    )
