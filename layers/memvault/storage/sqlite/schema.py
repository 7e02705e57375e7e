"""The embedded store's schema, by migration. Each store's module owns its tables'
statements; a released migration never changes, a new one is appended."""

from __future__ import annotations

from memvault.storage.sqlite import runs
from memvault.storage.sqlite.db import OUTBOX_SCHEMA, Migration

MIGRATIONS: tuple[Migration, ...] = (Migration(1, "initial", (*OUTBOX_SCHEMA, *runs.SCHEMA)),)
