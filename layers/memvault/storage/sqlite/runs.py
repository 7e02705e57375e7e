"""The run store on SQLite: one row per current checkpoint, version, operation and event
receipt, each led by the tenant; every port operation is one transaction.

Conditions are read inside the ``BEGIN IMMEDIATE`` transaction that then writes, so of two
writers at the same expected version exactly one commits. Counting a reference on an
artifact happens inside the same transaction through ``reference_artifact``, which the
artifact store supplies (its table is its own); without one, no artifact counts as
committed and every reference is refused.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from memvault.clock import iso, parse_iso
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.ports.memory import purged_by
from memvault.storage.ports.runs import (
    Advancement,
    ArtifactsNotCommitted,
    EventReceipt,
    RunsForgotten,
    StoredRun,
    SubjectEpoch,
    epoch_of,
    run_reference,
)
from memvault.storage.sqlite.db import Database, dumps, loads
from memvault.storage.sqlite.subjects import epoch_moved
from memvault_wire.memory import Sensitivity
from memvault_wire.run import Checkpoint, Operation, OperationStatus

#: ``reference_artifact(conn, tenant_id, subject_id, artifact_id, ref, sha256,
#: made_after, made_under)``: add ``ref`` to the artifact's references inside the
#: caller's transaction, if the artifact is committed for that subject with that sha256
#: (of the subject's epoch ``made_under``, or, without an epoch, made after
#: ``made_after``, when given); False (and nothing written) otherwise.
ReferenceArtifact = Callable[
    [sqlite3.Connection, str, str, str, str, str | None, datetime | None, int | None], bool
]

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE run_heads (
        tenant_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        checkpoint TEXT NOT NULL,
        fingerprint TEXT,
        ttl INTEGER,
        PRIMARY KEY (tenant_id, run_id)
    )""",
    "CREATE INDEX run_heads_subject ON run_heads (tenant_id, subject_id)",
    "CREATE INDEX run_heads_ttl ON run_heads (ttl) WHERE ttl IS NOT NULL",
    """CREATE TABLE run_versions (
        tenant_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        subject_id TEXT NOT NULL,
        checkpoint TEXT NOT NULL,
        ttl INTEGER,
        PRIMARY KEY (tenant_id, run_id, version)
    )""",
    "CREATE INDEX run_versions_subject ON run_versions (tenant_id, subject_id)",
    "CREATE INDEX run_versions_ttl ON run_versions (ttl) WHERE ttl IS NOT NULL",
    """CREATE TABLE run_operations (
        tenant_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        operation_id TEXT NOT NULL,
        status TEXT NOT NULL,
        result_ref TEXT,
        result_sha256 TEXT,
        updated_at TEXT NOT NULL,
        ttl INTEGER,
        PRIMARY KEY (tenant_id, run_id, operation_id)
    )""",
    "CREATE INDEX run_operations_ttl ON run_operations (ttl) WHERE ttl IS NOT NULL",
    """CREATE TABLE run_events (
        tenant_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        event_id TEXT NOT NULL,
        type TEXT NOT NULL,
        fingerprint TEXT NOT NULL,
        applied INTEGER NOT NULL,
        received_at TEXT NOT NULL,
        version INTEGER NOT NULL,
        ttl INTEGER,
        PRIMARY KEY (tenant_id, run_id, event_id)
    )""",
    "CREATE INDEX run_events_ttl ON run_events (ttl) WHERE ttl IS NOT NULL",
)

#: Migration 4: each operation carries its sensitivity class (rows recorded before it are
#: ``internal``, the class they were served as).
OPERATION_SENSITIVITY: tuple[str, ...] = (
    "ALTER TABLE run_operations ADD COLUMN sensitivity TEXT NOT NULL DEFAULT 'internal'",
)

_TABLES = ("run_heads", "run_versions", "run_operations", "run_events")
#: Rows deleted per sweeper transaction, so that writers never wait long.
SWEEP_BATCH = 500


def _refuse_every_artifact(
    conn: sqlite3.Connection,
    tenant_id: str,
    subject_id: str,
    artifact_id: str,
    ref: str,
    sha: str | None,
    made_after: datetime | None,
    made_under: int | None,
) -> bool:
    return False


