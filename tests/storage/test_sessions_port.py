"""The session store's conformance suite: every test runs against both adapters.

DynamoDB runs on moto, whose in-process backend is not atomic under threads (two
conditional writes can both pass their condition); its client is wrapped in
``SerializedClient``, which serialises the calls as real DynamoDB's atomic conditions
would, while threads still interleave between calls (where the read-decide-write races
live). SQLite runs on a real file with a connection per thread, so its concurrency tests
race for real on ``BEGIN IMMEDIATE``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import boto3
import moto
import pytest

from memvault.config import Settings
from memvault.services.deletion import SessionsStep
from memvault.services.sessions import SessionService
from memvault.storage.dynamodb.dynamo import Dynamo
from memvault.storage.dynamodb.memory import DynamoMemoryStore
from memvault.storage.dynamodb.sessions import DynamoSessionStore
from memvault.storage.dynamodb.tables import ALL_TABLES, create_tables, physical_name
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.ports.memory import ForgetState
from memvault.storage.ports.sessions import NewMessage, SessionStore, StoredSummary
from memvault.storage.sqlite import sessions as sqlite_sessions
from memvault.storage.sqlite.db import Database
from memvault.storage.sqlite.memory import SqliteMemoryStore
from memvault.storage.sqlite.schema import MIGRATIONS
from memvault.storage.sqlite.sessions import SqliteSessionStore
from memvault_wire.errors import IdempotencyKeyReused, NotFound, SessionExpired
from memvault_wire.memory import DeletionJob, DeletionScope, DeletionState
from memvault_wire.session import AppendMessage, PutSummary, Role
from tests.support.backends import STORES
from tests.support.harness import FakeClock, SerializedClient, ctx

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
IDLE = timedelta(minutes=30)
CAP = timedelta(hours=24)
KEY = ("acme", "u-1", "s-1")


@pytest.fixture(params=STORES)
def store(request: pytest.FixtureRequest, tmp_path: Any) -> Iterator[SessionStore]:
    if request.param == "dynamodb":
        with moto.mock_aws():
            client = SerializedClient(boto3.client("dynamodb", region_name="us-east-1"))
            create_tables(client, "port-")
            names = {spec.name: physical_name(spec, "port-") for spec in ALL_TABLES}
            yield DynamoSessionStore(Dynamo(client, names))
    else:
        db = Database(tmp_path / "memvault.db", MIGRATIONS)
        yield SqliteSessionStore(db)
        db.close()


@pytest.fixture
def sqlite_store(tmp_path: Any) -> Iterator[SqliteSessionStore]:
    db = Database(tmp_path / "memvault.db", MIGRATIONS)
    yield SqliteSessionStore(db)
    db.close()


def new(
    seq: int,
    request_id: str | None = None,
    *,
    key: tuple[str, str, str] = KEY,
    at: datetime = T0,
    content: str | None = None,
    expires_at: datetime = T0 + CAP,
) -> NewMessage:
    tenant, subject, session = key
    return NewMessage(
        tenant_id=tenant,
        subject_id=subject,
        session_id=session,
        seq=seq,
        role=Role.USER,
        content=content or f"message {seq}",
        request_id=request_id or f"r-{seq}",
        at=at,
        idle_expires_at=min(at + IDLE, expires_at),
        expires_at=expires_at,
    )


def fill(store: SessionStore, count: int, key: tuple[str, str, str] = KEY) -> None:
    for seq in range(1, count + 1):
        store.append(new(seq, key=key, at=T0 + timedelta(minutes=seq - 1)))


def refused(action: Callable[[], object]) -> frozenset[Conflict]:
    with pytest.raises(ConditionFailed) as raised:
        action()
    return raised.value.causes


# ---------------------------------------------------------------------------- append


def test_the_first_append_creates_the_head_with_both_clocks(store: SessionStore) -> None:
    assert store.head(*KEY) is None
    store.append(new(1))

    head = store.head(*KEY)
    assert head is not None
    assert (head.tenant_id, head.subject_id, head.session_id) == KEY
    assert head.created_at == head.last_activity_at == T0
    assert head.idle_expires_at == T0 + IDLE
    assert head.expires_at == T0 + CAP
    assert head.last_seq == 1
    receipt = store.receipt(*KEY, "r-1")
    assert receipt is not None
    assert (receipt.seq, receipt.role, receipt.content) == (1, Role.USER, "message 1")


def test_a_later_append_moves_the_head_and_never_its_absolute_expiry(
    store: SessionStore,
) -> None:
    store.append(new(1))
    later = T0 + timedelta(minutes=20)
    store.append(new(2, at=later))

    head = store.head(*KEY)
    assert head is not None
    assert head.last_seq == 2
    assert head.created_at == T0
    assert head.last_activity_at == later
    assert head.idle_expires_at == later + IDLE
    assert head.expires_at == T0 + CAP
    snap = store.snapshot(*KEY, now=later, recent=10)
    assert snap is not None
    assert [(m.seq, m.content, m.request_id, m.created_at) for m in snap.messages] == [
        (1, "message 1", "r-1", T0),
        (2, "message 2", "r-2", later),
    ]


def test_starting_a_session_that_exists_is_refused(store: SessionStore) -> None:
    store.append(new(1))
    assert Conflict.EXISTS in refused(lambda: store.append(new(1, "r-other")))
    head = store.head(*KEY)
    assert head is not None and head.last_seq == 1
    assert store.receipt(*KEY, "r-other") is None


def test_an_append_behind_or_ahead_of_the_head_is_refused(store: SessionStore) -> None:
    assert refused(lambda: store.append(new(2))) == {Conflict.VERSION}  # no head yet
    fill(store, 2)
    assert Conflict.VERSION in refused(lambda: store.append(new(2, "r-stale")))
    assert refused(lambda: store.append(new(4))) == {Conflict.VERSION}
    head = store.head(*KEY)
    assert head is not None and head.last_seq == 2
    assert store.message(*KEY, 4, now=T0) is None
    assert store.receipt(*KEY, "r-stale") is None
    assert store.receipt(*KEY, "r-4") is None


def test_a_request_id_that_has_a_receipt_is_refused_and_nothing_is_written(
    store: SessionStore,
) -> None:
    store.append(new(1, "r-1"))
    causes = refused(lambda: store.append(new(2, "r-1", content="another")))
    assert causes == {Conflict.IDEMPOTENCY}
    head = store.head(*KEY)
    assert head is not None and head.last_seq == 1
    assert store.message(*KEY, 2, now=T0) is None
    receipt = store.receipt(*KEY, "r-1")
    assert receipt is not None and receipt.content == "message 1"


def test_a_retried_append_stores_one_message(store: SessionStore) -> None:
    store.append(new(1))
    store.append(new(2))
    causes = refused(lambda: store.append(new(2)))  # the same append, sent again
    assert Conflict.IDEMPOTENCY in causes
    snap = store.snapshot(*KEY, now=T0, recent=10)
    assert snap is not None
    assert [m.seq for m in snap.messages] == [1, 2]
    assert snap.head.last_seq == 2


# ------------------------------------------------------------------------------ reads


def test_a_snapshot_has_the_newest_messages_oldest_first(store: SessionStore) -> None:
    fill(store, 5)
    snap = store.snapshot(*KEY, now=T0 + timedelta(minutes=5), recent=3)
    assert snap is not None
    assert [m.seq for m in snap.messages] == [3, 4, 5]
    assert snap.head.last_seq == 5
    assert snap.summary is None
    found = store.message(*KEY, 2, now=T0)
    assert found is not None and (found.seq, found.content) == (2, "message 2")
    assert store.message(*KEY, 9, now=T0) is None
    assert store.snapshot("acme", "u-1", "never", now=T0, recent=3) is None


def test_expiry_is_checked_on_read_whatever_the_store_has_removed(store: SessionStore) -> None:
    store.append(new(1))
    idle_end = T0 + IDLE
    assert store.snapshot(*KEY, now=idle_end - timedelta(seconds=1), recent=5) is not None
    # Idle clock run out: nothing is served, though every row is still stored.
    assert store.snapshot(*KEY, now=idle_end, recent=5) is None
    assert store.message(*KEY, 1, now=idle_end) is None
    assert store.message(*KEY, 1, now=idle_end - timedelta(seconds=1)) is not None
    # The head itself is still there (an append is refused, not started afresh).
    head = store.head(*KEY)
    assert head is not None and not head.live(idle_end)


def test_the_absolute_clock_ends_reads_though_the_idle_clock_says_live(
    store: SessionStore,
) -> None:
    cap = T0 + timedelta(minutes=10)  # a cap shorter than a stale idle clock
    store.append(
        NewMessage(
            tenant_id="acme",
            subject_id="u-1",
            session_id="s-1",
            seq=1,
            role=Role.USER,
            content="hi",
            request_id="r-1",
            at=T0,
            idle_expires_at=T0 + IDLE,
            expires_at=cap,
        )
    )
    assert store.snapshot(*KEY, now=cap - timedelta(seconds=1), recent=5) is not None
    assert store.snapshot(*KEY, now=cap, recent=5) is None
    assert store.message(*KEY, 1, now=cap) is None


# ---------------------------------------------------------------------------- summary


def summary(content: str = "sum", through: int = 1, expires: datetime = T0 + CAP) -> StoredSummary:
    return StoredSummary(
        content=content, from_seq=1, through_seq=through, created_at=T0, expires_at=expires
    )


def test_a_summary_is_replaced_and_hidden_once_past_its_own_expiry(store: SessionStore) -> None:
    fill(store, 3)
    store.put_summary(*KEY, summary("first", 2))
    store.put_summary(*KEY, summary("second", 3, T0 + timedelta(minutes=5)))

    snap = store.snapshot(*KEY, now=T0 + timedelta(minutes=4), recent=5)
    assert snap is not None and snap.summary is not None
    assert (snap.summary.content, snap.summary.from_seq, snap.summary.through_seq) == (
        "second",
        1,
        3,
    )
    assert snap.summary.expires_at == T0 + timedelta(minutes=5)
    later = store.snapshot(*KEY, now=T0 + timedelta(minutes=5), recent=5)
    assert later is not None and later.summary is None  # the session itself is still live


def test_a_summary_without_a_session_is_refused(store: SessionStore) -> None:
    assert refused(lambda: store.put_summary(*KEY, summary())) == {Conflict.ABSENT}
    store.append(new(1))
    store.end(*KEY)
    assert refused(lambda: store.put_summary(*KEY, summary())) == {Conflict.ABSENT}
    store.append(new(1))  # a fresh session under the same id has no summary
    snap = store.snapshot(*KEY, now=T0, recent=5)
    assert snap is not None and snap.summary is None


# -------------------------------------------------------------------------------- end


def test_ending_deletes_head_messages_receipts_and_summary(store: SessionStore) -> None:
    fill(store, 3)
    store.put_summary(*KEY, summary(through=3))

    assert store.end(*KEY) == 8  # head, 3 messages, 3 receipts, summary

    assert store.head(*KEY) is None
    assert store.snapshot(*KEY, now=T0, recent=5) is None
    assert store.receipt(*KEY, "r-1") is None
    assert refused(lambda: store.end(*KEY)) == {Conflict.ABSENT}  # a retried end
    # A later append under the same id starts afresh: an old request id is no replay.
    store.append(new(1, "r-1", content="new start"))
    snap = store.snapshot(*KEY, now=T0, recent=5)
    assert snap is not None
    assert [(m.seq, m.content) for m in snap.messages] == [(1, "new start")]


def test_ending_what_never_started_is_refused(store: SessionStore) -> None:
    assert refused(lambda: store.end(*KEY)) == {Conflict.ABSENT}


# ------------------------------------------------------------------- forget, isolation


def test_forgetting_a_subject_deletes_all_their_sessions_and_nothing_else(
    store: SessionStore,
) -> None:
    fill(store, 2, ("acme", "u-1", "s-1"))
    fill(store, 1, ("acme", "u-1", "s-2"))
    store.put_summary("acme", "u-1", "s-2", summary())
    fill(store, 1, ("acme", "u-10", "s-1"))  # a subject whose id extends u-1's
    fill(store, 1, ("globex", "u-1", "s-1"))

    assert store.forget_subject("acme", "u-1", T0) == 5 + 4  # every row of s-1 and of s-2

    assert store.head("acme", "u-1", "s-1") is None
    assert store.head("acme", "u-1", "s-2") is None
    assert store.receipt("acme", "u-1", "s-1", "r-1") is None
    for other in (("acme", "u-10", "s-1"), ("globex", "u-1", "s-1")):
        snap = store.snapshot(*other, now=T0, recent=5)
        assert snap is not None and [m.seq for m in snap.messages] == [1]
    assert store.forget_subject("acme", "u-1", T0) == 0  # a retried purge


def test_a_forget_takes_the_sessions_begun_by_its_time_whole_and_leaves_later_ones(
    store: SessionStore,
) -> None:
    """The purge of a forget at ``T0`` removes a session begun at ``T0`` with all its
    rows, a message appended after ``T0`` included; a session begun after the forget is
    another life of the subject and stays, whenever the purge runs."""
    fill(store, 3)  # begun at T0, messages at T0, T0+1m, T0+2m
    later = ("acme", "u-1", "s-later")
    store.append(new(1, "r-later", key=later, at=T0 + timedelta(milliseconds=1)))
    store.put_summary(*later, summary())

    assert store.forget_subject("acme", "u-1", T0) == 3 + 3 + 1  # s-1: messages, receipts, head

    assert store.head(*KEY) is None
    snap = store.snapshot(*later, now=T0, recent=5)
    assert snap is not None and [m.request_id for m in snap.messages] == ["r-later"]
    assert snap.summary is not None
    assert store.receipt(*later, "r-later") is not None
    assert store.forget_subject("acme", "u-1", T0 + timedelta(milliseconds=1)) == 4


def forget(store: SessionStore, tenant: str, subject: str, retired: int) -> None:
    """Move the subject's epoch past ``retired``, as a forget does (the memory store keeps
    it, in the same database or account as the sessions)."""
    memory: Any = (
        DynamoMemoryStore(store.db)
        if isinstance(store, DynamoSessionStore)
        else SqliteMemoryStore(store.db)  # type: ignore[attr-defined]
    )
    memory.raise_epoch(tenant, subject, retired, "del-1", T0)


def test_an_append_commits_only_under_the_epoch_it_was_decided_under(
    store: SessionStore,
) -> None:
    """Every write of a session is conditioned on its subject's epoch: a forget that lands
    between the service's decision and the write refuses it, with nothing written."""
    store.append(replace(new(1), subject_epoch=0))
    assert store.head(*KEY) is not None and store.head(*KEY).subject_epoch == 0  # type: ignore[union-attr]
    forget(store, "acme", "u-1", 0)

    assert Conflict.EPOCH in refused(lambda: store.append(replace(new(2), subject_epoch=0)))
    assert Conflict.EPOCH in refused(
        lambda: store.append(replace(new(1, key=("acme", "u-1", "s-2")), subject_epoch=0))
    )
    assert Conflict.EPOCH in refused(lambda: store.put_summary(*KEY, summary(), subject_epoch=0))
    assert store.head(*KEY).last_seq == 1  # type: ignore[union-attr]
    assert store.head("acme", "u-1", "s-2") is None
    snap = store.snapshot(*KEY, now=T0, recent=5)
    assert snap is not None and snap.summary is None
    # Under the new epoch the subject writes again; another subject is untouched.
    store.append(replace(new(1, key=("acme", "u-1", "s-3")), subject_epoch=1))
    store.append(replace(new(1, key=("acme", "u-2", "s-1")), subject_epoch=0))


