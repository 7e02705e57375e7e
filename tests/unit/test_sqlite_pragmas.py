"""How the embedded store opens its SQLite file."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from memvault.storage.sqlite.db import MMAP_BYTES, PAGE_BYTES, Database, Migration
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
    auto-vacuum (and the store runs no VACUUM)."""
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
    """The page size is set only where the file is new: an older store opens as it was."""
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
