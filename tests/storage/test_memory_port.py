"""Conformance of the memory store's port: the same rules on DynamoDB (moto) and SQLite.

Given a store, when an operation's condition does not hold, then nothing of it is
written and ``ConditionFailed`` names the cause; reads answer from the store's truth.
"""

from __future__ import annotations

import threading
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memvault.storage.dynamodb.dynamo import Dynamo
from memvault.storage.dynamodb.memory import DynamoMemoryStore
from memvault.storage.ports.changes import ChangeKind
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.ports.memory import (
    AuditEvent,
    IdempotencyRecord,
    IndexStatusUpdate,
    ListFilter,
    MemoryRecords,
    NewVersion,
    fact_id,
    keyed_chain_id,
    request_memory_id,
)
from memvault.storage.sqlite.db import Database, OutboxFeed
from memvault.storage.sqlite.memory import SqliteMemoryStore
from memvault_wire.memory import (
    CopyState,
    DeletionJob,
    DeletionScope,
    DeletionState,
    IndexStatus,
    Memory,
    MemoryKind,
    MemoryStatus,
    Sensitivity,
    Source,
    SourceType,
)
from tests.support.backends import STORES

NOW = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
T, S = "acme", "u-1"


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest) -> MemoryRecords:
    if request.param == "dynamodb":
        dynamo: Dynamo = request.getfixturevalue("dynamo")
        return DynamoMemoryStore(dynamo)
    database: Database = request.getfixturevalue("database")
    return SqliteMemoryStore(database)


def a_memory(req: str | None = "req-1", **changes: Any) -> Memory:
    """A version as the service makes it: with ``req`` its id derives from that request id
    (``first`` commits it with that id), and a keyed chain's id names its fact."""
    base: dict[str, Any] = {
        "memory_id": f"mem_{uuid.uuid4().hex}",
        "tenant_id": T,
        "subject_id": S,
        "chain_id": f"chn_{uuid.uuid4().hex}",
        "kind": MemoryKind.SEMANTIC,
        "canonical_key": "doc-language",
        "content": "Prefers Chinese for internal docs",
        "tags": ["preference"],
        "scope": {"workspace": "w1"},
        "source": Source(type=SourceType.USER_STATEMENT, ref="msg-1"),
        "sensitivity": Sensitivity.INTERNAL,
        "consent": True,
        "confidence": None,
        "visibility": [],
        "status": MemoryStatus.ACTIVE,
        "version": 1,
        "valid_from": NOW,
        "expires_at": NOW + timedelta(days=30),
        "supersedes_id": None,
        "content_hash": "h",
        "index_status": IndexStatus.PENDING,
        "embedding_model": None,
        "artifact_id": None,
        "request_id": None,
        "created_by": "agent-1",
        "created_at": NOW,
        "updated_at": NOW,
        "subject_epoch": 0,
    }
    base.update(changes)
    if req is not None and "memory_id" not in changes:
        base["memory_id"] = request_memory_id(base["tenant_id"], base["subject_id"], req)
    if base["canonical_key"] is not None and "chain_id" not in changes:
        fact = fact_id(str(base["kind"].value), base["canonical_key"], base["scope"])
        base["chain_id"] = keyed_chain_id(fact, None, uuid.uuid4().hex)
    return Memory.model_validate(base)


def audit(m: Memory | None = None, action: str = "memory.write") -> AuditEvent:
    return AuditEvent(
        event_id=uuid.uuid4().hex,
        at=NOW,
        action=action,
        actor="agent-1",
        tenant_id=T,
        subject_id=S,
        memory_id=m.memory_id if m else None,
    )


def first(
    m: Memory, request_id: str | None = "req-1", fact_expected_chain: str | None = None, **kw: Any
) -> NewVersion:
    fact = fact_id(m.kind.value, m.canonical_key, m.scope) if m.canonical_key else None
    return NewVersion(
        memory=m,
        expected_version=None,
        previous=None,
        fact=fact,
        fact_expected_chain=fact_expected_chain,
        idempotency=IdempotencyRecord(request_id, "hash", m.memory_id) if request_id else None,
        idempotency_expires_at=NOW + timedelta(days=7) if request_id else None,
        audit=audit(m),
        audit_expires_at=NOW + timedelta(days=400),
        **kw,
    )


def next_version(prev: Memory, **changes: Any) -> NewVersion:
    m = a_memory(
        None,
        chain_id=prev.chain_id,
        version=prev.version + 1,
        supersedes_id=prev.memory_id,
        **changes,
    )
    fact = fact_id(m.kind.value, m.canonical_key, m.scope) if m.canonical_key else None
    return NewVersion(
        memory=m,
        expected_version=prev.version,
        previous=prev,
        fact=fact,
        fact_expected_chain=prev.chain_id,
        idempotency=None,
        idempotency_expires_at=None,
        audit=audit(m, "memory.correct"),
        audit_expires_at=NOW + timedelta(days=400),
    )