def test_a_forget_takes_the_sessions_of_its_retired_epoch_whatever_their_time(
    store: SessionStore,
) -> None:
    """The purge goes by epoch, not by clock: a session begun under the retired epoch goes
    even when its clock stamped it after the forget, and one begun under the next epoch
    stays even when stamped before it (clocks of two machines disagree)."""
    ahead, behind = ("acme", "u-1", "s-ahead"), ("acme", "u-1", "s-behind")
    legacy = ("acme", "u-1", "s-legacy")  # begun before sessions carried their epoch
    store.append(new(1, key=legacy, at=T0 - timedelta(seconds=1)))
    store.append(replace(new(1, key=ahead, at=T0 + timedelta(seconds=5)), subject_epoch=0))
    forget(store, "acme", "u-1", 0)  # the forget at T0
    store.append(replace(new(1, key=behind, at=T0 - timedelta(seconds=5)), subject_epoch=1))

    # Each session: its head, its message and its receipt.
    assert store.forget_subject("acme", "u-1", T0, retired_epoch=0) == 3 + 3

    assert store.head(*ahead) is None and store.head(*legacy) is None
    assert store.head(*behind) is not None


def test_another_tenant_never_sees_or_touches_a_session(store: SessionStore) -> None:
    acme, globex = ("acme", "u-1", "s-1"), ("globex", "u-1", "s-1")
    fill(store, 2, acme)
    store.put_summary(*acme, summary())

    assert store.head(*globex) is None
    assert store.receipt(*globex, "r-1") is None
    assert store.snapshot(*globex, now=T0, recent=5) is None
    assert store.message(*globex, 1, now=T0) is None
    assert refused(lambda: store.end(*globex)) == {Conflict.ABSENT}
    assert refused(lambda: store.put_summary(*globex, summary())) == {Conflict.ABSENT}
    assert store.forget_subject("globex", "u-1", T0) == 0

    # The same ids in another tenant are another session, with its own sequence.
    store.append(new(1, "r-1", key=globex, content="globex's"))
    acme_snap = store.snapshot(*acme, now=T0, recent=5)
    globex_snap = store.snapshot(*globex, now=T0, recent=5)
    assert acme_snap is not None and globex_snap is not None
    assert [m.content for m in acme_snap.messages] == ["message 1", "message 2"]
    assert [m.content for m in globex_snap.messages] == ["globex's"]
    assert globex_snap.summary is None
    assert store.end(*globex) == 3  # head, message, receipt
    assert store.head(*acme) is not None


