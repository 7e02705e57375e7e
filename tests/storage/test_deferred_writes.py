"""Deferred writes (``memvault.storage.sqlite.deferred``) and the embedded store's recall
traces written with them: a recall does not wait for its trace, and nothing read or
deleted afterwards misses it."""

from __future__ import annotations

import logging
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from moto import mock_aws

from memvault.embeddings.hashing import HashingEmbedder
from memvault.models.trace_records import RecallTrace, ServedItem
from memvault.storage.sqlite import deferred
from memvault.storage.sqlite.db import Database
from memvault.storage.sqlite.deferred import DeferredWriter
from memvault.storage.sqlite.schema import MIGRATIONS
from memvault.storage.sqlite.traces import SqliteTraceStore
from memvault_wire.recall import RecallRequest, RecallResult
from tests.support.harness import a_write, ctx
from tests.support.recall import RecallRig, make_rig
from tests.support.traces import NOW, a_trace

WAIT = 10.0


class Gate:
    """A ``write`` that records its batches and can be held shut."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.open = threading.Event()
        self.open.set()
        self.entered = threading.Event()
        self.fail_next = False

    def __call__(self, batch: Sequence[int]) -> None:
        self.entered.set()
        assert self.open.wait(WAIT), "the test never opened the gate"
        if self.fail_next:
            self.fail_next = False
            raise OSError("disk full")
        self.batches.append(list(batch))

    @property
    def written(self) -> list[int]:
        return [r for b in self.batches for r in b]


@pytest.fixture
def gate() -> Gate:
    return Gate()


@pytest.fixture
def writer(gate: Gate) -> Iterator[DeferredWriter[int]]:
    w: DeferredWriter[int] = DeferredWriter(gate, name="test-deferred")
    yield w
    gate.open.set()
    w.close()


def test_submit_returns_before_the_write_and_flush_waits_for_it(
    writer: DeferredWriter[int], gate: Gate
) -> None:
    gate.open.clear()
    writer.submit(1)  # returns although the write is held
    assert gate.entered.wait(WAIT)
    assert gate.written == [] and writer.pending == 1
    assert writer.flush(timeout=0.05) is False  # not written yet
    gate.open.set()
    assert writer.flush(timeout=WAIT) is True
    assert gate.written == [1] and writer.pending == 0


def test_records_gathered_during_a_write_go_in_one_batch_in_order(
    writer: DeferredWriter[int], gate: Gate
) -> None:
    gate.open.clear()
    writer.submit(0)
    assert gate.entered.wait(WAIT)
    for i in range(1, 6):
        writer.submit(i)
    gate.open.set()
    assert writer.flush(timeout=WAIT)
    assert gate.batches == [[0], [1, 2, 3, 4, 5]]


def test_a_failed_batch_is_logged_counted_and_the_writer_goes_on(
    writer: DeferredWriter[int], gate: Gate, caplog: pytest.LogCaptureFixture
) -> None:
    gate.fail_next = True
    with caplog.at_level(logging.WARNING):
        writer.submit(7)
        assert writer.flush(timeout=WAIT)
    assert writer.failed == 1 and gate.written == []
    (logged,) = [r for r in caplog.records if r.getMessage() == "deferred records not written"]
    assert (logged.records, logged.error) == (1, "OSError")  # type: ignore[attr-defined]
    writer.submit(8)
    assert writer.flush(timeout=WAIT)
    assert gate.written == [8]


def test_submitters_wait_at_the_limit(gate: Gate) -> None:
    w: DeferredWriter[int] = DeferredWriter(gate, name="test-limit", limit=2)
    try:
        gate.open.clear()
        w.submit(0)
        assert gate.entered.wait(WAIT)  # 0 is being written; 1 and 2 fill the queue
        w.submit(1)
        w.submit(2)
        third = threading.Thread(target=w.submit, args=(3,))
        third.start()
        third.join(0.2)
        assert third.is_alive(), "a submitter past the limit must wait"
        gate.open.set()
        third.join(WAIT)
        assert not third.is_alive()
        assert w.flush(timeout=WAIT) and gate.written == [0, 1, 2, 3]
    finally:
        gate.open.set()
        w.close()


def test_close_writes_what_is_pending_and_later_records_inline(
    writer: DeferredWriter[int], gate: Gate
) -> None:
    gate.open.clear()
    writer.submit(1)
    writer.submit(2)
    closing = threading.Thread(target=writer.close)
    closing.start()
    gate.open.set()
    closing.join(WAIT)
    assert gate.written == [1, 2]
    writer.submit(3)  # closed: written before submit returns
    assert gate.written == [1, 2, 3]


def test_an_idle_thread_ends_and_the_next_record_starts_another(
    gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(deferred, "IDLE_S", 0.05)
    w: DeferredWriter[int] = DeferredWriter(gate, name="test-idle")
    try:
        w.submit(1)
        assert w.flush(timeout=WAIT)
        first = w._thread
        assert first is not None
        first.join(WAIT)
        assert not first.is_alive()
        w.submit(2)
        assert w.flush(timeout=WAIT) and gate.written == [1, 2]
    finally:
        w.close()


def test_flushing_one_key_does_not_wait_for_another(
    writer: DeferredWriter[int], gate: Gate
) -> None:
    gate.open.clear()
    writer.submit(1, key="a")
    assert gate.entered.wait(WAIT)
    assert writer.flush(key="b", timeout=0.05) is True  # nothing of b's pending
    assert writer.flush(key="a", timeout=0.05) is False
    gate.open.set()
    assert writer.flush(key="a", timeout=WAIT) is True


def test_one_bad_record_loses_no_other() -> None:
    """A batch that fails is written again record by record: only the bad one is lost."""
    written: list[int] = []

    def write(batch: Sequence[int]) -> None:
        if 13 in batch:
            raise ValueError("cannot serialise")
        written.extend(batch)

    w: DeferredWriter[int] = DeferredWriter(write, name="test-poison")
    hold = threading.Lock()
    try:
        with hold:  # 1 goes alone; 2, 13 and 3 gather behind it into one batch
            w._write = lambda batch: (hold.acquire(), hold.release(), write(batch))[-1]
            w.submit(1)
            for n in (2, 13, 3):
                w.submit(n)
        assert w.flush(timeout=WAIT)
        assert written == [1, 2, 3] and w.failed == 1
    finally:
        w.close()


def test_where_no_thread_can_start_records_are_written_inline(
    gate: Gate, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(self: threading.Thread) -> None:
        raise RuntimeError("can't start new thread")

    monkeypatch.setattr(threading.Thread, "start", refuse)
    w: DeferredWriter[int] = DeferredWriter(gate, name="test-no-thread")
    w.submit(1)
    assert gate.written == [1]  # written before submit returned
    assert w.pending == 0 and w.flush(timeout=0.05) is True
    w.close()  # nothing to join


def _trace(recall_id: str, chain: str = "chn_a") -> RecallTrace:
    """One served link, to ``chain``: the trace and its link are two rows."""
    return a_trace(recall_id, returned=(ServedItem("mem_a", chain, 1, 1),))


def test_closing_the_store_writes_the_pending_traces(tmp_path: Path) -> None:
    """Database.close runs the trace writer's close first: another process opening the
    file afterwards finds every trace recorded before it."""
    database = Database(tmp_path / "memvault.db", MIGRATIONS)
    store = SqliteTraceStore(database, deferred=True)
    with database.write():  # hold the write lock: the trace cannot be written yet
        store.record_recall(_trace("rcl_1"))
        store.record_recall(_trace("rcl_2"))
    database.close()
    reopened = Database(tmp_path / "memvault.db", MIGRATIONS)
    try:
        fresh = SqliteTraceStore(reopened)
        assert fresh.recall("t1", "u1", "rcl_1", NOW) is not None
        assert fresh.recall("t1", "u1", "rcl_2", NOW) is not None
    finally:
        reopened.close()


def _gated(store: SqliteTraceStore) -> threading.Event:
    """Hold the store's deferred trace writes until the event is set."""
    writer = store._deferred
    assert writer is not None
    real, gate = writer._write, threading.Event()

    def held(batch: Sequence[RecallTrace]) -> None:
        assert gate.wait(WAIT), "the test never opened the gate"
        real(batch)

    writer._write = held
    return gate


