"""Composition: build services from settings and ports, lazily, never at import time."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import boto3
from botocore.config import Config

from memvault.clock import Clock, IdSource, RandomIds, SystemClock
from memvault.config import Settings, get_settings
from memvault.services.artifacts import AliasKeys, ArtifactService, TenantKeys
from memvault.services.context import ContextAssembler
from memvault.services.deletion import InlinePurgeLauncher, PurgeRunner, default_steps
from memvault.services.memory import MemoryService
from memvault.services.runs import RunService
from memvault.services.sessions import SessionService
from memvault.services.tokens import Cl100kCounter
from memvault.storage.dynamo import Dynamo
from memvault.storage.memory_repo import MemoryRepository
from memvault.storage.tables import ALL_TABLES, physical_name


def table_names(settings: Settings) -> dict[str, str]:
    return {spec.name: physical_name(spec, settings.table_prefix) for spec in ALL_TABLES}


def dynamodb_client(settings: Settings) -> Any:
    return boto3.client(
        "dynamodb", region_name=settings.aws_region, endpoint_url=settings.dynamodb_endpoint
    )


@dataclass(frozen=True)
class Services:
    memory: MemoryService
    sessions: SessionService
    runs: RunService
    context: ContextAssembler
    artifacts: ArtifactService


def build_services(
    settings: Settings | None = None,
    *,
    client: Any = None,
    clock: Clock | None = None,
    ids: IdSource | None = None,
    s3: Any = None,
    keys: TenantKeys | None = None,
) -> Services:
    settings = settings or get_settings()
    clock = clock or SystemClock()
    ids = ids or RandomIds()
    db = Dynamo(client or dynamodb_client(settings), table_names(settings))
    repo = MemoryRepository(db)
    artifacts = ArtifactService(
        db,
        s3
        or boto3.client(
            "s3", region_name=settings.aws_region, config=Config(signature_version="s3v4")
        ),
        keys or AliasKeys(settings.tenant_key_alias_prefix),
        settings,
        clock,
        ids,
    )
    runner = PurgeRunner(repo, clock, default_steps(repo, clock, artifacts))
    # Until the Step Functions pipeline exists, the purge runs in-process right after the
    # tombstone commits; a failed step leaves the job FAILED and resumable.
    memory = MemoryService(repo, settings, clock, ids, InlinePurgeLauncher(runner.run))
    sessions = SessionService(db, settings, clock)
    runs = RunService(db, settings, clock)
    context = ContextAssembler(memory, sessions, runs, Cl100kCounter(), clock)
    return Services(
        memory=memory, sessions=sessions, runs=runs, context=context, artifacts=artifacts
    )


def build_memory_service(
    settings: Settings | None = None,
    *,
    client: Any = None,
    clock: Clock | None = None,
    ids: IdSource | None = None,
) -> MemoryService:
    return build_services(settings, client=client, clock=clock, ids=ids).memory
