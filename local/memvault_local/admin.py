"""Operator commands that work on the stores directly (not through the HTTP API).

They read the same ``MEMVAULT_*`` settings as the service: on AWS the deployment's
tables and OpenSearch domain; locally ``MEMVAULT_DYNAMODB_ENDPOINT`` and
``MEMVAULT_SEARCH_ENDPOINT`` (a real OpenSearch); without them, the local stack's
embedded store and index (``memvault reindex``, ``memvault resume``: with the stack
stopped, as it holds them while it runs).
"""

from __future__ import annotations

import os
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from memvault.clock import SystemClock
from memvault.config import Settings
from memvault.embeddings import Embedder, chinese_embedder_from_settings, embedder_from_settings
from memvault.embeddings.onnx import MODELS
from memvault.indexing.indexer import Indexer
from memvault.indexing.rebuild import rebuild
from memvault.models.access import AccessContext, Scope
from memvault.search.backend import SearchIndex
from memvault.search.opensearch import OpenSearchIndex
from memvault.services.deletion import IndexStep, PrimaryStep, PurgeStep, VersionsStep
from memvault.services.recall import RecallService
from memvault.storage.dynamodb.dynamo import Dynamo
from memvault.storage.dynamodb.memory import DynamoMemoryStore
from memvault.storage.ports.memory import MemoryStore
from memvault.wiring import dynamodb_client, search_index, table_names
from memvault_local.evaluation import EvalSet
from memvault_wire.memory import DeletionJob, DeletionScope, DeletionState, Sensitivity
from memvault_wire.recall import RecallRequest


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
    store = DynamoMemoryStore(db)
    chinese = chinese_embedder_from_settings(new_settings)
    indexer = Indexer(index, embedder, store, SystemClock(), chinese=chinese)
    with tqdm(
        total=approx or None, unit="item", desc=f"indexing into {index.name}", file=out
    ) as bar:
        report = rebuild(indexer, store.rebuild_records(tenant_id), progress=bar.update)
    index.refresh()
    out.write(
        f"{report.scanned} items scanned, {report.written} documents written, "
        f"{report.stale} already current, {report.failed} failed\n"
    )
    if report.failed:
        out.write("some documents failed: the alias stays where it is; run reindex again\n")
        return 1
    if eval_path:
        repo = store
        old = [n for n in previous if n != index.name]
        for name in [*old, index.name]:
            target = _index_named(index, name)
            target_embedder = embedder if name == index.name else _embedder_for(settings, target)
            service = RecallService(
                repo,
                target,
                target_embedder,
                settings,
                SystemClock(),
                chinese=chinese if target.dimensions_zh else None,
            )
            score = _eval_recall(service, EvalSet.read(eval_path), store)
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
    mappings = template.client.indices.get_mapping(index=name)[name]["mappings"]
    meta, props = mappings.get("_meta", {}), mappings["properties"]
    other = OpenSearchIndex(
        template.client,
        template.alias,
        model_slug=name.removeprefix(f"{template.alias}--"),
        model_id=meta.get("model_id", ""),
        model_version=meta.get("model_version", ""),
        dimensions=int(props["embedding"]["dimension"]),
        dimensions_zh=int(props["embedding_zh"]["dimension"]) if "embedding_zh" in props else None,
    )
    other.alias = name  # read this index itself, not through the alias
    return other


def _embedder_for(settings: Settings, index: OpenSearchIndex) -> Embedder:
    for model in ("minilm", *MODELS, "titan-v2", "hashing"):
        candidate = embedder_from_settings(settings.model_copy(update={"embedding_model": model}))
        if candidate.model_id == index.model_id and candidate.dimensions == index.dimensions:
            return candidate
    raise AdminError(f"no embedder here matches {index.model_id} ({index.dimensions} dims)")


def _eval_recall(service: RecallService, evalset: EvalSet, store: MemoryStore) -> float:
    """recall@10 over the set's queries whose memories were loaded with ``eval-<key>``
    request ids (as ``memvault_local.evaluation.load`` writes them)."""
    ids: dict[str, str] = {}
    for item in store.rebuild_records():
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


def _local_mode() -> bool:
    env = os.environ
    return not (
        env.get("MEMVAULT_BACKEND") == "aws"
        or env.get("MEMVAULT_DYNAMODB_ENDPOINT")
        or env.get("MEMVAULT_SEARCH_ENDPOINT")
        or env.get("MEMVAULT_STORE") == "dynamodb"
    )


