"""``TraceStore`` on DynamoDB: items in the audit table, under the partition
``<tenant>#~traces#<subject>`` (led by the tenant, so the pool mode's
``dynamodb:LeadingKeys`` condition confines them like every other item, with no table or
grant of their own). Each item carries ``ttl``: DynamoDB expires it by itself (lazily, so
reads check ``expires_at`` too).

A recall or feedback judged under a subject epoch is checked against the subject's epoch
once written (a strongly consistent read of the memory table's subject record): if a
forget retired that epoch meanwhile, its purge's traces step may have run already, so the
items just written are deleted again. The forget retires the epoch before its purge
starts, so a record written after the traces step always sees the retired epoch. (A
transaction with the epoch as a ``ConditionCheck`` would hold at most 99 items, and a
recall of 100 writes 101.)"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from memvault.clock import iso
from memvault.models.trace_records import Feedback, RecallTrace, ServedLink
from memvault.storage.codecs import traces as ti
from memvault.storage.dynamodb.dynamo import Dynamo
from memvault.storage.dynamodb.subjects import subject_epoch

TABLE = "audit"


def _ttl(expires_at: datetime) -> int:
    return int(expires_at.timestamp())


class DynamoTraceStore:
    def __init__(self, db: Dynamo) -> None:
        self.db = db

    def record_recall(self, trace: RecallTrace) -> None:
        pk = ti.traces_pk(trace.tenant_id, trace.subject_id)
        ttl = _ttl(trace.expires_at)
        items: list[dict[str, Any]] = [
            {"pk": pk, "sk": ti.recall_sk(trace.recall_id), "ttl": ttl, **ti.recall_item(trace)}
        ]
        expires = iso(trace.expires_at)
        items += [
            {"pk": pk, "sk": ti.served_sk(link), "ttl": ttl, **ti.link_item(link, expires)}
            for link in ti.links(trace)
        ]
        self.db.put_many(TABLE, items)
        self._unless_retired(trace.tenant_id, trace.subject_id, trace.subject_epoch, items)

    def _unless_retired(
        self, tenant_id: str, subject_id: str, judged_under: int | None, items: list[dict[str, Any]]
    ) -> None:
        """Delete ``items``, just written, if a forget has retired ``judged_under``."""
        if judged_under is None:
            return
        if subject_epoch(self.db, tenant_id, subject_id) > judged_under:
            self.db.delete_many(TABLE, [(i["pk"], i["sk"]) for i in items])

    def recall(
        self, tenant_id: str, subject_id: str, recall_id: str, now: datetime
    ) -> RecallTrace | None:
        item = self.db.get(TABLE, ti.traces_pk(tenant_id, subject_id), ti.recall_sk(recall_id))
        if item is None or item["expires_at"] <= iso(now):
            return None
        return ti.recall_from(item)

    def served(
        self, tenant_id: str, subject_id: str, chain_id: str, now: datetime, limit: int = 50
    ) -> list[ServedLink]:
        items, _ = self.db.query(
            TABLE,
            ti.traces_pk(tenant_id, subject_id),
            ti.served_prefix(chain_id),
            newest_first=True,
            limit=limit,
        )
        return [ti.link_from(i) for i in items if i["expires_at"] > iso(now)]

    def add_feedback(self, feedback: Feedback) -> None:
        item = {
            "pk": ti.traces_pk(feedback.tenant_id, feedback.subject_id),
            "sk": ti.feedback_sk(feedback),
            "ttl": _ttl(feedback.expires_at),
            **ti.feedback_item(feedback),
        }
        self.db.put(TABLE, item)
        self._unless_retired(
            feedback.tenant_id, feedback.subject_id, feedback.subject_epoch, [item]
        )

    def feedback(
        self,
        tenant_id: str,
        subject_id: str,
        now: datetime,
        *,
        chain_id: str | None = None,
        limit: int = 100,
    ) -> list[Feedback]:
        out: list[Feedback] = []
        start: str | None = None
        pk = ti.traces_pk(tenant_id, subject_id)
        while len(out) < limit:
            items, start = self.db.query(
                TABLE, pk, ti.FEEDBACK, start_sk=start, newest_first=True, limit=100
            )
            out += [
                ti.feedback_from(i)
                for i in items
                if i["expires_at"] > iso(now) and (chain_id is None or i["chain_id"] == chain_id)
            ]
            if start is None:
                break
        return out[:limit]

    def forget_subject(
        self, tenant_id: str, subject_id: str, before: datetime, epoch: int | None = None
    ) -> int:
        pk = ti.traces_pk(tenant_id, subject_id)
        cutoff = iso(before)
        doomed = [
            (pk, i["sk"])
            for i in self.db.query_all(TABLE, pk, "")
            if i["at"] <= cutoff or ti.judged_by(i, epoch)
        ]
        return self.db.delete_many(TABLE, doomed)

    def flush(self, tenant_id: str | None = None, subject_id: str | None = None) -> None:
        """Nothing to wait for: ``record_recall`` writes before it returns."""

    def forget_chain(self, tenant_id: str, subject_id: str, chain_id: str) -> int:
        pk = ti.traces_pk(tenant_id, subject_id)
        doomed = [(pk, i["sk"]) for i in self.db.query_all(TABLE, pk, ti.served_prefix(chain_id))]
        doomed += [
            (pk, i["sk"])
            for i in self.db.query_all(TABLE, pk, ti.FEEDBACK)
            if i.get("chain_id") == chain_id
        ]
        return self.db.delete_many(TABLE, doomed)
