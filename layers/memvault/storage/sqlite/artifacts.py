"""Artifact metadata in the embedded database: the SQLite adapter of ``ArtifactStore``.

Three tables, each led by the tenant: ``artifacts`` (one row per artifact, its state,
declared size and sha256, pinned object version), ``artifact_refs`` (one row per
reference, removed with its artifact) and ``artifact_receipts`` (upload receipts with an
``expires_at`` that ``sweep_expired`` honours, as DynamoDB's TTL does on AWS).

Each operation is one transaction; its condition is read or checked inside it, under the
write lock. The memory and run stores count a reference inside their own transaction
with ``add_reference(conn, ...)``.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime

from memvault.clock import iso, parse_iso
from memvault.storage.ports.artifacts import ArtifactRecord, UploadReceipt
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.sqlite.db import Database
from memvault.storage.sqlite.subjects import epoch_moved
from memvault_wire.artifact import ArtifactState
from memvault_wire.memory import Sensitivity

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE artifacts (
        tenant_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        artifact_id TEXT NOT NULL,
        media_type TEXT NOT NULL,
        size_bytes INTEGER NOT NULL,
        sha256 TEXT NOT NULL,
        state TEXT NOT NULL,
        sensitivity TEXT NOT NULL,
        created_at TEXT NOT NULL,
        created_by TEXT NOT NULL,
        name TEXT,
        retention_days INTEGER,
        staged_until INTEGER,
        version TEXT,
        committed_at TEXT,
        retain_until INTEGER,
        PRIMARY KEY (tenant_id, subject_id, artifact_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX artifacts_sweep ON artifacts (state, staged_until)",
    """CREATE TABLE artifact_refs (
        tenant_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        artifact_id TEXT NOT NULL,
        ref TEXT NOT NULL,
        PRIMARY KEY (tenant_id, subject_id, artifact_id, ref),
        FOREIGN KEY (tenant_id, subject_id, artifact_id)
            REFERENCES artifacts (tenant_id, subject_id, artifact_id) ON DELETE CASCADE
    ) WITHOUT ROWID""",
    """CREATE TABLE artifact_receipts (
        tenant_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        request_id TEXT NOT NULL,
        artifact_id TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        expires_at INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, subject_id, request_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX artifact_receipts_expiry ON artifact_receipts (expires_at)",
)

#: Migration 5: each artifact keeps the subject's epoch its upload was started under (NULL
#: for one started before: a forget covers those by their time).
SUBJECT_EPOCH: tuple[str, ...] = ("ALTER TABLE artifacts ADD COLUMN subject_epoch INTEGER",)

#: Rows a sweep deletes per transaction, so that writers are never held up for long.
SWEEP_BATCH = 500


def _epoch(ts: datetime) -> int:
    return int(ts.astimezone(UTC).timestamp())


def add_reference(
    conn: sqlite3.Connection,
    tenant_id: str,
    subject_id: str,
    artifact_id: str,
    ref: str,
    sha256: str | None = None,
    made_after: datetime | None = None,
    made_under: int | None = None,
) -> bool:
    """Count ``ref`` on a committed artifact (with ``sha256``, when given; of the subject's
    epoch ``made_under``, the referencing record's, when given; one without an epoch
    made after ``made_after``, the subject's last forget, when given), inside the
    caller's transaction; False, and nothing written, when the artifact is not (or not
    that one): the caller then rolls back."""
    row = conn.execute(
        "SELECT state, sha256, created_at, subject_epoch FROM artifacts WHERE tenant_id = ? "
        "AND subject_id = ? AND artifact_id = ?",
        (tenant_id, subject_id, artifact_id),
    ).fetchone()
    if row is None or row["state"] != ArtifactState.COMMITTED.value:
        return False
    if sha256 is not None and row["sha256"] != sha256:
        return False
    epoch = row["subject_epoch"]
    if made_under is not None and epoch is not None:
        mine = epoch == made_under
    else:  # kept before artifacts carried their epoch: by time (ISO sorts as text)
        mine = made_after is None or row["created_at"] > iso(made_after)
    if not mine:
        return False
    conn.execute(
        "INSERT INTO artifact_refs (tenant_id, subject_id, artifact_id, ref) "
        "VALUES (?, ?, ?, ?) ON CONFLICT DO NOTHING",
        (tenant_id, subject_id, artifact_id, ref),
    )
    return True