def reindex_local(
    model: str, *, switch: bool, eval_path: str | None, out: TextIO, tenant_id: str | None = None
) -> int:
    """The local stack's embedded index for ``model``, built afresh from the embedded
    store (with the stack stopped: it holds the store and its index while it runs);
    compared with the index in use on an evaluation set; ``--switch`` makes it the one
    ``memvault run`` uses from its next start, and the old index stays for a roll-back."""
    from memvault_local.devkeys import data_home
    from memvault_local.local_index import model_in_use, record_model, with_model
    from memvault_local.stack import AlreadyRunning, _single_instance

    if tenant_id is not None:
        raise AdminError("the local index holds every tenant: run reindex without --tenant")
    home = data_home()
    settings = _local_store_settings(home)
    index_dir = Path(settings.index_dir or "")
    current = model_in_use(index_dir)
    new_settings = with_model(settings, model)
    try:
        with _single_instance(home):
            if not _rebuild_local_index(settings, new_settings, model, current, eval_path, out):
                return 1
    except AlreadyRunning as running:
        raise AdminError(
            f"the local stack is running ({running}): stop it, then run reindex "
            "(it reads the store the stack holds)"
        ) from None
    if switch:
        record_model(index_dir, model)
        out.write(
            f"memvault run now uses {model} (was {current}); to roll back: "
            f"memvault reindex --model {current} --switch\n"
        )
    else:
        out.write(f"memvault run still uses {current}; add --switch to use {model}\n")
    return 0


def _local_store_settings(home: Path) -> Settings:
    """The local stack's settings; refused unless they name its embedded index and its
    embedded store holds a database to index."""
    from memvault_local.stack import _local_defaults

    settings = Settings(**_local_defaults(home, "http://127.0.0.1"))
    if settings.search_backend != "embedded":
        raise AdminError("set MEMVAULT_SEARCH_ENDPOINT's tables too, or unset it for local mode")
    if not (Path(settings.data_dir or "") / "memvault.db").exists():
        raise AdminError(f"no embedded store under {settings.data_dir}: nothing to index")
    return settings


def _rebuild_local_index(
    settings: Settings,
    new_settings: Settings,
    model: str,
    current: str,
    eval_path: str | None,
    out: TextIO,
) -> bool:
    """``model``'s index built afresh from the embedded store and, given an evaluation
    set, compared with ``current``'s; False when some documents failed."""
    from memvault.wiring import build_services
    from memvault_local.local_index import build, index_path, remove_index

    embedder = embedder_from_settings(new_settings)
    remove_index(index_path(new_settings, embedder))
    services = build_services(new_settings)
    try:
        store = services.stores.memory
        index = services.recall.index
        assert index is not None
        report = build(
            index,
            embedder,
            store,
            out,
            label=f"indexing into {index.name}",
            chinese=services.recall.chinese,
        )
        out.write(
            f"{report.scanned} items scanned, {report.written} documents written, "
            f"{report.failed} failed\n"
        )
        if report.failed:
            out.write(f"some documents failed: still on {current}; run reindex again\n")
            return False
        if eval_path:
            compared = [(current, settings)] if current != model else []
            _compare_local_recall(eval_path, store, [*compared, (model, new_settings)], out)
    finally:
        services.stores.database.close()
    return True


def _compare_local_recall(
    eval_path: str, store: MemoryStore, candidates: list[tuple[str, Settings]], out: TextIO
) -> None:
    """recall@10 on the evaluation set through each model's own index and embedder."""
    evalset = EvalSet.read(eval_path)
    for name, chosen in candidates:
        old_embedder = embedder_from_settings(chosen)
        target = search_index(chosen, old_embedder)
        chinese = chinese_embedder_from_settings(chosen)
        service = RecallService(store, target, old_embedder, chosen, SystemClock(), chinese=chinese)
        score = _eval_recall(service, evalset, store)
        out.write(f"{name}: recall@10 {score}\n")


def run_reindex(args: Any) -> int:
    common = {"switch": args.switch, "eval_path": args.eval, "out": sys.stdout}
    try:
        if _local_mode():
            return reindex_local(args.model, tenant_id=args.tenant, **common)
        return reindex(Settings(), args.model, tenant_id=args.tenant, **common)
    except AdminError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


