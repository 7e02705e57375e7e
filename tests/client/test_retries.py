"""Retries against real answers: a 429 the stack itself gives when its store is busy,
and 429s, 503s, lost answers and dropped connections from the fault proxy in front of
the stack (a real HTTP server; it forwards whatever it is not told to break)."""

from __future__ import annotations

import logging
import re
import sqlite3
import threading
import time
from pathlib import Path

import pytest

from memvault_client import (
    ConnectionFailed,
    MemvaultClient,
    MemvaultError,
    NotFound,
    RetryPolicy,
    Throttled,
    VersionConflict,
)
from memvault_client.errors import parse_retry_after
from memvault_local.process import RunningStack, free_port, start_stack
from tests.client.conftest import DROP, LOST, Fault, FaultProxy, memory, mint, new_subject

FAST = RetryPolicy(max_attempts=4, base_delay=0.01, max_delay=0.05)


@pytest.fixture
def subject() -> str:
    return new_subject("retry")


def _client(
    stack: RunningStack, faults: FaultProxy, subject: str, retry: RetryPolicy = FAST
) -> MemvaultClient:
    return MemvaultClient(faults.url, token=mint(stack, subject), retry=retry)


def test_a_429_then_success_is_retried_and_the_write_is_stored_once(
    stack: RunningStack, faults: FaultProxy, subject: str
) -> None:
    faults.fail(Fault(status=429), Fault(status=429))
    with _client(stack, faults, subject) as mv:
        written = mv.write_memory(subject, memory("Prefers the window seat"))
        listed = mv.list_memories(subject).items

    posts = faults.requests("POST")
    assert len(posts) == 3
    ids = {p.body["request_id"] for p in posts}
    assert len(ids) == 1 and re.fullmatch(r"[0-9a-f]{32}", ids.pop())
    assert [p.upstream_status for p in posts] == [None, None, 201]
    assert [m.memory_id for m in listed] == [written.memory_id]


def test_a_lost_answer_is_retried_with_the_same_request_id_and_replays(
    stack: RunningStack, faults: FaultProxy, subject: str
) -> None:
    """The stack stores the first attempt; the proxy throws its answer away and says 503.
    The retry carries the same request_id, so the stack replays instead of writing again."""
    faults.fail(LOST)
    with _client(stack, faults, subject) as mv:
        written = mv.write_memory(subject, memory("Takes the early train on Mondays"))
        listed = mv.list_memories(subject).items

    posts = faults.requests("POST")
    assert [p.upstream_status for p in posts] == [201, 201]
    assert [p.upstream_replay for p in posts] == ["false", "true"]
    assert posts[0].body["request_id"] == posts[1].body["request_id"]
    assert [m.memory_id for m in listed] == [written.memory_id]


def test_a_batch_whose_answer_is_lost_is_retried_with_the_same_ids_and_replays(
    stack: RunningStack, faults: FaultProxy, subject: str
) -> None:
    faults.fail(LOST)
    with _client(stack, faults, subject) as mv:
        answer = mv.write_memories(subject, [memory("Walks the dog at 7"), memory("Owns a kayak")])
        listed = mv.list_memories(subject).items

    posts = faults.requests("POST")
    assert [p.upstream_status for p in posts] == [200, 200]
    assert posts[0].body == posts[1].body  # the same request ids, generated once
    assert (answer.written, answer.replayed) == (0, 2)
    assert sorted(m.memory_id for m in listed) == sorted(
        i.memory.memory_id for i in answer.items if i.memory
    )


def test_a_caller_given_request_id_is_kept_and_each_call_gets_a_new_one(
    stack: RunningStack, faults: FaultProxy, subject: str
) -> None:
    with _client(stack, faults, subject) as mv:
        mv.write_memory(subject, memory("one", request_id="mine-1"))
        mv.write_memory(subject, memory("two"))
        mv.write_memory(subject, memory("three"))
        mv.append_message(subject, "s", {"role": "user", "content": "hi"})
    ids = [p.body["request_id"] for p in faults.requests("POST")]
    assert ids[0] == "mine-1"
    assert len(set(ids)) == 4


