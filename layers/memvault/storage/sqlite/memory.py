"""The memory store on SQLite: ``MemoryStore``, ``DeletionJobs`` and ``AuditLog``.

Every operation is one ``BEGIN IMMEDIATE`` transaction; its conditions are SQL
predicates and reads inside that transaction, so they hold at commit. Each change of a
memory version also writes its change record to the outbox in the same transaction (the
local change feed: what DynamoDB Streams carries on AWS), with the same images.

A version row keeps its record (``storage/codecs/memory.py``) as JSON in ``body`` and the columns
that queries need beside it; ``purged`` rows are ids-only tombstones (``body`` holds ids).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime
from typing import Any

from memvault.clock import iso, parse_iso
from memvault.storage.codecs.memory import (
    job_from_item,
    job_to_item,
    memory_from_item,
    memory_to_item,
)
from memvault.storage.ports.changes import ChangeKind
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.ports.memory import (
    LIVE,
    TOMBSTONED,
    AuditEvent,
    Chain,
    DeletionLogEntry,
    ForgetState,
    IdempotencyRecord,
    IndexStatusUpdate,
    ListFilter,
    NewVersion,
    StoredVersion,
    request_memory_id,
)
from memvault.storage.sqlite.db import Database, dumps, loads
from memvault_wire.memory import (
    CopyState,
    DeletionJob,
    DeletionState,
    Memory,
    MemoryStatus,
)

SCHEMA: tuple[str, ...] = (
    """CREATE TABLE memory_versions (
        tenant_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        memory_id TEXT NOT NULL,
        chain_id TEXT NOT NULL,
        type TEXT NOT NULL,
        status TEXT NOT NULL,
        version INTEGER,
        kind TEXT,
        canonical_key TEXT,
        ttl INTEGER,
        body TEXT NOT NULL,
        PRIMARY KEY (tenant_id, subject_id, memory_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX memory_versions_ttl ON memory_versions (ttl) WHERE ttl IS NOT NULL",
    """CREATE TABLE memory_chains (
        tenant_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        chain_id TEXT NOT NULL,
        state TEXT NOT NULL,
        current_memory_id TEXT NOT NULL,
        current_version INTEGER NOT NULL,
        versions TEXT NOT NULL,
        fact TEXT,
        subject_epoch INTEGER NOT NULL,
        deletion_id TEXT,
        artifact_ids TEXT NOT NULL DEFAULT '[]',
        created_at TEXT NOT NULL,
        updated_at TEXT NOT NULL,
        ttl INTEGER,
        PRIMARY KEY (tenant_id, subject_id, chain_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX memory_chains_ttl ON memory_chains (ttl) WHERE ttl IS NOT NULL",
    """CREATE TABLE memory_pointers (
        tenant_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        fact TEXT NOT NULL,
        chain_id TEXT NOT NULL,
        ttl INTEGER,
        PRIMARY KEY (tenant_id, subject_id, fact)
    ) WITHOUT ROWID""",
    """CREATE TABLE memory_subjects (
        tenant_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        epoch INTEGER NOT NULL,
        forgotten_at TEXT,
        deletion_id TEXT,
        PRIMARY KEY (tenant_id, subject_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE memory_idempotency (
        tenant_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        request_id TEXT NOT NULL,
        payload_hash TEXT NOT NULL,
        memory_id TEXT NOT NULL,
        created_at TEXT NOT NULL,
        ttl INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, subject_id, request_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX memory_idempotency_ttl ON memory_idempotency (ttl)",
    """CREATE TABLE audit_events (
        tenant_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        at TEXT NOT NULL,
        event_id TEXT NOT NULL,
        body TEXT NOT NULL,
        ttl INTEGER NOT NULL,
        PRIMARY KEY (tenant_id, subject_id, at, event_id)
    ) WITHOUT ROWID""",
    "CREATE INDEX audit_events_ttl ON audit_events (ttl)",
    """CREATE TABLE deletion_log (
        tenant_id TEXT NOT NULL,
        requested_at TEXT NOT NULL,
        deletion_id TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (tenant_id, requested_at, deletion_id)
    ) WITHOUT ROWID""",
    """CREATE TABLE deletion_jobs (
        tenant_id TEXT NOT NULL,
        deletion_id TEXT NOT NULL,
        body TEXT NOT NULL,
        PRIMARY KEY (tenant_id, deletion_id)
    ) WITHOUT ROWID""",
)

#: A version that references an artifact adds the reference inside the same transaction:
#: ``(conn, tenant, subject, artifact_id, ref, sha256, made_after) -> bool`` (False: not
#: committed, or made at or before ``made_after``).
AddReference = Callable[
    [sqlite3.Connection, str, str, str, str, str | None, datetime | None, int | None], bool
]

_MEMORY = "memory"


def _chain(row: sqlite3.Row) -> Chain:
    return Chain(
        chain_id=row["chain_id"],
        state=row["state"],
        current_memory_id=row["current_memory_id"],
        current_version=int(row["current_version"]),
        versions=loads(row["versions"]),
        fact=row["fact"],
        subject_epoch=int(row["subject_epoch"]),
        deletion_id=row["deletion_id"],
        ttl=row["ttl"],
        artifact_ids=tuple(sorted(loads(row["artifact_ids"]) or ())),
    )


class SqliteMemoryStore:
    def __init__(self, db: Database, add_reference: AddReference | None = None) -> None:
        self.db = db
        self._add_reference = add_reference

    def reachable(self) -> bool:
        try:
            with self.db.read() as conn:
                conn.execute("SELECT 1 FROM memory_subjects LIMIT 1").fetchall()
        except sqlite3.Error:
            return False
        return True

    # ------------------------------------------------------------------ reads

    def subject_epoch(self, tenant_id: str, subject_id: str) -> int:
        with self.db.read() as conn:
            return _epoch(conn, tenant_id, subject_id)

    def forgotten_at(self, tenant_id: str, subject_id: str) -> datetime | None:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT forgotten_at FROM memory_subjects WHERE tenant_id = ? AND subject_id = ?",
                (tenant_id, subject_id),
            ).fetchone()
        return parse_iso(row["forgotten_at"]) if row and row["forgotten_at"] else None

    def forget_state(self, tenant_id: str, subject_id: str) -> ForgetState:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT epoch, forgotten_at FROM memory_subjects "
                "WHERE tenant_id = ? AND subject_id = ?",
                (tenant_id, subject_id),
            ).fetchone()
        if row is None:
            return ForgetState(epoch=0, forgotten_at=None)
        at = row["forgotten_at"]
        return ForgetState(epoch=int(row["epoch"]), forgotten_at=parse_iso(at) if at else None)

    def _row(
        self, conn: sqlite3.Connection, tenant_id: str, subject_id: str, memory_id: str
    ) -> sqlite3.Row | None:
        row: sqlite3.Row | None = conn.execute(
            "SELECT * FROM memory_versions WHERE tenant_id = ? AND subject_id = ? "
            "AND memory_id = ?",
            (tenant_id, subject_id, memory_id),
        ).fetchone()
        return row

    def locate(self, tenant_id: str, subject_id: str, memory_id: str) -> tuple[str, int] | None:
        with self.db.read() as conn:
            row = self._row(conn, tenant_id, subject_id, memory_id)
        if row is None:
            return None
        return row["chain_id"], int(loads(row["body"]).get("subject_epoch", 0))

    def version(self, tenant_id: str, subject_id: str, memory_id: str) -> Memory | None:
        with self.db.read() as conn:
            row = self._row(conn, tenant_id, subject_id, memory_id)
        if row is None or row["type"] != "memory":
            return None
        return memory_from_item(loads(row["body"]))

    def versions(self, tenant_id: str, subject_id: str, memory_ids: list[str]) -> list[Memory]:
        with self.db.read() as conn:
            rows = _many(conn, "memory_versions", "memory_id", tenant_id, subject_id, memory_ids)
        return [memory_from_item(loads(r["body"])) for r in rows if r["type"] == "memory"]

    def chain(self, tenant_id: str, subject_id: str, chain_id: str) -> Chain | None:
        with self.db.read() as conn:
            return _chain_row(conn, tenant_id, subject_id, chain_id)

    def pointer(self, tenant_id: str, subject_id: str, fact: str) -> str | None:
        found = self.pointers(tenant_id, subject_id, [fact])
        return found[0] if found else None

    def pointers(self, tenant_id: str, subject_id: str, facts: Sequence[str]) -> list[str]:
        with self.db.read() as conn:
            rows = _many(conn, "memory_pointers", "fact", tenant_id, subject_id, facts)
        return [str(r["chain_id"]) for r in rows]

    def revalidation(
        self,
        tenant_id: str,
        subject_id: str,
        memory_ids: Sequence[str],
        chain_ids: Sequence[str],
    ) -> tuple[int, dict[str, StoredVersion], list[Chain]]:
        with self.db.read() as conn:
            epoch = _epoch(conn, tenant_id, subject_id)
            rows = _many(conn, "memory_versions", "memory_id", tenant_id, subject_id, memory_ids)
            chains = [
                _chain(r)
                for r in _many(conn, "memory_chains", "chain_id", tenant_id, subject_id, chain_ids)
            ]
        versions = {}
        for r in rows:
            body = loads(r["body"])
            versions[r["memory_id"]] = StoredVersion(
                memory_id=r["memory_id"],
                chain_id=r["chain_id"],
                memory=memory_from_item(body) if r["type"] == "memory" else None,
                superseded_by=body.get("superseded_by"),
            )
        return epoch, versions, chains

    def idempotency(
        self, tenant_id: str, subject_id: str, request_id: str
    ) -> IdempotencyRecord | None:
        """A memory write's record is the version it created (its id derives from the
        request id; an ids-only tombstone once purged); records written by the earlier
        layout, in their own table, are still read."""
        memory_id = request_memory_id(tenant_id, subject_id, request_id)
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT * FROM memory_idempotency WHERE tenant_id = ? AND subject_id = ? "
                "AND request_id = ?",
                (tenant_id, subject_id, request_id),
            ).fetchone()
            version = None if row else self._row(conn, tenant_id, subject_id, memory_id)
        if row is not None:
            return IdempotencyRecord(row["request_id"], row["payload_hash"], row["memory_id"])
        if version is None:
            return None
        payload_hash = loads(version["body"]).get("payload_hash") or ""
        return IdempotencyRecord(request_id, str(payload_hash), memory_id)

    def list_versions(
        self,
        tenant_id: str,
        subject_id: str,
        *,
        now: datetime,
        where: ListFilter,
        cursor: str | None,
        page_size: int,
    ) -> tuple[list[Memory], str | None]:
        clauses = ["tenant_id = ?", "subject_id = ?", "type = 'memory'", "ttl > ?"]
        params: list[Any] = [tenant_id, subject_id, int(now.timestamp())]
        clauses.append(f"status IN ({', '.join('?' for _ in where.statuses)})")
        params += list(where.statuses)
        if where.kind:
            clauses.append("kind = ?")
            params.append(where.kind)
        if where.canonical_key:
            clauses.append("canonical_key = ?")
            params.append(where.canonical_key)
        if where.tag:
            clauses.append("EXISTS (SELECT 1 FROM json_each(body, '$.tags') WHERE value = ?)")
            params.append(where.tag)
        if cursor:
            clauses.append("memory_id > ?")
            params.append(cursor)
        with self.db.read() as conn:
            rows = conn.execute(
                f"SELECT body FROM memory_versions WHERE {' AND '.join(clauses)} "  # noqa: S608 - fixed clauses, values bound
                "ORDER BY memory_id LIMIT ?",
                (*params, page_size),
            ).fetchall()
        items = [memory_from_item(loads(r["body"])) for r in rows]
        last = items[-1].memory_id if len(items) == page_size else None
        return items, last

    def subject_items(self, tenant_id: str, subject_id: str) -> tuple[list[Memory], list[Chain]]:
        with self.db.read() as conn:
            versions = conn.execute(
                "SELECT body FROM memory_versions WHERE tenant_id = ? AND subject_id = ? "
                "AND type = 'memory' ORDER BY memory_id",
                (tenant_id, subject_id),
            ).fetchall()
            chains = conn.execute(
                "SELECT * FROM memory_chains WHERE tenant_id = ? AND subject_id = ? "
                "ORDER BY chain_id",
                (tenant_id, subject_id),
            ).fetchall()
        return [memory_from_item(loads(r["body"])) for r in versions], [_chain(r) for r in chains]

    def subject_version_ids(self, tenant_id: str, subject_id: str) -> list[tuple[str, str]]:
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT memory_id, chain_id FROM memory_versions WHERE tenant_id = ? "
                "AND subject_id = ? ORDER BY memory_id",
                (tenant_id, subject_id),
            ).fetchall()
        return [(r["memory_id"], r["chain_id"]) for r in rows]

    def rebuild_records(self, tenant_id: str | None = None) -> Iterator[dict[str, Any]]:
        """Every version record and every tombstoned chain head (with its owner), for an
        index rebuild; read in pages so that a large store streams."""
        for table, key in (("memory_versions", "memory_id"), ("memory_chains", "chain_id")):
            after: tuple[str, str, str] = ("", "", "")
            while True:
                clauses = f"(tenant_id, subject_id, {key}) > (?, ?, ?)"
                params: list[Any] = list(after)
                if tenant_id is not None:
                    clauses += " AND tenant_id = ?"
                    params.append(tenant_id)
                with self.db.read() as conn:
                    rows = conn.execute(
                        f"SELECT * FROM {table} WHERE {clauses} "  # noqa: S608 - fixed names
                        f"ORDER BY tenant_id, subject_id, {key} LIMIT 500",
                        params,
                    ).fetchall()
                if not rows:
                    break
                for r in rows:
                    if table == "memory_versions":
                        yield loads(r["body"])
                    elif r["state"] != LIVE:
                        yield {
                            "type": "chain",
                            "tenant_id": r["tenant_id"],
                            "subject_id": r["subject_id"],
                            "chain_id": r["chain_id"],
                            "state": r["state"],
                            "current_memory_id": r["current_memory_id"],
                            "current_version": r["current_version"],
                        }
                last = rows[-1]
                after = (last["tenant_id"], last["subject_id"], last[key])

    # ------------------------------------------------------------------ writes

    def commit_version(self, new: NewVersion) -> None:
        """The version, its chain head (compare-and-set), the fact's pointer, the previous
        version superseded, the artifact reference and the audit entry, in one write
        transaction; ``ConditionFailed`` names every condition that failed."""
        m = new.memory
        t, s = m.tenant_id, m.subject_id
        with self.db.write() as conn:
            failed, chain, prev_row = self._failed_conditions(conn, new)
            if failed:
                raise ConditionFailed(*failed)
            if (
                m.artifact_id
                and (new.previous is None or new.previous.artifact_id != m.artifact_id)
                and not self._reference(
                    conn,
                    t,
                    s,
                    m.artifact_id,
                    f"memory:{m.chain_id}",
                    new.artifacts_after,
                    m.subject_epoch,
                )
            ):
                raise ConditionFailed(Conflict.ARTIFACT)

            record = memory_to_item(m)
            if new.idempotency is not None:
                record["payload_hash"] = new.idempotency.payload_hash
            _put_version(conn, record, None)
            ttl = new.head_ttl
            _write_chain_head(conn, new, chain, ttl)
            if new.fact is not None:
                conn.execute(
                    "INSERT INTO memory_pointers VALUES (?, ?, ?, ?, ?) "
                    "ON CONFLICT (tenant_id, subject_id, fact) DO UPDATE SET "
                    "chain_id = excluded.chain_id, ttl = excluded.ttl",
                    (t, s, new.fact, m.chain_id, ttl),
                )
            if new.previous is not None and prev_row is not None:
                old = loads(prev_row["body"])
                updated = {
                    **old,
                    "status": MemoryStatus.SUPERSEDED.value,
                    "superseded_by": m.memory_id,
                    "updated_at": iso(m.updated_at),
                }
                _put_version(conn, updated, old)
            _audit(conn, new.audit, new.audit_expires_at)

    def _failed_conditions(
        self, conn: sqlite3.Connection, new: NewVersion
    ) -> tuple[set[Conflict], Chain | None, sqlite3.Row | None]:
        """The conditions of ``new`` that do not hold, checked inside its transaction, with
        the chain head and the previous version's row it read."""
        m = new.memory
        t, s = m.tenant_id, m.subject_id
        failed: set[Conflict] = set()
        if _epoch(conn, t, s) != m.subject_epoch:
            failed.add(Conflict.EPOCH)
        if new.idempotency is not None:
            derived = request_memory_id(t, s, new.idempotency.request_id)
            if m.memory_id != derived or new.idempotency.memory_id != m.memory_id:
                raise ValueError("an idempotent write's memory id must derive from its request id")
            if conn.execute(
                "SELECT 1 FROM memory_idempotency WHERE tenant_id = ? AND subject_id = ? "
                "AND request_id = ?",
                (t, s, new.idempotency.request_id),
            ).fetchone():
                failed.add(Conflict.IDEMPOTENCY)  # a record of the earlier layout
        if self._row(conn, t, s, m.memory_id) is not None:
            # An idempotent write's version is its record: it exists, so this is a replay.
            failed.add(Conflict.IDEMPOTENCY if new.idempotency is not None else Conflict.EXISTS)
        chain = _chain_row(conn, t, s, m.chain_id)
        if new.expected_version is None:
            if chain is not None:
                failed.add(Conflict.VERSION)
        elif chain is None or not chain.live or chain.current_version != new.expected_version:
            failed.add(Conflict.VERSION)
        if new.fact is not None:
            held = conn.execute(
                "SELECT chain_id FROM memory_pointers WHERE tenant_id = ? AND subject_id = ? "
                "AND fact = ?",
                (t, s, new.fact),
            ).fetchone()
            holder = held["chain_id"] if held else None
            if new.fact_expected_chain is None:
                ok = holder is None
            elif new.fact_expected_chain == m.chain_id:
                ok = holder in (None, m.chain_id)
            else:
                ok = holder == new.fact_expected_chain
            if not ok:
                failed.add(Conflict.POINTER)
        prev_row = None
        if new.previous is not None:
            prev_row = self._row(conn, t, s, new.previous.memory_id)
            prev_body = loads(prev_row["body"]) if prev_row else None
            if (
                prev_body is None
                or prev_row is None
                or prev_row["type"] != "memory"
                or prev_body["status"]
                not in (MemoryStatus.ACTIVE.value, MemoryStatus.CANDIDATE.value)
                or prev_body["version"] != new.previous.version
            ):
                failed.add(Conflict.PREVIOUS)
        return failed, chain, prev_row

    def _reference(
        self,
        conn: sqlite3.Connection,
        t: str,
        s: str,
        artifact_id: str,
        ref: str,
        made_after: datetime | None,
        made_under: int,
    ) -> bool:
        if self._add_reference is None:
            return False
        return self._add_reference(conn, t, s, artifact_id, ref, None, made_after, made_under)

    def tombstone_chain(
        self,
        tenant_id: str,
        subject_id: str,
        chain: Chain,
        deletion_id: str,
        at: datetime,
        *,
        release_pointer: bool,
        job: DeletionJob | None,
        audit: AuditEvent | None,
        audit_expires_at: datetime | None,
    ) -> None:
        t, s = tenant_id, subject_id
        with self.db.write() as conn:
            failed, current = self._failed_tombstone_conditions(
                conn, t, s, chain, release_pointer=release_pointer, job=job
            )
            if failed:
                raise ConditionFailed(*failed)
            assert current is not None
            conn.execute(
                "UPDATE memory_chains SET state = ?, deletion_id = ?, updated_at = ?, ttl = NULL "
                "WHERE tenant_id = ? AND subject_id = ? AND chain_id = ?",
                (TOMBSTONED, deletion_id, iso(at), t, s, chain.chain_id),
            )
            old = loads(current["body"])
            _put_version(
                conn,
                {
                    **old,
                    "status": MemoryStatus.DELETED.value,
                    "deletion_id": deletion_id,
                    "updated_at": iso(at),
                },
                old,
            )
            if release_pointer and chain.fact:
                conn.execute(
                    "DELETE FROM memory_pointers WHERE tenant_id = ? AND subject_id = ? "
                    "AND fact = ?",
                    (t, s, chain.fact),
                )
            if job is not None:
                _insert_job(conn, job)
            if audit is not None:
                assert audit_expires_at is not None
                _audit(conn, audit, audit_expires_at)

    def _failed_tombstone_conditions(
        self,
        conn: sqlite3.Connection,
        t: str,
        s: str,
        chain: Chain,
        *,
        release_pointer: bool,
        job: DeletionJob | None,
    ) -> tuple[set[Conflict], sqlite3.Row | None]:
        """The conditions of a tombstone that do not hold, checked inside its transaction,
        with the current version's row it read: the chain still live at the version that
        was read, its current version present, the fact's pointer still its own (when
        released) and the deletion job new."""
        held = _chain_row(conn, t, s, chain.chain_id)
        failed: set[Conflict] = set()
        if held is None or not held.live or held.current_version != chain.current_version:
            failed.add(Conflict.VERSION)
        current = self._row(conn, t, s, chain.current_memory_id)
        if current is None:
            failed.add(Conflict.ABSENT)
        if release_pointer and chain.fact:
            holder = conn.execute(
                "SELECT chain_id FROM memory_pointers WHERE tenant_id = ? AND subject_id = ? "
                "AND fact = ?",
                (t, s, chain.fact),
            ).fetchone()
            if holder is None or holder["chain_id"] != chain.chain_id:
                failed.add(Conflict.POINTER)
        if job is not None and _job_exists(conn, job):
            failed.add(Conflict.EXISTS)
        return failed, current

    def retire_subject_epoch(
        self,
        tenant_id: str,
        subject_id: str,
        epoch: int,
        job: DeletionJob,
        audit: AuditEvent,
        audit_expires_at: datetime,
    ) -> None:
        with self.db.write() as conn:
            failed: set[Conflict] = set()
            if _epoch(conn, tenant_id, subject_id) != epoch:
                failed.add(Conflict.EPOCH)
            if _job_exists(conn, job):
                failed.add(Conflict.EXISTS)
            if failed:
                raise ConditionFailed(*failed)
            conn.execute(
                "INSERT INTO memory_subjects VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant_id, subject_id) DO UPDATE SET epoch = excluded.epoch, "
                "forgotten_at = excluded.forgotten_at, deletion_id = excluded.deletion_id",
                (tenant_id, subject_id, epoch + 1, iso(job.requested_at), job.deletion_id),
            )
            _insert_job(conn, job)
            _audit(conn, audit, audit_expires_at)

    def raise_epoch(
        self, tenant_id: str, subject_id: str, above: int, deletion_id: str, at: datetime
    ) -> None:
        with self.db.write() as conn:
            if _epoch(conn, tenant_id, subject_id) > above:
                return
            # ISO times sort as text: the later forget time stays.
            conn.execute(
                "INSERT INTO memory_subjects VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (tenant_id, subject_id) DO UPDATE SET epoch = excluded.epoch, "
                "deletion_id = excluded.deletion_id, forgotten_at = "
                "max(coalesce(forgotten_at, ''), excluded.forgotten_at)",
                (tenant_id, subject_id, above + 1, iso(at), deletion_id),
            )

    def purge_version(
        self,
        tenant_id: str,
        subject_id: str,
        memory_id: str,
        chain_id: str,
        deletion_id: str,
        at: datetime,
    ) -> None:
        with self.db.write() as conn:
            row = self._row(conn, tenant_id, subject_id, memory_id)
            if row is None or row["chain_id"] != chain_id:
                return  # absent already (expired and swept): nothing to purge
            old = loads(row["body"])
            tombstone = {
                "type": "memory-tombstone",
                "tenant_id": tenant_id,
                "subject_id": subject_id,
                "memory_id": memory_id,
                "chain_id": chain_id,
                "status": MemoryStatus.DELETED.value,
                "deletion_id": deletion_id,
                "purged_at": iso(at),
            }
            if old == tombstone or old.get("type") == "memory-tombstone":
                return
            # The change's image before is ids and version only: the indexer needs the
            # version to outrank the live document, and the content must not outlive
            # the purge in the outbox (until pruned) when it is gone from the table.
            _put_version(conn, tombstone, _ids_only(old))
            # The outbox rows that carried this version's content go with it: the change
            # just emitted (ids only) is what consumers still need.
            conn.execute(
                "DELETE FROM outbox WHERE tbl = ? AND tenant_id = ? AND subject_id = ? "
                "AND seq < (SELECT MAX(seq) FROM outbox) "
                "AND (json_extract(new_image, '$.memory_id') = ? "
                "OR json_extract(old_image, '$.memory_id') = ?)",
                (_MEMORY, tenant_id, subject_id, memory_id, memory_id),
            )

    def record_index_statuses(self, updates: Sequence[IndexStatusUpdate]) -> list[bool]:
        """All of a batch in one transaction (a commit per version was most of the
        indexer's time in this process)."""
        if not updates:
            return []
        with self.db.write() as conn:
            return [self._record_index_status(conn, u) for u in updates]

    def _record_index_status(self, conn: sqlite3.Connection, u: IndexStatusUpdate) -> bool:
        row = self._row(conn, u.tenant_id, u.subject_id, u.memory_id)
        if row is None or row["type"] != "memory":
            return False
        old = loads(row["body"])
        held = old.get("indexed_version")
        if (
            old["status"] != u.status
            or old["version"] != u.version
            or (held is not None and held > u.indexed_version)
        ):
            return False
        _put_version(
            conn,
            {
                **old,
                "index_status": u.index_status,
                "indexed_version": u.indexed_version,
                "embedding_model": u.embedding_model,
                "indexed_at": iso(u.at),
            },
            old,
            # The indexer's own bookkeeping is not fed back to it: it changes nothing
            # the index holds (``op_from_images`` skips it on DynamoDB's stream), and
            # on the local feed it was half of every batch.
            emit=False,
        )
        return True

    # ------------------------------------------------------------------ deletion jobs

    def job(self, tenant_id: str, deletion_id: str) -> DeletionJob | None:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT body FROM deletion_jobs WHERE tenant_id = ? AND deletion_id = ?",
                (tenant_id, deletion_id),
            ).fetchone()
        return job_from_item(loads(row["body"])) if row else None

    def put_job(self, job: DeletionJob) -> None:
        with self.db.write() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO deletion_jobs VALUES (?, ?, ?)",
                (job.tenant_id, job.deletion_id, dumps(job_to_item(job))),
            )

    def _update_job(
        self, tenant_id: str, deletion_id: str, change: Callable[[dict[str, Any]], None]
    ) -> None:
        with self.db.write() as conn:
            row = conn.execute(
                "SELECT body FROM deletion_jobs WHERE tenant_id = ? AND deletion_id = ?",
                (tenant_id, deletion_id),
            ).fetchone()
            if row is None:
                raise ConditionFailed(Conflict.ABSENT)
            body = loads(row["body"])
            change(body)
            conn.execute(
                "UPDATE deletion_jobs SET body = ? WHERE tenant_id = ? AND deletion_id = ?",
                (dumps(body), tenant_id, deletion_id),
            )

    def set_copy(
        self,
        tenant_id: str,
        deletion_id: str,
        copy: str,
        state: CopyState,
        at: datetime,
        reason: str | None = None,
        *,
        attempt: bool = False,
    ) -> None:
        event = {"status": state.value, "at": iso(at), "reason": reason}

        def change(body: dict[str, Any]) -> None:
            held = body.setdefault("copies", {}).get(copy) or {"attempts": 0, "history": []}
            body["copies"][copy] = {
                "status": state.value,
                "updated_at": iso(at),
                "reason": reason,
                "attempts": int(held.get("attempts", 0)) + (1 if attempt else 0),
                "history": [*held.get("history", []), event],
            }

        self._update_job(tenant_id, deletion_id, change)

    def set_job_state(
        self, tenant_id: str, deletion_id: str, state: DeletionState, at: datetime
    ) -> None:
        def change(body: dict[str, Any]) -> None:
            body["status"] = state.value
            body["completed_at"] = iso(at) if state is DeletionState.COMPLETED else None
            body["updated_at"] = iso(at)

        if state is DeletionState.COMPLETED:
            # COMPLETED means gone from disk: the purged rows were overwritten in place
            # (secure_delete), but the WAL still holds the frames written before the
            # purge until a checkpoint; empty it before the job says COMPLETED.
            self.db.purge_files()
        self._update_job(tenant_id, deletion_id, change)

    # ------------------------------------------------------------------ audit

    def events(self, tenant_id: str, subject_id: str) -> list[AuditEvent]:
        with self.db.read() as conn:
            rows = conn.execute(
                "SELECT body FROM audit_events WHERE tenant_id = ? AND subject_id = ? "
                "ORDER BY at, event_id",
                (tenant_id, subject_id),
            ).fetchall()
        out = []
        for r in rows:
            body = loads(r["body"])
            body["at"] = parse_iso(body["at"])
            out.append(AuditEvent(**body))
        return out

    def deletion_log(self, tenant_id: str | None) -> list[DeletionLogEntry]:
        query = "SELECT body FROM deletion_log"
        params: tuple[str, ...] = ()
        if tenant_id is not None:
            query += " WHERE tenant_id = ?"
            params = (tenant_id,)
        with self.db.read() as conn:
            rows = conn.execute(query + " ORDER BY requested_at, deletion_id", params).fetchall()
        out = []
        for r in rows:
            body = loads(r["body"])
            body["requested_at"] = parse_iso(body["requested_at"])
            out.append(DeletionLogEntry(**body))
        return out

    # ------------------------------------------------------------------ expiry

    def sweep_expired(self, now_epoch: int, batch: int = 500) -> int:
        """Play DynamoDB TTL: delete rows past their expiry, a batch per transaction; each
        removed version goes to the change feed as a service delete."""
        removed = 0
        for table, key in (
            ("memory_versions", "memory_id"),
            ("memory_chains", "chain_id"),
            ("memory_pointers", "fact"),
            ("memory_idempotency", "request_id"),
        ):
            while True:
                with self.db.write() as conn:
                    rows = conn.execute(
                        f"SELECT * FROM {table} WHERE ttl IS NOT NULL AND ttl < ? LIMIT ?",  # noqa: S608
                        (now_epoch, batch),
                    ).fetchall()
                    for r in rows:
                        conn.execute(
                            f"DELETE FROM {table} WHERE tenant_id = ? AND subject_id = ? "  # noqa: S608
                            f"AND {key} = ?",
                            (r["tenant_id"], r["subject_id"], r[key]),
                        )
                        if table == "memory_versions":
                            Database.emit(
                                conn,
                                _MEMORY,
                                ChangeKind.REMOVE,
                                r["tenant_id"],
                                r["subject_id"],
                                None,
                                # Ids and version only: the indexer needs no more to
                                # tombstone it, and the content is gone from the table.
                                _ids_only(loads(r["body"])),
                                service_delete=True,
                            )
                removed += len(rows)
                if len(rows) < batch:
                    break
        with self.db.write() as conn:
            cur = conn.execute("DELETE FROM audit_events WHERE ttl < ?", (now_epoch,))
            removed += cur.rowcount
        return removed


