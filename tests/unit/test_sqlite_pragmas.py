"""How the embedded store opens its SQLite file."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from memvault.storage.sqlite.db import (
    MMAP_BYTES,
    PAGE_BYTES,
    Database,
    Migration,
    NotConverted,
    convert_page_size,
)
from memvault.storage.sqlite.schema import MIGRATIONS


def _mapped_at_most(conn: sqlite3.Connection) -> int:
    """What this SQLite build maps at most (``SQLITE_MAX_MMAP_SIZE``; 0x7fff0000 unless
    built otherwise): it lowers a larger ``mmap_size`` to that."""
    for (option,) in conn.execute("PRAGMA compile_options"):
        if option.startswith("MAX_MMAP_SIZE="):
            return int(option.split("=", 1)[1], 0)
    return 0x7FFF0000


def test_each_connection_reads_the_file_memory_mapped_and_it_never_shrinks(
    tmp_path: Path,
) -> None:
    """Recall reads its candidates back by key on every call, through whichever pooled
    connection it leases; mapped, their pages come from the OS's cache without a system
    call each, and stay mapped. The whole file is mapped, as far as SQLite maps at all:
    a page beyond a smaller mapping sits unmapped in the OS's cache, where a kernel that
    reclaims idle unmapped file pages drops it within minutes (a 100,000-memory store is
    540 MB). That is safe only while the file cannot shrink under a mapping: no
    auto-vacuum (the one VACUUM, rewriting an older file's pages, runs before the stack
    opens the file, with the file to itself)."""
    assert MMAP_BYTES >= 2**31 - 2**16
    db = Database(tmp_path / "memvault.db", MIGRATIONS)
    try:
        with db.read() as first, db.read() as second:  # two leases, two connections
            for conn in (first, second):
                expected = min(MMAP_BYTES, _mapped_at_most(conn))
                assert conn.execute("PRAGMA mmap_size").fetchone()[0] == expected
                assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    finally:
        db.close()


def test_a_new_file_is_mapped_too(tmp_path: Path) -> None:
    db = Database(tmp_path / "other.db", [Migration(1, "one table", ("CREATE TABLE t (x)",))])
    try:
        with db.write() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
        with db.read() as conn:
            expected = min(MMAP_BYTES, _mapped_at_most(conn))
            assert conn.execute("PRAGMA mmap_size").fetchone()[0] == expected
            assert conn.execute("SELECT x FROM t").fetchall()[0][0] == 1
    finally:
        db.close()


def test_a_new_file_has_pages_that_hold_a_memory_whole(tmp_path: Path) -> None:
    """A memory's row is about 1.2 KB. In 4 KB pages a ``WITHOUT ROWID`` table keeps about
    1,000 bytes of it in the page and the rest in an overflow page of its own, so every
    read-back touched two pages and the table took three times its size."""
    db = Database(tmp_path / "memvault.db", MIGRATIONS)
    try:
        with db.read() as conn:
            assert conn.execute("PRAGMA page_size").fetchone()[0] == PAGE_BYTES == 8192
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    finally:
        db.close()


def test_a_file_made_with_other_pages_keeps_them_and_its_data(tmp_path: Path) -> None:
    """Opening sets the page size only where the file is new: an older store opens as it
    was (the local stack rewrites it before it opens it, ``convert_page_size``)."""
    path = tmp_path / "old.db"
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA page_size=4096")
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("CREATE TABLE t (x)")
    raw.execute("INSERT INTO t VALUES (7)")
    raw.commit()
    raw.close()
    db = Database(path, [Migration(1, "one table", ("CREATE TABLE IF NOT EXISTS t (x)",))])
    try:
        with db.read() as conn:
            assert conn.execute("PRAGMA page_size").fetchone()[0] == 4096
            assert conn.execute("SELECT x FROM t").fetchall()[0][0] == 7
    finally:
        db.close()


def _old_store(path: Path) -> None:
    """A store file as memvault made them before 8 KB pages: 4 KB pages, WAL, rows."""
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA page_size=4096")
    raw.execute("PRAGMA journal_mode=WAL")
    raw.close()
    Database(path, MIGRATIONS).close()
    raw = sqlite3.connect(path, isolation_level=None)
    assert raw.execute("PRAGMA page_size").fetchone()[0] == 4096
    raw.execute("CREATE TABLE probe (n INTEGER, body TEXT)")
    raw.executemany("INSERT INTO probe VALUES (?, ?)", [(i, "x" * 1200) for i in range(500)])
    raw.close()


def _state(path: Path) -> tuple[int, str, int, str]:
    raw = sqlite3.connect(path)
    try:
        return (
            raw.execute("PRAGMA page_size").fetchone()[0],
            raw.execute("PRAGMA journal_mode").fetchone()[0],
            raw.execute("SELECT count(*) FROM probe").fetchone()[0],
            raw.execute("PRAGMA integrity_check").fetchone()[0],
        )
    finally:
        raw.close()


def test_an_older_file_is_rewritten_in_8_kb_pages_with_its_data(tmp_path: Path) -> None:
    """The local stack converts a store made with 4 KB pages when it starts
    (``convert_page_size``): in those pages a memory's row overflows into a page of its
    own. Once converted, the file opens as any new one does, and nothing is left beside
    it."""
    path = tmp_path / "memvault.db"
    _old_store(path)
    told: list[int] = []

    assert convert_page_size(path, before=told.append) == 4096
    assert told == [4096]
    assert convert_page_size(path) is None  # once only
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memvault.db"]

    db = Database(path, MIGRATIONS)
    try:
        with db.read() as conn:
            assert conn.execute("PRAGMA page_size").fetchone()[0] == PAGE_BYTES
            assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
            assert tuple(conn.execute("SELECT count(*), sum(n) FROM probe").fetchone()) == (
                500,
                sum(range(500)),
            )
            assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        db.close()


def _killed_after(path: Path, *statements: str) -> None:
    """Run ``statements`` in a process that then dies without closing (as kill -9 does):
    what it committed stays in the write-ahead log, not yet checkpointed into the file."""
    script = (
        "import os, sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('PRAGMA wal_autocheckpoint=0')\n"
        "for statement in sys.argv[2:]:\n"
        "    c.execute(statement)\n"
        "os._exit(0)\n"
    )
    subprocess.run([sys.executable, "-c", script, str(path), *statements], check=True)


def test_writes_left_in_the_log_by_a_killed_writer_are_kept(tmp_path: Path) -> None:
    """A stack killed with kill -9 leaves committed writes in the write-ahead log, not yet
    in the file: they are folded in before the rewrite."""
    path = tmp_path / "memvault.db"
    _old_store(path)
    _killed_after(path, "INSERT INTO probe VALUES (9999, 'in the log')")
    assert (tmp_path / "memvault.db-wal").stat().st_size > 0

    assert convert_page_size(path) == 4096

    assert _state(path) == (PAGE_BYTES, "wal", 501, "ok")
    raw = sqlite3.connect(path)
    try:
        assert raw.execute("SELECT body FROM probe WHERE n = 9999").fetchone() == ("in the log",)
    finally:
        raw.close()


@pytest.mark.parametrize("in_transaction", [False, True], ids=["idle", "reading"])
def test_a_file_another_connection_holds_is_left_as_it_was(
    tmp_path: Path, in_transaction: bool
) -> None:
    """Where another connection has the file open (``memvault doctor`` beside a starting
    stack, an ``sqlite3`` shell), idle or reading, the rewrite does not start, and that
    connection goes on reading and writing."""
    path = tmp_path / "memvault.db"
    _old_store(path)
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("SELECT count(*) FROM probe").fetchone()
    if in_transaction:
        other.execute("BEGIN")
        other.execute("SELECT count(*) FROM probe").fetchone()
    try:
        with pytest.raises(NotConverted, match="locked"):
            convert_page_size(path, busy_ms=50)
        if in_transaction:
            other.execute("COMMIT")
        other.execute("INSERT INTO probe VALUES (500, 'after')")
    finally:
        other.close()
    assert _state(path) == (4096, "wal", 501, "ok")


def test_a_process_that_opens_the_file_during_the_rewrite_waits_and_sees_it_whole(
    tmp_path: Path,
) -> None:
    """The rewrite holds the file for itself from before it leaves WAL mode to the end: a
    process that opens the file meanwhile (as a memvault command does, asking for WAL
    mode) is kept out, and nothing it could do reaches the file half-rewritten."""
    path = tmp_path / "memvault.db"
    _old_store(path)
    outcomes: list[str] = []
    opener = (
        "import sqlite3, sys\n"
        "c = sqlite3.connect(sys.argv[1], isolation_level=None, timeout=0.2)\n"
        "try:\n"
        "    c.execute('PRAGMA journal_mode=WAL')\n"
        "    c.execute(\"INSERT INTO probe VALUES (777, 'meanwhile')\")\n"
        "    print('wrote')\n"
        "except sqlite3.OperationalError as err:\n"
        "    print('kept out:', err)\n"
    )

    def meanwhile(old: int) -> None:
        done = subprocess.run(
            [sys.executable, "-c", opener, str(path)], capture_output=True, text=True, check=True
        )
        outcomes.append(done.stdout.strip())

    assert convert_page_size(path, before=meanwhile) == 4096
    assert outcomes == ["kept out: database is locked"]
    assert _state(path) == (PAGE_BYTES, "wal", 500, "ok")


def test_the_file_stays_where_it_is_with_its_mode_and_its_link(tmp_path: Path) -> None:
    """Rewritten in place, never renamed: a symlinked store stays a link to the same
    file, which keeps its mode (and owner)."""
    real = tmp_path / "elsewhere" / "store.db"
    real.parent.mkdir()
    _old_store(real)
    real.chmod(0o600)
    (tmp_path / "data").mkdir()
    link = tmp_path / "data" / "memvault.db"
    link.symlink_to(real)

    assert convert_page_size(link) == 4096

    assert link.is_symlink() and link.resolve() == real.resolve()
    assert oct(real.stat().st_mode & 0o777) == oct(0o600)
    assert _state(real) == (PAGE_BYTES, "wal", 500, "ok")
    assert sorted(p.name for p in real.parent.iterdir()) == ["store.db"]


def test_a_folder_it_cannot_write_to_leaves_the_file_untouched(tmp_path: Path) -> None:
    """Where the folder cannot be written, the log cannot be removed when the file leaves
    WAL mode, and a VACUUM then damages the file (found by a fresh review): the rewrite
    checks the folder first. (Run as root, a read-only folder is writable; a directory in
    the way of the check's file stands in for it.)"""
    path = tmp_path / "memvault.db"
    _old_store(path)
    (tmp_path / "memvault.db.writable").mkdir()
    with pytest.raises(NotConverted, match="folder cannot be written"):
        convert_page_size(path)
    assert _state(path) == (4096, "wal", 500, "ok")


def test_what_is_not_a_store_is_refused_and_left_alone(tmp_path: Path) -> None:
    path = tmp_path / "memvault.db"
    path.write_bytes(b"not a database at all" * 400)
    with pytest.raises(NotConverted):
        convert_page_size(path)
    assert path.read_bytes() == b"not a database at all" * 400
    assert sorted(p.name for p in tmp_path.iterdir()) == ["memvault.db"]


def test_no_file_is_made_where_there_was_none(tmp_path: Path) -> None:
    assert convert_page_size(tmp_path / "absent.db") is None
    assert not (tmp_path / "absent.db").exists()
    (tmp_path / "empty.db").touch()
    assert convert_page_size(tmp_path / "empty.db") is None
    assert (tmp_path / "empty.db").read_bytes() == b""


def test_old_pages_left_past_the_end_by_an_interrupted_rewrite_are_cut_off(
    tmp_path: Path,
) -> None:
    """A rewrite killed between its commit and cutting the file to its new length leaves
    the old pages past the file's end, where deleting a memory never reaches them (found
    by a fresh probe): a file longer than its pages is rewritten again, 8 KB or not."""
    path = tmp_path / "memvault.db"
    _old_store(path)
    assert convert_page_size(path) == 4096
    whole = path.stat().st_size
    # What the killed rewrite left: the file out of WAL mode, old pages past its end.
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA journal_mode=DELETE")
    raw.close()
    with path.open("ab") as f:
        f.write(b"the badge number is zq4411x " * 4000)

    told: list[int] = []
    assert convert_page_size(path, before=told.append) == PAGE_BYTES
    assert told == [PAGE_BYTES]

    assert path.stat().st_size <= whole
    assert b"zq4411x" not in path.read_bytes()
    assert _state(path) == (PAGE_BYTES, "wal", 500, "ok")
    assert convert_page_size(path) is None


def test_a_callback_that_fails_leaves_no_setting_behind(tmp_path: Path) -> None:
    """Where the caller's ``before`` raises, the file is as it was and SQLite's
    process-wide temp folder is not left pointing at the store's folder."""
    path = tmp_path / "memvault.db"
    _old_store(path)

    def broken(old: int) -> None:
        raise BrokenPipeError("stdout went away")

    with pytest.raises(BrokenPipeError):
        convert_page_size(path, before=broken)
    raw = sqlite3.connect(":memory:")
    try:
        assert raw.execute("PRAGMA temp_store_directory").fetchone() in (None, ("",))
    finally:
        raw.close()
    assert _state(path) == (4096, "wal", 500, "ok")


def test_a_file_of_larger_pages_past_its_end_keeps_its_page_size(tmp_path: Path) -> None:
    path = tmp_path / "memvault.db"
    raw = sqlite3.connect(path, isolation_level=None)
    raw.execute("PRAGMA page_size=16384")
    raw.execute("CREATE TABLE probe (n INTEGER, body TEXT)")
    raw.executemany("INSERT INTO probe VALUES (?, ?)", [(i, "x" * 1200) for i in range(200)])
    raw.close()
    with path.open("ab") as f:
        f.write(b"\0" * 65536)

    assert convert_page_size(path) == 16384

    assert path.stat().st_size % 16384 == 0
    assert _state(path)[::2] == (16384, 200)


def test_a_log_that_shrank_the_file_is_no_reason_to_rewrite_it(tmp_path: Path) -> None:
    """In WAL mode the file may be longer than its pages until a checkpoint cuts it (a
    VACUUM in the log, its writer killed): that is not a rewrite's leftover."""
    path = tmp_path / "memvault.db"
    Database(path, MIGRATIONS).close()
    _killed_after(
        path,
        "CREATE TABLE probe (n INTEGER, body TEXT)",
        # 2,000 rows of 1,200 x's.
        "WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 1999) "
        "INSERT INTO probe SELECT i, replace(hex(zeroblob(600)), '0', 'x') FROM n",
        "PRAGMA wal_checkpoint(TRUNCATE)",
        "DELETE FROM probe WHERE n >= 100",
        "VACUUM",
    )
    assert (tmp_path / "memvault.db-wal").stat().st_size > 0
    longer = path.stat().st_size

    assert convert_page_size(path) is None

    # Its close was the last: the checkpoint cut the file, as the log said.
    assert path.stat().st_size < longer
    assert _state(path) == (PAGE_BYTES, "wal", 100, "ok")
