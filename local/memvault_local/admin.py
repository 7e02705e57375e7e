"""Operator commands that work on the stores directly (not through the HTTP API).

They read the same ``MEMVAULT_*`` settings as the service: on AWS the deployment's
tables and OpenSearch domain; locally ``MEMVAULT_DYNAMODB_ENDPOINT`` and
``MEMVAULT_SEARCH_ENDPOINT`` (a real OpenSearch; the embedded index belongs to the
``memvault run`` process that holds it).
"""

from __future__ import annotations

import statistics
import sys
from typing import Any, TextIO

from memvault.clock import SystemClock
from memvault.config import Settings
from memvault.embeddings import Embedder, embedder_from_settings
from memvault.indexing.indexer import Indexer
from memvault.indexing.rebuild import rebuild, scan_items
from memvault.models.access import AccessContext, Scope
from memvault.models.memory import Sensitivity
from memvault.models.recall import RecallRequest
from memvault.search.opensearch import OpenSearchIndex
from memvault.services.recall import RecallService
from memvault.storage.dynamo import Dynamo
from memvault.storage.memory_repo import MemoryRepository
from memvault.wiring import dynamodb_client, search_index, table_names
from memvault_local.evaluation import EvalSet


class AdminError(Exception):
    """A refusal with a message that says what to change."""


def _opensearch(settings: Settings, embedder: Embedder) -> OpenSearchIndex:
    if settings.search_backend != "opensearch" or not settings.search_endpoint:
        raise AdminError(
            "reindex works on OpenSearch: set MEMVAULT_SEARCH_ENDPOINT (the embedded index "
            "of the local stack is rebuilt by restarting `memvault run`)"
        )
    index = search_index(settings, embedder)
    assert isinstance(index, OpenSearchIndex)
    return index


def reindex(
    settings: Settings,
    model: str,
    *,
    tenant_id: str | None,
    switch: bool,
    eval_path: str | None,
    out: TextIO,
    client: Any = None,
) -> int:
    """Build the index of ``model`` from the memory table; compare; switch the alias."""
    from tqdm import tqdm

    new_settings = settings.model_copy(update={"embedding_model": model})
    embedder = embedder_from_settings(new_settings)
    index = _opensearch(new_settings, embedder)
    previous = index.alias_target()
    index.ensure()
    client = client or dynamodb_client(settings)
    db = Dynamo(client, table_names(settings))
    table = db.names["memory"]
    approx = int(client.describe_table(TableName=table)["Table"].get("ItemCount", 0))
    indexer = Indexer(index, embedder, db, SystemClock())
    with tqdm(
        total=approx or None, unit="item", desc=f"indexing into {index.name}", file=out
    ) as bar:
        report = rebuild(indexer, scan_items(client, table, tenant_id), progress=bar.update)
    index.refresh()
    out.write(
        f"{report.scanned} items scanned, {report.written} documents written, "
        f"{report.stale} already current, {report.failed} failed\n"
    )
    if report.failed:
        out.write("some documents failed: the alias stays where it is; run reindex again\n")
        return 1
    if eval_path:
        repo = MemoryRepository(db)
        old = [n for n in previous if n != index.name]
        for name in [*old, index.name]:
            target = _index_named(index, name)
            target_embedder = embedder if name == index.name else _embedder_for(settings, target)
            service = RecallService(repo, target, target_embedder, settings, SystemClock())
            score = _eval_recall(service, EvalSet.read(eval_path), client, table)
            out.write(f"{name}: recall@10 {score}\n")
    if switch:
        index.point_alias(index.name)
        out.write(f"alias {index.alias} -> {index.name}")
        if previous and previous != [index.name]:
            out.write(
                f" (was {', '.join(previous)}; to roll back: "
                f"memvault reindex --model <old model> --switch)"
            )
        out.write("\n")
    else:
        out.write(
            f"alias {index.alias} still -> {', '.join(previous) or index.name}; "
            "add --switch to move it\n"
        )
    return 0


def _index_named(template: OpenSearchIndex, name: str) -> OpenSearchIndex:
    meta = template.client.indices.get_mapping(index=name)[name]["mappings"].get("_meta", {})
    props = template.client.indices.get_mapping(index=name)[name]["mappings"]["properties"]
    other = OpenSearchIndex(
        template.client,
        template.alias,
        model_slug=name.removeprefix(f"{template.alias}--"),
        model_id=meta.get("model_id", ""),
        model_version=meta.get("model_version", ""),
        dimensions=int(props["embedding"]["dimension"]),
    )
    other.alias = name  # read this index itself, not through the alias
    return other


def _embedder_for(settings: Settings, index: OpenSearchIndex) -> Embedder:
    for model in ("minilm", "titan-v2", "hashing"):
        candidate = embedder_from_settings(settings.model_copy(update={"embedding_model": model}))
        if candidate.model_id == index.model_id and candidate.dimensions == index.dimensions:
            return candidate
    raise AdminError(f"no embedder here matches {index.model_id} ({index.dimensions} dims)")


def _eval_recall(service: RecallService, evalset: EvalSet, client: Any, table: str) -> float:
    """recall@10 over the set's queries whose memories were loaded with ``eval-<key>``
    request ids (as ``memvault_local.evaluation.load`` writes them)."""
    ids: dict[str, str] = {}
    for item in scan_items(client, table):
        request = str(item.get("request_id") or "")
        if request.startswith("eval-") and item.get("type") == "memory":
            ids[request.removeprefix("eval-")] = str(item["memory_id"])
    if not ids:
        raise AdminError("the evaluation set is not loaded in this table")
    key_of = {v: k for k, v in ids.items()}
    shares = []
    for q in evalset.queries:
        if q["expect_empty"]:
            continue
        ctx = AccessContext(
            tenant_id=q["tenant_id"],
            principal="memvault-reindex",
            subject_id=q["subject_id"],
            scopes=frozenset({Scope.MEMORY_READ}),
            agent_role=q.get("agent_role"),
            max_sensitivity=Sensitivity(q.get("max_sensitivity") or "internal"),
        )
        got = service.recall(
            ctx, q["subject_id"], RecallRequest(query=q["text"], scope=q.get("scope") or {})
        )
        keys = {key_of.get(i.memory.memory_id) for i in got.items}
        shares.append(len(keys & set(q["relevant"])) / len(q["relevant"]))
    return round(statistics.fmean(shares), 4)


def run_reindex(args: Any) -> int:
    settings = Settings()
    try:
        return reindex(
            settings,
            args.model,
            tenant_id=args.tenant,
            switch=args.switch,
            eval_path=args.eval,
            out=sys.stdout,
        )
    except AdminError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
