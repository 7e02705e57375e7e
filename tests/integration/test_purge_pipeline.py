"""The purge pipeline over the real step handlers: retries, failures, the index copy, TTL
expiry reaching the index, restore replay and tenant offboarding.

Every test writes through the memory service (moto DynamoDB), lets the stream pump
carry the records to the real indexer, and runs the real steps of ``PURGE_PIPELINE``
through the local runner. moto never expires items by TTL and its streams never show a
TTL deletion, so the TTL test builds the REMOVE record DynamoDB sends for one (with the
service's ``userIdentity``) from the item's own image.
"""

from __future__ import annotations

import io
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from memvault.embeddings.hashing import HashingEmbedder
from memvault.services.deletion import PurgeRunner
from memvault.services.purge_pipeline import PURGE_PIPELINE
from memvault.storage.dynamodb import keys
from memvault.storage.dynamodb.tables import MEMORY, create_table_request
from memvault_local.admin import offboard, restore_replay
from memvault_wire.errors import NotFound
from memvault_wire.memory import CopyState, DeletionState
from memvault_wire.recall import RecallRequest
from tests.support.harness import a_write, ctx
from tests.support.recall import RecallRig, make_rig

EMBEDDER = HashingEmbedder()


@pytest.fixture
def rig() -> Iterator[RecallRig]:
    with mock_aws():
        yield make_rig("embedded", EMBEDDER, recall_relevance_floor=0.1)


def write(rig: RecallRig, content: str, subject: str = "u-1", **kw: Any) -> Any:
    body = {"request_id": uuid.uuid4().hex, "canonical_key": None, "scope": {}, "tags": []}
    return rig.services.memory.write(
        ctx("acme", subject), subject, a_write(content=content, **{**body, **kw})
    ).memory


def recalled(rig: RecallRig, query: str, subject: str = "u-1") -> list[str]:
    result = rig.services.recall.recall(ctx("acme", subject), subject, RecallRequest(query=query))
    return [i.memory.memory_id for i in result.items]


class Flaky:
    """Wraps a real step: fails its first ``times`` runs, then does the real work."""

    def __init__(self, real: Any, times: int) -> None:
        self.real = real
        self.copy = real.copy
        self.left = times

    def run(self, job: Any) -> Any:
        if self.left:
            self.left -= 1
            raise ConnectionError("index node did not answer")
        return self.real.run(job)


class Recording:
    def __init__(self, real: Any, ran: list[str]) -> None:
        self.real = real
        self.copy = real.copy
        self.ran = ran

    def run(self, job: Any) -> Any:
        self.ran.append(self.copy)
        return self.real.run(job)


def deferred(rig: RecallRig) -> None:
    """Deletes record their job; the test runs the pipeline itself."""
    rig.services.memory.purge = type("Deferred", (), {"launch": lambda *a, **k: None})()


def runner_with(rig: RecallRig, copy: str, times: int) -> PurgeRunner:
    repo = rig.services.memory.repo
    steps = list(rig.services.purge.handlers.values())
    steps = [Flaky(s, times) if s.copy == copy else s for s in steps]
    return PurgeRunner(repo, rig.clock, steps, sleep=lambda s: None)


def test_the_pipeline_runs_every_step_in_order_and_tombstones_the_index(rig: RecallRig) -> None:
    m = write(rig, "Lin keeps her bicycle in locker 12")
    rig.sync()
    deferred(rig)
    job = rig.services.memory.delete(ctx(), "u-1", m.memory_id)
    ran: list[str] = []
    runner = runner_with(rig, "index", times=0)
    for copy, step in list(runner.handlers.items()):
        runner.handlers[copy] = Recording(step, ran)

    job = runner.run("acme", job.deletion_id)

    assert ran == [s.copy for s in PURGE_PIPELINE]
    assert job.status is DeletionState.COMPLETED
    copies = {c.name: c for c in job.copies}
    assert set(copies) == {s.copy for s in PURGE_PIPELINE} | {"idempotency"}
    assert copies["index"].status is CopyState.DONE
    held = rig.index.get("acme", m.chain_id)
    assert held is not None and held[1]["doc_type"] == "tombstone"