def test_the_sessions_purge_step_forgets_through_the_port(store: SessionStore) -> None:
    fill(store, 2)
    step = SessionsStep(store)

    def job(scope: DeletionScope) -> DeletionJob:
        return DeletionJob(
            deletion_id="del_" + "0" * 32,
            tenant_id="acme",
            subject_id="u-1",
            scope=scope,
            target="epoch:0",
            status=DeletionState.PURGING,
            requested_by="tester",
            requested_at=T0,
            completed_at=None,
            copies=[],
        )

    assert step.run(job(DeletionScope.MEMORY)).count == 0
    assert store.head(*KEY) is not None  # one memory's deletion leaves sessions alone
    result = step.run(job(DeletionScope.SUBJECT))
    assert (result.state.value, result.count) == ("DONE", 5)
    assert store.head(*KEY) is None


# ------------------------------------------------------------------------ concurrency


def _append_until_stored(
    store: SessionStore, request_id: str, together: threading.Barrier | None = None
) -> tuple[bool, set[Conflict]]:
    """What the service does: read, decide the next sequence number, compare-and-set,
    re-read on refusal. Returns whether this call stored the message and every cause it
    was refused for on the way. With ``together``, every caller has read the head before
    any first attempt is made, so they surely collide (on a loaded machine a thread could
    otherwise read and write within one time slice, and no two ever meet)."""
    seen: set[Conflict] = set()
    for attempt in range(2000):
        if store.receipt(*KEY, request_id) is not None:
            return False, seen
        head = store.head(*KEY)
        seq = head.last_seq + 1 if head else 1
        if attempt == 0 and together is not None:
            together.wait()
        try:
            store.append(new(seq, request_id, content=f"from {request_id}"))
        except ConditionFailed as err:
            seen |= err.causes
            continue
        return True, seen
    raise AssertionError("an append never got through")