def _blocked_then(call: Callable[[], Any], gate: threading.Event) -> Any:
    """``call`` on a thread: it must wait while the gate is shut, and finish once open."""
    out: list[Any] = []
    worker = threading.Thread(target=lambda: out.append(call()))
    worker.start()
    worker.join(0.3)
    waited = worker.is_alive()
    gate.set()
    worker.join(WAIT)
    assert waited, "it did not wait for the trace still in flight"
    return out[0]


def test_forgetting_a_chain_covers_a_trace_still_in_flight(database: Database) -> None:
    store = SqliteTraceStore(database, deferred=True)
    gate = _gated(store)
    store.record_recall(_trace("rcl_1", chain="chn_gone"))
    assert _blocked_then(lambda: store.forget_chain("t1", "u1", "chn_gone"), gate) == 1
    assert store.served("t1", "u1", "chn_gone", NOW) == []


def test_forgetting_a_subject_covers_a_trace_still_in_flight(database: Database) -> None:
    store = SqliteTraceStore(database, deferred=True)
    gate = _gated(store)
    store.record_recall(_trace("rcl_1"))
    assert _blocked_then(lambda: store.forget_subject("t1", "u1", NOW), gate) == 2
    assert store.recall("t1", "u1", "rcl_1", NOW) is None


