from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from moto import mock_aws

from memvault.services.memory import MemoryService
from tests.support.harness import FakeClock, make_service

# Never reach real AWS from a test: fake credentials, a fixed region.
for _name, _value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}.items():
    os.environ[_name] = _value
os.environ.pop("AWS_PROFILE", None)
# Node 20 works for jsii (the CDK's runtime) but prints an end-of-life banner.
os.environ.setdefault("JSII_SILENCE_WARNING_DEPRECATED_NODE_VERSION", "1")
os.environ.setdefault("JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION", "20")


@pytest.fixture
def aws() -> Iterator[None]:
    with mock_aws():
        yield


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def env(aws: None, clock: FakeClock) -> tuple[MemoryService, object, FakeClock]:
    return make_service(clock=clock)


@pytest.fixture
def service(env: tuple[MemoryService, object, FakeClock]) -> MemoryService:
    return env[0]


@pytest.fixture
def ddb(env: tuple[MemoryService, object, FakeClock]) -> object:
    return env[1]


@pytest.fixture
def api(service: MemoryService) -> Iterator[MemoryService]:
    """The HTTP handlers, serving with a moto-backed service."""
    from memvault.api.deps import deps

    deps.use(service)
    yield service
    deps.use(None)
