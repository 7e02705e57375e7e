"""The trace store's conformance suite: every test runs against both adapters.

- ``dynamodb``: ``DynamoTraceStore`` on moto (items in the audit table, partition
  ``<tenant>#~traces#<subject>``). moto ignores TTL: expired items stay in its table
  until deleted, so these tests prove the adapter's own expiry check on read, which real
  DynamoDB needs as well (its TTL deletes lazily, up to days late).
- ``sqlite``: ``SqliteTraceStore`` on a file under ``tmp_path``; its ``sweep_expired``
  plays DynamoDB TTL.
- ``sqlite-deferred``: the same, writing recall traces on its own thread, as the local
  stack does: every read and delete here follows a record at once, so each test also
  shows that the store reads its own deferred writes.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest

from memvault.models.trace_records import ServedItem
from memvault.storage.dynamodb.dynamo import Dynamo
from memvault.storage.dynamodb.memory import DynamoMemoryStore
from memvault.storage.dynamodb.traces import DynamoTraceStore
from memvault.storage.ports.traces import TraceStore
from memvault.storage.sqlite.db import Database
from memvault.storage.sqlite.memory import SqliteMemoryStore
from memvault.storage.sqlite.traces import SqliteTraceStore
from tests.support.backends import STORES
from tests.support.traces import NOW
from tests.support.traces import a_feedback as _feedback
from tests.support.traces import a_trace as _trace

LATER = NOW + timedelta(days=30)


@pytest.fixture(params=[*STORES, "sqlite-deferred"])
def store(request: pytest.FixtureRequest) -> Iterator[TraceStore]:
    if request.param == "dynamodb":
        db: Dynamo = request.getfixturevalue("dynamo")
        yield DynamoTraceStore(db)
    else:
        database: Database = request.getfixturevalue("database")
        yield SqliteTraceStore(database, deferred=request.param == "sqlite-deferred")


def test_a_recall_trace_reads_back_whole(store: TraceStore) -> None:
    trace = _trace("rcl_1")
    store.record_recall(trace)
    assert store.recall("t1", "u1", "rcl_1", NOW) == trace


def test_another_tenant_or_subject_never_reads_a_trace(store: TraceStore) -> None:
    store.record_recall(_trace("rcl_1"))
    assert store.recall("t2", "u1", "rcl_1", NOW) is None
    assert store.recall("t1", "u2", "rcl_1", NOW) is None
    assert store.served("t2", "u1", "chn_b", NOW) == []
    store.add_feedback(_feedback("fb_1"))
    assert store.feedback("t2", "u1", NOW) == []
    assert store.feedback("t1", "u2", NOW) == []


def test_an_expired_trace_is_not_read_even_before_any_sweep(store: TraceStore) -> None:
    store.record_recall(_trace("rcl_1"))
    store.add_feedback(_feedback("fb_1"))
    past = LATER + timedelta(seconds=1)
    assert store.recall("t1", "u1", "rcl_1", past) is None
    assert store.served("t1", "u1", "chn_b", past) == []
    assert store.feedback("t1", "u1", past) == []


def test_served_links_are_per_chain_newest_first(store: TraceStore) -> None:
    store.record_recall(_trace("rcl_1"))
    store.record_recall(
        _trace(
            "rcl_2",
            NOW + timedelta(minutes=5),
            returned=(ServedItem("mem_b3", "chn_b", 3, 2),),
            run_id=None,
            task_id="task-9",
        )
    )
    links = store.served("t1", "u1", "chn_b", NOW)
    assert [(x.recall_id, x.version, x.rank) for x in links] == [("rcl_2", 3, 2), ("rcl_1", 2, 1)]
    assert links[0].task_id == "task-9" and links[1].run_id == "run-1"
    assert [x.recall_id for x in store.served("t1", "u1", "chn_b", NOW, limit=1)] == ["rcl_2"]
    assert [x.recall_id for x in store.served("t1", "u1", "chn_c", NOW)] == ["rcl_1"]
    # A chain id that is a prefix of another's sees only its own links.
    assert store.served("t1", "u1", "chn_", NOW) == []


def test_feedback_lists_newest_first_and_by_chain(store: TraceStore) -> None:
    store.add_feedback(_feedback("fb_1"))
    store.add_feedback(_feedback("fb_2", NOW + timedelta(seconds=1), chain_id="chn_c"))
    store.add_feedback(_feedback("fb_3", NOW + timedelta(seconds=2), verdict="helpful"))
    assert [f.feedback_id for f in store.feedback("t1", "u1", NOW)] == ["fb_3", "fb_2", "fb_1"]
    assert [f.feedback_id for f in store.feedback("t1", "u1", NOW, chain_id="chn_b")] == [
        "fb_3",
        "fb_1",
    ]
    assert [f.feedback_id for f in store.feedback("t1", "u1", NOW, limit=1)] == ["fb_3"]
    assert store.feedback("t1", "u1", NOW)[2] == _feedback("fb_1")


def test_forgetting_a_subject_removes_what_it_covered_only(store: TraceStore) -> None:
    store.record_recall(_trace("rcl_1"))
    store.add_feedback(_feedback("fb_1"))
    store.record_recall(_trace("rcl_other", subject_id="u2"))
    store.record_recall(_trace("rcl_tenant", tenant_id="t2"))
    store.record_recall(_trace("rcl_after", NOW + timedelta(minutes=1)))
    removed = store.forget_subject("t1", "u1", NOW)
    assert removed == 1 + 2 + 1  # the trace, its two links, the feedback
    assert store.recall("t1", "u1", "rcl_1", NOW) is None
    assert store.feedback("t1", "u1", NOW) == []
    assert [x.recall_id for x in store.served("t1", "u1", "chn_b", NOW)] == ["rcl_after"]
    assert store.recall("t1", "u1", "rcl_after", NOW) is not None
    assert store.recall("t1", "u2", "rcl_other", NOW) is not None
    assert store.recall("t2", "u1", "rcl_tenant", NOW) is not None
    assert store.forget_subject("t1", "u1", NOW) == 0  # idempotent


def test_forgetting_a_subject_removes_every_recall_judged_under_its_epoch(
    store: TraceStore,
) -> None:
    """A recall that overlapped the forget (made after it was asked, but judged under the
    epoch it retired) may have served what it removes: its trace and links go too. One
    judged under the next epoch stays, and so does one that recorded no epoch."""
    after = NOW + timedelta(minutes=1)
    store.record_recall(_trace("rcl_overlap", after, subject_epoch=0))
    store.record_recall(_trace("rcl_next", after, subject_epoch=1))
    store.record_recall(_trace("rcl_unknown", after))
    store.record_recall(_trace("rcl_other", after, subject_id="u2", subject_epoch=0))
    store.add_feedback(_feedback("fb_overlap", after, subject_epoch=0))
    store.add_feedback(_feedback("fb_next", after, subject_epoch=1))
    removed = store.forget_subject("t1", "u1", NOW, epoch=0)
    assert removed == 1 + 2 + 1  # the overlapping recall's trace, its two links, feedback
    assert [f.feedback_id for f in store.feedback("t1", "u1", after)] == ["fb_next"]
    assert store.recall("t1", "u1", "rcl_overlap", after) is None
    assert store.recall("t1", "u1", "rcl_next", after) is not None
    assert store.recall("t1", "u1", "rcl_unknown", after) is not None
    assert store.recall("t1", "u2", "rcl_other", after) is not None
    links = [x.recall_id for x in store.served("t1", "u1", "chn_b", after)]
    assert sorted(links) == ["rcl_next", "rcl_unknown"]
    assert store.served("t1", "u1", "chn_b", after)[0].subject_epoch in (1, None)


def _forget(store: TraceStore, tenant_id: str, subject_id: str) -> None:
    """Retire the subject's epoch 0 in the memory store beside ``store``, as a forget does."""
    if isinstance(store, DynamoTraceStore):
        DynamoMemoryStore(store.db).raise_epoch(tenant_id, subject_id, 0, "del_1", NOW)
    else:
        assert isinstance(store, SqliteTraceStore)
        SqliteMemoryStore(store.db).raise_epoch(tenant_id, subject_id, 0, "del_1", NOW)


