"""Each port's conformance suite runs against both adapters: DynamoDB on moto and SQLite
on a temporary file."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from memvault.storage.dynamodb.dynamo import Dynamo
from memvault.storage.dynamodb.tables import ALL_TABLES, create_tables, physical_name
from memvault.storage.sqlite.db import Database
from memvault.storage.sqlite.schema import MIGRATIONS
from tests.support.harness import SerializedClient

PREFIX = "port-"


@pytest.fixture
def dynamo() -> Iterator[Dynamo]:
    """moto's DynamoDB, with every call serialised: moto is not atomic under threads (two
    conditional writes can both pass), where DynamoDB evaluates a transaction's conditions
    atomically. Threads still interleave between calls."""
    with mock_aws():
        client: Any = SerializedClient(boto3.client("dynamodb", region_name="us-east-1"))
        create_tables(client, PREFIX)
        yield Dynamo(client, {s.name: physical_name(s, PREFIX) for s in ALL_TABLES})


@pytest.fixture
def database(tmp_path: Path) -> Iterator[Database]:
    db = Database(tmp_path / "memvault.db", MIGRATIONS)
    yield db
    db.close()