# ---------------------------------------------------------------------- helpers


def _epoch(conn: sqlite3.Connection, tenant_id: str, subject_id: str) -> int:
    row = conn.execute(
        "SELECT epoch FROM memory_subjects WHERE tenant_id = ? AND subject_id = ?",
        (tenant_id, subject_id),
    ).fetchone()
    return int(row["epoch"]) if row else 0


#: The subject's current epoch, inside the caller's transaction: the trace store's
#: deferred writes check it (``sqlite.traces``), as they share this file.
subject_epoch = _epoch


def _chain_row(
    conn: sqlite3.Connection, tenant_id: str, subject_id: str, chain_id: str
) -> Chain | None:
    row = conn.execute(
        "SELECT * FROM memory_chains WHERE tenant_id = ? AND subject_id = ? AND chain_id = ?",
        (tenant_id, subject_id, chain_id),
    ).fetchone()
    return _chain(row) if row else None


def _write_chain_head(
    conn: sqlite3.Connection, new: NewVersion, chain: Chain | None, ttl: int
) -> None:
    """Create the head of a new chain whose first version is ``new.memory``, or move the
    existing ``chain``'s head on to it (adding its artifact, if any), in the caller's
    transaction."""
    m = new.memory
    t, s = m.tenant_id, m.subject_id
    if chain is None:
        conn.execute(
            "INSERT INTO memory_chains VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                t,
                s,
                m.chain_id,
                LIVE,
                m.memory_id,
                m.version,
                dumps([m.memory_id]),
                new.fact,
                m.subject_epoch,
                None,
                dumps([m.artifact_id] if m.artifact_id else []),
                iso(m.created_at),
                iso(m.updated_at),
                ttl,
            ),
        )
    else:
        artifacts = set(chain.artifact_ids) | ({m.artifact_id} if m.artifact_id else set())
        conn.execute(
            "UPDATE memory_chains SET current_memory_id = ?, current_version = ?, "
            "versions = ?, updated_at = ?, ttl = ?, artifact_ids = ? "
            "WHERE tenant_id = ? AND subject_id = ? AND chain_id = ?",
            (
                m.memory_id,
                m.version,
                dumps([*chain.versions, m.memory_id]),
                iso(m.updated_at),
                ttl,
                dumps(sorted(artifacts)),
                t,
                s,
                m.chain_id,
            ),
        )


