"""The run store's conformance suite: every test runs against both adapters.

- ``dynamodb``: ``DynamoRunStore`` on moto, the tables created from the shared
  definitions. moto's DynamoDB is not atomic under threads (two conditional writes can
  both pass), so its client is wrapped in ``SerializedClient``, as real DynamoDB's
  transactions are atomic; the concurrency tests then prove the adapter's conditions, not
  moto's locking. Artifact references go through the real artifacts table item.
- ``sqlite``: ``SqliteRunStore`` on a file under ``tmp_path``, real threads with a
  connection each. The artifacts SQLite table belongs to the artifact store and is not
  wired here yet: this variant alone gets a small fake ``reference_artifact`` (a table of
  its own in the same database, written inside the store's transaction), so that a refused
  reference is seen rolled back with everything else.
"""

from __future__ import annotations

import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from memvault.clock import iso
from memvault.storage.dynamodb.dynamo import Dynamo, from_item, key, to_item
from memvault.storage.dynamodb.memory import DynamoMemoryStore
from memvault.storage.dynamodb.runs import DynamoRunStore
from memvault.storage.dynamodb.tables import ARTIFACTS, MEMORY, RUNS, create_tables, physical_name
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.ports.memory import ForgetState
from memvault.storage.ports.runs import (
    Advancement,
    ArtifactsNotCommitted,
    EventReceipt,
    RunStore,
    SubjectEpoch,
    run_reference,
)
from memvault.storage.sqlite.db import Database
from memvault.storage.sqlite.memory import SqliteMemoryStore
from memvault.storage.sqlite.runs import SqliteRunStore
from memvault.storage.sqlite.schema import MIGRATIONS
from memvault_local.sweeper import TtlSweeper
from memvault_wire.run import ArtifactRef, Checkpoint, Operation, OperationStatus, RunStatus
from tests.support.backends import STORES
from tests.support.harness import SerializedClient

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
LATER = NOW + timedelta(days=1)
TTL = int(LATER.timestamp())
SHA = "a" * 64
OTHER_SHA = "b" * 64
PREFIX = "port-"


@dataclass
class Backend:
    name: str
    store: RunStore
    #: Make an artifact COMMITTED for (tenant, subject) with a digest (made at ``NOW``,
    #: or at the ``created_at`` given).
    commit_artifact: Callable[..., None]
    #: The references counted on an artifact.
    references: Callable[[str, str, str], set[str]]
    #: How many physical records the run store holds (every tenant).
    records: Callable[[], int]
    #: Delete what expired by ``now`` (epoch seconds), as the store's TTL does.
    sweep: Callable[[int], int]


def _dynamodb() -> Iterator[Backend]:
    with mock_aws():
        client = SerializedClient(boto3.client("dynamodb", region_name="us-east-1"))
        # The memory table holds the subject epochs every run write is conditioned on.
        create_tables(client, PREFIX, (RUNS, ARTIFACTS, MEMORY))
        names = {s.name: physical_name(s, PREFIX) for s in (RUNS, ARTIFACTS, MEMORY)}
        db = Dynamo(client, names)

        def commit_artifact(
            tenant: str, subject: str, artifact_id: str, sha: str, created_at: datetime = NOW
        ) -> None:
            item = {
                "pk": f"{tenant}#{subject}",
                "sk": f"ART#{artifact_id}",
                "artifact_id": artifact_id,
                "state": "COMMITTED",
                "sha256": sha,
                "created_at": iso(created_at),
            }
            client.put_item(TableName=names["artifacts"], Item=to_item(item))

        def references(tenant: str, subject: str, artifact_id: str) -> set[str]:
            out = client.get_item(
                TableName=names["artifacts"],
                Key=key(f"{tenant}#{subject}", f"ART#{artifact_id}"),
                ConsistentRead=True,
            )
            return set(from_item(out.get("Item", {})).get("referenced_by", []))

        def records() -> int:
            return sum(1 for _ in db.scan_prefix("runs", ""))

        sweeper = TtlSweeper(client, PREFIX, (RUNS,))
        yield Backend(
            "dynamodb",
            DynamoRunStore(db),
            commit_artifact,
            references,
            records,
            lambda now: sweeper.sweep(now),
        )


_FAKE_ARTIFACTS = (
    "CREATE TABLE fake_artifacts (tenant_id TEXT, subject_id TEXT, artifact_id TEXT, "
    "state TEXT, sha256 TEXT, created_at TEXT, PRIMARY KEY (tenant_id, subject_id, artifact_id))",
    "CREATE TABLE fake_artifact_refs (tenant_id TEXT, subject_id TEXT, artifact_id TEXT, "
    "ref TEXT, PRIMARY KEY (tenant_id, subject_id, artifact_id, ref))",
)