class SqliteRunStore:
    def __init__(self, db: Database, reference_artifact: ReferenceArtifact | None = None) -> None:
        self.db = db
        self.reference_artifact = reference_artifact or _refuse_every_artifact

    # ------------------------------------------------------------------ reads

    def head(self, tenant_id: str, run_id: str, *, now: datetime) -> StoredRun | None:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT checkpoint, fingerprint, ttl FROM run_heads "
                "WHERE tenant_id = ? AND run_id = ? AND (ttl IS NULL OR ttl > ?)",
                (tenant_id, run_id, _epoch(now)),
            ).fetchone()
        if row is None:
            return None
        return StoredRun(
            checkpoint=Checkpoint.model_validate(loads(row["checkpoint"])),
            fingerprint=row["fingerprint"],
            ttl=row["ttl"],
        )

    def version(
        self, tenant_id: str, run_id: str, version: int, *, now: datetime
    ) -> Checkpoint | None:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT checkpoint FROM run_versions "
                "WHERE tenant_id = ? AND run_id = ? AND version = ? AND (ttl IS NULL OR ttl > ?)",
                (tenant_id, run_id, version, _epoch(now)),
            ).fetchone()
        return None if row is None else Checkpoint.model_validate(loads(row["checkpoint"]))

    def operations(self, tenant_id: str, run_id: str, *, now: datetime) -> list[Operation]:
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT * FROM run_operations WHERE tenant_id = ? AND run_id = ? "
                "AND (ttl IS NULL OR ttl > ?) ORDER BY operation_id",
                (tenant_id, run_id, _epoch(now)),
            ).fetchall()
        return [_operation(r) for r in rows]

    def operation(
        self, tenant_id: str, run_id: str, operation_id: str, *, now: datetime
    ) -> Operation | None:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT * FROM run_operations WHERE tenant_id = ? AND run_id = ? "
                "AND operation_id = ? AND (ttl IS NULL OR ttl > ?)",
                (tenant_id, run_id, operation_id, _epoch(now)),
            ).fetchone()
        return None if row is None else _operation(row)

    def receipt(
        self, tenant_id: str, run_id: str, event_id: str, *, now: datetime
    ) -> EventReceipt | None:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT * FROM run_events "
                "WHERE tenant_id = ? AND run_id = ? AND event_id = ? AND (ttl IS NULL OR ttl > ?)",
                (tenant_id, run_id, event_id, _epoch(now)),
            ).fetchone()
        return None if row is None else _receipt(row)

    def receipts(
        self,
        tenant_id: str,
        run_id: str,
        *,
        now: datetime,
        cursor: str | None = None,
        limit: int = 100,
    ) -> tuple[list[EventReceipt], str | None]:
        # By event id as the primary key orders it (binary, as DynamoDB orders sort keys);
        # one row more than the page tells whether another follows.
        clauses = "tenant_id = ? AND run_id = ? AND (ttl IS NULL OR ttl > ?)"
        params: list[Any] = [tenant_id, run_id, _epoch(now)]
        if cursor is not None:
            clauses += " AND event_id > ?"
            params.append(cursor)
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT * FROM run_events WHERE {clauses} "  # noqa: S608 - fixed clauses, values bound
                "ORDER BY event_id LIMIT ?",
                (*params, limit + 1),
            ).fetchall()
        found = [_receipt(r) for r in rows]
        if len(found) > limit:
            return found[:limit], found[limit - 1].event_id
        return found, None

    # ------------------------------------------------------------------ writes

    def create(self, tenant_id: str, checkpoint: Checkpoint, fingerprint: str) -> None:
        run_id = checkpoint.run_id
        with self.db.write() as conn:
            # Any kept record of the id, expired or not, as DynamoDB's condition sees it.
            taken = conn.execute(
                "SELECT 1 FROM run_heads WHERE tenant_id = ? AND run_id = ? UNION ALL "
                "SELECT 1 FROM run_versions WHERE tenant_id = ? AND run_id = ? AND version = ?",
                (tenant_id, run_id, tenant_id, run_id, checkpoint.version),
            ).fetchone()
            causes = {Conflict.EXISTS} if taken else set()
            if _epoch_moved(conn, tenant_id, epoch_of(checkpoint)):
                causes.add(Conflict.EPOCH)
            if causes:
                raise ConditionFailed(*causes)
            conn.execute(
                "INSERT INTO run_heads (tenant_id, run_id, subject_id, version, checkpoint, "
                "fingerprint, ttl) VALUES (?, ?, ?, ?, ?, ?, NULL)",
                (
                    tenant_id,
                    run_id,
                    checkpoint.subject_id,
                    checkpoint.version,
                    _stored(checkpoint),
                    fingerprint,
                ),
            )
            _insert_version(conn, tenant_id, checkpoint, None)

    def advance(self, tenant_id: str, step: Advancement) -> None:
        cp = step.checkpoint
        with self.db.write() as conn:
            causes: set[Conflict] = set()
            if _head_version(conn, tenant_id, cp.run_id) != step.expected_version:
                causes.add(Conflict.VERSION)
            if _has_version(conn, tenant_id, cp.run_id, cp.version):
                causes.add(Conflict.VERSION)
            if step.receipt is not None and _has_receipt(
                conn, tenant_id, cp.run_id, step.receipt.event_id
            ):
                causes.add(Conflict.IDEMPOTENCY)
            if _epoch_moved(conn, tenant_id, epoch_of(cp)):
                causes.add(Conflict.EPOCH)
            # Each reference is counted inside this transaction; a refusal rolls them all
            # back with the rest.
            missing = [
                ref.artifact_id
                for ref in step.new_references
                if not self.reference_artifact(
                    conn,
                    tenant_id,
                    cp.subject_id,
                    ref.artifact_id,
                    run_reference(cp.run_id),
                    ref.sha256,
                    step.artifacts_after,
                    cp.subject_epoch,
                )
            ]
            if missing:
                raise ArtifactsNotCommitted(missing, *causes)
            if causes:
                raise ConditionFailed(*causes)
            conn.execute(
                "UPDATE run_heads SET version = ?, subject_id = ?, checkpoint = ?, ttl = ? "
                "WHERE tenant_id = ? AND run_id = ?",
                (cp.version, cp.subject_id, _stored(cp), step.ttl, tenant_id, cp.run_id),
            )
            _insert_version(conn, tenant_id, cp, step.ttl)
            if step.receipt is not None:
                _insert_receipt(conn, tenant_id, cp.run_id, step.receipt)

    def record_event(
        self,
        tenant_id: str,
        run_id: str,
        receipt: EventReceipt,
        *,
        at_version: int,
        epoch: SubjectEpoch | None = None,
    ) -> None:
        with self.db.write() as conn:
            causes: set[Conflict] = set()
            if _head_version(conn, tenant_id, run_id) != at_version:
                causes.add(Conflict.VERSION)
            if _has_receipt(conn, tenant_id, run_id, receipt.event_id):
                causes.add(Conflict.IDEMPOTENCY)
            if _epoch_moved(conn, tenant_id, epoch):
                causes.add(Conflict.EPOCH)
            if causes:
                raise ConditionFailed(*causes)
            _insert_receipt(conn, tenant_id, run_id, receipt)

    def put_operation(
        self,
        tenant_id: str,
        run_id: str,
        operation: Operation,
        *,
        expected: OperationStatus | None,
        ttl: int | None = None,
        epoch: SubjectEpoch | None = None,
    ) -> None:
        with self.db.write() as conn:
            causes: set[Conflict] = set()
            if _head_version(conn, tenant_id, run_id) is None:
                causes.add(Conflict.ABSENT)
            if _epoch_moved(conn, tenant_id, epoch):
                causes.add(Conflict.EPOCH)
            row = conn.execute(
                "SELECT status FROM run_operations "
                "WHERE tenant_id = ? AND run_id = ? AND operation_id = ?",
                (tenant_id, run_id, operation.operation_id),
            ).fetchone()
            if expected is None and row is not None:
                causes.add(Conflict.EXISTS)
            if expected is not None and (row is None or row["status"] != expected.value):
                causes.add(Conflict.STATE)
            if causes:
                raise ConditionFailed(*causes)
            conn.execute(
                "INSERT INTO run_operations (tenant_id, run_id, operation_id, status, "
                "result_ref, result_sha256, updated_at, ttl, sensitivity) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant_id, run_id, operation_id) DO UPDATE SET "
                "status = excluded.status, result_ref = excluded.result_ref, "
                "result_sha256 = excluded.result_sha256, updated_at = excluded.updated_at, "
                "ttl = excluded.ttl, sensitivity = excluded.sensitivity",
                (
                    tenant_id,
                    run_id,
                    operation.operation_id,
                    operation.status.value,
                    operation.result_ref,
                    operation.result_sha256,
                    iso(operation.updated_at),
                    ttl,
                    operation.sensitivity.value,
                ),
            )

    def retain(self, tenant_id: str, run_id: str, ttl: int) -> int:
        changed = 0
        with self.db.write() as conn:
            for table in _TABLES:
                cur = conn.execute(
                    f"UPDATE {table} SET ttl = ? "  # noqa: S608 - table names are constants
                    "WHERE tenant_id = ? AND run_id = ? AND ttl IS NULL",
                    (ttl, tenant_id, run_id),
                )
                changed += cur.rowcount
        return changed

    def forget_subject(
        self,
        tenant_id: str,
        subject_id: str,
        before: datetime,
        *,
        retired_epoch: int | None = None,
    ) -> RunsForgotten:
        with self.db.write() as conn:
            kept = {
                r["run_id"]
                for r in conn.execute(
                    "SELECT run_id, checkpoint FROM run_heads "
                    "WHERE tenant_id = ? AND subject_id = ?",
                    (tenant_id, subject_id),
                )
                if not purged_by(
                    (cp := Checkpoint.model_validate(loads(r["checkpoint"]))).subject_epoch,
                    cp.created_at,
                    retired_epoch=retired_epoch,
                    before=before,
                )
            }
            runs = [
                r[0]
                for r in conn.execute(
                    "SELECT run_id FROM run_heads WHERE tenant_id = ? AND subject_id = ? "
                    "UNION SELECT run_id FROM run_versions WHERE tenant_id = ? AND subject_id = ?",
                    (tenant_id, subject_id, tenant_id, subject_id),
                )
                if r[0] not in kept
            ]
            records = 0
            for run_id in runs:
                for table in _TABLES:
                    cur = conn.execute(
                        f"DELETE FROM {table} "  # noqa: S608 - table names are constants
                        "WHERE tenant_id = ? AND run_id = ?",
                        (tenant_id, run_id),
                    )
                    records += cur.rowcount
        return RunsForgotten(runs=len(runs), records=records)

    def sweep_expired(self, now_epoch: int) -> int:
        """Delete rows past their ttl (the local stand-in for DynamoDB TTL), one
        transaction per batch; returns how many went."""
        removed = 0
        for table in _TABLES:
            while True:
                with self.db.write() as conn:
                    cur = conn.execute(
                        f"DELETE FROM {table} WHERE rowid IN ("  # noqa: S608 - constant names
                        f"SELECT rowid FROM {table} WHERE ttl IS NOT NULL AND ttl <= ? LIMIT ?)",
                        (now_epoch, SWEEP_BATCH),
                    )
                    count = cur.rowcount
                removed += count
                if count < SWEEP_BATCH:
                    break
        return removed