# ------------------------------------------------------------------ restore replay


@dataclass
class ReplayReport:
    deletions: int = 0
    chains: int = 0
    versions: int = 0
    reenabled: list[str] = field(default_factory=list)


def _reenable(client: Any, table: str, out: TextIO) -> list[str]:
    """A table restored from a backup has no stream and no TTL: turn both back on."""
    done = []
    described = client.describe_table(TableName=table)["Table"]
    if not (described.get("StreamSpecification") or {}).get("StreamEnabled"):
        client.update_table(
            TableName=table,
            StreamSpecification={"StreamEnabled": True, "StreamViewType": "NEW_AND_OLD_IMAGES"},
        )
        done.append("stream (NEW_AND_OLD_IMAGES)")
    ttl = client.describe_time_to_live(TableName=table)["TimeToLiveDescription"]
    if ttl.get("TimeToLiveStatus") not in ("ENABLED", "ENABLING"):
        client.update_time_to_live(
            TableName=table, TimeToLiveSpecification={"Enabled": True, "AttributeName": "ttl"}
        )
        done.append("TTL on 'ttl'")
    for what in done:
        out.write(f"{table}: the restored table had no {what.split(' ')[0]}; re-enabled {what}\n")
    return done


def restore_replay(
    settings: Settings,
    restored_table: str,
    *,
    tenant_id: str | None,
    out: TextIO,
    client: Any = None,
    index: SearchIndex | None = None,
) -> ReplayReport:
    """Re-apply every logged deletion to a memory table restored from a backup, and to
    the search index, so that nothing deleted comes back. Safe to run more than once."""
    client = client or dynamodb_client(settings)
    names = table_names(settings)
    report = ReplayReport(reenabled=_reenable(client, restored_table, out))
    restored = DynamoMemoryStore(Dynamo(client, {**names, "memory": restored_table}))
    clock = SystemClock()
    if index is None and (settings.search_endpoint or settings.search_backend == "embedded"):
        index = search_index(settings, embedder_from_settings(settings))
    steps: list[PurgeStep] = [
        PrimaryStep(restored, clock),
        VersionsStep(restored, clock),
        IndexStep(restored, index),
    ]
    for entry in restored.deletion_log(tenant_id):
        job = DeletionJob(
            deletion_id=entry.deletion_id,
            tenant_id=entry.tenant_id,
            subject_id=entry.subject_id,
            scope=DeletionScope(entry.scope),
            target=entry.target,
            status=DeletionState.PURGING,
            requested_by=entry.requested_by,
            requested_at=entry.requested_at,
            completed_at=None,
            copies=[],
        )
        if job.scope is DeletionScope.ARTIFACT:
            continue  # artifacts live in S3, which a table restore does not bring back
        if job.scope is DeletionScope.SUBJECT:
            _retire_at_least(restored, job)
        for step in steps:
            result = step.run(job)
            if step.copy == "primary":
                report.chains += result.count
            elif step.copy == "versions":
                report.versions += result.count
        report.deletions += 1
    out.write(
        f"replayed {report.deletions} deletion(s) on {restored_table}: "
        f"{report.chains} chain(s) tombstoned, {report.versions} version(s) purged"
        f"{', index tombstones written' if index is not None else ''}\n"
    )
    return report


def _retire_at_least(repo: DynamoMemoryStore, job: DeletionJob) -> None:
    """The restored subject epoch must be past the one the forget retired."""
    repo.raise_epoch(
        job.tenant_id,
        job.subject_id,
        int(job.target.removeprefix("epoch:")),
        job.deletion_id,
        job.requested_at,
    )


def run_restore_replay(args: Any) -> int:
    try:
        restore_replay(Settings(), args.table, tenant_id=args.tenant, out=sys.stdout)
    except AdminError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


# --------------------------------------------------------------------- offboarding


@dataclass
class OffboardPlan:
    tenant_id: str
    subjects: dict[str, int]
    key_alias: str
    deletion_ids: list[str] = field(default_factory=list)
    key_deletion_date: str | None = None