def test_a_record_judged_under_a_retired_epoch_is_not_kept(store: TraceStore) -> None:
    """A recall judged under epoch 0 whose trace is written after a forget retired that
    epoch (the forget's traces step may have run already) is not kept, nor are its links
    or feedback judged readable under that epoch; those judged under the current epoch,
    or recording none, and another subject's, are kept. On DynamoDB the items are written,
    then deleted once the subject's epoch is read back: moto serves both calls in order,
    so this shows the outcome, not the interleaving with a purge running beside it."""
    _forget(store, "t1", "u1")
    late = _trace("rcl_late", returned=(ServedItem("mem_a", "chn_gone", 1, 1),), subject_epoch=0)
    store.record_recall(late)
    store.record_recall(_trace("rcl_now", subject_epoch=1))
    store.record_recall(_trace("rcl_unknown"))
    store.record_recall(_trace("rcl_other", subject_id="u2", subject_epoch=0))
    for fid, epoch in (("fb_late", 0), ("fb_now", 1)):
        store.add_feedback(_feedback(fid, subject_epoch=epoch))
    assert store.recall("t1", "u1", "rcl_late", NOW) is None
    assert store.served("t1", "u1", "chn_gone", NOW) == []
    assert store.recall("t1", "u1", "rcl_now", NOW) is not None
    assert store.recall("t1", "u1", "rcl_unknown", NOW) is not None
    assert store.recall("t1", "u2", "rcl_other", NOW) is not None
    assert [f.feedback_id for f in store.feedback("t1", "u1", NOW)] == ["fb_now"]


def test_forgetting_a_chain_removes_its_links_and_feedback(store: TraceStore) -> None:
    store.record_recall(_trace("rcl_1"))
    store.add_feedback(_feedback("fb_1"))
    store.add_feedback(_feedback("fb_2", chain_id="chn_c"))
    assert store.forget_chain("t1", "u1", "chn_b") == 2
    assert store.served("t1", "u1", "chn_b", NOW) == []
    assert [x.recall_id for x in store.served("t1", "u1", "chn_c", NOW)] == ["rcl_1"]
    assert [f.feedback_id for f in store.feedback("t1", "u1", NOW)] == ["fb_2"]
    # The recall trace keeps the ids it returned until it expires.
    assert store.recall("t1", "u1", "rcl_1", NOW) is not None


def test_a_recall_with_many_items_is_written_whole(store: TraceStore) -> None:
    items = tuple(ServedItem(f"mem_{i}", f"chn_{i:03d}", 1, i + 1) for i in range(60))
    store.record_recall(_trace("rcl_big", returned=items))
    got = store.recall("t1", "u1", "rcl_big", NOW)
    assert got is not None and got.returned == items
    assert all(store.served("t1", "u1", f"chn_{i:03d}", NOW) for i in range(60))


def test_sqlite_sweep_plays_ttl(database: Database) -> None:
    store = SqliteTraceStore(database)
    store.record_recall(_trace("rcl_1"))
    store.add_feedback(_feedback("fb_1"))
    assert store.sweep_expired(int(NOW.timestamp())) == 0
    assert store.sweep_expired(int((LATER + timedelta(seconds=2)).timestamp())) == 4