def _fake_reference_artifact(
    conn: sqlite3.Connection,
    tenant: str,
    subject: str,
    artifact_id: str,
    ref: str,
    sha: str | None,
    made_after: datetime | None,
    made_under: int | None = None,
) -> bool:
    """Stand-in for the artifact store's hook: counts a reference on a committed artifact
    with that digest, made after ``made_after`` when given, in the caller's transaction
    (its artifacts carry no epoch: ``made_under`` never applies)."""
    found = conn.execute(
        "SELECT 1 FROM fake_artifacts WHERE tenant_id = ? AND subject_id = ? "
        "AND artifact_id = ? AND state = 'COMMITTED' AND sha256 = ? AND created_at > ?",
        (tenant, subject, artifact_id, sha, iso(made_after) if made_after else ""),
    ).fetchone()
    if found is None:
        return False
    conn.execute(
        "INSERT OR IGNORE INTO fake_artifact_refs VALUES (?, ?, ?, ?)",
        (tenant, subject, artifact_id, ref),
    )
    return True


def _sqlite(path: Path) -> Iterator[Backend]:
    db = Database(path / "memvault.db", MIGRATIONS)
    with db.write() as conn:
        for statement in _FAKE_ARTIFACTS:
            conn.execute(statement)
    store = SqliteRunStore(db, reference_artifact=_fake_reference_artifact)

    def commit_artifact(
        tenant: str, subject: str, artifact_id: str, sha: str, created_at: datetime = NOW
    ) -> None:
        with db.write() as conn:
            conn.execute(
                "INSERT INTO fake_artifacts VALUES (?, ?, ?, 'COMMITTED', ?, ?)",
                (tenant, subject, artifact_id, sha, iso(created_at)),
            )

    def references(tenant: str, subject: str, artifact_id: str) -> set[str]:
        with db.read() as conn:
            rows = conn.execute(
                "SELECT ref FROM fake_artifact_refs WHERE tenant_id = ? AND subject_id = ? "
                "AND artifact_id = ?",
                (tenant, subject, artifact_id),
            ).fetchall()
        return {r[0] for r in rows}

    def records() -> int:
        with db.read() as conn:
            return sum(
                int(conn.execute(f"SELECT COUNT(*) FROM {t}").fetchone()[0])  # noqa: S608
                for t in ("run_heads", "run_versions", "run_operations", "run_events")
            )

    yield Backend("sqlite", store, commit_artifact, references, records, store.sweep_expired)
    db.close()


@pytest.fixture(params=STORES)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    if request.param == "dynamodb":
        yield from _dynamodb()
    else:
        yield from _sqlite(tmp_path)


@pytest.fixture
def store(backend: Backend) -> RunStore:
    return backend.store


# ---------------------------------------------------------------------- builders


def checkpoint(
    run_id: str = "run-1",
    version: int = 1,
    *,
    subject: str = "u-1",
    status: RunStatus = RunStatus.CREATED,
    step: str = "created",
    refs: list[ArtifactRef] | None = None,
    state: dict[str, Any] | None = None,
    created_at: datetime = NOW,
) -> Checkpoint:
    return Checkpoint(
        run_id=run_id,
        subject_id=subject,
        version=version,
        status=status,
        step=step,
        plan_version="p1",
        budget={"tokens": 100.0},
        pending_approvals=["a-1"] if version > 1 else [],
        state=state or {},
        artifact_refs=refs or [],
        created_at=created_at,
        updated_at=NOW + timedelta(seconds=version),
    )


def step_to(
    version: int, run_id: str = "run-1", *, ttl: int | None = None, **kw: Any
) -> Advancement:
    """The advance from ``version - 1`` to ``version``."""
    status = kw.pop("status", RunStatus.RUNNING)
    refs = kw.pop("new_references", ())
    receipt = kw.pop("receipt", None)
    after = kw.pop("artifacts_after", None)
    return Advancement(
        checkpoint=checkpoint(run_id, version, status=status, step=f"step-{version}", **kw),
        expected_version=version - 1,
        new_references=refs,
        receipt=receipt,
        ttl=ttl,
        artifacts_after=after,
    )


def receipt(event_id: str = "evt-1", version: int = 2, *, applied: bool = True) -> EventReceipt:
    return EventReceipt(
        event_id=event_id,
        type="approval.granted",
        fingerprint="f" * 64,
        applied=applied,
        received_at=NOW,
        version=version,
    )


def operation(status: OperationStatus, ref: str | None = None) -> Operation:
    return Operation(
        operation_id="op-1",
        status=status,
        result_ref=ref,
        result_sha256=None,
        updated_at=NOW,
    )


def created(store: RunStore, run_id: str = "run-1", tenant: str = "acme", **kw: Any) -> None:
    store.create(tenant, checkpoint(run_id, **kw), fingerprint="fp-" + run_id)


def refused(fn: Callable[[], object]) -> ConditionFailed:
    with pytest.raises(ConditionFailed) as raised:
        fn()
    return raised.value