def offboard(
    settings: Settings,
    tenant_id: str,
    *,
    dry_run: bool,
    out: TextIO,
    services: Any = None,
    kms: Any = None,
    pending_days: int = 30,
) -> OffboardPlan:
    """Forget every subject of the tenant, then schedule the tenant's KMS key for deletion
    (after ``pending_days``, 7 to 30, during which it can still be cancelled)."""
    import boto3

    from memvault.wiring import build_services

    services = services or build_services(settings)
    db = services.memory.repo.db
    counts: dict[str, int] = {}
    for table in ("memory", "sessions", "artifacts"):
        for item in db.scan_prefix(table, f"{tenant_id}#"):
            subject = str(item["pk"]).split("#")[1]
            if subject.startswith("~"):
                continue
            counts[subject] = counts.get(subject, 0) + (1 if item.get("type") == "memory" else 0)
    plan = OffboardPlan(
        tenant_id, dict(sorted(counts.items())), services.artifacts.objects.tenant_key(tenant_id)
    )
    out.write(f"tenant {tenant_id}: {len(plan.subjects)} subject(s) to forget\n")
    for subject, memories in plan.subjects.items():
        out.write(f"  {subject}: {memories} memory version(s)\n")
    out.write(f"  then schedule key {plan.key_alias} for deletion in {pending_days} days\n")
    if dry_run:
        out.write("dry run: nothing was changed\n")
        return plan
    ctx = AccessContext(
        tenant_id=tenant_id,
        principal="memvault-offboard",
        scopes=frozenset({Scope.MEMORY_DELETE, Scope.MEMORY_READ, Scope.SUBJECTS_ANY}),
        max_sensitivity=Sensitivity.PII,
    )
    for subject in plan.subjects:
        job = services.memory.forget(ctx, subject)
        plan.deletion_ids.append(job.deletion_id)
        out.write(f"  forgot {subject}: {job.deletion_id} {job.status.value}\n")
    kms = kms or boto3.client("kms", region_name=settings.aws_region)
    key_id = kms.describe_key(KeyId=plan.key_alias)["KeyMetadata"]["KeyId"]
    scheduled = kms.schedule_key_deletion(KeyId=key_id, PendingWindowInDays=pending_days)
    plan.key_deletion_date = str(scheduled["DeletionDate"])
    out.write(f"key {plan.key_alias} scheduled for deletion on {plan.key_deletion_date}\n")
    return plan


def run_offboard(args: Any) -> int:
    offboard(Settings(), args.tenant, dry_run=args.dry_run, out=sys.stdout, pending_days=args.days)
    return 0


# ------------------------------------------------------------------ resume deletions


def resume_deletions(services: Any, out: TextIO) -> int:
    """Run every unfinished deletion job to its end, inline; 0 when each one completed."""
    jobs = services.purge.unfinished()
    if not jobs:
        out.write("no unfinished deletions\n")
        return 0
    left = 0
    for job in jobs:
        done = services.purge.run(job.tenant_id, job.deletion_id)
        pending = [c.name for c in done.copies if c.status.value not in ("DONE", "NOT_APPLICABLE")]
        left += done.status is not DeletionState.COMPLETED
        out.write(
            f"{done.deletion_id} ({done.scope.value}, tenant {done.tenant_id}): "
            f"{job.status.value} -> {done.status.value}"
            + (f"; copies not done: {', '.join(pending)}" if pending else "")
            + "\n"
        )
    out.write(f"{len(jobs) - left} of {len(jobs)} deletion(s) completed\n")
    return 1 if left else 0


def run_resume(args: Any) -> int:
    from memvault.wiring import build_services
    from memvault_local.devkeys import data_home
    from memvault_local.stack import AlreadyRunning, _local_defaults, _single_instance

    home = data_home()
    settings = Settings(**{**_local_defaults(home, "http://127.0.0.1"), "purge_launch": "inline"})
    if not (Path(settings.data_dir or "") / "memvault.db").exists():
        print(f"no embedded store under {settings.data_dir}: nothing to resume", file=sys.stderr)
        return 2
    try:
        with _single_instance(home):
            services = build_services(settings)
            try:
                return resume_deletions(services, sys.stdout)
            finally:
                services.stores.database.close()
    except AlreadyRunning as running:
        print(
            f"the local stack is running ({running}); it resumed unfinished deletions when it "
            "started: restart it, or stop it and run `memvault resume`",
            file=sys.stderr,
        )
        return 2
