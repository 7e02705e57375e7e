"""The artifact metadata store's contract, against both adapters: DynamoDB (moto) and
SQLite (a file under ``tmp_path``). Every test runs on both.

moto's in-process DynamoDB is not atomic under threads (two conditional writes can both
pass their condition), so the DynamoDB adapter runs over ``SerializedClient``: the
concurrency tests then prove that our conditions let exactly one writer win, not that
moto is atomic. On SQLite the threads really race, each on its own connection.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from memvault.storage.dynamodb import artifacts as dynamo_artifacts
from memvault.storage.dynamodb.artifacts import DynamoArtifactStore
from memvault.storage.dynamodb.dynamo import Dynamo
from memvault.storage.dynamodb.memory import DynamoMemoryStore
from memvault.storage.dynamodb.tables import ALL_TABLES, create_tables, physical_name
from memvault.storage.ports.artifacts import ArtifactRecord, ArtifactStore, UploadReceipt
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.sqlite import artifacts as sqlite_artifacts
from memvault.storage.sqlite.artifacts import SqliteArtifactStore
from memvault.storage.sqlite.db import Database
from memvault.storage.sqlite.memory import SqliteMemoryStore
from memvault.storage.sqlite.schema import MIGRATIONS
from memvault_wire.artifact import ArtifactState
from memvault_wire.memory import Sensitivity
from tests.support.backends import STORES
from tests.support.harness import SerializedClient

NOW = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
SHA = "ab" * 32
PREFIX = "port-"


def epoch(ts: datetime) -> int:
    return int(ts.timestamp())


@dataclass
class Rig:
    kind: str
    store: ArtifactStore
    #: Runs the adapter's module-level ``add_reference`` inside a transaction of the
    #: adapter's own kind, next to another write that fails when ``fail_with_it``.
    add_in_transaction: Callable[..., bool]


def _dynamo_rig() -> Rig:
    client = SerializedClient(boto3.client("dynamodb", region_name="us-east-1"))
    create_tables(client, PREFIX)
    names = {spec.name: physical_name(spec, PREFIX) for spec in ALL_TABLES}
    db = Dynamo(client, names)

    def add_in_transaction(
        tenant: str,
        subject: str,
        artifact_id: str,
        ref: str,
        sha256: str | None,
        fail: bool,
        made_after: datetime | None = None,
        made_under: int | None = None,
    ) -> bool:
        items = [
            dynamo_artifacts.add_reference(
                names["artifacts"],
                tenant,
                subject,
                artifact_id,
                ref,
                sha256,
                made_after,
                made_under,
            ),
            {  # the caller's own write: a record that must not exist yet
                "Put": {
                    "TableName": names["artifacts"],
                    "Item": {"pk": {"S": f"{tenant}#{subject}"}, "sk": {"S": "OTHER#1"}},
                    "ConditionExpression": (
                        "attribute_exists(pk)" if fail else "attribute_not_exists(pk)"
                    ),
                }
            },
        ]
        try:
            client.transact_write_items(TransactItems=items)
        except client.exceptions.TransactionCanceledException:
            return False
        return True

    return Rig("dynamodb", DynamoArtifactStore(db), add_in_transaction)


def _sqlite_rig(path: Path) -> tuple[Rig, Database]:
    db = Database(path, MIGRATIONS)

    class CallerFailed(Exception):
        pass

    def add_in_transaction(
        tenant: str,
        subject: str,
        artifact_id: str,
        ref: str,
        sha256: str | None,
        fail: bool,
        made_after: datetime | None = None,
        made_under: int | None = None,
    ) -> bool:
        try:
            with db.write() as conn:
                if not sqlite_artifacts.add_reference(
                    conn, tenant, subject, artifact_id, ref, sha256, made_after, made_under
                ):
                    raise CallerFailed
                if fail:
                    raise CallerFailed
        except CallerFailed:
            return False
        return True

    return Rig("sqlite", SqliteArtifactStore(db), add_in_transaction), db


@pytest.fixture(params=STORES)
def rig(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Rig]:
    if request.param == "dynamodb":
        with mock_aws():
            yield _dynamo_rig()
    else:
        made, db = _sqlite_rig(tmp_path / "memvault.db")
        yield made
        db.close()


def record(
    artifact_id: str = "art_1", tenant: str = "acme", subject: str = "u-1", **kw: Any
) -> ArtifactRecord:
    fields: dict[str, Any] = {
        "tenant_id": tenant,
        "subject_id": subject,
        "artifact_id": artifact_id,
        "media_type": "text/plain",
        "size_bytes": 1234,
        "sha256": SHA,
        "state": ArtifactState.STAGED,
        "sensitivity": Sensitivity.INTERNAL,
        "created_at": NOW,
        "created_by": "agent-1",
        "name": "report.txt",
        "retention_days": 30,
        "staged_until": epoch(NOW + timedelta(hours=1)),
        **kw,
    }
    return ArtifactRecord(**fields)


def receipt(request_id: str = "req-1", artifact_id: str = "art_1", **kw: Any) -> UploadReceipt:
    fields: dict[str, Any] = {
        "request_id": request_id,
        "artifact_id": artifact_id,
        "fingerprint": "fp-1",
        "expires_at": epoch(NOW + timedelta(hours=1)),
        **kw,
    }
    return UploadReceipt(**fields)


def stage(
    rig: Rig, artifact_id: str = "art_1", request_id: str | None = None, **kw: Any
) -> ArtifactRecord:
    made = record(artifact_id, **kw)
    rig.store.stage(made, receipt(request_id or f"req-{artifact_id}", artifact_id), NOW)
    return made


def committed(rig: Rig, artifact_id: str = "art_1", **kw: Any) -> ArtifactRecord:
    made = stage(rig, artifact_id, **kw)
    rig.store.commit(
        made.tenant_id, made.subject_id, artifact_id, version="v1", at=NOW, retain_until=None
    )
    return made


def state(
    rig: Rig, artifact_id: str = "art_1", tenant: str = "acme", subject: str = "u-1"
) -> ArtifactState | None:
    found = rig.store.artifact(tenant, subject, artifact_id)
    return found.state if found else None


def causes(call: Callable[[], object]) -> frozenset[Conflict]:
    with pytest.raises(ConditionFailed) as failed:
        call()
    return failed.value.causes


# ----------------------------------------------------------------------------- stage


def test_a_staged_artifact_reads_back_field_for_field(rig: Rig) -> None:
    made = stage(rig)
    assert rig.store.artifact("acme", "u-1", "art_1") == made
    assert rig.store.receipt("acme", "u-1", "req-art_1", NOW) == receipt("req-art_1")


def test_a_request_id_taken_by_a_live_receipt_is_refused_and_nothing_written(rig: Rig) -> None:
    stage(rig, "art_1", request_id="req-1")
    assert causes(lambda: stage(rig, "art_2", request_id="req-1")) == {Conflict.IDEMPOTENCY}
    assert rig.store.artifact("acme", "u-1", "art_2") is None
    found = rig.store.receipt("acme", "u-1", "req-1", NOW)
    assert found is not None and found.artifact_id == "art_1"


def test_an_artifact_id_taken_is_refused_and_nothing_written(rig: Rig) -> None:
    stage(rig, "art_1", request_id="req-1")
    assert causes(lambda: stage(rig, "art_1", request_id="req-2")) == {Conflict.EXISTS}
    assert rig.store.receipt("acme", "u-1", "req-2", NOW) is None


def test_an_expired_receipt_is_absent_on_read_and_its_request_id_free_again(rig: Rig) -> None:
    stage(rig, "art_1", request_id="req-1")
    later = NOW + timedelta(hours=1, seconds=1)
    assert rig.store.receipt("acme", "u-1", "req-1", NOW + timedelta(hours=1)) is not None
    assert rig.store.receipt("acme", "u-1", "req-1", later) is None  # whatever TTL did

    again = record("art_2", created_at=later)
    rig.store.stage(again, receipt("req-1", "art_2", expires_at=epoch(later) + 3600), later)
    found = rig.store.receipt("acme", "u-1", "req-1", later)
    assert found is not None and found.artifact_id == "art_2"


# ----------------------------------------------------------------------------- isolation


def test_another_tenant_or_subject_never_sees_a_row(rig: Rig) -> None:
    committed(rig)
    rig.store.add_reference("acme", "u-1", "art_1", "memory:c1")
    for tenant, subject in (("globex", "u-1"), ("acme", "u-2")):
        assert rig.store.artifact(tenant, subject, "art_1") is None
        assert rig.store.receipt(tenant, subject, "req-art_1", NOW) is None
        assert causes(lambda t=tenant, s=subject: rig.store.mark_deleted(t, s, "art_1")) == {
            Conflict.ABSENT
        }
        assert not rig.store.release(tenant, subject, "art_1", "memory:c1")
        assert rig.store.forget_subject(tenant, subject, NOW) == []
    kept = rig.store.artifact("acme", "u-1", "art_1")
    assert kept is not None and kept.state is ArtifactState.COMMITTED
    assert kept.referenced_by == {"memory:c1"}


def test_the_same_ids_under_two_tenants_are_two_artifacts(rig: Rig) -> None:
    stage(rig, tenant="acme")
    stage(rig, tenant="globex")
    rig.store.commit("globex", "u-1", "art_1", version="g1", at=NOW, retain_until=None)
    assert state(rig, tenant="acme") is ArtifactState.STAGED
    assert state(rig, tenant="globex") is ArtifactState.COMMITTED


# ----------------------------------------------------------------------------- commit


def test_commit_pins_the_version_once(rig: Rig) -> None:
    stage(rig)
    at = NOW + timedelta(minutes=5)
    rig.store.commit("acme", "u-1", "art_1", version="v7", at=at, retain_until=epoch(at) + 99)
    found = rig.store.artifact("acme", "u-1", "art_1")
    assert found is not None
    assert (found.state, found.version, found.committed_at) == (ArtifactState.COMMITTED, "v7", at)
    assert found.retain_until == epoch(at) + 99 and found.staged_until is None

    assert causes(
        lambda: rig.store.commit("acme", "u-1", "art_1", version="v8", at=at, retain_until=None)
    ) == {Conflict.STATE}
    again = rig.store.artifact("acme", "u-1", "art_1")
    assert again is not None and again.version == "v7"


def test_commit_of_an_absent_artifact_is_absent(rig: Rig) -> None:
    assert causes(
        lambda: rig.store.commit("acme", "u-1", "art_x", version="v", at=NOW, retain_until=None)
    ) == {Conflict.ABSENT}
    assert rig.store.artifact("acme", "u-1", "art_x") is None


# ----------------------------------------------------------------------------- references


def test_only_a_committed_artifact_with_the_right_digest_takes_a_reference(rig: Rig) -> None:
    stage(rig)
    assert causes(lambda: rig.store.add_reference("acme", "u-1", "art_1", "run:r1")) == {
        Conflict.ARTIFACT
    }
    rig.store.commit("acme", "u-1", "art_1", version="v1", at=NOW, retain_until=None)
    assert causes(
        lambda: rig.store.add_reference("acme", "u-1", "art_1", "run:r1", sha256="cd" * 32)
    ) == {Conflict.ARTIFACT}
    assert causes(lambda: rig.store.add_reference("acme", "u-1", "art_x", "run:r1")) == {
        Conflict.ARTIFACT
    }
    rig.store.add_reference("acme", "u-1", "art_1", "run:r1", sha256=SHA)
    rig.store.add_reference("acme", "u-1", "art_1", "run:r1", sha256=SHA)  # a retry
    rig.store.add_reference("acme", "u-1", "art_1", "memory:c1")
    found = rig.store.artifact("acme", "u-1", "art_1")
    assert found is not None and found.referenced_by == {"run:r1", "memory:c1"}


def test_a_reference_added_in_a_callers_transaction_commits_and_rolls_back_with_it(
    rig: Rig,
) -> None:
    committed(rig)
    assert not rig.add_in_transaction("acme", "u-1", "art_1", "memory:c1", None, True)
    found = rig.store.artifact("acme", "u-1", "art_1")
    assert found is not None and found.referenced_by == frozenset()

    assert rig.add_in_transaction("acme", "u-1", "art_1", "memory:c1", SHA, False)
    found = rig.store.artifact("acme", "u-1", "art_1")
    assert found is not None and found.referenced_by == {"memory:c1"}


def test_a_callers_transaction_naming_an_uncommitted_artifact_writes_nothing(rig: Rig) -> None:
    stage(rig)
    assert not rig.add_in_transaction("acme", "u-1", "art_1", "memory:c1", None, False)
    committed(rig, "art_2")
    assert not rig.add_in_transaction("acme", "u-1", "art_2", "run:r1", "cd" * 32, False)
    for artifact_id in ("art_1", "art_2"):
        found = rig.store.artifact("acme", "u-1", artifact_id)
        assert found is not None and found.referenced_by == frozenset()


# ----------------------------------------------------------------------------- deletion


def test_a_referenced_artifact_is_not_marked_deleted(rig: Rig) -> None:
    committed(rig)
    rig.store.add_reference("acme", "u-1", "art_1", "memory:c1")
    assert causes(lambda: rig.store.mark_deleted("acme", "u-1", "art_1")) == {Conflict.REFERENCED}
    assert state(rig) is ArtifactState.COMMITTED


def test_marking_deleted_happens_once(rig: Rig) -> None:
    stage(rig)
    rig.store.mark_deleted("acme", "u-1", "art_1")
    assert state(rig) is ArtifactState.DELETED
    assert causes(lambda: rig.store.mark_deleted("acme", "u-1", "art_1")) == {Conflict.ABSENT}
    assert causes(lambda: rig.store.mark_deleted("acme", "u-1", "art_x")) == {Conflict.ABSENT}
    assert rig.store.artifact("acme", "u-1", "art_x") is None  # no stub row was made


def test_a_delete_and_a_forget_record_when_the_upload_window_closed(rig: Rig) -> None:
    """A deleted row keeps when its upload window closed (``staged_until``): the service
    keeps the row, and purges what arrives under its key, until every upload URL issued
    by then has expired."""
    stage(rig, "art_1", staged_until=epoch(NOW + timedelta(days=1)))
    rig.store.mark_deleted("acme", "u-1", "art_1", at=NOW)
    found = rig.store.artifact("acme", "u-1", "art_1")
    assert found is not None and found.staged_until == epoch(NOW)
    committed(rig, "art_2")
    stage(rig, "art_3", request_id="req-3", staged_until=epoch(NOW + timedelta(days=1)))
    later = NOW + timedelta(minutes=5)
    rig.store.forget_subject("acme", "u-1", later)
    for artifact_id in ("art_2", "art_3"):
        found = rig.store.artifact("acme", "u-1", artifact_id)
        assert found is not None and found.staged_until == epoch(later), artifact_id


def test_the_last_release_of_a_committed_artifact_deletes_it(rig: Rig) -> None:
    committed(rig)
    rig.store.add_reference("acme", "u-1", "art_1", "memory:c1")
    rig.store.add_reference("acme", "u-1", "art_1", "run:r1")

    assert not rig.store.release("acme", "u-1", "art_1", "memory:c1")
    assert not rig.store.release("acme", "u-1", "art_1", "memory:c1")  # a retry: no change
    found = rig.store.artifact("acme", "u-1", "art_1")
    assert found is not None and found.state is ArtifactState.COMMITTED
    assert found.referenced_by == {"run:r1"}

    assert rig.store.release("acme", "u-1", "art_1", "run:r1")
    assert state(rig) is ArtifactState.DELETED
    assert not rig.store.release("acme", "u-1", "art_1", "run:r1")  # a retry: not again


def test_releasing_a_reference_of_a_staged_or_absent_artifact_deletes_nothing(rig: Rig) -> None:
    stage(rig)
    assert not rig.store.release("acme", "u-1", "art_1", "memory:c1")
    assert state(rig) is ArtifactState.STAGED
    assert not rig.store.release("acme", "u-1", "art_x", "memory:c1")
    assert rig.store.artifact("acme", "u-1", "art_x") is None


def test_only_a_deleted_row_is_removed(rig: Rig) -> None:
    committed(rig)
    assert not rig.store.remove("acme", "u-1", "art_1")
    assert state(rig) is ArtifactState.COMMITTED
    rig.store.mark_deleted("acme", "u-1", "art_1")
    assert rig.store.remove("acme", "u-1", "art_1")
    assert rig.store.artifact("acme", "u-1", "art_1") is None
    assert not rig.store.remove("acme", "u-1", "art_1")


# ----------------------------------------------------------------------------- sweeping


def test_the_sweep_lists_closed_staged_uploads_and_deleted_rows_of_every_tenant(
    rig: Rig,
) -> None:
    stage(rig, "art_open", staged_until=epoch(NOW + timedelta(hours=2)))
    stage(rig, "art_closed", staged_until=epoch(NOW - timedelta(seconds=1)))
    stage(rig, "art_other", tenant="globex", staged_until=epoch(NOW - timedelta(hours=1)))
    committed(rig, "art_kept", staged_until=epoch(NOW - timedelta(hours=1)))
    stage(rig, "art_gone")
    rig.store.mark_deleted("acme", "u-1", "art_gone")

    listed = {(r.tenant_id, r.artifact_id) for r in rig.store.sweepable(NOW)}
    assert listed == {("acme", "art_closed"), ("globex", "art_other"), ("acme", "art_gone")}


def test_claiming_a_staged_upload_needs_its_window_closed(rig: Rig) -> None:
    stage(rig, staged_until=epoch(NOW))
    assert not rig.store.claim_expired("acme", "u-1", "art_1", NOW)
    assert state(rig) is ArtifactState.STAGED
    assert rig.store.claim_expired("acme", "u-1", "art_1", NOW + timedelta(seconds=1))
    assert state(rig) is ArtifactState.DELETED
    assert not rig.store.claim_expired("acme", "u-1", "art_1", NOW + timedelta(seconds=1))


def test_a_commit_that_lands_first_keeps_its_artifact_from_the_sweeper(rig: Rig) -> None:
    stage(rig, staged_until=epoch(NOW - timedelta(seconds=1)))
    (listed,) = list(rig.store.sweepable(NOW))
    rig.store.commit("acme", "u-1", "art_1", version="v1", at=NOW, retain_until=None)
    assert not rig.store.claim_expired(listed.tenant_id, listed.subject_id, "art_1", NOW)
    assert state(rig) is ArtifactState.COMMITTED


def test_the_sweep_pages_through_many_rows(rig: Rig, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sqlite_artifacts, "SWEEP_BATCH", 3)
    for n in range(8):
        stage(rig, f"art_{n}", staged_until=epoch(NOW - timedelta(seconds=1)))
    assert sorted(r.artifact_id for r in rig.store.sweepable(NOW)) == [f"art_{n}" for n in range(8)]


# ----------------------------------------------------------------------------- forgetting


def test_forgetting_a_subject_deletes_every_artifact_of_theirs_referenced_or_not(
    rig: Rig,
) -> None:
    committed(rig, "art_1")
    rig.store.add_reference("acme", "u-1", "art_1", "memory:c1")
    stage(rig, "art_2", request_id="req-2")
    committed(rig, "art_3")
    rig.store.mark_deleted("acme", "u-1", "art_3")
    committed(rig, "art_9", subject="u-2")

    assert sorted(rig.store.forget_subject("acme", "u-1", NOW)) == ["art_1", "art_2", "art_3"]

    for artifact_id in ("art_1", "art_2", "art_3"):
        found = rig.store.artifact("acme", "u-1", artifact_id)
        assert found is not None and found.state is ArtifactState.DELETED
        assert found.referenced_by == frozenset()
    assert rig.store.receipt("acme", "u-1", "req-2", NOW) is None
    assert state(rig, "art_9", subject="u-2") is ArtifactState.COMMITTED
    # A retry finds the same rows (their objects may not be gone yet) and changes nothing.
    assert sorted(rig.store.forget_subject("acme", "u-1", NOW)) == ["art_1", "art_2", "art_3"]
    for artifact_id in ("art_1", "art_2", "art_3"):
        assert rig.store.remove("acme", "u-1", artifact_id)
    assert rig.store.forget_subject("acme", "u-1", NOW) == []


def test_a_forget_leaves_the_artifacts_made_after_it_with_their_receipts_and_references(
    rig: Rig,
) -> None:
    """A forget covers what the subject had by its time; an upload after it is another
    life of the subject, and its purge (whenever it runs) must not take it."""
    committed(rig, "art_1")
    rig.store.add_reference("acme", "u-1", "art_1", "memory:c1")
    after = NOW + timedelta(milliseconds=1)
    later = committed(rig, "art_2", request_id="req-2", created_at=after)
    rig.store.add_reference("acme", "u-1", "art_2", "memory:c2")
    stage(rig, "art_3", request_id="req-3", created_at=after)

    assert rig.store.forget_subject("acme", "u-1", NOW) == ["art_1"]

    assert state(rig, "art_1") is ArtifactState.DELETED
    assert rig.store.receipt("acme", "u-1", "req-art_1", NOW) is None
    kept = rig.store.artifact("acme", "u-1", "art_2")
    assert kept is not None and kept.state is ArtifactState.COMMITTED
    assert kept.referenced_by == {"memory:c2"} and kept.sha256 == later.sha256
    assert state(rig, "art_3") is ArtifactState.STAGED
    for request_id, artifact_id in (("req-2", "art_2"), ("req-3", "art_3")):
        found = rig.store.receipt("acme", "u-1", request_id, NOW)
        assert found is not None and found.artifact_id == artifact_id
    # A later forget covers them too.
    assert rig.store.forget_subject("acme", "u-1", after) == ["art_1", "art_2", "art_3"]


def test_a_reference_to_an_artifact_made_by_the_last_forget_is_refused(rig: Rig) -> None:
    """A version or checkpoint written after a forget may not name an artifact of the
    forget's (made at or before it): the reference's condition checks the making time."""
    committed(rig, "art_1")
    committed(rig, "art_2", request_id="req-2", created_at=NOW + timedelta(milliseconds=1))
    assert not rig.add_in_transaction("acme", "u-1", "art_1", "memory:c1", None, False, NOW)
    assert rig.add_in_transaction("acme", "u-1", "art_2", "memory:c2", None, False, NOW)
    first, second = (
        rig.store.artifact("acme", "u-1", "art_1"),
        rig.store.artifact("acme", "u-1", "art_2"),
    )
    assert first is not None and first.referenced_by == frozenset()
    assert second is not None and second.referenced_by == {"memory:c2"}


def _forget(rig: Rig, retired: int) -> None:
    """Move u-1's epoch past ``retired``, as a forget does (the memory store keeps it)."""
    db: Any = rig.store.db  # type: ignore[attr-defined]
    memory: Any = DynamoMemoryStore(db) if rig.kind == "dynamodb" else SqliteMemoryStore(db)
    memory.raise_epoch("acme", "u-1", retired, "del-1", NOW)