# ---------------------------------------------------------------------- create


def test_a_created_run_is_its_head_and_its_first_version(store: RunStore) -> None:
    created(store, state={"nested": {"x": None}, "n": 3})
    head = store.head("acme", "run-1", now=NOW)
    assert head is not None
    assert head.checkpoint == checkpoint(state={"nested": {"x": None}, "n": 3})
    assert (head.fingerprint, head.ttl) == ("fp-run-1", None)
    assert store.version("acme", "run-1", 1, now=NOW) == head.checkpoint
    assert store.version("acme", "run-1", 2, now=NOW) is None
    assert store.operations("acme", "run-1", now=NOW) == []
    assert store.head("acme", "run-2", now=NOW) is None


def test_creating_a_run_id_that_is_kept_is_refused_and_changes_nothing(
    store: RunStore,
) -> None:
    created(store)
    again = refused(lambda: store.create("acme", checkpoint(step="other"), "fp-other"))
    assert again.causes == {Conflict.EXISTS}
    head = store.head("acme", "run-1", now=NOW)
    assert head is not None and (head.fingerprint, head.checkpoint.step) == ("fp-run-1", "created")


def test_an_expired_run_id_stays_taken_until_its_records_are_gone(backend: Backend) -> None:
    store = backend.store
    created(store)
    store.advance("acme", step_to(2, status=RunStatus.SUCCEEDED, ttl=TTL))
    assert store.head("acme", "run-1", now=LATER) is None  # expired: never served
    assert refused(lambda: created(store)).causes == {Conflict.EXISTS}
    assert store.retain("acme", "run-1", TTL) == 1  # version 1
    assert backend.sweep(TTL + 1) == 3
    created(store)  # once the store's expiry deleted them, the id is free again
    head = store.head("acme", "run-1", now=LATER)
    assert head is not None and head.checkpoint.version == 1


def test_of_concurrent_creates_of_one_run_exactly_one_wins(store: RunStore) -> None:
    outcomes = _race(16, lambda i: store.create("acme", checkpoint(step=f"c-{i}"), f"fp-{i}"))
    assert outcomes.count("won") == 1
    assert outcomes.count(frozenset({Conflict.EXISTS})) == 15
    head = store.head("acme", "run-1", now=NOW)
    assert head is not None and head.fingerprint == f"fp-{head.checkpoint.step[2:]}"


# ---------------------------------------------------------------------- advance


def test_an_advance_at_the_expected_version_moves_the_head_and_keeps_history(
    store: RunStore,
) -> None:
    created(store)
    store.advance("acme", step_to(2))
    store.advance("acme", step_to(3))
    head = store.head("acme", "run-1", now=NOW)
    assert head is not None
    assert head.checkpoint == checkpoint(version=3, status=RunStatus.RUNNING, step="step-3")
    assert head.fingerprint == "fp-run-1"  # the create's fingerprint survives advances
    assert [store.version("acme", "run-1", v, now=NOW) for v in (1, 2)] == [
        checkpoint(),
        checkpoint(version=2, status=RunStatus.RUNNING, step="step-2"),
    ]


def test_an_advance_at_a_stale_version_is_refused_and_writes_nothing(
    store: RunStore,
) -> None:
    created(store)
    store.advance("acme", step_to(2))
    stale = Advancement(
        checkpoint=checkpoint(version=3, status=RunStatus.FAILED, step="late"),
        expected_version=1,
    )
    assert refused(lambda: store.advance("acme", stale)).causes == {Conflict.VERSION}
    head = store.head("acme", "run-1", now=NOW)
    assert head is not None and head.checkpoint.version == 2
    assert store.version("acme", "run-1", 3, now=NOW) is None


def test_advancing_an_absent_run_is_a_version_conflict(store: RunStore) -> None:
    assert refused(lambda: store.advance("acme", step_to(2))).causes == {Conflict.VERSION}
    assert store.head("acme", "run-1", now=NOW) is None
    assert store.version("acme", "run-1", 2, now=NOW) is None


def test_a_new_reference_counts_on_a_committed_artifact_in_the_same_commit(
    backend: Backend,
) -> None:
    store = backend.store
    created(store)
    backend.commit_artifact("acme", "u-1", "art-1", SHA)
    ref = ArtifactRef(artifact_id="art-1", sha256=SHA)
    store.advance("acme", step_to(2, refs=[ref], new_references=[ref]))
    assert backend.references("acme", "u-1", "art-1") == {"run:run-1"}
    head = store.head("acme", "run-1", now=NOW)
    assert head is not None and head.checkpoint.artifact_refs == [ref]