def a_job(target: str, scope: DeletionScope = DeletionScope.MEMORY) -> DeletionJob:
    return DeletionJob(
        deletion_id=f"del_{uuid.uuid4().hex}",
        tenant_id=T,
        subject_id=S,
        scope=scope,
        target=target,
        status=DeletionState.BLOCKED,
        requested_by="agent-1",
        requested_at=NOW,
        completed_at=None,
        copies=[],
    )


# ---------------------------------------------------------------------- writes


def test_a_first_version_starts_a_chain_with_its_pointer_and_idempotency(
    store: MemoryRecords,
) -> None:
    m = a_memory()
    store.commit_version(first(m))

    assert store.version(T, S, m.memory_id) == m
    chain = store.chain(T, S, m.chain_id)
    assert chain is not None and chain.live and chain.current_version == 1
    assert chain.versions == [m.memory_id]
    fact = fact_id("semantic", "doc-language", {"workspace": "w1"})
    assert chain.fact == fact
    assert store.pointer(T, S, fact) == m.chain_id
    assert store.idempotency(T, S, "req-1") == IdempotencyRecord("req-1", "hash", m.memory_id)
    assert store.locate(T, S, m.memory_id) == (m.chain_id, 0)
    assert [e.action for e in store.events(T, S)] == ["memory.write"]


def test_a_reused_request_id_is_refused_and_writes_nothing(store: MemoryRecords) -> None:
    kept = a_memory(canonical_key=None)
    store.commit_version(first(kept))
    other = a_memory(canonical_key=None, content="another payload")

    with pytest.raises(ConditionFailed) as failed:
        store.commit_version(first(other))

    # One memory per request id: the retry's version id is the stored one's.
    assert other.memory_id == kept.memory_id
    assert Conflict.IDEMPOTENCY in failed.value
    assert store.version(T, S, kept.memory_id) == kept
    assert store.chain(T, S, other.chain_id) is None


def test_an_idempotent_write_must_use_the_id_its_request_id_derives(
    store: MemoryRecords,
) -> None:
    stray = a_memory(None)
    with pytest.raises(ValueError, match="derive from its request id"):
        store.commit_version(first(stray))
    assert store.version(T, S, stray.memory_id) is None


def test_a_second_chain_cannot_take_a_held_pointer(store: MemoryRecords) -> None:
    store.commit_version(first(a_memory()))
    rival = a_memory("req-2")

    with pytest.raises(ConditionFailed) as failed:
        store.commit_version(first(rival, request_id="req-2"))

    assert failed.value.causes == {Conflict.POINTER}
    assert store.version(T, S, rival.memory_id) is None


def test_a_correction_supersedes_the_previous_version_by_compare_and_set(
    store: MemoryRecords,
) -> None:
    v1 = a_memory()
    store.commit_version(first(v1))
    v2 = next_version(v1, content="Prefers English now")
    store.commit_version(v2)

    old = store.version(T, S, v1.memory_id)
    assert old is not None and old.status is MemoryStatus.SUPERSEDED
    chain = store.chain(T, S, v1.chain_id)
    assert chain is not None and chain.current_version == 2
    assert chain.versions == [v1.memory_id, v2.memory.memory_id]
    _, found, _ = store.revalidation(T, S, [v1.memory_id], [])
    assert found[v1.memory_id].superseded_by == v2.memory.memory_id

    stale = next_version(v1, content="a stale writer")
    with pytest.raises(ConditionFailed) as failed:
        store.commit_version(stale)
    assert Conflict.VERSION in failed.value
    assert store.version(T, S, stale.memory.memory_id) is None


def test_a_write_from_a_retired_epoch_is_refused(store: MemoryRecords) -> None:
    store.retire_subject_epoch(T, S, 0, a_job("epoch:0", DeletionScope.SUBJECT), audit(), NOW)
    m = a_memory(subject_epoch=0)

    with pytest.raises(ConditionFailed) as failed:
        store.commit_version(first(m))

    assert Conflict.EPOCH in failed.value
    assert store.subject_epoch(T, S) == 1
    assert store.forgotten_at(T, S) == NOW  # the job's requested_at
    assert store.version(T, S, m.memory_id) is None
    with pytest.raises(ConditionFailed) as again:
        store.retire_subject_epoch(T, S, 0, a_job("epoch:0", DeletionScope.SUBJECT), audit(), NOW)
    assert Conflict.EPOCH in again.value