def test_an_artifact_is_staged_and_referenced_under_its_epoch_and_purged_by_it(
    rig: Rig,
) -> None:
    """Staging is conditioned on the subject's epoch (after a forget: ``EPOCH``, nothing
    written); a reference counts only on an artifact of the referencing record's epoch;
    the purge takes the artifacts of the retired epoch whatever their clocks said."""
    committed(rig, "art_1", created_at=NOW + timedelta(seconds=5), subject_epoch=0)
    _forget(rig, 0)  # the forget at NOW
    assert causes(lambda: stage(rig, "art_2", subject_epoch=0)) == {Conflict.EPOCH}
    assert rig.store.artifact("acme", "u-1", "art_2") is None
    later = NOW - timedelta(seconds=5)  # a clock behind the forget's
    committed(rig, "art_3", request_id="req-3", created_at=later, subject_epoch=1)

    early = NOW - timedelta(seconds=10)
    assert not rig.add_in_transaction(
        "acme", "u-1", "art_1", "memory:c1", None, False, early, made_under=1
    )
    assert rig.add_in_transaction("acme", "u-1", "art_3", "memory:c3", None, False, NOW, 1)
    assert rig.store.forget_subject("acme", "u-1", NOW, retired_epoch=0) == ["art_1"]
    assert state(rig, "art_1") is ArtifactState.DELETED
    assert state(rig, "art_3") is ArtifactState.COMMITTED