def _record(row: sqlite3.Row, refs: list[str]) -> ArtifactRecord:
    return ArtifactRecord(
        tenant_id=row["tenant_id"],
        subject_id=row["subject_id"],
        artifact_id=row["artifact_id"],
        media_type=row["media_type"],
        size_bytes=int(row["size_bytes"]),
        sha256=row["sha256"],
        state=ArtifactState(row["state"]),
        sensitivity=Sensitivity(row["sensitivity"]),
        created_at=parse_iso(row["created_at"]),
        created_by=row["created_by"],
        name=row["name"],
        retention_days=row["retention_days"],
        staged_until=row["staged_until"],
        version=row["version"],
        committed_at=parse_iso(row["committed_at"]) if row["committed_at"] else None,
        retain_until=row["retain_until"],
        referenced_by=frozenset(refs),
        subject_epoch=row["subject_epoch"],
    )


def _refs(conn: sqlite3.Connection, tenant_id: str, subject_id: str, artifact_id: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT ref FROM artifact_refs WHERE tenant_id = ? "
            "AND subject_id = ? AND artifact_id = ?",
            (tenant_id, subject_id, artifact_id),
        )
    ]


def _load(
    conn: sqlite3.Connection, tenant_id: str, subject_id: str, artifact_id: str
) -> ArtifactRecord | None:
    row = conn.execute(
        "SELECT * FROM artifacts WHERE tenant_id = ? AND subject_id = ? AND artifact_id = ?",
        (tenant_id, subject_id, artifact_id),
    ).fetchone()
    return _record(row, _refs(conn, tenant_id, subject_id, artifact_id)) if row else None


def _set_state(
    conn: sqlite3.Connection, tenant_id: str, subject_id: str, artifact_id: str, state: str
) -> None:
    conn.execute(
        "UPDATE artifacts SET state = ? WHERE tenant_id = ? AND subject_id = ? AND artifact_id = ?",
        (state, tenant_id, subject_id, artifact_id),
    )


def _insert_artifact(conn: sqlite3.Connection, r: ArtifactRecord) -> None:
    """Write an artifact's row and one row per reference it holds, in the caller's
    transaction."""
    conn.execute(
        "INSERT INTO artifacts (tenant_id, subject_id, artifact_id, media_type, "
        "size_bytes, sha256, state, sensitivity, created_at, created_by, name, "
        "retention_days, staged_until, version, committed_at, retain_until, "
        "subject_epoch) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            r.tenant_id,
            r.subject_id,
            r.artifact_id,
            r.media_type,
            r.size_bytes,
            r.sha256,
            r.state.value,
            r.sensitivity.value,
            iso(r.created_at),
            r.created_by,
            r.name,
            r.retention_days,
            r.staged_until,
            r.version,
            iso(r.committed_at) if r.committed_at else None,
            r.retain_until,
            r.subject_epoch,
        ),
    )
    for ref in sorted(r.referenced_by):
        conn.execute(
            "INSERT INTO artifact_refs (tenant_id, subject_id, artifact_id, ref) "
            "VALUES (?, ?, ?, ?)",
            (r.tenant_id, r.subject_id, r.artifact_id, ref),
        )