def test_an_old_insert_replayed_after_the_purge_is_never_indexed_or_recalled(
    rig: RecallRig,
) -> None:
    captured: list[dict[str, Any]] = []
    real = rig.pump.handler
    rig.pump.handler = lambda event: (captured.extend(event["Records"]), real(event))[1]
    m = write(rig, "the vault combination is left-right-left")
    rig.sync()
    insert = next(
        r
        for r in captured
        if r["eventName"] == "INSERT"
        and r["dynamodb"]["Keys"]["sk"]["S"] == keys.version_sk(m.memory_id)
    )
    rig.services.memory.delete(ctx(), "u-1", m.memory_id)

    answer = real({"Records": [insert]})  # the purge's tombstone is already there
    rig.index.refresh()

    assert answer == {"batchItemFailures": []}
    held = rig.index.get("acme", m.chain_id)
    assert held is not None and held[1]["doc_type"] == "tombstone"
    assert recalled(rig, "vault combination") == []


def test_a_step_failing_twice_then_succeeding_completes_with_its_history(rig: RecallRig) -> None:
    m = write(rig, "Lin's bike is the green one")
    rig.sync()
    deferred(rig)
    job = rig.services.memory.delete(ctx(), "u-1", m.memory_id)

    done = runner_with(rig, "index", times=2).run("acme", job.deletion_id)

    assert done.status is DeletionState.COMPLETED
    index = next(c for c in done.copies if c.name == "index")
    assert index.attempts == 3
    assert [e.status for e in index.history] == [
        CopyState.PENDING,
        CopyState.PENDING,
        CopyState.DONE,
    ]
    assert all("ConnectionError" in (e.reason or "") for e in index.history[:2])
    primary = next(c for c in done.copies if c.name == "primary")
    assert primary.attempts == 1


def test_a_step_that_keeps_failing_leaves_the_job_failed_and_the_memory_unreadable(
    rig: RecallRig,
) -> None:
    m = write(rig, "Lin's spare key is under the mat")
    rig.sync()
    deferred(rig)
    job = rig.services.memory.delete(ctx(), "u-1", m.memory_id)

    failed = runner_with(rig, "index", times=100).run("acme", job.deletion_id)

    assert failed.status is DeletionState.FAILED and failed.completed_at is None
    index = next(c for c in failed.copies if c.name == "index")
    retry = next(s for s in PURGE_PIPELINE if s.copy == "index").retry
    assert index.status is CopyState.FAILED
    assert index.attempts == retry.max_attempts + 1
    assert "ConnectionError" in (index.reason or "") and "resume" in (index.reason or "")
    later = [c for c in failed.copies if c.name in ("cache", "sessions", "runs")]
    assert all(c.status is CopyState.PENDING for c in later)  # never reached
    with pytest.raises(NotFound):
        rig.services.memory.get(ctx(), "u-1", m.memory_id)
    assert recalled(rig, "spare key") == []

    resumed = runner_with(rig, "index", times=0).run("acme", job.deletion_id)
    assert resumed.status is DeletionState.COMPLETED


