"""The session store on SQLite: the local default.

Four tables, each keyed by (tenant, subject, session): the head (clocks and the last
sequence number), the messages, the append receipts and the summary. An append is one
``BEGIN IMMEDIATE`` transaction: the receipt and the head's last sequence number are
checked under the write lock, then message, receipt and head are written, so that of
concurrent appends each gets its own sequence number and a retried request id stores one
message. Every row carries its expiry as ``ttl`` (epoch seconds), which ``sweep_expired``
uses the way DynamoDB's native TTL does; reads check the clocks themselves.
"""

from __future__ import annotations

import sqlite3
from datetime import datetime

from memvault.clock import iso, parse_iso
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.ports.sessions import (
    AppendReceipt,
    NewMessage,
    SessionHead,
    SessionSnapshot,
    StoredMessage,
    StoredSummary,
)
from memvault.storage.sqlite.db import Database
from memvault.storage.sqlite.subjects import epoch_moved
from memvault_wire.memory import Sensitivity
from memvault_wire.session import Role

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE session_heads (
        tenant_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        last_activity_at TEXT NOT NULL,
        idle_expires_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        last_seq INTEGER NOT NULL,
        ttl INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, subject_id, session_id)
    )""",
    "CREATE INDEX session_heads_ttl ON session_heads (ttl)",
    """CREATE TABLE session_messages (
        tenant_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        request_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        ttl INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, subject_id, session_id, seq)
    )""",
    "CREATE INDEX session_messages_ttl ON session_messages (ttl)",
    """CREATE TABLE session_receipts (
        tenant_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        request_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        ttl INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, subject_id, session_id, request_id)
    )""",
    "CREATE INDEX session_receipts_ttl ON session_receipts (ttl)",
    """CREATE TABLE session_summaries (
        tenant_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        session_id TEXT NOT NULL,
        content TEXT NOT NULL,
        from_seq INTEGER NOT NULL,
        through_seq INTEGER NOT NULL,
        created_at TEXT NOT NULL,
        expires_at TEXT NOT NULL,
        ttl INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, subject_id, session_id)
    )""",
    "CREATE INDEX session_summaries_ttl ON session_summaries (ttl)",
)

#: Migration 2: each message and summary carries its sensitivity class (rows written
#: before it are ``internal``, the class they were served as).
SENSITIVITY: tuple[str, ...] = (
    "ALTER TABLE session_messages ADD COLUMN sensitivity TEXT NOT NULL DEFAULT 'internal'",
    "ALTER TABLE session_summaries ADD COLUMN sensitivity TEXT NOT NULL DEFAULT 'internal'",
)

#: Migration 5: each session's head keeps the subject's epoch it was begun under (NULL for
#: sessions begun before: a forget covers those by their time).
SUBJECT_EPOCH: tuple[str, ...] = ("ALTER TABLE session_heads ADD COLUMN subject_epoch INTEGER",)

#: Every row of one session, the head's statement last.
_DELETE_SESSION = (
    "DELETE FROM session_summaries WHERE tenant_id = ? AND subject_id = ? AND session_id = ?",
    "DELETE FROM session_receipts WHERE tenant_id = ? AND subject_id = ? AND session_id = ?",
    "DELETE FROM session_messages WHERE tenant_id = ? AND subject_id = ? AND session_id = ?",
    "DELETE FROM session_heads WHERE tenant_id = ? AND subject_id = ? AND session_id = ?",
)
#: The sessions a forget covers: every session of the subject but those begun after it:
#: under a later epoch than the one it retired, or, for a head without an epoch (or a
#: purge that names none), created after the forget's time (ISO times sort as text). So
#: any left without a head (a remnant nothing serves) goes too.
_FORGOTTEN_SESSIONS = (
    "SELECT session_id FROM session_heads WHERE tenant_id = ? AND subject_id = ? "
    "UNION SELECT session_id FROM session_messages WHERE tenant_id = ? AND subject_id = ? "
    "UNION SELECT session_id FROM session_summaries WHERE tenant_id = ? AND subject_id = ? "
    "UNION SELECT session_id FROM session_receipts WHERE tenant_id = ? AND subject_id = ? "
    "EXCEPT SELECT session_id FROM session_heads WHERE tenant_id = ? AND subject_id = ? "
    "AND CASE WHEN subject_epoch IS NULL OR ? IS NULL THEN created_at > ? "
    "ELSE subject_epoch > ? END"
)
#: Expired rows whose head is not (yet) expired or is gone: one batch each.
_SWEEP_ROWS = (
    "DELETE FROM session_summaries WHERE rowid IN "
    "(SELECT rowid FROM session_summaries WHERE ttl < ? LIMIT ?)",
    "DELETE FROM session_receipts WHERE rowid IN "
    "(SELECT rowid FROM session_receipts WHERE ttl < ? LIMIT ?)",
    "DELETE FROM session_messages WHERE rowid IN "
    "(SELECT rowid FROM session_messages WHERE ttl < ? LIMIT ?)",
)
#: Rows the sweeper deletes per transaction (per table).
SWEEP_BATCH = 500


def _epoch(ts: datetime) -> int:
    return int(ts.timestamp())


def _head(row: sqlite3.Row) -> SessionHead:
    return SessionHead(
        tenant_id=row["tenant_id"],
        subject_id=row["subject_id"],
        session_id=row["session_id"],
        created_at=parse_iso(row["created_at"]),
        last_activity_at=parse_iso(row["last_activity_at"]),
        idle_expires_at=parse_iso(row["idle_expires_at"]),
        expires_at=parse_iso(row["expires_at"]),
        last_seq=int(row["last_seq"]),
        subject_epoch=row["subject_epoch"],
    )


def _message(row: sqlite3.Row) -> StoredMessage:
    return StoredMessage(
        seq=int(row["seq"]),
        role=Role(row["role"]),
        content=row["content"],
        request_id=row["request_id"],
        created_at=parse_iso(row["created_at"]),
        sensitivity=Sensitivity(row["sensitivity"]),
    )


def _summary(row: sqlite3.Row) -> StoredSummary:
    return StoredSummary(
        content=row["content"],
        from_seq=int(row["from_seq"]),
        through_seq=int(row["through_seq"]),
        created_at=parse_iso(row["created_at"]),
        expires_at=parse_iso(row["expires_at"]),
        sensitivity=Sensitivity(row["sensitivity"]),
    )


def _read_head(conn: sqlite3.Connection, key: tuple[str, str, str]) -> SessionHead | None:
    row = conn.execute(
        "SELECT * FROM session_heads WHERE tenant_id = ? AND subject_id = ? AND session_id = ?", key
    ).fetchone()
    return _head(row) if row else None


def _insert_message(
    conn: sqlite3.Connection, key: tuple[str, str, str], new: NewMessage, ttl: int
) -> None:
    """Write an append's message and its receipt, in the caller's transaction."""
    conn.execute(
        "INSERT INTO session_messages (tenant_id, subject_id, session_id, seq, role, "
        "content, request_id, created_at, ttl, sensitivity) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            *key,
            new.seq,
            new.role.value,
            new.content,
            new.request_id,
            iso(new.at),
            ttl,
            new.sensitivity.value,
        ),
    )
    conn.execute(
        "INSERT INTO session_receipts (tenant_id, subject_id, session_id, request_id, "
        "seq, role, content, ttl) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (*key, new.request_id, new.seq, new.role.value, new.content, ttl),
    )


def _write_head(
    conn: sqlite3.Connection, key: tuple[str, str, str], new: NewMessage, ttl: int
) -> None:
    """Create the session's head with its first message, or move it on to ``new``'s
    sequence number, activity time and idle clock, in the caller's transaction."""
    if new.seq == 1:
        conn.execute(
            "INSERT INTO session_heads (tenant_id, subject_id, session_id, created_at, "
            "last_activity_at, idle_expires_at, expires_at, last_seq, ttl, "
            "subject_epoch) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?)",
            (
                *key,
                iso(new.at),
                iso(new.at),
                iso(new.idle_expires_at),
                iso(new.expires_at),
                ttl,
                new.subject_epoch,
            ),
        )
    else:
        conn.execute(
            "UPDATE session_heads SET last_seq = ?, last_activity_at = ?, "
            "idle_expires_at = ? "
            "WHERE tenant_id = ? AND subject_id = ? AND session_id = ? AND last_seq = ?",
            (new.seq, iso(new.at), iso(new.idle_expires_at), *key, new.seq - 1),
        )


class SqliteSessionStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # ------------------------------------------------------------------ reads

    def head(self, tenant_id: str, subject_id: str, session_id: str) -> SessionHead | None:
        with self.db.read() as conn:
            return _read_head(conn, (tenant_id, subject_id, session_id))

    def receipt(
        self, tenant_id: str, subject_id: str, session_id: str, request_id: str
    ) -> AppendReceipt | None:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT seq, role, content FROM session_receipts "
                "WHERE tenant_id = ? AND subject_id = ? AND session_id = ? AND request_id = ?",
                (tenant_id, subject_id, session_id, request_id),
            ).fetchone()
        if row is None:
            return None
        return AppendReceipt(
            request_id=request_id,
            seq=int(row["seq"]),
            role=Role(row["role"]),
            content=row["content"],
        )

    def snapshot(
        self, tenant_id: str, subject_id: str, session_id: str, *, now: datetime, recent: int
    ) -> SessionSnapshot | None:
        key = (tenant_id, subject_id, session_id)
        with self.db.read() as conn:
            head = _read_head(conn, key)
            if head is None or not head.live(now):
                return None
            newest = conn.execute(
                "SELECT * FROM session_messages "
                "WHERE tenant_id = ? AND subject_id = ? AND session_id = ? "
                "ORDER BY seq DESC LIMIT ?",
                (*key, recent),
            ).fetchall()
            row = conn.execute(
                "SELECT * FROM session_summaries "
                "WHERE tenant_id = ? AND subject_id = ? AND session_id = ?",
                key,
            ).fetchone()
        summary = _summary(row) if row else None
        return SessionSnapshot(
            head=head,
            messages=[_message(r) for r in reversed(newest)],
            summary=summary if summary and now < summary.expires_at else None,
        )

    def message(
        self, tenant_id: str, subject_id: str, session_id: str, seq: int, *, now: datetime
    ) -> StoredMessage | None:
        key = (tenant_id, subject_id, session_id)
        with self.db.read() as conn:
            head = _read_head(conn, key)
            if head is None or not head.live(now):
                return None
            row = conn.execute(
                "SELECT * FROM session_messages "
                "WHERE tenant_id = ? AND subject_id = ? AND session_id = ? AND seq = ?",
                (*key, seq),
            ).fetchone()
        return _message(row) if row else None

    # ------------------------------------------------------------------ writes

    def append(self, new: NewMessage) -> None:
        key = (new.tenant_id, new.subject_id, new.session_id)
        ttl = _epoch(new.expires_at)
        with self.db.write() as conn:
            # Every condition is read under the write lock, before anything is written.
            causes: list[Conflict] = []
            if conn.execute(
                "SELECT 1 FROM session_receipts "
                "WHERE tenant_id = ? AND subject_id = ? AND session_id = ? AND request_id = ?",
                (*key, new.request_id),
            ).fetchone():
                causes.append(Conflict.IDEMPOTENCY)
            head = conn.execute(
                "SELECT last_seq FROM session_heads "
                "WHERE tenant_id = ? AND subject_id = ? AND session_id = ?",
                key,
            ).fetchone()
            if new.seq == 1:
                if head is not None:
                    causes.append(Conflict.EXISTS)
            elif head is None or int(head["last_seq"]) != new.seq - 1:
                causes.append(Conflict.VERSION)
            if conn.execute(
                "SELECT 1 FROM session_messages "
                "WHERE tenant_id = ? AND subject_id = ? AND session_id = ? AND seq = ?",
                (*key, new.seq),
            ).fetchone():
                causes.append(Conflict.EXISTS)
            if epoch_moved(conn, new.tenant_id, new.subject_id, new.subject_epoch):
                causes.append(Conflict.EPOCH)
            if causes:
                raise ConditionFailed(*causes)
            _insert_message(conn, key, new, ttl)
            _write_head(conn, key, new, ttl)

    def put_summary(
        self,
        tenant_id: str,
        subject_id: str,
        session_id: str,
        summary: StoredSummary,
        *,
        subject_epoch: int | None = None,
    ) -> None:
        key = (tenant_id, subject_id, session_id)
        with self.db.write() as conn:
            head = conn.execute(
                "SELECT 1 FROM session_heads "
                "WHERE tenant_id = ? AND subject_id = ? AND session_id = ?",
                key,
            ).fetchone()
            causes = [Conflict.ABSENT] if head is None else []
            if epoch_moved(conn, tenant_id, subject_id, subject_epoch):
                causes.append(Conflict.EPOCH)
            if causes:
                raise ConditionFailed(*causes)
            conn.execute(
                "INSERT INTO session_summaries (tenant_id, subject_id, session_id, content, "
                "from_seq, through_seq, created_at, expires_at, ttl, sensitivity) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant_id, subject_id, session_id) DO UPDATE SET "
                "content = excluded.content, from_seq = excluded.from_seq, "
                "through_seq = excluded.through_seq, created_at = excluded.created_at, "
                "expires_at = excluded.expires_at, ttl = excluded.ttl, "
                "sensitivity = excluded.sensitivity",
                (
                    *key,
                    summary.content,
                    summary.from_seq,
                    summary.through_seq,
                    iso(summary.created_at),
                    iso(summary.expires_at),
                    _epoch(summary.expires_at),
                    summary.sensitivity.value,
                ),
            )

    def end(self, tenant_id: str, subject_id: str, session_id: str) -> int:
        key = (tenant_id, subject_id, session_id)
        # One transaction: the head and everything else go at the same instant.
        with self.db.write() as conn:
            *rest, head = _DELETE_SESSION
            if not conn.execute(head, key).rowcount:
                raise ConditionFailed(Conflict.ABSENT)
            return 1 + sum(conn.execute(statement, key).rowcount for statement in rest)

    def forget_subject(
        self,
        tenant_id: str,
        subject_id: str,
        before: datetime,
        *,
        retired_epoch: int | None = None,
    ) -> int:
        owner = (tenant_id, subject_id)
        with self.db.write() as conn:
            doomed = [
                r[0]
                for r in conn.execute(
                    _FORGOTTEN_SESSIONS, (*owner * 5, retired_epoch, iso(before), retired_epoch)
                )
            ]
            return sum(
                conn.execute(statement, (*owner, session_id)).rowcount
                for session_id in doomed
                for statement in _DELETE_SESSION
            )

    # ------------------------------------------------------------------ expiry

    def sweep_expired(self, now_epoch: int) -> int:
        """Delete what is past its ``ttl`` (as DynamoDB TTL does: strictly past), one
        transaction per batch. An expired head takes every row of its session with it in
        the same transaction, so no session is left half swept; other expired rows (a
        summary with a shorter life) go on their own. Returns how many rows went."""
        total = 0
        while True:
            with self.db.write() as conn:
                removed = 0
                heads = conn.execute(
                    "SELECT tenant_id, subject_id, session_id FROM session_heads "
                    "WHERE ttl < ? LIMIT ?",
                    (now_epoch, SWEEP_BATCH),
                ).fetchall()
                for head in heads:
                    for statement in _DELETE_SESSION:
                        removed += conn.execute(statement, tuple(head)).rowcount
                for statement in _SWEEP_ROWS:
                    removed += conn.execute(statement, (now_epoch, SWEEP_BATCH)).rowcount
            total += removed
            if not removed:
                return total