def test_the_real_stack_answers_429_while_its_store_is_locked_and_the_retry_succeeds(
    tmp_path: Path,
) -> None:
    """Another process holds the embedded store's write lock: the stack waits its busy
    timeout (10 s) and answers its own ``429 throttled`` (``memvault.storage.sqlite.db``).
    The lock is let go once that 429 has passed the proxy; the client backs off, tries
    again with the same request_id, and the write lands. A stack of its own, with nothing
    else writing, so the request is the one that meets the lock."""
    quiet = start_stack(
        tmp_path / "home",
        MEMVAULT_EMBEDDING_MODEL="hashing",
        MEMVAULT_EMBED_WORKER="off",
        MEMVAULT_SWEEP_SECONDS="3600",
    )
    proxy = FaultProxy(quiet.url)
    subject = new_subject("busy")
    try:
        with MemvaultClient(
            proxy.url, token=mint(quiet, subject), retry=RetryPolicy(base_delay=0.2)
        ) as mv:
            warm = mv.write_memory(subject, memory("A first write warms the stack up"))
            deadline = time.monotonic() + 30
            while mv.get_memory(subject, warm.memory_id).index_status != "indexed":
                assert time.monotonic() < deadline
                time.sleep(0.1)
            time.sleep(0.3)  # the change feed's cursor is written after the index
            proxy.reset()

            holder = sqlite3.connect(
                quiet.home / "data" / "memvault.db", isolation_level=None, check_same_thread=False
            )
            holder.execute("BEGIN IMMEDIATE")

            def release_after_the_429() -> None:
                until = time.monotonic() + 60
                while time.monotonic() < until and not any(
                    s.upstream_status == 429 for s in proxy.requests()
                ):
                    time.sleep(0.05)
                holder.execute("ROLLBACK")
                holder.close()

            releaser = threading.Thread(target=release_after_the_429)
            releaser.start()
            try:
                written = mv.write_memory(subject, memory("Written once the store is free"))
            finally:
                releaser.join()
            listed = [m.memory_id for m in mv.list_memories(subject).items]
        posts = proxy.requests("POST")
    finally:
        proxy.close()
        quiet.stop()
    assert [p.upstream_status for p in posts] == [429, 201]
    assert posts[0].body["request_id"] == posts[1].body["request_id"]
    assert sorted(listed) == sorted([warm.memory_id, written.memory_id])


def test_retry_after_is_honoured(stack: RunningStack, faults: FaultProxy, subject: str) -> None:
    faults.fail(Fault(status=503, retry_after="1"))
    with _client(stack, faults, subject) as mv:
        started = time.monotonic()
        mv.list_memories(subject)
        waited = time.monotonic() - started
    assert len(faults.requests("GET")) == 2
    assert waited >= 1.0  # FAST alone would have waited at most 0.01 s


def test_a_retry_after_beyond_the_limit_is_raised_at_once(
    stack: RunningStack, faults: FaultProxy, subject: str
) -> None:
    faults.fail(Fault(status=429, retry_after="3600"))
    with _client(stack, faults, subject) as mv, pytest.raises(Throttled) as caught:
        mv.list_memories(subject)
    assert caught.value.retry_after == 3600
    assert caught.value.status == 429
    assert len(faults.requests()) == 1


def test_attempts_are_bounded(stack: RunningStack, faults: FaultProxy, subject: str) -> None:
    faults.fail(*[Fault(status=503)] * 10)
    policy = RetryPolicy(max_attempts=3, base_delay=0.01)
    with (
        _client(stack, faults, subject, retry=policy) as mv,
        pytest.raises(MemvaultError) as caught,
    ):
        mv.list_memories(subject)
    assert (caught.value.status, caught.value.code) == (503, "bad_response")
    assert type(caught.value) is MemvaultError  # API Gateway's body has no error code
    assert len(faults.requests()) == 3


