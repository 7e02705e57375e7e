"""The stores a deployment runs on, chosen in one place: DynamoDB with S3 and KMS (what
AWS runs) or the embedded SQLite file with encrypted local objects (local mode)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memvault.clock import Clock
from memvault.config import Settings
from memvault.storage.ports.artifacts import ArtifactStore
from memvault.storage.ports.memory import MemoryRecords
from memvault.storage.ports.objects import ObjectStore
from memvault.storage.ports.runs import RunStore
from memvault.storage.ports.sessions import SessionStore
from memvault.storage.ports.traces import TraceStore


@dataclass
class Stores:
    memory: MemoryRecords
    sessions: SessionStore
    runs: RunStore
    artifacts: ArtifactStore
    objects: ObjectStore
    #: Recall traces, served links and feedback (ids only).
    traces: TraceStore
    #: Local mode: the database file; ``sweepers`` play DynamoDB TTL on it.
    database: Any = None
    sweepers: list[Any] = field(default_factory=list)


def dynamodb_stores(settings: Settings, client: Any, *, s3: Any = None, keys: Any = None) -> Stores:
    import boto3
    from botocore.config import Config

    from memvault.storage.dynamodb.artifacts import DynamoArtifactStore
    from memvault.storage.dynamodb.dynamo import Dynamo
    from memvault.storage.dynamodb.memory import DynamoMemoryStore
    from memvault.storage.dynamodb.runs import DynamoRunStore
    from memvault.storage.dynamodb.sessions import DynamoSessionStore
    from memvault.storage.dynamodb.tables import table_names
    from memvault.storage.dynamodb.traces import DynamoTraceStore
    from memvault.storage.s3.objects import AliasKeys, S3ObjectStore

    db = Dynamo(client, table_names(settings.table_prefix))
    s3 = s3 or boto3.client(
        "s3", region_name=settings.aws_region, config=Config(signature_version="s3v4")
    )
    return Stores(
        memory=DynamoMemoryStore(db),
        sessions=DynamoSessionStore(db),
        runs=DynamoRunStore(db),
        artifacts=DynamoArtifactStore(db),
        objects=S3ObjectStore(
            s3, settings.artifacts_bucket, keys or AliasKeys(settings.tenant_key_alias_prefix)
        ),
        traces=DynamoTraceStore(db),
    )


def data_folder(settings: Settings) -> Path:
    if not settings.data_dir:
        raise ValueError("the embedded store needs a data folder: set MEMVAULT_DATA_DIR")
    return Path(settings.data_dir)


def store_file(settings: Settings) -> Path:
    """The embedded store's one SQLite file."""
    return data_folder(settings) / "memvault.db"


def sqlite_stores(settings: Settings, clock: Clock) -> Stores:
    from memvault.storage.local.objects import LocalObjectStore
    from memvault.storage.sqlite import artifacts as sqlite_artifacts
    from memvault.storage.sqlite.artifacts import SqliteArtifactStore
    from memvault.storage.sqlite.db import Database
    from memvault.storage.sqlite.memory import SqliteMemoryStore
    from memvault.storage.sqlite.runs import SqliteRunStore
    from memvault.storage.sqlite.schema import MIGRATIONS
    from memvault.storage.sqlite.sessions import SqliteSessionStore
    from memvault.storage.sqlite.traces import SqliteTraceStore

    folder = data_folder(settings)
    database = Database(store_file(settings), MIGRATIONS, synchronous=settings.sqlite_synchronous)
    memory = SqliteMemoryStore(database, add_reference=sqlite_artifacts.add_reference)
    sessions = SqliteSessionStore(database)
    runs = SqliteRunStore(database, reference_artifact=sqlite_artifacts.add_reference)
    artifacts = SqliteArtifactStore(database)
    # Recall traces are written off the request path (``SqliteTraceStore``'s docstring).
    traces = SqliteTraceStore(database, deferred=True)
    return Stores(
        memory=memory,
        sessions=sessions,
        runs=runs,
        artifacts=artifacts,
        objects=LocalObjectStore(folder, settings.local_url, clock),
        traces=traces,
        database=database,
        sweepers=[memory, sessions, runs, artifacts, traces],
    )
