"""The embedded store's database: one SQLite file, WAL, one transaction per port operation.

Every write of a port operation runs inside ``write()``: ``BEGIN IMMEDIATE`` takes the
database's write lock before anything is read, so the operation's conditions (SQL
predicates checked inside the transaction) and its writes are atomic with respect to
every other writer, in this process or another. Reads run in ``read()``: a deferred
transaction, one consistent snapshot under WAL, never blocking writers.

``secure_delete`` overwrites deleted content inside the database file; ``purge_files``
also checkpoints and truncates the write-ahead log, so deleted content does not linger in
free pages or old WAL frames.

The schema carries a version (``PRAGMA user_version``) and moves forward only, one
migration at a time, each in its own transaction.
"""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memvault.storage.ports.changes import Change, ChangeKind
from memvault_wire.errors import InternalError, Throttled

#: How long a writer waits for the write lock before the operation is refused as busy.
BUSY_TIMEOUT_MS = 10_000
#: How much of the file each connection reads through memory-mapped I/O rather than a
#: read() per page: all of it, up to SQLite's own build limit (``SQLITE_MAX_MMAP_SIZE``,
#: 2 GB less 64 KB by default; SQLite lowers a larger request to it). Recall reads its
#: candidates back by key on every call, through a connection leased from the pool, whose
#: own page cache may not hold their pages; mapped, those pages come from the OS's cache
#: without a system call each, and a page once read stays mapped while the connection
#: lives. A page beyond the mapping is read into the OS's cache unmapped, where a kernel
#: that reclaims idle file pages (DAMON's ``pageout`` on unmapped pages, as on the bench
#: machine) drops it after a minute. With 256 MB of a 100,000-memory store (540 MB)
#: mapped, memvault's recall p95 over its floor's was 1.22-1.25 in three runs of 600
#: recalls, against 1.12-1.16 with the file mapped whole (``docs/testing.md``). Safe here
#: because the file never shrinks under a mapping: no auto-vacuum, and the one VACUUM
#: (``convert_page_size``) runs before the stack opens the file, with the file to itself.
#: Writes still go through the pager.
MMAP_BYTES = 0x7FFF0000
#: The page size of a new file (an existing file keeps the size it was made with). A
#: memory's row (about 1.2 KB, most of it its body) does not fit in a 4 KB page of a
#: ``WITHOUT ROWID`` table, which keeps at most about 1,000 bytes of a row in the page and
#: puts the rest in an overflow page of its own: at 100,000 memories the table took 446 MB
#: in 4 KB pages and 155 MB in 8 KB ones. Re-validating a recall's twelve rows there took
#: 1.06 -> 0.66 ms at the median inside recall (the same store, copied both ways).
#: Writes measured as fast (about 500 a second either way).
PAGE_BYTES = 8192


class NotConverted(Exception):
    """The store file could not be rewritten now; it is as it was."""


