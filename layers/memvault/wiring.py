"""Composition: build services from settings and ports, lazily, never at import time."""

from __future__ import annotations

from typing import Any

import boto3

from memvault.clock import Clock, IdSource, RandomIds, SystemClock
from memvault.config import Settings, get_settings
from memvault.services.deletion import InlinePurgeLauncher, PurgeRunner, default_steps
from memvault.services.memory import MemoryService
from memvault.storage.dynamo import Dynamo
from memvault.storage.memory_repo import MemoryRepository
from memvault.storage.tables import ALL_TABLES, physical_name


def table_names(settings: Settings) -> dict[str, str]:
    return {spec.name: physical_name(spec, settings.table_prefix) for spec in ALL_TABLES}


def dynamodb_client(settings: Settings) -> Any:
    return boto3.client(
        "dynamodb", region_name=settings.aws_region, endpoint_url=settings.dynamodb_endpoint
    )


def build_memory_service(
    settings: Settings | None = None,
    *,
    client: Any = None,
    clock: Clock | None = None,
    ids: IdSource | None = None,
) -> MemoryService:
    settings = settings or get_settings()
    clock = clock or SystemClock()
    repo = MemoryRepository(Dynamo(client or dynamodb_client(settings), table_names(settings)))
    runner = PurgeRunner(repo, clock, default_steps(repo, clock))
    # Until the Step Functions pipeline exists, the purge runs in-process right after the
    # tombstone commits; a failed step leaves the job FAILED and resumable.
    return MemoryService(repo, settings, clock, ids or RandomIds(), InlinePurgeLauncher(runner.run))
