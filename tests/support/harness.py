"""Test harness: moto-backed tables built from the shared definitions, a settable clock,
builders for commands and access contexts."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
from botocore.config import Config

from memvault.config import Settings
from memvault.models.access import AccessContext, Scope
from memvault.services.bundle import Services
from memvault.services.memory import MemoryService
from memvault.storage.dynamodb.tables import create_tables
from memvault.wiring import build_services
from memvault_local.keys import LocalTenantKeys, ensure_bucket
from memvault_wire.memory import MemoryWrite, Sensitivity

ALL_SCOPES = frozenset(Scope) - {Scope.SUBJECTS_ANY}


class FakeClock:
    def __init__(self, start: datetime | None = None) -> None:
        self.current = start or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def now(self) -> datetime:
        return self.current

    def advance(self, **delta: float) -> None:
        self.current += timedelta(**delta)


class SerializedClient:
    """Serialises every call to a boto3 client through one lock.

    moto's in-process DynamoDB backend is not atomic under threads: two conditional
    writes can both pass their condition. Real DynamoDB evaluates a transaction's
    conditions atomically, so a concurrency test that should prove *our* compare-and-set
    logic serialises the calls to moto. Threads still interleave between calls, which is
    where our read-decide-write races live.
    """

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._client, name)
        if not callable(attr):
            return attr

        def locked(*args: Any, **kwargs: Any) -> Any:
            with self._lock:
                return attr(*args, **kwargs)

        return locked


def make_services(
    prefix: str = "test-",
    clock: FakeClock | None = None,
    *,
    store: str = "dynamodb",
    data_dir: str | None = None,
    **settings: Any,
) -> tuple[Services, Any, FakeClock]:
    """The services over a store: DynamoDB tables on moto (inside an active ``mock_aws``)
    or, with ``store="sqlite"``, the embedded store's file under ``data_dir``."""
    client = SerializedClient(boto3.client("dynamodb", region_name="us-east-1"))
    if store == "sqlite":
        assert data_dir is not None, "the embedded store needs a data folder"
        settings = {"store": "sqlite", "data_dir": data_dir, **settings}
    cfg = Settings(table_prefix=prefix, artifacts_bucket=f"{prefix}artifacts", **settings)
    create_tables(client, prefix)
    s3 = boto3.client("s3", region_name="us-east-1", config=Config(signature_version="s3v4"))
    ensure_bucket(s3, cfg.artifacts_bucket)
    keys = LocalTenantKeys(
        boto3.client("kms", region_name="us-east-1"), cfg.tenant_key_alias_prefix
    )
    clock = clock or FakeClock()
    services = build_services(cfg, client=client, clock=clock, s3=s3, keys=keys)
    services.purge.sleep = lambda seconds: None  # retry backoff without waiting
    return services, client, clock


def make_service(
    prefix: str = "test-", clock: FakeClock | None = None, **settings: Any
) -> tuple[MemoryService, Any, FakeClock]:
    services, client, clock = make_services(prefix, clock, **settings)
    return services.memory, client, clock


def ctx(
    tenant: str = "acme",
    subject: str | None = "u-1",
    *,
    scopes: frozenset[Scope] = ALL_SCOPES,
    agent_role: str | None = None,
    max_sensitivity: Sensitivity = Sensitivity.INTERNAL,
    principal: str = "agent-client-1",
) -> AccessContext:
    return AccessContext(
        tenant_id=tenant,
        principal=principal,
        subject_id=subject,
        scopes=scopes,
        agent_role=agent_role,
        max_sensitivity=max_sensitivity,
    )


def a_write(**overrides: Any) -> MemoryWrite:
    body: dict[str, Any] = {
        "request_id": "req-1",
        "kind": "semantic",
        "canonical_key": "preferred-language",
        "content": "Prefers Chinese for internal technical documents",
        "tags": ["preference", "language"],
        "scope": {"workspace": "w1"},
        "source": {"type": "user_statement", "ref": "msg-17"},
        "sensitivity": "internal",
        "consent": True,
        "ttl_seconds": 90 * 86400,
    }
    body.update(overrides)
    return MemoryWrite.model_validate(body)