def test_no_retry_on_other_4xx(stack: RunningStack, faults: FaultProxy, subject: str) -> None:
    with _client(stack, faults, subject) as mv:
        first = mv.write_memory(subject, memory("Cycles to work", canonical_key="commute"))
        faults.reset()
        with pytest.raises(NotFound):  # 404
            mv.get_memory(subject, "mem_" + "1" * 32)
        with pytest.raises(MemvaultError) as unprocessable:  # 422, from the stack's policy
            mv.write_memory(subject, memory("no consent", consent=False))
        mv.correct_memory(subject, first.memory_id, {"expected_version": 1, "content": "Walks"})
        with pytest.raises(VersionConflict):  # 409
            mv.correct_memory(subject, first.memory_id, {"expected_version": 1, "content": "x"})
    assert unprocessable.value.status == 422
    assert [p.upstream_status for p in faults.requests()] == [404, 422, 200, 409]


def test_a_dropped_connection_is_retried_for_an_idempotent_request(
    stack: RunningStack, faults: FaultProxy, subject: str
) -> None:
    faults.fail(DROP, DROP)
    with _client(stack, faults, subject) as mv:
        assert mv.list_memories(subject).items == []
    assert len(faults.requests("GET")) == 3


def test_a_dropped_connection_is_not_retried_for_a_compare_and_set(
    stack: RunningStack, faults: FaultProxy, subject: str
) -> None:
    run_id = f"run-{subject}"
    with _client(stack, faults, subject) as mv:
        mv.create_run(run_id, {"subject_id": subject, "plan_version": "p1"})
        faults.fail(DROP)
        with pytest.raises(ConnectionFailed) as caught:
            mv.advance_run(run_id, {"expected_version": 1, "status": "RUNNING", "step": "go"})
        assert mv.get_run(run_id).version == 1
    assert isinstance(caught.value, OSError)  # code that catches OSError keeps working
    assert len(faults.requests("POST")) == 1


def test_a_refused_connection_is_retried_then_raised(caplog: pytest.LogCaptureFixture) -> None:
    policy = RetryPolicy(max_attempts=3, base_delay=0.01)
    caplog.set_level(logging.INFO, logger="memvault_client")
    with (
        MemvaultClient(f"http://127.0.0.1:{free_port()}", retry=policy) as mv,
        pytest.raises(ConnectionFailed) as caught,
    ):
        mv.health()
    assert caught.value.details["attempts"] == 3
    assert len([r for r in caplog.records if r.name == "memvault_client"]) == 2


def test_retry_logs_carry_neither_content_nor_token(
    stack: RunningStack, faults: FaultProxy, subject: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    token = mint(stack, subject)
    content = "Keeps the spare key under the blue flowerpot"
    faults.fail(Fault(status=429), LOST)
    with MemvaultClient(faults.url, token=token, retry=FAST) as mv:
        mv.write_memory(subject, memory(content, tags=["flowerpot-tag"]))
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert "memvault memory.write: 429 throttled; attempt 1 of 4" in logged
    assert content not in logged and token not in logged and "flowerpot" not in logged


def test_backoff_is_exponential_with_full_jitter() -> None:
    policy = RetryPolicy(base_delay=0.1, max_delay=0.5)
    for attempt, ceiling in [(1, 0.1), (2, 0.2), (3, 0.4), (4, 0.5), (9, 0.5)]:
        delays = [policy.backoff(attempt) for _ in range(300)]
        assert all(0 <= d <= ceiling for d in delays)
        assert max(delays) > ceiling * 0.8 and min(delays) < ceiling * 0.2  # spread, not fixed


def test_retry_after_takes_seconds_or_an_http_date() -> None:
    assert parse_retry_after("2") == 2.0
    soon = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(time.time() + 30))
    assert 25 <= (parse_retry_after(soon) or 0) <= 31
    assert parse_retry_after("whenever") is None