def test_the_sweep_covers_a_trace_still_in_flight(database: Database) -> None:
    store = SqliteTraceStore(database, deferred=True)
    gate = _gated(store)
    store.record_recall(_trace("rcl_old"))
    later = int((NOW + timedelta(days=31)).timestamp())
    assert _blocked_then(lambda: store.sweep_expired(later), gate) == 2


def test_another_subjects_read_does_not_wait(database: Database) -> None:
    store = SqliteTraceStore(database, deferred=True)
    gate = _gated(store)
    try:
        store.record_recall(_trace("rcl_1"))
        reader = threading.Thread(target=lambda: store.served("t1", "u2", "chn_a", NOW))
        reader.start()
        reader.join(WAIT / 2)
        assert not reader.is_alive(), "a read of u2 waited for u1's trace"
    finally:
        gate.set()


@pytest.fixture
def rig() -> Iterator[RecallRig]:
    with mock_aws():
        built = make_rig("embedded", HashingEmbedder(), store="sqlite", recall_relevance_floor=0.1)
        yield built
        assert built.services.stores.database is not None
        built.services.stores.database.close()


def test_a_recall_does_not_wait_behind_a_write_holding_the_store(rig: RecallRig) -> None:
    """The local stack's recall answers while another transaction holds the store's write
    lock (a memory write, a purge); its trace is written once the lock is free. Written
    inline, the recall would wait for the lock."""
    rig.services.memory.write(
        ctx(), "u-1", a_write(content="Walks the dog at seven", request_id=uuid.uuid4().hex)
    )
    rig.sync()
    database = rig.services.stores.database
    assert database is not None
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with database.write():
            held.set()
            release.wait(WAIT)

    holder = threading.Thread(target=hold)
    holder.start()
    assert held.wait(WAIT)
    answers: list[RecallResult] = []
    caller = threading.Thread(
        target=lambda: answers.append(
            rig.services.recall.recall(ctx(), "u-1", RecallRequest(query="walks the dog"))
        )
    )
    caller.start()
    caller.join(5.0)
    answered = not caller.is_alive()
    release.set()
    holder.join(WAIT)
    caller.join(WAIT)
    assert answered, "the recall waited for the write lock"
    (result,) = answers
    assert [i.memory.content for i in result.items] == ["Walks the dog at seven"]
    assert result.recall_id is not None
    # Its trace is read back at once: the read waits for the deferred write.
    trace = rig.services.stores.traces.recall("acme", "u-1", result.recall_id, rig.clock.now())
    assert trace is not None and [s.memory_id for s in trace.returned] == [
        result.items[0].memory.memory_id
    ]