def test_a_ttl_removal_reaches_the_index(rig: RecallRig) -> None:
    """DynamoDB's TTL deletion arrives as a REMOVE whose userIdentity is the service."""
    m = write(rig, "the parking pass expires soon", ttl_seconds=60)
    rig.sync()
    assert rig.index.get("acme", m.chain_id)[1]["doc_type"] == "memory"  # type: ignore[index]
    table = rig.services.memory.repo.db.names["memory"]
    pk, sk = keys.subject_pk("acme", "u-1"), keys.version_sk(m.memory_id)
    image = rig.client.get_item(TableName=table, Key={"pk": {"S": pk}, "sk": {"S": sk}})["Item"]
    rig.client.delete_item(TableName=table, Key={"pk": {"S": pk}, "sk": {"S": sk}})
    removal = {
        "eventID": "ttl-1",
        "eventName": "REMOVE",
        "eventVersion": "1.1",
        "eventSource": "aws:dynamodb",
        "awsRegion": "us-east-1",
        "userIdentity": {"type": "Service", "principalId": "dynamodb.amazonaws.com"},
        "dynamodb": {
            "Keys": {"pk": {"S": pk}, "sk": {"S": sk}},
            "OldImage": image,
            "SequenceNumber": "999000000000000000001",
            "SizeBytes": 512,
            "StreamViewType": "NEW_AND_OLD_IMAGES",
        },
    }

    assert rig.pump.handler({"Records": [removal]}) == {"batchItemFailures": []}
    rig.index.refresh()

    held = rig.index.get("acme", m.chain_id)
    assert held is not None and held[1]["doc_type"] == "tombstone"
    assert held[1]["status"] == "removed"
    assert recalled(rig, "parking pass") == []


def test_restore_replay_keeps_deleted_memories_gone_from_the_restored_table_and_index(
    rig: RecallRig,
) -> None:
    kept = write(rig, "Lin takes the 8:15 train")
    # Words for markers: digits alone also turn up inside random hex ids and hashes.
    gone = write(rig, "Lin's door code is by the walrus statue")
    forgotten = write(rig, "Kim's door code is under the narwhal mat", subject="u-2")
    rig.sync()
    table = rig.services.memory.repo.db.names["memory"]
    backup = f"{table}-restored"
    _copy_table(rig.client, table, backup)  # a point-in-time copy taken before the deletes

    rig.services.memory.delete(ctx(), "u-1", gone.memory_id)
    rig.services.memory.forget(ctx("acme", "u-2"), "u-2")
    # The index is rebuilt from the restored copy: the deleted memories are back in it.
    fresh = make_rig_index(rig, backup)
    assert {gone.chain_id, forgotten.chain_id} <= set(fresh.documents("acme"))

    out = io.StringIO()
    report = restore_replay(
        rig.settings, backup, tenant_id="acme", out=out, client=rig.client, index=fresh
    )

    assert report.deletions == 2 and report.chains >= 2
    assert "re-enabled stream" in out.getvalue() and "re-enabled TTL" in out.getvalue()
    restored = _services_over(rig, backup, fresh)
    with pytest.raises(NotFound):
        restored.memory.get(ctx(), "u-1", gone.memory_id)
    with pytest.raises(NotFound):
        restored.memory.get(ctx("acme", "u-2"), "u-2", forgotten.memory_id)
    assert restored.memory.get(ctx(), "u-1", kept.memory_id).memory_id == kept.memory_id
    text = str(rig.client.scan(TableName=backup)["Items"])
    assert "walrus" not in text and "narwhal" not in text and "8:15" in text
    for chain in (gone.chain_id, forgotten.chain_id):
        assert fresh.get("acme", chain)[1]["doc_type"] == "tombstone"  # type: ignore[index]
    assert restored.recall.recall(ctx(), "u-1", RecallRequest(query="door code")).items == []
    # Running it again changes nothing.
    again = restore_replay(
        rig.settings, backup, tenant_id="acme", out=io.StringIO(), client=rig.client, index=fresh
    )
    assert again.reenabled == []


def test_offboarding_forgets_every_subject_then_schedules_the_key(rig: RecallRig) -> None:
    write(rig, "Lin likes tea")
    write(rig, "Kim likes coffee", subject="u-2")
    rig.services.artifacts.objects.tenant_key("acme")  # the tenant's key exists
    kms = boto3.client("kms", region_name="us-east-1")

    dry = io.StringIO()
    plan = offboard(rig.settings, "acme", dry_run=True, out=dry, services=rig.services, kms=kms)
    assert set(plan.subjects) == {"u-1", "u-2"} and plan.deletion_ids == []
    assert "dry run" in dry.getvalue()
    assert rig.services.memory.list_memories(ctx(), "u-1").items  # nothing changed

    out = io.StringIO()
    done = offboard(rig.settings, "acme", dry_run=False, out=out, services=rig.services, kms=kms)

    assert len(done.deletion_ids) == 2
    for subject in ("u-1", "u-2"):
        assert rig.services.memory.list_memories(ctx("acme", subject), subject).items == []
    key = kms.describe_key(KeyId=plan.key_alias)["KeyMetadata"]
    assert key["KeyState"] == "PendingDeletion"