class SqliteArtifactStore:
    def __init__(self, db: Database) -> None:
        self.db = db

    # ------------------------------------------------------------------ reads

    def artifact(self, tenant_id: str, subject_id: str, artifact_id: str) -> ArtifactRecord | None:
        with self.db.read() as conn:
            return _load(conn, tenant_id, subject_id, artifact_id)

    def receipt(
        self, tenant_id: str, subject_id: str, request_id: str, now: datetime
    ) -> UploadReceipt | None:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT artifact_id, fingerprint, expires_at FROM artifact_receipts "
                "WHERE tenant_id = ? AND subject_id = ? AND request_id = ? AND expires_at >= ?",
                (tenant_id, subject_id, request_id, _epoch(now)),
            ).fetchone()
        if row is None:
            return None
        return UploadReceipt(request_id, row["artifact_id"], row["fingerprint"], row["expires_at"])

    def sweepable(self, now: datetime) -> Iterator[ArtifactRecord]:
        # Page by key, each page its own read: the caller writes between pages.
        after = ("", "", "")
        while True:
            with self.db.read() as conn:
                rows = conn.execute(
                    "SELECT * FROM artifacts WHERE (tenant_id, subject_id, artifact_id) > "
                    "(?, ?, ?) AND ((state = ? AND staged_until < ?) OR state = ?) "
                    "ORDER BY tenant_id, subject_id, artifact_id LIMIT ?",
                    (
                        *after,
                        ArtifactState.STAGED.value,
                        _epoch(now),
                        ArtifactState.DELETED.value,
                        SWEEP_BATCH,
                    ),
                ).fetchall()
                page = [
                    _record(r, _refs(conn, r["tenant_id"], r["subject_id"], r["artifact_id"]))
                    for r in rows
                ]
            yield from page
            if len(rows) < SWEEP_BATCH:
                return
            last = rows[-1]
            after = (last["tenant_id"], last["subject_id"], last["artifact_id"])

    # ------------------------------------------------------------------ writes

    def stage(self, record: ArtifactRecord, receipt: UploadReceipt, now: datetime) -> None:
        r = record
        with self.db.write() as conn:
            taken = conn.execute(
                "SELECT 1 FROM artifact_receipts WHERE tenant_id = ? AND subject_id = ? "
                "AND request_id = ? AND expires_at >= ?",
                (r.tenant_id, r.subject_id, receipt.request_id, _epoch(now)),
            ).fetchone()
            exists = conn.execute(
                "SELECT 1 FROM artifacts WHERE tenant_id = ? "
                "AND subject_id = ? AND artifact_id = ?",
                (r.tenant_id, r.subject_id, r.artifact_id),
            ).fetchone()
            causes = [
                c for c, hit in ((Conflict.IDEMPOTENCY, taken), (Conflict.EXISTS, exists)) if hit
            ]
            if epoch_moved(conn, r.tenant_id, r.subject_id, r.subject_epoch):
                causes.append(Conflict.EPOCH)
            if causes:
                raise ConditionFailed(*causes)
            conn.execute(
                "INSERT INTO artifact_receipts (tenant_id, subject_id, request_id, artifact_id, "
                "fingerprint, expires_at) VALUES (?, ?, ?, ?, ?, ?) "
                "ON CONFLICT DO UPDATE SET artifact_id = excluded.artifact_id, "
                "fingerprint = excluded.fingerprint, expires_at = excluded.expires_at",
                (
                    r.tenant_id,
                    r.subject_id,
                    receipt.request_id,
                    receipt.artifact_id,
                    receipt.fingerprint,
                    receipt.expires_at,
                ),
            )
            _insert_artifact(conn, r)

    def commit(
        self,
        tenant_id: str,
        subject_id: str,
        artifact_id: str,
        *,
        version: str,
        at: datetime,
        retain_until: int | None,
    ) -> None:
        with self.db.write() as conn:
            done = conn.execute(
                "UPDATE artifacts SET state = ?, version = ?, committed_at = ?, "
                "retain_until = ?, staged_until = NULL WHERE tenant_id = ? "
                "AND subject_id = ? AND artifact_id = ? AND state = ?",
                (
                    ArtifactState.COMMITTED.value,
                    version,
                    iso(at),
                    retain_until,
                    tenant_id,
                    subject_id,
                    artifact_id,
                    ArtifactState.STAGED.value,
                ),
            ).rowcount
            if not done:
                found = _load(conn, tenant_id, subject_id, artifact_id)
                raise ConditionFailed(Conflict.ABSENT if found is None else Conflict.STATE)

    def add_reference(
        self,
        tenant_id: str,
        subject_id: str,
        artifact_id: str,
        ref: str,
        sha256: str | None = None,
    ) -> None:
        with self.db.write() as conn:
            if not add_reference(conn, tenant_id, subject_id, artifact_id, ref, sha256):
                raise ConditionFailed(Conflict.ARTIFACT)

    def mark_deleted(
        self, tenant_id: str, subject_id: str, artifact_id: str, *, at: datetime | None = None
    ) -> None:
        with self.db.write() as conn:
            found = _load(conn, tenant_id, subject_id, artifact_id)
            if found is None or found.state is ArtifactState.DELETED:
                raise ConditionFailed(Conflict.ABSENT)
            if found.referenced_by:
                raise ConditionFailed(Conflict.REFERENCED)
            _set_state(conn, tenant_id, subject_id, artifact_id, ArtifactState.DELETED.value)
            if at is not None:
                conn.execute(
                    "UPDATE artifacts SET staged_until = ? WHERE tenant_id = ? "
                    "AND subject_id = ? AND artifact_id = ?",
                    (_epoch(at), tenant_id, subject_id, artifact_id),
                )

    def release(self, tenant_id: str, subject_id: str, artifact_id: str, ref: str) -> bool:
        with self.db.write() as conn:
            conn.execute(
                "DELETE FROM artifact_refs WHERE tenant_id = ? "
                "AND subject_id = ? AND artifact_id = ? AND ref = ?",
                (tenant_id, subject_id, artifact_id, ref),
            )
            found = _load(conn, tenant_id, subject_id, artifact_id)
            if found is None or found.referenced_by or found.state is not ArtifactState.COMMITTED:
                return False
            _set_state(conn, tenant_id, subject_id, artifact_id, ArtifactState.DELETED.value)
            return True

    def claim_expired(
        self, tenant_id: str, subject_id: str, artifact_id: str, now: datetime
    ) -> bool:
        with self.db.write() as conn:
            done = conn.execute(
                "UPDATE artifacts SET state = ? WHERE tenant_id = ? "
                "AND subject_id = ? AND artifact_id = ? "
                "AND state = ? AND staged_until < ?",
                (
                    ArtifactState.DELETED.value,
                    tenant_id,
                    subject_id,
                    artifact_id,
                    ArtifactState.STAGED.value,
                    _epoch(now),
                ),
            ).rowcount
        return bool(done)

    def remove(self, tenant_id: str, subject_id: str, artifact_id: str) -> bool:
        with self.db.write() as conn:
            done = conn.execute(
                "DELETE FROM artifacts WHERE tenant_id = ? "
                "AND subject_id = ? AND artifact_id = ? AND state = ?",
                (tenant_id, subject_id, artifact_id, ArtifactState.DELETED.value),
            ).rowcount
        return bool(done)

    def forget_subject(
        self,
        tenant_id: str,
        subject_id: str,
        before: datetime,
        *,
        retired_epoch: int | None = None,
    ) -> list[str]:
        owner = (tenant_id, subject_id)
        with self.db.write() as conn:
            # Under the retired epoch or earlier; one without an epoch (or a purge that
            # names none) made by the forget's time (ISO times sort as text).
            ids = [
                r[0]
                for r in conn.execute(
                    "SELECT artifact_id FROM artifacts WHERE tenant_id = ? AND subject_id = ? "
                    "AND CASE WHEN subject_epoch IS NULL OR ? IS NULL THEN created_at <= ? "
                    "ELSE subject_epoch <= ? END ORDER BY artifact_id",
                    (*owner, retired_epoch, iso(before), retired_epoch),
                )
            ]
            for artifact_id in ids:
                one = (*owner, artifact_id)
                conn.execute(
                    "UPDATE artifacts SET state = ?, staged_until = ? "
                    "WHERE tenant_id = ? AND subject_id = ? AND artifact_id = ?",
                    (ArtifactState.DELETED.value, _epoch(before), *one),
                )
                conn.execute(
                    "DELETE FROM artifact_refs "
                    "WHERE tenant_id = ? AND subject_id = ? AND artifact_id = ?",
                    one,
                )
            # Receipts of the forget's artifacts, and of any upload whose row is gone.
            conn.execute(
                "DELETE FROM artifact_receipts WHERE tenant_id = ? AND subject_id = ? "
                "AND artifact_id NOT IN (SELECT artifact_id FROM artifacts "
                "WHERE tenant_id = ? AND subject_id = ? AND state != ?)",
                (*owner, *owner, ArtifactState.DELETED.value),
            )
        return ids

    # ------------------------------------------------------------------ local expiry

    def sweep_expired(self, now_epoch: int) -> int:
        """Delete upload receipts past their expiry, a batch per transaction (what
        DynamoDB's TTL does on AWS); returns how many went. Artifacts themselves are
        never expired here: the staged-upload sweeper removes them with their objects."""
        removed = 0
        while True:
            with self.db.write() as conn:
                count = conn.execute(
                    "DELETE FROM artifact_receipts WHERE (tenant_id, subject_id, request_id) "
                    "IN (SELECT tenant_id, subject_id, request_id FROM artifact_receipts "
                    "WHERE expires_at < ? LIMIT ?)",
                    (now_epoch, SWEEP_BATCH),
                ).rowcount
            removed += count
            if count < SWEEP_BATCH:
                return removed