def _race(workers: int, work: Callable[[int], tuple[bool, set[Conflict]]]) -> list[Any]:
    barrier = threading.Barrier(workers)
    results: list[Any] = [None] * workers

    def run(i: int) -> None:
        barrier.wait()
        try:
            results[i] = work(i)
        except BaseException as err:  # reported below, not lost in the thread
            results[i] = err

    threads = [threading.Thread(target=run, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    errors = [r for r in results if isinstance(r, BaseException)]
    assert not errors, errors
    return results


def test_concurrent_appends_each_get_their_own_sequence_number(store: SessionStore) -> None:
    read_first = threading.Barrier(32)
    results = _race(32, lambda i: _append_until_stored(store, f"r-{i}", read_first))

    assert all(stored for stored, _ in results)
    refusals = set().union(*(causes for _, causes in results))
    assert refusals  # the threads did collide on the head ...
    assert refusals <= {Conflict.VERSION, Conflict.EXISTS}  # ... and lost only on it
    snap = store.snapshot(*KEY, now=T0, recent=100)
    assert snap is not None
    assert snap.head.last_seq == 32
    assert [m.seq for m in snap.messages] == list(range(1, 33))
    assert sorted(m.request_id for m in snap.messages) == sorted(f"r-{i}" for i in range(32))
    for i in range(32):
        receipt = store.receipt(*KEY, f"r-{i}")
        assert receipt is not None
        stored = store.message(*KEY, receipt.seq, now=T0)
        assert stored is not None and stored.request_id == f"r-{i}"


def test_one_request_id_sent_by_many_threads_stores_one_message(store: SessionStore) -> None:
    results = _race(16, lambda i: _append_until_stored(store, "r-same"))

    assert sum(stored for stored, _ in results) == 1
    snap = store.snapshot(*KEY, now=T0, recent=100)
    assert snap is not None
    assert snap.head.last_seq == 1
    assert [(m.seq, m.request_id) for m in snap.messages] == [(1, "r-same")]


# ----------------------------------------------------------------- the service on both


class NeverForgotten:
    def forgotten_at(self, tenant_id: str, subject_id: str) -> datetime | None:
        return None

    def forget_state(self, tenant_id: str, subject_id: str) -> ForgetState:
        return ForgetState(epoch=0, forgotten_at=None)


def test_the_service_keeps_its_rules_on_either_store(store: SessionStore) -> None:
    clock = FakeClock(T0)
    sessions = SessionService(store, Settings(), clock, NeverForgotten())

    def say(text: str, request_id: str) -> AppendMessage:
        return AppendMessage(request_id=request_id, role=Role.USER, content=text)

    first, created = sessions.append(ctx(), "u-1", "s-1", say("hello", "a"))
    again, created_again = sessions.append(ctx(), "u-1", "s-1", say("hello", "a"))
    assert created and not created_again and again.message_count == 1
    with pytest.raises(IdempotencyKeyReused):
        sessions.append(ctx(), "u-1", "s-1", say("other", "a"))

    clock.advance(minutes=20)
    assert sessions.read(ctx(), "u-1", "s-1").idle_expires_at == first.idle_expires_at
    renewed, _ = sessions.append(ctx(), "u-1", "s-1", say("still here", "b"))
    assert renewed.idle_expires_at == clock.now() + IDLE
    assert renewed.expires_at == first.expires_at
    assert sessions.message(ctx(), "u-1", "s-1", 2).content == "still here"
    with_summary = sessions.put_summary(
        ctx(), "u-1", "s-1", PutSummary(content="greetings", from_seq=1, through_seq=2)
    )
    assert with_summary.summary is not None and with_summary.summary.through_seq == 2

    clock.advance(minutes=31)
    with pytest.raises(NotFound):
        sessions.read(ctx(), "u-1", "s-1")
    with pytest.raises(SessionExpired):
        sessions.append(ctx(), "u-1", "s-1", say("too late", "c"))
    assert sessions.end(ctx(), "u-1", "s-1") == 6  # head, 2 messages, 2 receipts, summary
    with pytest.raises(NotFound):
        sessions.end(ctx(), "u-1", "s-1")


# ---------------------------------------------------------------- the local sweeper


def test_the_sweeper_removes_what_is_strictly_past_its_ttl(
    sqlite_store: SqliteSessionStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(sqlite_sessions, "SWEEP_BATCH", 2)  # several batches
    short = T0 + timedelta(hours=1)
    fill(sqlite_store, 3, ("acme", "u-1", "old"))  # expires at T0 + CAP
    for seq in (1, 2):
        sqlite_store.append(new(seq, key=("acme", "u-1", "brief"), expires_at=short))
    fill(sqlite_store, 1, ("acme", "u-1", "kept"))
    sqlite_store.put_summary("acme", "u-1", "kept", summary(expires=short))
    epoch = int(short.timestamp())

    assert sqlite_store.sweep_expired(epoch) == 0  # at its ttl: not yet past it
    assert sqlite_store.sweep_expired(epoch + 1) == 5 + 1  # "brief" whole, kept's summary

    assert sqlite_store.head("acme", "u-1", "brief") is None
    assert sqlite_store.receipt("acme", "u-1", "brief", "r-1") is None
    kept = sqlite_store.snapshot("acme", "u-1", "kept", now=T0, recent=5)
    assert kept is not None and kept.summary is None and len(kept.messages) == 1
    assert sqlite_store.head("acme", "u-1", "old") is not None
    assert sqlite_store.sweep_expired(int((T0 + CAP).timestamp()) + 1) == 7 + 3
    assert sqlite_store.head("acme", "u-1", "old") is None
    with sqlite_store.db.read() as conn:
        for table in ("session_heads", "session_messages", "session_receipts"):
            assert conn.execute(f"SELECT COUNT(*) FROM {table}").fetchone()[0] == 0  # noqa: S608