@pytest.mark.parametrize(
    "case", ["uncommitted", "other digest", "other subject's", "other tenant's"]
)
def test_a_reference_to_an_artifact_that_is_not_committed_with_its_digest_is_refused(
    backend: Backend, case: str
) -> None:
    store = backend.store
    created(store)
    backend.commit_artifact("acme", "u-1", "good", SHA)
    if case == "other digest":
        backend.commit_artifact("acme", "u-1", "bad", OTHER_SHA)
    if case == "other subject's":
        backend.commit_artifact("acme", "u-2", "bad", SHA)
    if case == "other tenant's":
        backend.commit_artifact("globex", "u-1", "bad", SHA)
    refs = [ArtifactRef(artifact_id="good", sha256=SHA), ArtifactRef(artifact_id="bad", sha256=SHA)]
    err = refused(lambda: store.advance("acme", step_to(2, refs=refs, new_references=refs)))
    assert isinstance(err, ArtifactsNotCommitted)
    assert err.causes == {Conflict.ARTIFACT}
    assert err.artifact_ids == ("bad",)
    # Nothing of the advance was written, not even the good artifact's reference.
    assert backend.references("acme", "u-1", "good") == set()
    head = store.head("acme", "run-1", now=NOW)
    assert head is not None and head.checkpoint.version == 1
    assert store.version("acme", "run-1", 2, now=NOW) is None


def test_causes_refused_together_are_reported_together(backend: Backend) -> None:
    store = backend.store
    created(store)
    store.advance("acme", step_to(2))
    ref = ArtifactRef(artifact_id="missing", sha256=SHA)
    late = Advancement(
        checkpoint=checkpoint(version=2, refs=[ref]), expected_version=1, new_references=[ref]
    )
    err = refused(lambda: store.advance("acme", late))
    assert isinstance(err, ArtifactsNotCommitted)
    assert err.causes == {Conflict.ARTIFACT, Conflict.VERSION}


def test_an_advance_commits_its_events_receipt_once(store: RunStore) -> None:
    created(store)
    store.advance("acme", step_to(2, receipt=receipt()))
    assert store.receipt("acme", "run-1", "evt-1", now=NOW) == receipt()
    again = refused(lambda: store.advance("acme", step_to(3, receipt=receipt(version=3))))
    assert again.causes == {Conflict.IDEMPOTENCY}
    head = store.head("acme", "run-1", now=NOW)
    assert head is not None and head.checkpoint.version == 2


def test_of_64_workers_at_one_expected_version_exactly_one_advances(store: RunStore) -> None:
    """Real threads on SQLite (a connection each, its write lock deciding); serialised
    calls on moto (see the module docstring)."""
    created(store)
    store.advance("acme", step_to(2))

    def advance(i: int) -> None:
        cp = checkpoint(version=3, status=RunStatus.RUNNING, step=f"worker-{i}")
        store.advance("acme", Advancement(checkpoint=cp, expected_version=2))

    outcomes = _race(64, advance)
    assert outcomes.count("won") == 1
    assert outcomes.count(frozenset({Conflict.VERSION})) == 63
    head = store.head("acme", "run-1", now=NOW)
    assert head is not None and head.checkpoint.version == 3
    winner = outcomes.index("won")
    assert head.checkpoint.step == f"worker-{winner}"
    assert store.version("acme", "run-1", 3, now=NOW) == head.checkpoint


# ---------------------------------------------------------------------- events


def test_an_event_without_effect_is_recorded_at_the_current_version_only(
    store: RunStore,
) -> None:
    created(store)
    store.record_event("acme", "run-1", receipt(version=1, applied=False), at_version=1)
    assert store.receipt("acme", "run-1", "evt-1", now=NOW) == receipt(version=1, applied=False)
    duplicate = refused(
        lambda: store.record_event("acme", "run-1", receipt(version=1), at_version=1)
    )
    assert duplicate.causes == {Conflict.IDEMPOTENCY}
    store.advance("acme", step_to(2))
    stale = refused(lambda: store.record_event("acme", "run-1", receipt("evt-2", 1), at_version=1))
    assert stale.causes == {Conflict.VERSION}
    assert store.receipt("acme", "run-1", "evt-2", now=NOW) is None
    absent = refused(lambda: store.record_event("acme", "run-9", receipt("evt-3", 1), at_version=1))
    assert absent.causes == {Conflict.VERSION}
    assert store.receipt("acme", "run-9", "evt-3", now=NOW) is None


def _ids(page: tuple[list[EventReceipt], str | None]) -> tuple[list[str], str | None]:
    return [r.event_id for r in page[0]], page[1]