def _many(
    conn: sqlite3.Connection,
    table: str,
    key: str,
    tenant_id: str,
    subject_id: str,
    values: Sequence[str],
) -> list[sqlite3.Row]:
    unique = list(dict.fromkeys(values))
    rows: list[sqlite3.Row] = []
    for start in range(0, len(unique), 500):
        part = unique[start : start + 500]
        rows += conn.execute(
            f"SELECT * FROM {table} WHERE tenant_id = ? AND subject_id = ? "  # noqa: S608 - fixed names
            f"AND {key} IN ({', '.join('?' for _ in part)})",
            (tenant_id, subject_id, *part),
        ).fetchall()
    return rows


#: What a purge's change keeps of the version it replaced (no content, no metadata).
_PURGED_IMAGE = ("type", "tenant_id", "subject_id", "memory_id", "chain_id", "version", "status")


def _ids_only(record: dict[str, Any]) -> dict[str, Any]:
    return {k: record[k] for k in _PURGED_IMAGE if k in record}


def _put_version(
    conn: sqlite3.Connection,
    record: dict[str, Any],
    old: dict[str, Any] | None,
    *,
    emit: bool = True,
) -> None:
    """Write a version row from its record and emit its change (unless ``emit`` is off),
    in the caller's transaction."""
    conn.execute(
        "INSERT OR REPLACE INTO memory_versions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            record["tenant_id"],
            record["subject_id"],
            record["memory_id"],
            record["chain_id"],
            record.get("type", "memory"),
            record["status"],
            record.get("version"),
            record.get("kind"),
            record.get("canonical_key"),
            record.get("ttl"),
            dumps(record),
        ),
    )
    if not emit:
        return
    Database.emit(
        conn,
        _MEMORY,
        ChangeKind.MODIFY if old is not None else ChangeKind.INSERT,
        record["tenant_id"],
        record["subject_id"],
        record,
        old,
    )


