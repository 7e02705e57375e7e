"""The embedded store's schema, by migration. Each store's module owns its tables'
statements; a released migration never changes, a new one is appended."""

from __future__ import annotations

from memvault.storage.sqlite import artifacts, memory, runs, sessions, traces
from memvault.storage.sqlite.db import OUTBOX_SCHEMA, Migration

INITIAL: tuple[str, ...] = (
    *OUTBOX_SCHEMA,
    *memory.SCHEMA,
    *sessions.SCHEMA,
    *runs.SCHEMA,
    *artifacts.SCHEMA,
)

MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, "initial", INITIAL),
    Migration(2, "session sensitivity", sessions.SENSITIVITY),
    Migration(3, "recall traces, served links and feedback", traces.SCHEMA),
    Migration(4, "operation sensitivity", runs.OPERATION_SENSITIVITY),
    Migration(5, "subject epochs", (*sessions.SUBJECT_EPOCH, *artifacts.SUBJECT_EPOCH)),
)
