"""The stores a deployment runs on, chosen in one place: DynamoDB (what AWS runs) or the
embedded SQLite file (local mode's default)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memvault.config import Settings
from memvault.storage.ports.memory import MemoryRecords
from memvault.storage.ports.sessions import SessionStore


@dataclass
class Stores:
    memory: MemoryRecords
    sessions: SessionStore
    #: The DynamoDB tables, for the stores still on them (runs, artifacts).
    dynamo: Any = None
    #: Local mode: the database file, its change feed and its expiry sweep.
    database: Any = None
    sweepers: list[Any] = field(default_factory=list)


def dynamodb_stores(settings: Settings, client: Any) -> Stores:
    from memvault.storage.dynamo import Dynamo
    from memvault.storage.dynamodb.memory import DynamoMemoryStore
    from memvault.storage.dynamodb.sessions import DynamoSessionStore
    from memvault.storage.tables import ALL_TABLES, physical_name

    db = Dynamo(client, {s.name: physical_name(s, settings.table_prefix) for s in ALL_TABLES})
    return Stores(memory=DynamoMemoryStore(db), sessions=DynamoSessionStore(db), dynamo=db)


def database_path(settings: Settings) -> Path:
    if not settings.data_dir:
        raise ValueError("the embedded store needs a data folder: set MEMVAULT_DATA_DIR")
    return Path(settings.data_dir) / "memvault.db"


def sqlite_stores(settings: Settings, client: Any = None) -> Stores:
    from memvault.storage.sqlite.db import Database
    from memvault.storage.sqlite.memory import SqliteMemoryStore
    from memvault.storage.sqlite.schema import MIGRATIONS
    from memvault.storage.sqlite.sessions import SqliteSessionStore

    database = Database(database_path(settings), MIGRATIONS)
    memory = SqliteMemoryStore(database)
    sessions = SqliteSessionStore(database)
    stores = Stores(memory=memory, sessions=sessions, database=database)
    stores.sweepers = [memory, sessions]
    if client is not None:  # runs and artifacts are not on the embedded store yet
        stores.dynamo = dynamodb_stores(settings, client).dynamo
    return stores