def _job_exists(conn: sqlite3.Connection, job: DeletionJob) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM deletion_jobs WHERE tenant_id = ? AND deletion_id = ?",
            (job.tenant_id, job.deletion_id),
        ).fetchone()
        is not None
    )


def _insert_job(conn: sqlite3.Connection, job: DeletionJob) -> None:
    conn.execute(
        "INSERT INTO deletion_jobs VALUES (?, ?, ?)",
        (job.tenant_id, job.deletion_id, dumps(job_to_item(job))),
    )
    # The deletion log has no expiry: a restore from backup replays it.
    conn.execute(
        "INSERT INTO deletion_log VALUES (?, ?, ?, ?)",
        (
            job.tenant_id,
            iso(job.requested_at),
            job.deletion_id,
            dumps(
                {
                    "deletion_id": job.deletion_id,
                    "tenant_id": job.tenant_id,
                    "subject_id": job.subject_id,
                    "scope": job.scope.value,
                    "target": job.target,
                    "requested_by": job.requested_by,
                    "requested_at": iso(job.requested_at),
                }
            ),
        ),
    )


def _audit(conn: sqlite3.Connection, event: AuditEvent, expires_at: datetime) -> None:
    body = {
        "event_id": event.event_id,
        "at": iso(event.at),
        "action": event.action,
        "actor": event.actor,
        "tenant_id": event.tenant_id,
        "subject_id": event.subject_id,
        "memory_id": event.memory_id,
        "chain_id": event.chain_id,
        "version": event.version,
        "deletion_id": event.deletion_id,
        "request_id": event.request_id,
        "detail": dict(event.detail) if event.detail else None,
    }
    conn.execute(
        "INSERT INTO audit_events VALUES (?, ?, ?, ?, ?, ?)",
        (
            event.tenant_id,
            event.subject_id,
            iso(event.at),
            event.event_id,
            dumps(body),
            int(expires_at.timestamp()),
        ),
    )