def test_a_runs_receipts_are_listed_by_event_id_in_pages(store: RunStore) -> None:
    created(store)
    assert store.receipts("acme", "run-1", now=NOW) == ([], None)
    # An applied event (with its advance) and events recorded without effect, out of order.
    store.advance("acme", step_to(2, receipt=receipt("evt-c")))
    for event_id in ("evt-a", "evt-e", "evt-b", "evt-d"):
        store.record_event("acme", "run-1", receipt(event_id, 2, applied=False), at_version=2)
    everything = store.receipts("acme", "run-1", now=NOW)
    assert _ids(everything) == (["evt-a", "evt-b", "evt-c", "evt-d", "evt-e"], None)
    # Each receipt as stored: ids, type, time, fingerprint and effect.
    assert everything[0][2] == receipt("evt-c")
    assert everything[0][0] == receipt("evt-a", 2, applied=False)

    first = store.receipts("acme", "run-1", now=NOW, limit=2)
    assert _ids(first) == (["evt-a", "evt-b"], "evt-b")
    second = store.receipts("acme", "run-1", now=NOW, limit=2, cursor=first[1])
    assert _ids(second) == (["evt-c", "evt-d"], "evt-d")
    last = store.receipts("acme", "run-1", now=NOW, limit=2, cursor=second[1])
    assert _ids(last) == (["evt-e"], None)
    # A page that takes the rest exactly is not followed by an empty one.
    assert _ids(store.receipts("acme", "run-1", now=NOW, limit=5)) == (
        ["evt-a", "evt-b", "evt-c", "evt-d", "evt-e"],
        None,
    )
    assert _ids(store.receipts("acme", "run-1", now=NOW, limit=1, cursor="evt-d")) == (
        ["evt-e"],
        None,
    )
    # The cursor need not be a receipt's id: listing resumes after it.
    assert _ids(store.receipts("acme", "run-1", now=NOW, limit=2, cursor="evt-bb")) == (
        ["evt-c", "evt-d"],
        "evt-d",
    )
    assert store.receipts("acme", "run-1", now=NOW, cursor="evt-e") == ([], None)
    # Another run's receipts are its own.
    created(store, "run-2")
    assert store.receipts("acme", "run-2", now=NOW) == ([], None)
    assert store.receipts("acme", "run-9", now=NOW) == ([], None)


def test_expired_receipts_are_skipped_and_pages_stay_full(store: RunStore) -> None:
    """A receipt past its expiry is never listed, whatever the store's TTL has deleted so
    far; a page is still full when expired receipts lie among live ones."""
    created(store)
    for event_id in ("evt-a", "evt-b", "evt-c", "evt-d", "evt-e"):
        expiring = event_id in ("evt-b", "evt-c")
        kept = replace(receipt(event_id, 1, applied=False), ttl=TTL if expiring else None)
        store.record_event("acme", "run-1", kept, at_version=1)
    assert _ids(store.receipts("acme", "run-1", now=NOW, limit=3)) == (
        ["evt-a", "evt-b", "evt-c"],
        "evt-c",
    )
    first = store.receipts("acme", "run-1", now=LATER, limit=2)
    assert _ids(first) == (["evt-a", "evt-d"], "evt-d")
    second = store.receipts("acme", "run-1", now=LATER, limit=2, cursor=first[1])
    assert _ids(second) == (["evt-e"], None)
    assert _ids(store.receipts("acme", "run-1", now=LATER, limit=1, cursor="evt-a")) == (
        ["evt-d"],
        "evt-d",
    )


def test_receipts_list_in_byte_order_of_their_ids(store: RunStore) -> None:
    """Event ids are any text: both stores order them by their UTF-8 bytes."""
    created(store)
    ids = ["Z", "a", "a#b", "a-b", "é", "日本", "~"]
    for event_id in reversed(ids):
        store.record_event("acme", "run-1", receipt(event_id, 1, applied=False), at_version=1)
    expected = sorted(ids, key=lambda i: i.encode())
    assert _ids(store.receipts("acme", "run-1", now=NOW)) == (expected, None)
    seen: list[str] = []
    cursor: str | None = None
    while True:
        page, cursor = store.receipts("acme", "run-1", now=NOW, limit=3, cursor=cursor)
        seen += [r.event_id for r in page]
        if cursor is None:
            break
    assert seen == expected


# ---------------------------------------------------------------------- operations


def test_an_operation_moves_only_from_the_status_it_was_read_in(store: RunStore) -> None:
    created(store)
    pending = operation(OperationStatus.PENDING)
    store.put_operation("acme", "run-1", pending, expected=None)
    assert store.operation("acme", "run-1", "op-1", now=NOW) == pending
    twice = refused(lambda: store.put_operation("acme", "run-1", pending, expected=None))
    assert twice.causes == {Conflict.EXISTS}
    done = operation(OperationStatus.COMMITTED, "tx-9")
    store.put_operation("acme", "run-1", done, expected=OperationStatus.PENDING)
    stale = refused(
        lambda: store.put_operation(
            "acme", "run-1", operation(OperationStatus.FAILED), expected=OperationStatus.PENDING
        )
    )
    assert stale.causes == {Conflict.STATE}
    assert store.operations("acme", "run-1", now=NOW) == [done]
    never = refused(
        lambda: store.put_operation(
            "acme",
            "run-1",
            pending.model_copy(update={"operation_id": "op-2"}),
            expected=OperationStatus.PENDING,
        )
    )
    assert never.causes == {Conflict.STATE}
    assert store.operation("acme", "run-1", "op-2", now=NOW) is None


