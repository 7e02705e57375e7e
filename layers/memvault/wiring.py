"""Composition: build services from settings and ports, lazily, never at import time."""

from __future__ import annotations

import threading
from typing import Any

import boto3

from memvault.clock import Clock, IdSource, RandomIds, SystemClock
from memvault.config import Settings, get_settings
from memvault.embeddings import Embedder, chinese_embedder_from_settings, embedder_from_settings
from memvault.indexing.indexer import Indexer
from memvault.search.backend import SearchIndex
from memvault.search.rerank import BedrockReranker, Reranker
from memvault.services.artifacts import ArtifactService
from memvault.services.bundle import Services
from memvault.services.context import ContextAssembler, CurrentMemories, RecallOrCurrent
from memvault.services.deletion import (
    BackgroundPurgeLauncher,
    InlinePurgeLauncher,
    PurgeLauncher,
    PurgeRunner,
    StepFunctionsPurgeLauncher,
    default_steps,
)
from memvault.services.memory import MemoryService
from memvault.services.recall import RecallService
from memvault.services.runs import RunService
from memvault.services.sessions import SessionService
from memvault.services.tokens import Cl100kCounter
from memvault.services.traces import TraceService
from memvault.storage.dynamodb import tables
from memvault.storage.s3.objects import TenantKeys
from memvault.storage.stores import Stores, dynamodb_stores, sqlite_stores


def reranker_from_settings(settings: Settings) -> Reranker | None:
    """Bedrock's reranker when the deployment names a model, else none."""
    if not settings.rerank_model_arn:
        return None
    return BedrockReranker(
        settings.rerank_model_arn, settings.aws_region, timeout_s=settings.rerank_timeout_s
    )


def table_names(settings: Settings) -> dict[str, str]:
    return tables.table_names(settings.table_prefix)


def dynamodb_client(settings: Settings) -> Any:
    return boto3.client(
        "dynamodb", region_name=settings.aws_region, endpoint_url=settings.dynamodb_endpoint
    )


_EMBEDDED: dict[tuple[str | None, str], SearchIndex] = {}
_EMBEDDED_LOCK = threading.Lock()


def search_index(settings: Settings, embedder: Embedder) -> SearchIndex | None:
    """The configured index for this embedder's model, or ``None`` when none is
    configured. It is named after that model alone: the Chinese model of
    ``embedding_model_zh`` adds a second vector field to the same index (an index made
    before it gains the field in place), so turning it on or off never moves recall to
    another, emptier index."""
    if settings.search_backend == "embedded":
        from memvault.search.embedded import EmbeddedIndex

        name = f"{settings.search_alias}--{embedder.slug}"
        # One instance per process: the local stack's indexer and its API share it.
        with _EMBEDDED_LOCK:
            index = _EMBEDDED.get((settings.index_dir, name))
            if index is None:
                index = EmbeddedIndex(name, settings.index_dir)
                _EMBEDDED[(settings.index_dir, name)] = index
        return index
    if not settings.search_endpoint:
        return None
    from memvault.search.opensearch import OpenSearchIndex, is_loopback, opensearch_client

    chinese = chinese_embedder_from_settings(settings)
    return OpenSearchIndex(
        opensearch_client(
            settings.search_endpoint,
            region=settings.aws_region,
            sigv4=settings.search_auth == "sigv4",
        ),
        settings.search_alias,
        model_slug=embedder.slug,
        model_id=embedder.model_id,
        model_version=embedder.model_version,
        dimensions=embedder.dimensions,
        dimensions_zh=None if chinese is None else chinese.dimensions,
        reader_role_arns=settings.search_reader_role_arns,
        writer_role_arns=settings.search_writer_role_arns,
        refresh_interval=settings.search_refresh_interval,
        remote=not is_loopback(settings.search_endpoint),
    )


def build_stores(
    settings: Settings, clock: Clock, client: Any = None, *, s3: Any = None, keys: Any = None
) -> Stores:
    """The configured backend's stores (``MEMVAULT_STORE``)."""
    if settings.store == "sqlite":
        return sqlite_stores(settings, clock)
    return dynamodb_stores(settings, client or dynamodb_client(settings), s3=s3, keys=keys)


