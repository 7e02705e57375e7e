from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from moto import mock_aws

from memvault.services.bundle import Services
from memvault.services.memory import MemoryService
from tests.support.backends import STORES
from tests.support.harness import FakeClock, make_services

# Never reach real AWS from a test: fake credentials, a fixed region.
for _name, _value in {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_SESSION_TOKEN": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
    # moto answers DynamoDB Streams only on the classic endpoint, not account-based ones.
    "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
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


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Domain tests run on both stores; a test that inspects DynamoDB itself (``ddb``) or
    is about the AWS adapters (marked ``aws``: S3 presigning, KMS) runs on them only."""
    if "store_backend" in metafunc.fixturenames:
        aws_only = "ddb" in metafunc.fixturenames or metafunc.definition.get_closest_marker("aws")
        stores = ["dynamodb"] if aws_only else list(STORES)
        metafunc.parametrize("store_backend", stores, indirect=True)


@pytest.fixture
def store_backend(request: pytest.FixtureRequest) -> str:
    return str(getattr(request, "param", "dynamodb"))


@pytest.fixture
def wired(
    aws: None, clock: FakeClock, store_backend: str, tmp_path: Path
) -> Iterator[tuple[Services, object, FakeClock]]:
    made = make_services(clock=clock, store=store_backend, data_dir=str(tmp_path / "data"))
    yield made
    database = made[0].stores.database
    if database is not None:
        database.close()


@pytest.fixture
def services(wired: tuple[Services, object, FakeClock]) -> Services:
    return wired[0]


@pytest.fixture
def env(wired: tuple[Services, object, FakeClock]) -> tuple[MemoryService, object, FakeClock]:
    return wired[0].memory, wired[1], wired[2]


@pytest.fixture
def service(services: Services) -> MemoryService:
    return services.memory


@pytest.fixture
def ddb(wired: tuple[Services, object, FakeClock]) -> object:
    return wired[1]


@pytest.fixture
def api(services: Services) -> Iterator[MemoryService]:
    """The HTTP handlers, serving with moto-backed services; yields the memory service."""
    from memvault.api.deps import deps

    deps.use(services)
    yield services.memory
    deps.use(None)


def pytest_sessionstart(session: pytest.Session) -> None:
    from tests.support import reliability

    if getattr(session.config, "workerinput", None) is None:
        reliability.clear_parts()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Write the reliability scenarios this run recorded to build/reliability.json; under
    pytest-xdist each worker leaves its rows and the controller merges and writes them."""
    from tests.support import reliability

    worker = getattr(session.config, "workerinput", None)
    if worker is not None:
        reliability.write_part(str(worker["workerid"]))
        return
    reliability.merge_parts()
    reliability.write(int(exitstatus), selected=session.testscollected)