# ----------------------------------------------------------------------------- concurrency


def race(n: int, attempt: Callable[[int], None]) -> tuple[list[int], list[ConditionFailed]]:
    barrier = threading.Barrier(n)
    won: list[int] = []
    lost: list[ConditionFailed] = []
    errors: list[BaseException] = []
    lock = threading.Lock()

    def run(i: int) -> None:
        barrier.wait()
        try:
            attempt(i)
        except ConditionFailed as failed:
            with lock:
                lost.append(failed)
        except BaseException as err:  # surfaced below, not swallowed by the thread
            with lock:
                errors.append(err)
        else:
            with lock:
                won.append(i)

    threads = [threading.Thread(target=run, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    return won, lost


def test_of_concurrent_commits_exactly_one_pins_its_version(rig: Rig) -> None:
    stage(rig)
    won, lost = race(
        8,
        lambda i: rig.store.commit(
            "acme", "u-1", "art_1", version=f"v{i}", at=NOW, retain_until=None
        ),
    )
    assert len(won) == 1 and len(lost) == 7
    assert all(f.causes == {Conflict.STATE} for f in lost)
    found = rig.store.artifact("acme", "u-1", "art_1")
    assert found is not None and found.version == f"v{won[0]}"


def test_of_concurrent_starts_with_one_request_id_exactly_one_stages(rig: Rig) -> None:
    won, lost = race(
        8,
        lambda i: rig.store.stage(record(f"art_{i}"), receipt("req-1", f"art_{i}"), NOW),
    )
    assert len(won) == 1 and all(f.causes == {Conflict.IDEMPOTENCY} for f in lost)
    found = rig.store.receipt("acme", "u-1", "req-1", NOW)
    assert found is not None and found.artifact_id == f"art_{won[0]}"
    staged = [i for i in range(8) if rig.store.artifact("acme", "u-1", f"art_{i}")]
    assert staged == won


def test_a_delete_racing_new_references_never_leaves_a_referenced_deleted_artifact(
    rig: Rig,
) -> None:
    committed(rig)

    def attempt(i: int) -> None:
        if i % 2:
            rig.store.add_reference("acme", "u-1", "art_1", f"memory:c{i}")
        else:
            rig.store.mark_deleted("acme", "u-1", "art_1")

    won, _ = race(8, attempt)
    found = rig.store.artifact("acme", "u-1", "art_1")
    assert found is not None
    deleted = [i for i in won if i % 2 == 0]
    if found.state is ArtifactState.DELETED:
        assert len(deleted) == 1 and found.referenced_by == frozenset()
    else:
        assert deleted == [] and found.referenced_by
    assert found.referenced_by == {f"memory:c{i}" for i in won if i % 2}


# ----------------------------------------------------------------------------- SQLite expiry


def test_the_local_sweeper_deletes_receipts_past_their_expiry(tmp_path: Path) -> None:
    made, db = _sqlite_rig(tmp_path / "memvault.db")
    store = made.store
    assert isinstance(store, SqliteArtifactStore)
    for n in range(5):
        expires = epoch(NOW) + (n - 2) * 60  # two past, one just now, two later
        store.stage(
            record(f"art_{n}"),
            receipt(f"req-{n}", f"art_{n}", expires_at=expires),
            NOW - timedelta(hours=1),
        )
    assert store.sweep_expired(epoch(NOW)) == 2
    assert store.sweep_expired(epoch(NOW)) == 0
    with db.read() as conn:
        left = sorted(r[0] for r in conn.execute("SELECT request_id FROM artifact_receipts"))
    assert left == ["req-2", "req-3", "req-4"]
    # The artifacts stay: the staged-upload sweeper removes them with their objects.
    assert all(store.artifact("acme", "u-1", f"art_{n}") for n in range(5))
    db.close()


def test_a_removed_artifact_takes_its_references_with_it(tmp_path: Path) -> None:
    made, db = _sqlite_rig(tmp_path / "memvault.db")
    committed(made)
    made.store.add_reference("acme", "u-1", "art_1", "memory:c1")
    made.store.forget_subject("acme", "u-1", NOW)
    assert made.store.remove("acme", "u-1", "art_1")
    with db.read() as conn:
        assert conn.execute("SELECT COUNT(*) FROM artifact_refs").fetchone()[0] == 0
    db.close()
