"""The saver's tests run against the real local stack (``memvault run`` as a subprocess,
one for the whole folder) over HTTP, as the SDK's do."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from memvault_local.devkeys import DevKey
from memvault_local.process import RunningStack, start_stack

TENANT = "langgraph"
SCOPES = "memory:read memory:write memory:delete runs:write artifacts:write"


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("langgraph-home"),
        MEMVAULT_EMBEDDING_MODEL="hashing",
        MEMVAULT_EMBED_WORKER="off",
    )
    yield running
    running.stop()


def mint(stack: RunningStack, subject: str) -> str:
    return DevKey.load_or_create(stack.home).mint(tenant=TENANT, subject=subject, scope=SCOPES)


@pytest.fixture
def subject() -> str:
    return f"lg-{uuid.uuid4().hex[:12]}"
