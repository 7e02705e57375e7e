"""A recall rig: services over moto, the real indexer fed by the real stream, and an index.

The stream pump reads moto's DynamoDB stream exactly as the local stack does, so the
records the indexer sees are the ones DynamoDB produced for our writes.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import boto3

from memvault.config import Settings
from memvault.embeddings import Embedder
from memvault.handlers.indexer import handle
from memvault.indexing.indexer import Indexer
from memvault.search.backend import SearchIndex
from memvault.search.embedded import EmbeddedIndex
from memvault.services.bundle import Services
from memvault.storage.dynamodb.dynamo import Dynamo
from memvault.storage.dynamodb.memory import DynamoMemoryStore
from memvault.storage.dynamodb.tables import create_tables
from memvault.storage.sqlite.db import OutboxFeed
from memvault.wiring import build_services, table_names
from memvault_local.keys import LocalTenantKeys, ensure_bucket
from memvault_local.outbox_pump import OutboxPump
from memvault_local.stream_pump import StreamPump
from tests.support.harness import FakeClock, SerializedClient

BACKENDS = ("embedded", "opensearch")


@dataclass
class RecallRig:
    services: Services
    index: SearchIndex
    indexer: Indexer
    #: The change feed's pump: DynamoDB Streams (moto) or the embedded store's outbox.
    pump: StreamPump | OutboxPump
    client: Any
    clock: FakeClock
    settings: Settings

    def sync(self) -> int:
        """Deliver every stream record written so far, then make the index searchable."""
        n = self.pump.drain()
        self.index.refresh()
        return n


def opensearch_index(
    url: str, embedder: Embedder, alias: str | None = None, chinese: Embedder | None = None
) -> SearchIndex:
    from opensearchpy import OpenSearch

    from memvault.search.opensearch import OpenSearchIndex

    return OpenSearchIndex(
        OpenSearch(hosts=[url], timeout=30),
        alias or f"t-{uuid.uuid4().hex[:12]}",
        model_slug=embedder.slug,
        model_id=embedder.model_id,
        model_version=embedder.model_version,
        dimensions=embedder.dimensions,
        dimensions_zh=None if chinese is None else chinese.dimensions,
    )


def drop_opensearch_index(index: SearchIndex) -> None:
    client = getattr(index, "client", None)
    if client is not None:
        client.indices.delete(index=f"{index.name}*", ignore_unavailable=True)


def make_rig(
    backend: str,
    embedder: Embedder,
    *,
    opensearch_url: str | None = None,
    prefix: str = "rc-",
    clock: FakeClock | None = None,
    store: str = "dynamodb",
    chinese: Embedder | None = None,
    **settings: Any,
) -> RecallRig:
    """Inside an active ``mock_aws``: tables, services, indexer and pump for ``backend``.

    With ``store="sqlite"`` the services run on the embedded store in a temporary folder
    and the outbox pump feeds the indexer, as in local mode."""
    client = SerializedClient(boto3.client("dynamodb", region_name="us-east-1"))
    if store == "sqlite":
        settings = {"store": "sqlite", "data_dir": tempfile.mkdtemp(prefix="rig-"), **settings}
    cfg = Settings(table_prefix=prefix, artifacts_bucket=f"{prefix}artifacts", **settings)
    create_tables(client, prefix)
    s3 = boto3.client("s3", region_name="us-east-1")
    ensure_bucket(s3, cfg.artifacts_bucket)
    keys = LocalTenantKeys(
        boto3.client("kms", region_name="us-east-1"), cfg.tenant_key_alias_prefix
    )
    clock = clock or FakeClock()
    if backend == "embedded":
        name = f"t-{uuid.uuid4().hex[:12]}--{embedder.slug}"
        index: SearchIndex = EmbeddedIndex(name)
    else:
        assert opensearch_url is not None
        index = opensearch_index(opensearch_url, embedder, chinese=chinese)
    index.ensure()
    services = build_services(
        cfg,
        client=client,
        clock=clock,
        s3=s3,
        keys=keys,
        search=index,
        embedder=embedder,
        chinese=chinese,
    )
    services.purge.sleep = lambda seconds: None
    if store == "sqlite":
        indexer = Indexer(index, embedder, services.stores.memory, clock, chinese=chinese)
        feed = OutboxFeed(services.stores.database)
        outbox = OutboxPump(feed, indexer, backoff_seconds=0.0)
        return RecallRig(services, index, indexer, outbox, client, clock, cfg)
    memories = DynamoMemoryStore(Dynamo(client, table_names(cfg)))
    indexer = Indexer(index, embedder, memories, clock, chinese=chinese)
    pump = StreamPump(
        client,
        boto3.client("dynamodbstreams", region_name="us-east-1"),
        table_names(cfg)["memory"],
        lambda event: handle(event, indexer),
        backoff_seconds=0.0,
    )
    return RecallRig(services, index, indexer, pump, client, clock, cfg)


#: Every search backend on every store: (backend, store) pairs, named "backend-store".
RIG_PARAMS = [(b, s) for b in BACKENDS for s in ("dynamodb", "sqlite")]


def rig_for(param: tuple[str, str], embedder: Embedder) -> Iterator[RecallRig]:
    """A rig for one of ``RIG_PARAMS`` inside ``mock_aws``, its OpenSearch index dropped
    after."""
    from moto import mock_aws

    from tests.support.opensearch import opensearch_url

    backend, store = param
    with mock_aws():
        url = opensearch_url() if backend == "opensearch" else None
        built = make_rig(backend, embedder, opensearch_url=url, store=store)
        try:
            yield built
        finally:
            if backend == "opensearch":
                drop_opensearch_index(built.index)