def test_another_tenant_sees_nothing(store: MemoryRecords) -> None:
    m = a_memory()
    store.commit_version(first(m))

    assert store.version("globex", S, m.memory_id) is None
    assert store.chain("globex", S, m.chain_id) is None
    assert store.idempotency("globex", S, "req-1") is None
    assert store.subject_items("globex", S) == ([], [])
    assert store.pointers("globex", S, [m.chain_id]) == []


# ---------------------------------------------------------------------- delete


def test_a_tombstone_blocks_the_chain_and_releases_the_pointer(store: MemoryRecords) -> None:
    m = a_memory()
    store.commit_version(first(m))
    chain = store.chain(T, S, m.chain_id)
    assert chain is not None
    job = a_job(m.chain_id)

    store.tombstone_chain(
        T,
        S,
        chain,
        job.deletion_id,
        NOW,
        release_pointer=True,
        job=job,
        audit=audit(m, "memory.delete"),
        audit_expires_at=NOW + timedelta(days=1),
    )

    held = store.chain(T, S, m.chain_id)
    assert held is not None and not held.live and held.deletion_id == job.deletion_id
    current = store.version(T, S, m.memory_id)
    assert current is not None and current.status is MemoryStatus.DELETED
    # Released: the pointer names no live chain (DynamoDB's names the dead newest
    # generation, SQLite's none), and the fact's next chain can be written.
    fact = chain.fact or ""
    named = store.pointer(T, S, fact)
    assert named is None or not store.chain(T, S, named).live  # type: ignore[union-attr]
    again = a_memory("req-again", content="written anew after the delete")
    again = again.model_copy(update={"chain_id": keyed_chain_id(fact, named, "fresh")})
    store.commit_version(first(again, "req-again", fact_expected_chain=named))
    assert store.pointer(T, S, fact) == again.chain_id
    assert store.chain(T, S, again.chain_id).live  # type: ignore[union-attr]
    assert store.job(T, job.deletion_id) == job
    assert [e.deletion_id for e in store.deletion_log(T)] == [job.deletion_id]
    with pytest.raises(ConditionFailed) as twice:
        store.tombstone_chain(
            T,
            S,
            chain,
            "del_other",
            NOW,
            release_pointer=False,
            job=None,
            audit=None,
            audit_expires_at=None,
        )
    assert Conflict.VERSION in twice.value


def test_a_purged_version_keeps_ids_only(store: MemoryRecords) -> None:
    m = a_memory(content="MARKER-purge-me")
    store.commit_version(first(m))

    store.purge_version(T, S, m.memory_id, m.chain_id, "del_1", NOW)
    store.purge_version(T, S, m.memory_id, m.chain_id, "del_1", NOW)  # idempotent
    store.purge_version(T, S, "mem_" + "0" * 32, m.chain_id, "del_1", NOW)  # absent stays

    assert store.version(T, S, m.memory_id) is None
    assert store.locate(T, S, m.memory_id) == (m.chain_id, 0)
    _, found, _ = store.revalidation(T, S, [m.memory_id], [])
    assert found[m.memory_id].memory is None
    assert store.subject_version_ids(T, S) == [(m.memory_id, m.chain_id)]
    assert all("MARKER" not in str(r) for r in store.rebuild_records(T))


def test_raise_epoch_only_moves_forward(store: MemoryRecords) -> None:
    assert store.forgotten_at(T, S) is None
    store.raise_epoch(T, S, 2, "del_1", NOW)
    assert store.subject_epoch(T, S) == 3
    assert store.forgotten_at(T, S) == NOW  # restored reads cover what that forget did
    store.raise_epoch(T, S, 1, "del_2", NOW + timedelta(days=1))
    assert store.subject_epoch(T, S) == 3
    assert store.forgotten_at(T, S) == NOW


# ---------------------------------------------------------------------- reads


def test_listing_pages_filters_and_never_serves_the_expired(store: MemoryRecords) -> None:
    kept = []
    for i in range(7):
        m = a_memory(f"r-{i}", canonical_key=None, tags=["even" if i % 2 == 0 else "odd"])
        store.commit_version(first(m, request_id=f"r-{i}"))
        kept.append(m)
    gone = a_memory("r-gone", canonical_key=None, expires_at=NOW - timedelta(seconds=1))
    store.commit_version(first(gone, request_id="r-gone"))

    seen: list[str] = []
    cursor = None
    while True:
        page, cursor = store.list_versions(
            T,
            S,
            now=NOW,
            where=ListFilter(statuses=["active"]),
            cursor=cursor,
            page_size=3,
        )
        seen += [m.memory_id for m in page]
        if cursor is None:
            break
    assert sorted(seen) == sorted(m.memory_id for m in kept)
    assert len(seen) == len(set(seen))

    evens, _ = store.list_versions(
        T, S, now=NOW, where=ListFilter(statuses=["active"], tag="even"), cursor=None, page_size=50
    )
    assert len(evens) == 4 and all("even" in m.tags for m in evens)