def convert_page_size(
    path: str | Path, *, busy_ms: int = 1_000, before: Callable[[int], None] | None = None
) -> int | None:
    """Rewrite a store file made with pages smaller than ``PAGE_BYTES`` in pages of that
    size, in place, before this process opens it. Returns the old page size when the file
    was rewritten, ``None`` when there was nothing to do (no file, an empty one, or pages
    of that size already). ``before`` is told the old page size when the rewrite starts
    (about 6 s a GB; free space beside the file up to twice its size).

    The file is taken for this connection alone first (``locking_mode=EXCLUSIVE`` and a
    first read): where any other connection has it open, that fails at once and nothing
    has changed. Only then does it leave WAL mode (its log checkpointed into it and
    removed; where the log stays, as in a read-only folder, it stops there), and
    ``VACUUM`` rewrites it in one transaction under that lock: another process that opens
    the file meanwhile waits, or gives up, and then sees either file whole. A crash
    leaves a hot journal that SQLite rolls back at the next open. VACUUM's temporary copy
    goes beside the store, not to the system's temp folder. The file is renamed never,
    so its owner, mode and any symlink to it stay.

    A rewrite killed between its commit and cutting the file to its new length leaves
    old pages past the file's end, where deleting a memory would never reach them: such a
    file (out of WAL mode, as the rewrite leaves it, and longer than its pages) is
    rewritten again, keeping a page size larger than ``PAGE_BYTES``.

    Raises ``NotConverted`` where it cannot now (the file is held, its folder cannot be
    written, the disk is full, it is no SQLite database); the file is then as it was."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return None
    real = Path(os.path.realpath(path))
    for leftover in real.parent.glob("etilqs_*"):
        # VACUUM's temporary file, left by a kill between its creation and its unlink.
        if leftover.is_file() and leftover.stat().st_size == 0:
            with contextlib.suppress(OSError):
                leftover.unlink()
    try:
        conn = sqlite3.connect(real, isolation_level=None, timeout=busy_ms / 1000)
    except sqlite3.Error as err:
        raise NotConverted(str(err)) from err
    try:
        try:
            # A read first: it rolls back a journal that a killed rewrite left, so that
            # the page size read next is the file's, not the unfinished rewrite's.
            conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()
            old = int(conn.execute("PRAGMA page_size").fetchone()[0])
            pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
            logged = conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        except sqlite3.Error as err:
            raise NotConverted(str(err)) from err
        # Past its pages only out of WAL mode, as the rewrite leaves it: in WAL mode the
        # log's last transaction may have shrunk the file, which a checkpoint will cut.
        if old >= PAGE_BYTES and (logged or real.stat().st_size <= pages * old):
            return None
        wanted = max(old, PAGE_BYTES)  # a file of larger pages keeps them
        probe = real.with_name(real.name + ".writable")
        try:
            probe.touch()
            probe.unlink()
        except OSError as err:
            raise NotConverted(f"its folder cannot be written ({err.strerror})") from err
        try:
            conn.execute("PRAGMA locking_mode=EXCLUSIVE")
            # Under exclusive locking this read's lock is kept: the file is ours from here.
            conn.execute("SELECT count(*) FROM sqlite_schema").fetchone()
            mode = conn.execute("PRAGMA journal_mode=DELETE").fetchone()[0]
            if mode != "delete" or real.with_name(real.name + "-wal").exists():
                raise NotConverted("its write-ahead log could not be folded into it")
            conn.execute("BEGIN EXCLUSIVE")
            conn.execute("COMMIT")
            conn.execute(f"PRAGMA page_size={wanted}")
            if before is not None:
                before(old)
            try:
                conn.execute(f"PRAGMA temp_store_directory='{_sql_text(str(real.parent))}'")
                if conn.execute("PRAGMA temp_store_directory").fetchone() in (None, ("",)):
                    conn.execute("PRAGMA temp_store=MEMORY")  # a build without that pragma
                conn.execute("VACUUM")
            finally:
                conn.execute("PRAGMA temp_store_directory=''")  # process-wide: reset
            new = int(conn.execute("PRAGMA page_size").fetchone()[0])
        except sqlite3.Error as err:
            raise NotConverted(str(err)) from err
        finally:
            with contextlib.suppress(sqlite3.Error):  # ``_open`` sets WAL again anyway
                conn.execute("PRAGMA journal_mode=WAL")
        if new != wanted:
            raise NotConverted("the page size did not change")
        return old
    finally:
        conn.close()


def _sql_text(value: str) -> str:
    return value.replace("'", "''")


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: Sequence[str]


def dumps(value: Any) -> str:
    """JSON as stored: compact, UTF-8 kept, keys in order (stable for equality)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True)


def loads(text: str | None) -> Any:
    return None if text is None else json.loads(text)


