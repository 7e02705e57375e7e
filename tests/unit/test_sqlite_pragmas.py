"""How the embedded store opens its SQLite file."""

from __future__ import annotations

from pathlib import Path

from memvault.storage.sqlite.db import MMAP_BYTES, Database, Migration
from memvault.storage.sqlite.schema import MIGRATIONS


def test_each_connection_reads_the_file_memory_mapped_and_it_never_shrinks(
    tmp_path: Path,
) -> None:
    """Recall reads its candidates back by key on every call, through whichever pooled
    connection it leases; mapped, their pages come from the OS's cache without a system
    call each. That is safe only while the file cannot shrink under a mapping: no
    auto-vacuum (and the store runs no VACUUM)."""
    db = Database(tmp_path / "memvault.db", MIGRATIONS)
    try:
        with db.read() as first, db.read() as second:  # two leases, two connections
            for conn in (first, second):
                assert conn.execute("PRAGMA mmap_size").fetchone()[0] == MMAP_BYTES
                assert conn.execute("PRAGMA auto_vacuum").fetchone()[0] == 0
    finally:
        db.close()


def test_a_new_file_is_mapped_too(tmp_path: Path) -> None:
    db = Database(tmp_path / "other.db", [Migration(1, "one table", ("CREATE TABLE t (x)",))])
    try:
        with db.write() as conn:
            conn.execute("INSERT INTO t VALUES (1)")
        with db.read() as conn:
            assert conn.execute("PRAGMA mmap_size").fetchone()[0] == MMAP_BYTES
            assert conn.execute("SELECT x FROM t").fetchall()[0][0] == 1
    finally:
        db.close()
