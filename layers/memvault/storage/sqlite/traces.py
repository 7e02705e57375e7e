"""``TraceStore`` on SQLite: one table mirroring the DynamoDB items (tenant, subject,
sort key), the record as JSON, and ``ttl`` (epoch seconds) that ``sweep_expired`` plays
DynamoDB TTL with; reads check ``expires_at`` themselves. A recall's trace and its
served links are one transaction.

``deferred=True`` (the local stack's choice) writes recall traces on a thread of their own
(``sqlite.deferred``), several recalls' in one transaction: a recall no longer waits for
its trace's commit, nor behind a memory write holding the write lock. Every other method
first waits for the traces recorded before it, so this store reads its own writes and a
deletion covers every trace recorded before it."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from memvault.clock import iso
from memvault.models.trace_records import Feedback, RecallTrace, ServedLink
from memvault.storage.codecs import traces as ti
from memvault.storage.sqlite.db import Database, dumps, loads
from memvault.storage.sqlite.deferred import DeferredWriter
from memvault.storage.sqlite.memory import subject_epoch

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE trace_items (
        tenant_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        sk TEXT NOT NULL,
        at TEXT NOT NULL,
        chain_id TEXT,
        expires_at TEXT NOT NULL,
        ttl INTEGER NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (tenant_id, subject_id, sk)
    ) WITHOUT ROWID""",
    "CREATE INDEX trace_items_ttl ON trace_items (ttl)",
)

_INSERT = "INSERT OR REPLACE INTO trace_items VALUES (?, ?, ?, ?, ?, ?, ?, ?)"