#: The change feed's tables; part of the first migration.
OUTBOX_SCHEMA = (
    """CREATE TABLE outbox (
        seq INTEGER PRIMARY KEY AUTOINCREMENT,
        tbl TEXT NOT NULL,
        kind TEXT NOT NULL,
        tenant_id TEXT NOT NULL,
        subject_id TEXT NOT NULL,
        new_image TEXT,
        old_image TEXT,
        service_delete INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX outbox_owner ON outbox (tenant_id, subject_id)",
    """CREATE TABLE feed_cursor (
        consumer TEXT PRIMARY KEY,
        position INTEGER NOT NULL
    )""",
)


class Database:
    """A SQLite file and a small pool of connections.

    A connection is leased for one transaction and handed back after it, so that any
    number of short-lived threads (a threaded HTTP server starts one per connection) share
    a few connections instead of each opening, and leaking, its own."""

    #: Connections kept open between transactions; more are opened under load and closed
    #: when handed back to a full pool.
    IDLE_CONNECTIONS = 8

    def __init__(
        self,
        path: str | Path,
        migrations: Sequence[Migration],
        *,
        synchronous: str = "normal",
    ) -> None:
        if synchronous.lower() not in ("normal", "full"):
            raise ValueError("synchronous must be 'normal' or 'full'")
        self.synchronous = synchronous.upper()
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._idle: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        #: Writers of this process queue here rather than in SQLite's busy handler, which
        #: polls with growing sleeps (up to 100 ms) and so lets fresh arrivals overtake a
        #: writer that has waited longest. Other processes on the same file still meet
        #: the busy timeout.
        self._writer = threading.Lock()
        self._closed = False
        self._before_close: list[Callable[[], None]] = []
        self.migrate(migrations)

    # ------------------------------------------------------------------ connections

    def _open(self) -> sqlite3.Connection:
        # A leased connection is used by one thread at a time; ``check_same_thread`` is
        # off because the next lease may be another thread's.
        conn = sqlite3.connect(
            self.path,
            isolation_level=None,
            timeout=BUSY_TIMEOUT_MS / 1000,
            check_same_thread=False,
        )
        conn.row_factory = sqlite3.Row
        # Before the journal mode: switching a new, empty file to WAL writes its header,
        # and with it the page size.
        conn.execute(f"PRAGMA page_size={PAGE_BYTES}")
        conn.execute("PRAGMA journal_mode=WAL")
        # In WAL mode NORMAL keeps every committed transaction through a crash of the
        # process (kill -9 included): the WAL is fsynced at each checkpoint, not at each
        # commit. FULL (``synchronous="full"``) also survives a power cut, at an fsync
        # per commit.
        conn.execute(f"PRAGMA synchronous={self.synchronous}")
        conn.execute("PRAGMA secure_delete=ON")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        conn.execute(f"PRAGMA mmap_size={MMAP_BYTES}")
        return conn

    @contextmanager
    def _lease(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            if self._closed:
                raise InternalError("the local store is closed")
            conn = self._idle.pop() if self._idle else None
        if conn is None:
            conn = self._open()
        try:
            yield conn
        finally:
            if conn.in_transaction:  # never hand back a connection mid-transaction
                conn.execute("ROLLBACK")
            with self._lock:
                keep = not self._closed and len(self._idle) < self.IDLE_CONNECTIONS
                if keep:
                    self._idle.append(conn)
            if not keep:
                conn.close()

    def before_close(self, hook: Callable[[], None]) -> None:
        """Run ``hook`` when the store is closed, while it can still be written (a deferred
        writer's last batch)."""
        self._before_close.append(hook)

    def close(self) -> None:
        hooks, self._before_close = self._before_close, []
        for hook in hooks:
            hook()
        with self._lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    # ------------------------------------------------------------------ transactions

    @contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One write transaction: the write lock first, then reads, checks and writes."""
        with self._writer, self._lease() as conn:
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.OperationalError as err:
                raise _mapped(err) from err
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            try:
                conn.execute("COMMIT")
            except sqlite3.OperationalError as err:
                conn.execute("ROLLBACK")
                raise _mapped(err) from err

    @contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """One consistent snapshot for several reads."""
        with self._lease() as conn:
            conn.execute("BEGIN")
            try:
                yield conn
            finally:
                conn.execute("COMMIT")

    def run(self, fn: Callable[[sqlite3.Connection], Any]) -> Any:
        with self.write() as conn:
            return fn(conn)

    # ------------------------------------------------------------------ schema

    def schema_version(self) -> int:
        with self._lease() as conn:
            return int(conn.execute("PRAGMA user_version").fetchone()[0])

    def migrate(self, migrations: Sequence[Migration]) -> None:
        """Apply, in order, every migration above the file's schema version, each in its
        own transaction. A file written by a newer memvault (a version above every known
        migration) is refused, not guessed at."""
        known = max(m.version for m in migrations)
        current = self.schema_version()
        if current > known:
            raise InternalError(
                "the data file was written by a newer memvault; upgrade memvault",
                {"schema_version": current, "known": known},
            )
        for migration in sorted(migrations, key=lambda m: m.version):
            with self.write() as conn:
                # Re-read under the write lock: another process may have migrated meanwhile.
                if migration.version <= int(conn.execute("PRAGMA user_version").fetchone()[0]):
                    continue
                for statement in migration.statements:
                    conn.execute(statement)
                conn.execute(f"PRAGMA user_version={int(migration.version)}")

    # ------------------------------------------------------------------ change feed

    @staticmethod
    def emit(
        conn: sqlite3.Connection,
        table: str,
        kind: ChangeKind,
        tenant_id: str,
        subject_id: str,
        new: Mapping[str, Any] | None,
        old: Mapping[str, Any] | None,
        *,
        service_delete: bool = False,
    ) -> None:
        """Record a change in the outbox, inside the caller's transaction."""
        conn.execute(
            "INSERT INTO outbox (tbl, kind, tenant_id, subject_id, new_image, old_image, "
            "service_delete) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (
                table,
                kind.value,
                tenant_id,
                subject_id,
                dumps(new) if new is not None else None,
                dumps(old) if old is not None else None,
                int(service_delete),
            ),
        )

    def purge_files(self) -> None:
        """Checkpoint the WAL into the database and truncate it, so that content deleted
        (and overwritten by ``secure_delete``) is in no old WAL frame either."""
        with self._lease() as conn:
            for _ in range(3):  # a reader on an old snapshot past the busy timeout: again
                busy = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
                if not busy:
                    return


class OutboxFeed:
    """The local change feed: the outbox read through a durable per-consumer cursor."""

    def __init__(self, db: Database, table: str | None = None) -> None:
        self.db = db
        self.table = table

    def read(self, consumer: str, limit: int) -> list[Change]:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT position FROM feed_cursor WHERE consumer = ?", (consumer,)
            ).fetchone()
            after = int(row[0]) if row else 0
            query = "SELECT * FROM outbox WHERE seq > ?"
            params: list[Any] = [after]
            if self.table:
                query += " AND tbl = ?"
                params.append(self.table)
            rows = conn.execute(query + " ORDER BY seq LIMIT ?", (*params, limit)).fetchall()
        return [
            Change(
                table=r["tbl"],
                kind=ChangeKind(r["kind"]),
                new=loads(r["new_image"]),
                old=loads(r["old_image"]),
                position=str(r["seq"]),
                service_delete=bool(r["service_delete"]),
            )
            for r in rows
        ]

    def acknowledge(self, consumer: str, position: str) -> None:
        with self.db.write() as conn:
            conn.execute(
                "INSERT INTO feed_cursor (consumer, position) VALUES (?, ?) "
                "ON CONFLICT (consumer) DO UPDATE SET position = MAX(position, excluded.position)",
                (consumer, int(position)),
            )

    def prune(self) -> int:
        """Drop what every consumer has passed; with no consumer yet, keep everything."""
        with self.db.write() as conn:
            row = conn.execute("SELECT MIN(position), COUNT(*) FROM feed_cursor").fetchone()
            if not row[1]:
                return 0
            cur = conn.execute("DELETE FROM outbox WHERE seq <= ?", (int(row[0]),))
            return int(cur.rowcount)

    def backlog(self, consumer: str) -> int:
        with self.db.read() as conn:
            row = conn.execute(
                "SELECT position FROM feed_cursor WHERE consumer = ?", (consumer,)
            ).fetchone()
            after = int(row[0]) if row else 0
            row = conn.execute("SELECT COUNT(*) FROM outbox WHERE seq > ?", (after,)).fetchone()
            return int(row[0])


def _mapped(err: sqlite3.OperationalError) -> Exception:
    if "locked" in str(err) or "busy" in str(err):
        return Throttled("the local store is busy; retry", {"retryable": True})
    return InternalError("the local store failed", {"store_error": type(err).__name__})