def test_index_status_is_recorded_only_for_the_version_indexed(store: MemoryRecords) -> None:
    m, other = a_memory(), a_memory("req-2", canonical_key="timezone")
    store.commit_version(first(m))
    store.commit_version(first(other, request_id="req-2"))

    def update(memory_id: str, **kw: Any) -> IndexStatusUpdate:
        fields: dict[str, Any] = {
            "tenant_id": T,
            "subject_id": S,
            "memory_id": memory_id,
            "status": "active",
            "version": 1,
            "indexed_version": 18,
            "embedding_model": "hashing@1",
            "at": NOW,
            "index_status": "indexed",
        }
        return IndexStatusUpdate(**{**fields, **kw})

    # One batch, one answer per update, in order: an update for a version that is not
    # (or no longer) the one indexed is refused without holding back the others.
    assert store.record_index_statuses(
        [
            update(m.memory_id),
            update(m.memory_id, indexed_version=17),  # older than the one just recorded
            update(other.memory_id, status="candidate", indexed_version=19),  # not its status
            update(other.memory_id, version=2),  # not its version
            update("mem_absent"),
            update(other.memory_id, indexed_version=5),
        ]
    ) == [True, False, False, False, False, True]
    assert store.record_index_statuses([]) == []
    for memory_id in (m.memory_id, other.memory_id):
        held = store.version(T, S, memory_id)
        assert held is not None and held.index_status is IndexStatus.INDEXED


def test_copy_status_keeps_attempts_and_history(store: MemoryRecords) -> None:
    job = a_job("chn_x")
    store.put_job(job)

    store.set_copy(T, job.deletion_id, "index", CopyState.PENDING, NOW, "boom", attempt=True)
    store.set_copy(T, job.deletion_id, "index", CopyState.DONE, NOW, attempt=True)
    store.set_job_state(T, job.deletion_id, DeletionState.COMPLETED, NOW)

    held = store.job(T, job.deletion_id)
    assert held is not None and held.status is DeletionState.COMPLETED
    copy = next(c for c in held.copies if c.name == "index")
    assert copy.attempts == 2
    assert [e.status for e in copy.history] == [CopyState.PENDING, CopyState.DONE]


# ---------------------------------------------------------------------- concurrency


def test_of_many_writers_at_one_version_exactly_one_wins(store: MemoryRecords) -> None:
    v1 = a_memory()
    store.commit_version(first(v1))
    writers = 16
    barrier = threading.Barrier(writers)
    outcomes: list[str] = []
    lock = threading.Lock()

    def write(i: int) -> None:
        candidate = next_version(v1, content=f"writer {i}")
        barrier.wait()
        try:
            store.commit_version(candidate)
            result = "won"
        except ConditionFailed as err:
            result = ",".join(sorted(err.causes))
        with lock:
            outcomes.append(result)

    threads = [threading.Thread(target=write, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert outcomes.count("won") == 1
    assert all("version" in o for o in outcomes if o != "won")
    chain = store.chain(T, S, v1.chain_id)
    assert chain is not None and chain.current_version == 2 and len(chain.versions) == 2


# ---------------------------------------------------------------------- change feed


def test_sqlite_changes_reach_the_outbox_in_the_same_transaction(database: Database) -> None:
    store = SqliteMemoryStore(database)
    feed = OutboxFeed(database)
    v1 = a_memory()
    store.commit_version(first(v1))
    store.commit_version(next_version(v1, content="second"))
    with pytest.raises(ConditionFailed):
        store.commit_version(next_version(v1, content="stale"))

    changes = feed.read("indexer", 100)
    assert [(c.kind, c.new["status"] if c.new else None) for c in changes] == [
        (ChangeKind.INSERT, "active"),
        (ChangeKind.INSERT, "active"),
        (ChangeKind.MODIFY, "superseded"),
    ]
    feed.acknowledge("indexer", changes[-1].position)
    assert feed.read("indexer", 100) == []
    assert feed.prune() == 3


def test_sqlite_sweep_removes_the_expired_as_service_deletes(database: Database) -> None:
    store = SqliteMemoryStore(database)
    feed = OutboxFeed(database)
    m = a_memory(expires_at=NOW + timedelta(seconds=5))
    store.commit_version(first(m))
    feed.acknowledge("indexer", feed.read("indexer", 10)[-1].position)

    removed = store.sweep_expired(int((NOW + timedelta(days=8)).timestamp()))

    assert removed >= 3  # version, chain, pointer (and the idempotency record)
    (change,) = feed.read("indexer", 10)
    assert change.kind is ChangeKind.REMOVE and change.service_delete
    assert change.old is not None and change.old["memory_id"] == m.memory_id
