"""A subject's epoch, read inside another store's write transaction.

The memory store keeps each subject's epoch in ``memory_subjects``; a forget retires it
in one transaction. A session, run or artifact write reads it under the same write lock
before it writes, so that it commits only while the epoch is still the one it was
decided under (``Conflict.EPOCH`` otherwise).
"""

from __future__ import annotations

import sqlite3


def subject_epoch(conn: sqlite3.Connection, tenant_id: str, subject_id: str) -> int:
    row = conn.execute(
        "SELECT epoch FROM memory_subjects WHERE tenant_id = ? AND subject_id = ?",
        (tenant_id, subject_id),
    ).fetchone()
    return int(row[0]) if row else 0


def epoch_moved(
    conn: sqlite3.Connection, tenant_id: str, subject_id: str, epoch: int | None
) -> bool:
    """Whether a write decided under ``epoch`` must be refused (None: no condition)."""
    return epoch is not None and subject_epoch(conn, tenant_id, subject_id) != epoch