def _epoch(now: datetime) -> int:
    return int(now.timestamp())


def _stored(cp: Checkpoint) -> str:
    body = cp.model_dump(mode="json", exclude={"operations", "withheld"})
    return dumps({**body, "subject_epoch": cp.subject_epoch})


def _epoch_moved(conn: sqlite3.Connection, tenant_id: str, epoch: SubjectEpoch | None) -> bool:
    return epoch is not None and epoch_moved(conn, tenant_id, epoch.subject_id, epoch.epoch)


def _head_version(conn: sqlite3.Connection, tenant_id: str, run_id: str) -> int | None:
    row = conn.execute(
        "SELECT version FROM run_heads WHERE tenant_id = ? AND run_id = ?", (tenant_id, run_id)
    ).fetchone()
    return None if row is None else int(row[0])


def _has_version(conn: sqlite3.Connection, tenant_id: str, run_id: str, version: int) -> bool:
    return _exists(
        conn,
        "SELECT 1 FROM run_versions WHERE tenant_id = ? AND run_id = ? AND version = ?",
        (tenant_id, run_id, version),
    )


def _has_receipt(conn: sqlite3.Connection, tenant_id: str, run_id: str, event_id: str) -> bool:
    return _exists(
        conn,
        "SELECT 1 FROM run_events WHERE tenant_id = ? AND run_id = ? AND event_id = ?",
        (tenant_id, run_id, event_id),
    )