def test_an_operation_of_an_absent_run_is_refused(store: RunStore) -> None:
    pending = operation(OperationStatus.PENDING)
    err = refused(lambda: store.put_operation("acme", "run-9", pending, expected=None))
    assert err.causes == {Conflict.ABSENT}
    assert store.operation("acme", "run-9", "op-1", now=NOW) is None


def test_operations_are_listed_by_id(store: RunStore) -> None:
    created(store)
    for op_id in ("b", "c", "a"):
        op = operation(OperationStatus.PENDING).model_copy(update={"operation_id": op_id})
        store.put_operation("acme", "run-1", op, expected=None)
    assert [o.operation_id for o in store.operations("acme", "run-1", now=NOW)] == ["a", "b", "c"]


def test_of_concurrent_first_records_of_an_operation_exactly_one_wins(store: RunStore) -> None:
    created(store)

    def record(i: int) -> None:
        op = operation(OperationStatus.COMMITTED, f"tx-{i}")
        store.put_operation("acme", "run-1", op, expected=None)

    outcomes = _race(16, record)
    assert outcomes.count("won") == 1
    assert outcomes.count(frozenset({Conflict.EXISTS})) == 15
    found = store.operation("acme", "run-1", "op-1", now=NOW)
    assert found is not None and found.result_ref == f"tx-{outcomes.index('won')}"


# ---------------------------------------------------------------------- retention and expiry


def test_a_finished_runs_records_all_take_its_retention(backend: Backend) -> None:
    store = backend.store
    created(store)
    store.put_operation("acme", "run-1", operation(OperationStatus.PENDING), expected=None)
    store.advance("acme", step_to(2, receipt=receipt()))
    store.advance("acme", step_to(3, status=RunStatus.SUCCEEDED, ttl=TTL))
    # Head and version 3 carry it already; version 1, 2, the operation and the receipt not.
    assert store.retain("acme", "run-1", TTL) == 4
    assert store.retain("acme", "run-1", TTL) == 0  # idempotent
    before = NOW + timedelta(hours=23)
    head = store.head("acme", "run-1", now=before)
    assert head is not None and head.ttl == TTL
    assert store.receipt("acme", "run-1", "evt-1", now=before) is not None
    # Expiry is checked on read, whatever the store's own TTL has deleted so far.
    assert store.head("acme", "run-1", now=LATER) is None
    assert [store.version("acme", "run-1", v, now=LATER) for v in (1, 2, 3)] == [None] * 3
    assert store.operations("acme", "run-1", now=LATER) == []
    assert store.operation("acme", "run-1", "op-1", now=LATER) is None
    assert store.receipt("acme", "run-1", "evt-1", now=LATER) is None
    assert _ids(store.receipts("acme", "run-1", now=before)) == (["evt-1"], None)
    assert store.receipts("acme", "run-1", now=LATER) == ([], None)
    assert backend.records() == 6  # still there until the sweep
    assert backend.sweep(TTL - 1) == 0
    assert backend.sweep(TTL + 1) == 6
    assert backend.records() == 0


def test_an_active_runs_records_never_expire(backend: Backend) -> None:
    store = backend.store
    created(store)
    store.advance("acme", step_to(2, receipt=receipt()))
    store.put_operation("acme", "run-1", operation(OperationStatus.PENDING), expected=None)
    far = NOW + timedelta(days=3650)
    assert backend.sweep(int(far.timestamp())) == 0
    head = store.head("acme", "run-1", now=far)
    assert head is not None and head.ttl is None
    assert store.operation("acme", "run-1", "op-1", now=far) is not None


def test_an_operation_given_a_retention_expires_with_it(store: RunStore) -> None:
    created(store)
    op = operation(OperationStatus.PENDING)
    store.put_operation("acme", "run-1", op, expected=None, ttl=TTL)
    assert store.operation("acme", "run-1", "op-1", now=NOW) == op
    assert store.operation("acme", "run-1", "op-1", now=LATER) is None


# ---------------------------------------------------------------------- isolation, forget


