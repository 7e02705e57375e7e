"""The embedded store: moto's DynamoDB in this process, tables from the shared definitions."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import boto3
from moto import mock_aws

from memvault.config import Settings
from memvault.storage.tables import create_tables

_FAKE_CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "memvault-local",
    "AWS_SECRET_ACCESS_KEY": "memvault-local",
    "AWS_SESSION_TOKEN": "memvault-local",
}


@contextmanager
def embedded_dynamodb(settings: Settings) -> Iterator[Any]:
    """Yield a DynamoDB client on moto's in-process backend with memvault's tables created.

    Placeholder credentials are set for the duration so that nothing can reach a real
    account even if the environment holds real ones."""
    saved = {name: os.environ.get(name) for name in _FAKE_CREDENTIALS}
    os.environ.update(_FAKE_CREDENTIALS)
    try:
        with mock_aws():
            client = boto3.client("dynamodb", region_name=settings.aws_region)
            create_tables(client, settings.table_prefix)
            yield client
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