def _exists(conn: sqlite3.Connection, query: str, params: Iterable[Any]) -> bool:
    return conn.execute(query, tuple(params)).fetchone() is not None


def _insert_version(
    conn: sqlite3.Connection, tenant_id: str, cp: Checkpoint, ttl: int | None
) -> None:
    conn.execute(
        "INSERT INTO run_versions (tenant_id, run_id, version, subject_id, checkpoint, ttl) "
        "VALUES (?, ?, ?, ?, ?, ?)",
        (tenant_id, cp.run_id, cp.version, cp.subject_id, _stored(cp), ttl),
    )


def _insert_receipt(
    conn: sqlite3.Connection, tenant_id: str, run_id: str, receipt: EventReceipt
) -> None:
    conn.execute(
        "INSERT INTO run_events (tenant_id, run_id, event_id, type, fingerprint, applied, "
        "received_at, version, ttl) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            tenant_id,
            run_id,
            receipt.event_id,
            receipt.type,
            receipt.fingerprint,
            int(receipt.applied),
            iso(receipt.received_at),
            receipt.version,
            receipt.ttl,
        ),
    )


def _receipt(row: sqlite3.Row) -> EventReceipt:
    return EventReceipt(
        event_id=row["event_id"],
        type=row["type"],
        fingerprint=row["fingerprint"],
        applied=bool(row["applied"]),
        received_at=parse_iso(row["received_at"]),
        version=int(row["version"]),
        ttl=row["ttl"],
    )


def _operation(row: sqlite3.Row) -> Operation:
    return Operation(
        operation_id=row["operation_id"],
        status=OperationStatus(row["status"]),
        result_ref=row["result_ref"],
        result_sha256=row["result_sha256"],
        updated_at=parse_iso(row["updated_at"]),
        sensitivity=Sensitivity(row["sensitivity"]),
    )