def test_another_tenant_never_sees_a_run(store: RunStore) -> None:
    created(store)
    store.advance("acme", step_to(2, receipt=receipt()))
    store.put_operation("acme", "run-1", operation(OperationStatus.PENDING), expected=None)
    assert store.head("globex", "run-1", now=NOW) is None
    assert store.version("globex", "run-1", 1, now=NOW) is None
    assert store.operations("globex", "run-1", now=NOW) == []
    assert store.operation("globex", "run-1", "op-1", now=NOW) is None
    assert store.receipt("globex", "run-1", "evt-1", now=NOW) is None
    assert store.receipts("globex", "run-1", now=NOW) == ([], None)
    assert refused(lambda: store.advance("globex", step_to(3))).causes == {Conflict.VERSION}
    assert store.retain("globex", "run-1", TTL) == 0
    assert store.forget_subject("globex", "u-1", NOW).runs == 0
    # The same run id is another tenant's own run.
    created(store, tenant="globex")
    mine = store.head("acme", "run-1", now=NOW)
    theirs = store.head("globex", "run-1", now=NOW)
    assert mine is not None and theirs is not None
    assert (mine.checkpoint.version, theirs.checkpoint.version) == (2, 1)
    assert store.head("acme", "run-1", now=NOW + timedelta(days=3650)) is not None


def test_forgetting_a_subject_deletes_every_record_of_their_runs_only(backend: Backend) -> None:
    store = backend.store
    for run_id in ("run-1", "run-2"):
        created(store, run_id)
        store.advance("acme", step_to(2, run_id, receipt=receipt()))
        op = operation(OperationStatus.PENDING)
        store.put_operation("acme", run_id, op, expected=None)
    created(store, "run-3", subject="u-2")
    created(store, "run-1", tenant="globex")
    assert backend.records() == 2 * 5 + 2 + 2

    gone = store.forget_subject("acme", "u-1", NOW)

    assert (gone.runs, gone.records) == (2, 10)
    assert backend.records() == 4
    for run_id in ("run-1", "run-2"):
        assert store.head("acme", run_id, now=NOW) is None
        assert store.version("acme", run_id, 1, now=NOW) is None
        assert store.operations("acme", run_id, now=NOW) == []
        assert store.receipt("acme", run_id, "evt-1", now=NOW) is None
        assert store.receipts("acme", run_id, now=NOW) == ([], None)
    assert store.head("acme", "run-3", now=NOW) is not None
    assert store.head("globex", "run-1", now=NOW) is not None
    again = store.forget_subject("acme", "u-1", NOW)
    assert (again.runs, again.records) == (0, 0)


def test_a_forget_leaves_the_runs_created_after_it(backend: Backend) -> None:
    """A forget at ``NOW`` covers the runs created by then, each with every record (an
    advance after the forget included); a run created after it stays, whenever the
    purge runs."""
    store = backend.store
    created(store, "run-old")
    store.advance("acme", step_to(2, "run-old", receipt=receipt()))
    created(store, "run-new", created_at=NOW + timedelta(milliseconds=1))
    store.put_operation("acme", "run-new", operation(OperationStatus.PENDING), expected=None)

    gone = store.forget_subject("acme", "u-1", NOW)

    assert (gone.runs, gone.records) == (1, 4)  # head, two versions, the receipt
    assert store.head("acme", "run-old", now=NOW) is None
    kept = store.head("acme", "run-new", now=NOW)
    assert kept is not None and kept.checkpoint.version == 1
    assert [o.operation_id for o in store.operations("acme", "run-new", now=NOW)] == ["op-1"]
    assert store.forget_subject("acme", "u-1", NOW + timedelta(milliseconds=1)).runs == 1


def _forget(store: RunStore, retired: int) -> None:
    """Move u-1's epoch past ``retired``, as a forget does (the memory store keeps it)."""
    db: Any = store.db  # type: ignore[attr-defined]
    memory: Any = (
        DynamoMemoryStore(db) if isinstance(store, DynamoRunStore) else SqliteMemoryStore(db)
    )
    memory.raise_epoch("acme", "u-1", retired, "del-1", NOW)


def test_every_write_of_a_run_commits_only_under_its_epoch_and_the_purge_goes_by_it(
    backend: Backend,
) -> None:
    """A run's writes are conditioned on its subject's epoch: after a forget each one is
    refused (``EPOCH``), nothing written. The purge takes the runs of the retired epoch
    whatever their clocks said, and leaves those of the next one."""
    store = backend.store
    under = checkpoint("run-old", created_at=NOW + timedelta(seconds=5)).model_copy(
        update={"subject_epoch": 0}
    )
    store.create("acme", under, "fp")
    _forget(store, 0)

    later = under.model_copy(update={"version": 2, "status": RunStatus.RUNNING})
    step = Advancement(checkpoint=later, expected_version=1)
    assert Conflict.EPOCH in refused(lambda: store.advance("acme", step))
    gone_epoch = SubjectEpoch("u-1", 0)
    assert Conflict.EPOCH in refused(
        lambda: store.put_operation(
            "acme", "run-old", operation(OperationStatus.PENDING), expected=None, epoch=gone_epoch
        )
    )
    assert Conflict.EPOCH in refused(
        lambda: store.record_event("acme", "run-old", receipt(), at_version=1, epoch=gone_epoch)
    )
    stale = checkpoint("run-late").model_copy(update={"subject_epoch": 0})
    assert Conflict.EPOCH in refused(lambda: store.create("acme", stale, "fp"))
    fresh = checkpoint("run-new", created_at=NOW - timedelta(seconds=5))
    store.create("acme", fresh.model_copy(update={"subject_epoch": 1}), "fp")

    gone = store.forget_subject("acme", "u-1", NOW, retired_epoch=0)

    assert (gone.runs, gone.records) == (1, 2)  # run-old: head and version 1
    assert store.head("acme", "run-old", now=NOW) is None
    assert store.head("acme", "run-late", now=NOW) is None
    assert store.head("acme", "run-new", now=NOW) is not None