def build_services(
    settings: Settings | None = None,
    *,
    client: Any = None,
    clock: Clock | None = None,
    ids: IdSource | None = None,
    s3: Any = None,
    keys: TenantKeys | None = None,
    search: SearchIndex | None = None,
    embedder: Embedder | None = None,
    stores: Stores | None = None,
    chinese: Embedder | None = None,
) -> Services:
    """Every service over the configured stores and index; ``embedder``, ``chinese`` (the
    Chinese model, ``embedding_model_zh``) and ``search`` default to the settings'."""
    settings = settings or get_settings()
    clock = clock or SystemClock()
    ids = ids or RandomIds()
    stores = stores or build_stores(settings, clock, client, s3=s3, keys=keys)
    repo = stores.memory
    artifacts = ArtifactService(stores.artifacts, stores.objects, repo, settings, clock, ids)
    embedder = embedder or embedder_from_settings(settings)
    search = search or search_index(settings, embedder)
    runner = _purge_runner(stores, clock, artifacts, search)
    memory = MemoryService(
        repo,
        settings,
        clock,
        ids,
        _launcher(settings, runner, clock),
        traces=stores.traces,
        artifacts=stores.artifacts,
    )
    sessions = SessionService(stores.sessions, settings, clock, repo)
    runs = RunService(stores.runs, settings, clock, repo, artifacts=stores.artifacts)
    chinese = chinese or chinese_embedder_from_settings(settings)
    recall = _recall_service(stores, search, embedder, chinese, settings, clock, ids)
    context = ContextAssembler(
        memory,
        sessions,
        runs,
        Cl100kCounter(),
        clock,
        RecallOrCurrent(recall, CurrentMemories(memory)),
    )
    return Services(
        memory=memory,
        sessions=sessions,
        runs=runs,
        context=context,
        artifacts=artifacts,
        recall=recall,
        purge=runner,
        stores=stores,
        traces=TraceService(repo, memory, stores.traces, settings, clock, ids),
    )


def _purge_runner(
    stores: Stores, clock: Clock, artifacts: ArtifactService, search: SearchIndex | None
) -> PurgeRunner:
    """The runner of a deletion's steps over every copy the stores and the index hold."""
    repo = stores.memory
    return PurgeRunner(
        repo,
        clock,
        default_steps(
            repo,
            clock,
            artifacts,
            search,
            sessions=stores.sessions,
            runs=stores.runs,
            traces=stores.traces,
        ),
    )


def _recall_service(
    stores: Stores,
    search: SearchIndex | None,
    embedder: Embedder,
    chinese: Embedder | None,
    settings: Settings,
    clock: Clock,
    ids: IdSource,
) -> RecallService:
    """Recall over the index (with the configured reranker, if any), traced."""
    return RecallService(
        stores.memory,
        search,
        embedder,
        settings,
        clock,
        traces=stores.traces,
        ids=ids,
        reranker=reranker_from_settings(settings),
        chinese=chinese,
    )


def _launcher(settings: Settings, runner: PurgeRunner, clock: Clock) -> PurgeLauncher:
    if settings.purge_state_machine_arn:
        return StepFunctionsPurgeLauncher(
            boto3.client("stepfunctions", region_name=settings.aws_region),
            settings.purge_state_machine_arn,
            clock,
        )
    if settings.purge_launch == "background":
        return BackgroundPurgeLauncher(runner.run)
    return InlinePurgeLauncher(runner.run)


def build_purge_runner(
    settings: Settings | None = None, *, client: Any = None, clock: Clock | None = None
) -> PurgeRunner:
    """The runner the Step Functions tasks call (one action per invocation)."""
    settings = settings or get_settings()
    clock = clock or SystemClock()
    services = build_services(settings, client=client, clock=clock)
    return services.purge


def build_indexer(
    settings: Settings | None = None,
    *,
    client: Any = None,
    clock: Clock | None = None,
    search: SearchIndex | None = None,
    embedder: Embedder | None = None,
    chinese: Embedder | None = None,
) -> Indexer:
    settings = settings or get_settings()
    embedder = embedder or embedder_from_settings(settings)
    index = search or search_index(settings, embedder)
    if index is None:
        raise RuntimeError(
            "the indexer needs a search index: set MEMVAULT_SEARCH_ENDPOINT "
            "or MEMVAULT_SEARCH_BACKEND=embedded"
        )
    clock = clock or SystemClock()
    return Indexer(
        index,
        embedder,
        build_stores(settings, clock, client).memory,
        clock,
        chinese=chinese if chinese is not None else chinese_embedder_from_settings(settings),
    )