class SqliteTraceStore:
    def __init__(self, db: Database, *, deferred: bool = False) -> None:
        self.db = db
        self._deferred: DeferredWriter[RecallTrace] | None = None
        if deferred:
            self._deferred = DeferredWriter(self._write_recalls, name="memvault-traces")
            db.before_close(self._deferred.close)

    def flush(self, tenant_id: str | None = None, subject_id: str | None = None) -> None:
        """Wait until the recall traces recorded so far are written (deferred mode): the
        subject's, given one, or every one."""
        if self._deferred is not None:
            self._deferred.flush(None if tenant_id is None else (tenant_id, subject_id))

    @staticmethod
    def _insert(
        conn: sqlite3.Connection, rows: list[tuple[str, str, str, dict[str, Any], datetime]]
    ) -> None:
        if rows:
            conn.executemany(
                _INSERT,
                [
                    (
                        t,
                        s,
                        sk,
                        item["at"],
                        item.get("chain_id"),
                        iso(exp),
                        int(exp.timestamp()),
                        dumps(item),
                    )
                    for t, s, sk, item, exp in rows
                ],
            )

    def record_recall(self, trace: RecallTrace) -> None:
        if self._deferred is not None:
            self._deferred.submit(trace, key=(trace.tenant_id, trace.subject_id))
        else:
            self._write_recalls([trace])

    def _write_recalls(self, traces: Sequence[RecallTrace]) -> None:
        """Each trace and its served links, all in one transaction. A trace judged under a
        subject epoch that a forget has retired since is not written: the forget's traces
        step may have run already (this reads the memory store's epochs, in the same file
        and transaction, so the forget's commit and this write are ordered)."""
        with self.db.write() as conn:
            self._insert(conn, self._rows(conn, traces))

    @staticmethod
    def _rows(
        conn: sqlite3.Connection, traces: Sequence[RecallTrace]
    ) -> list[tuple[str, str, str, dict[str, Any], datetime]]:
        current: dict[tuple[str, str], int] = {}
        rows: list[tuple[str, str, str, dict[str, Any], datetime]] = []
        for trace in traces:
            t, s = owner = (trace.tenant_id, trace.subject_id)
            if _retired(conn, owner, trace.subject_epoch, current):
                continue
            expires = iso(trace.expires_at)
            rows.append(
                (t, s, ti.recall_sk(trace.recall_id), ti.recall_item(trace), trace.expires_at)
            )
            rows += [
                (t, s, ti.served_sk(link), ti.link_item(link, expires), trace.expires_at)
                for link in ti.links(trace)
            ]
        return rows

    def recall(
        self, tenant_id: str, subject_id: str, recall_id: str, now: datetime
    ) -> RecallTrace | None:
        self.flush(tenant_id, subject_id)
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT body FROM trace_items WHERE tenant_id = ? AND subject_id = ? "
                "AND sk = ? AND expires_at > ?",
                (tenant_id, subject_id, ti.recall_sk(recall_id), iso(now)),
            ).fetchone()
        return None if row is None else ti.recall_from(loads(row["body"]))

    def _prefixed(
        self, tenant_id: str, subject_id: str, prefix: str, now: datetime, limit: int | None
    ) -> list[dict[str, Any]]:
        # ``~`` sorts after every character a sort key holds: the prefix's upper bound.
        query = (
            "SELECT body FROM trace_items WHERE tenant_id = ? AND subject_id = ? "
            "AND sk >= ? AND sk < ? AND expires_at > ? ORDER BY sk DESC"
        )
        params: tuple[Any, ...] = (tenant_id, subject_id, prefix, prefix + "~", iso(now))
        if limit is not None:
            query += " LIMIT ?"
            params += (limit,)
        self.flush(tenant_id, subject_id)
        with self.db.read() as conn:
            return [loads(r["body"]) for r in conn.execute(query, params).fetchall()]

    def served(
        self, tenant_id: str, subject_id: str, chain_id: str, now: datetime, limit: int = 50
    ) -> list[ServedLink]:
        items = self._prefixed(tenant_id, subject_id, ti.served_prefix(chain_id), now, limit)
        return [ti.link_from(i) for i in items]

    def add_feedback(self, feedback: Feedback) -> None:
        """Not written when a forget has retired the epoch the feedback's memory was
        judged readable under since (the forget's traces step may have run already)."""
        owner = (feedback.tenant_id, feedback.subject_id)
        with self.db.write() as conn:
            if _retired(conn, owner, feedback.subject_epoch, {}):
                return
            item = ti.feedback_item(feedback)
            self._insert(conn, [(*owner, ti.feedback_sk(feedback), item, feedback.expires_at)])

    def feedback(
        self,
        tenant_id: str,
        subject_id: str,
        now: datetime,
        *,
        chain_id: str | None = None,
        limit: int = 100,
    ) -> list[Feedback]:
        items = self._prefixed(tenant_id, subject_id, ti.FEEDBACK, now, None)
        out = [ti.feedback_from(i) for i in items if chain_id is None or i["chain_id"] == chain_id]
        return out[:limit]

    def forget_subject(
        self, tenant_id: str, subject_id: str, before: datetime, epoch: int | None = None
    ) -> int:
        self.flush(tenant_id, subject_id)
        with self.db.write() as conn:
            cur = conn.execute(
                "DELETE FROM trace_items WHERE tenant_id = ? AND subject_id = ? AND (at <= ? "
                "OR json_extract(body, '$.subject_epoch') <= ?)",
                (tenant_id, subject_id, iso(before), epoch),
            )
            return int(cur.rowcount)

    def forget_chain(self, tenant_id: str, subject_id: str, chain_id: str) -> int:
        self.flush(tenant_id, subject_id)
        with self.db.write() as conn:
            cur = conn.execute(
                "DELETE FROM trace_items WHERE tenant_id = ? AND subject_id = ? "
                "AND chain_id = ? AND (sk LIKE 'SERVED#%' OR sk LIKE 'FEEDBACK#%')",
                (tenant_id, subject_id, chain_id),
            )
            return int(cur.rowcount)

    def sweep_expired(self, now_epoch: int) -> int:
        """Delete rows past their ttl (the local stand-in for DynamoDB TTL)."""
        self.flush()
        with self.db.write() as conn:
            cur = conn.execute("DELETE FROM trace_items WHERE ttl < ?", (now_epoch,))
            return int(cur.rowcount)


def _retired(
    conn: sqlite3.Connection,
    owner: tuple[str, str],
    judged_under: int | None,
    current: dict[tuple[str, str], int],
) -> bool:
    """Whether a forget has retired the subject epoch a record was judged under (read in
    the caller's write transaction; ``current`` keeps each subject's epoch for a batch)."""
    if judged_under is None:
        return False
    if owner not in current:
        current[owner] = subject_epoch(conn, *owner)
    return judged_under < current[owner]