def test_an_advance_may_not_name_an_artifact_made_by_the_last_forget(backend: Backend) -> None:
    store = backend.store
    created(store)
    backend.commit_artifact("acme", "u-1", "art-old", SHA)
    backend.commit_artifact("acme", "u-1", "art-new", SHA, NOW + timedelta(milliseconds=1))
    old = ArtifactRef(artifact_id="art-old", sha256=SHA)
    new = ArtifactRef(artifact_id="art-new", sha256=SHA)

    with pytest.raises(ArtifactsNotCommitted) as refused_old:
        store.advance("acme", step_to(2, new_references=[old, new], artifacts_after=NOW))
    assert list(refused_old.value.artifact_ids) == ["art-old"]
    assert backend.references("acme", "u-1", "art-new") == set()  # rolled back together

    store.advance("acme", step_to(2, new_references=[new], artifacts_after=NOW))
    assert backend.references("acme", "u-1", "art-new") == {run_reference("run-1")}


# ---------------------------------------------------------------------- helpers


def _race(n: int, fn: Callable[[int], None]) -> list[object]:
    """Run ``fn(i)`` on ``n`` threads released at once by a barrier; each outcome is
    "won" or the causes of its ``ConditionFailed``."""
    barrier = threading.Barrier(n)
    outcomes: list[object] = [None] * n
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        barrier.wait()
        try:
            fn(i)
            outcomes[i] = "won"
        except ConditionFailed as err:
            outcomes[i] = err.causes
        except BaseException as err:  # reported below
            errors.append(err)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    return outcomes


# ---------------------------------------------------------------------- the service on each


class NeverForgotten:
    def forgotten_at(self, tenant_id: str, subject_id: str) -> datetime | None:
        return None

    def forget_state(self, tenant_id: str, subject_id: str) -> ForgetState:
        return ForgetState(epoch=0, forgotten_at=None)


def test_the_run_service_keeps_its_rules_on_either_store(backend: Backend) -> None:
    """The service speaks only the port: the same rules hold whichever store is wired."""
    from memvault.config import Settings
    from memvault.models.access import Scope
    from memvault.services.runs import RunService
    from memvault_wire.errors import ArtifactNotCommitted, IdempotencyKeyReused, VersionConflict
    from memvault_wire.run import Advance, CreateRun, RecordOperation, RunEvent
    from tests.support.harness import FakeClock, ctx

    runs = RunService(backend.store, Settings(), FakeClock(NOW), NeverForgotten())
    me = ctx(scopes=frozenset({Scope.RUNS_WRITE}))
    body = CreateRun(subject_id="u-1", plan_version="p1")
    assert runs.create(me, "r", body)[1] and not runs.create(me, "r", body)[1]
    with pytest.raises(IdempotencyKeyReused):
        runs.create(me, "r", CreateRun(subject_id="u-1", plan_version="p2"))
    runs.advance(me, "r", Advance(expected_version=1, status=RunStatus.RUNNING, step="s"))
    with pytest.raises(VersionConflict):
        runs.advance(me, "r", Advance(expected_version=1, status=RunStatus.RUNNING, step="s"))
    backend.commit_artifact("acme", "u-1", "art-1", SHA)
    for sha in (OTHER_SHA, SHA):
        ref = ArtifactRef(artifact_id="art-1", sha256=sha)
        advance = Advance(
            expected_version=2, status=RunStatus.RUNNING, step="t", artifact_refs=[ref]
        )
        if sha == OTHER_SHA:
            with pytest.raises(ArtifactNotCommitted):
                runs.advance(me, "r", advance)
        else:
            runs.advance(me, "r", advance)
    assert backend.references("acme", "u-1", "art-1") == {"run:u-1/r"}  # under its subject
    runs.record_operation(me, "r", "op", RecordOperation(status=OperationStatus.PENDING))
    cancel = RunEvent(event_id="e", type="cancel.requested")
    assert runs.deliver_event(me, "r", cancel)["applied"]
    assert runs.deliver_event(me, "r", cancel)["duplicate"]
    final = runs.get(me, "r")
    assert (final.status, final.version, [o.operation_id for o in final.operations]) == (
        RunStatus.CANCELLED,
        4,
        ["op"],
    )
    assert runs.version(me, "r", 3).artifact_refs[0].sha256 == SHA