def invariant_violations(db: Database, now_epoch: int) -> list[str]:
    """What ``memvault doctor`` reports of the store itself, one readable line each."""
    out: list[str] = []
    with db.read() as conn:
        for r in conn.execute(
            "SELECT c.tenant_id, c.subject_id, c.chain_id, c.current_memory_id, "
            "c.current_version, v.status, v.version, v.type FROM memory_chains c "
            "LEFT JOIN memory_versions v ON v.tenant_id = c.tenant_id "
            "AND v.subject_id = c.subject_id AND v.memory_id = c.current_memory_id "
            "WHERE c.state = ?",
            (LIVE,),
        ):
            where = f"{r['tenant_id']}/{r['subject_id']} chain {r['chain_id']}"
            if r["type"] is None:
                out.append(f"{where}: its current version {r['current_memory_id']} is missing")
            elif r["type"] != "memory" or r["status"] not in ("active", "candidate"):
                out.append(
                    f"{where}: the chain is live but its current version "
                    f"{r['current_memory_id']} is {r['status']}"
                )
            elif r["version"] != r["current_version"]:
                out.append(
                    f"{where}: head says version {r['current_version']}, "
                    f"its current row holds {r['version']}"
                )
        for r in conn.execute(
            "SELECT tenant_id, subject_id, chain_id, COUNT(*) AS n FROM memory_versions "
            "WHERE type = 'memory' AND status IN ('active', 'candidate') "
            "GROUP BY tenant_id, subject_id, chain_id HAVING n > 1"
        ):
            out.append(
                f"{r['tenant_id']}/{r['subject_id']} chain {r['chain_id']}: "
                f"{r['n']} current versions (one expected)"
            )
        for r in conn.execute(
            "SELECT v.tenant_id, v.subject_id, v.chain_id, v.memory_id, v.version, "
            "c.current_version FROM memory_versions v JOIN memory_chains c "
            "ON c.tenant_id = v.tenant_id AND c.subject_id = v.subject_id "
            "AND c.chain_id = v.chain_id WHERE v.version > c.current_version"
        ):
            out.append(
                f"{r['tenant_id']}/{r['subject_id']} version {r['memory_id']}: version "
                f"{r['version']} is above its chain head's {r['current_version']}"
            )
        for r in conn.execute(
            "SELECT p.tenant_id, p.subject_id, p.fact, p.chain_id, c.state, c.fact AS held "
            "FROM memory_pointers p LEFT JOIN memory_chains c ON c.tenant_id = p.tenant_id "
            "AND c.subject_id = p.subject_id AND c.chain_id = p.chain_id "
            "WHERE p.ttl IS NULL OR p.ttl >= ?",
            (now_epoch,),
        ):
            where = f"{r['tenant_id']}/{r['subject_id']} pointer {r['fact']}"
            if r["state"] is None:
                out.append(f"{where}: names chain {r['chain_id']}, which does not exist")
            elif r["state"] != LIVE:
                out.append(f"{where}: names chain {r['chain_id']}, which is deleted")
            elif r["held"] != r["fact"]:
                out.append(f"{where}: names chain {r['chain_id']}, which holds another fact")
    return out