# ----------------------------------------------------------------------------- helpers


def _copy_table(client: Any, source: str, target: str) -> None:
    """What a point-in-time restore gives: the items, but no stream and no TTL."""
    request = create_table_request(MEMORY, "")
    request["TableName"] = target
    request.pop("StreamSpecification", None)
    client.create_table(**request)
    for item in client.scan(TableName=source)["Items"]:
        client.put_item(TableName=target, Item=item)


def make_rig_index(rig: RecallRig, table: str) -> Any:
    from memvault.indexing.indexer import Indexer
    from memvault.indexing.rebuild import rebuild
    from memvault.search.embedded import EmbeddedIndex
    from memvault.storage.dynamodb.dynamo import Dynamo
    from memvault.storage.dynamodb.memory import DynamoMemoryStore
    from memvault.wiring import table_names

    index = EmbeddedIndex(f"rebuilt-{uuid.uuid4().hex[:6]}")
    names = {**table_names(rig.settings), "memory": table}
    rebuild(
        Indexer(index, EMBEDDER, DynamoMemoryStore(Dynamo(rig.client, names)), rig.clock),
        DynamoMemoryStore(Dynamo(rig.client, names)).rebuild_records(),
    )
    return index


def _services_over(rig: RecallRig, table: str, index: Any) -> Any:
    from memvault.wiring import build_services

    settings = rig.settings.model_copy(update={"table_prefix": rig.settings.table_prefix})
    services = build_services(
        settings,
        client=rig.client,
        clock=rig.clock,
        s3=rig.services.artifacts.objects.s3,
        keys=rig.services.artifacts.objects.keys,
        search=index,
        embedder=EMBEDDER,
    )
    services.memory.repo.db.names["memory"] = table
    return services


def test_the_state_machine_tasks_drive_the_same_runner(rig: RecallRig) -> None:
    """The purge Lambda's actions, called in the order the state machine calls them."""
    from memvault.handlers.purge import handle

    m = write(rig, "Lin's desk is by the east window")
    rig.sync()
    deferred(rig)
    job = rig.services.memory.delete(ctx(), "u-1", m.memory_id)
    runner = rig.services.purge
    ids = {"tenant_id": "acme", "deletion_id": job.deletion_id}

    handle({"action": "begin", **ids}, runner)
    assert runner.load("acme", job.deletion_id).status is DeletionState.PURGING
    for step in PURGE_PIPELINE:
        assert handle({"action": "step", "copy": step.copy, **ids}, runner)["status"] == "PURGING"
    assert handle({"action": "finish", **ids}, runner)["status"] == "COMPLETED"
    held = rig.index.get("acme", m.chain_id)
    assert held is not None and held[1]["doc_type"] == "tombstone"

    other = write(rig, "Lin's umbrella is blue")
    failing = rig.services.memory.delete(ctx(), "u-1", other.memory_id)
    failed_ids = {"tenant_id": "acme", "deletion_id": failing.deletion_id}
    error = {"Error": "PurgeStepFailed", "Cause": "index node did not answer"}
    answer = handle({"action": "fail", "copy": "index", "error": error, **failed_ids}, runner)
    assert answer["status"] == "FAILED"
    index = next(c for c in runner.load("acme", failing.deletion_id).copies if c.name == "index")
    assert index.status is CopyState.FAILED and "PurgeStepFailed" in (index.reason or "")
    with pytest.raises(ValueError, match="unknown purge action"):
        handle({"action": "explode", **failed_ids}, runner)
