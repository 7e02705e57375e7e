"""Local mode's own machinery on the embedded store: the outbox pump feeding the real
indexer, ``memvault doctor``, and the resolver made safe for a threaded server."""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from memvault.embeddings.hashing import HashingEmbedder
from memvault.indexing.indexer import BatchOutcome, Indexer
from memvault.search.embedded import EmbeddedIndex
from memvault.services.bundle import Services
from memvault.services.recall import RecallService
from memvault.storage.ports.changes import Change
from memvault.storage.sqlite.db import Database, OutboxFeed
from memvault_local.doctor import doctor
from memvault_local.outbox_pump import OutboxPump
from memvault_local.threads import make_resolver_thread_safe
from memvault_wire.recall import RecallRequest
from tests.support.api import call, claims, memory_body
from tests.support.harness import FakeClock, a_write, ctx, make_services

EMBEDDER = HashingEmbedder()


@pytest.fixture
def local(aws: None, tmp_path: Path) -> Any:
    index = EmbeddedIndex(f"local-{tmp_path.name}--{EMBEDDER.slug}")
    services, _, clock = make_services(
        store="sqlite", data_dir=str(tmp_path / "data"), clock=FakeClock()
    )
    database: Database = services.stores.database
    indexer = Indexer(index, EMBEDDER, services.stores.memory, clock)
    recall = RecallService(services.stores.memory, index, EMBEDDER, services.recall.settings, clock)
    yield services, database, indexer, index, recall, clock
    database.close()


def test_the_pump_indexes_every_write_and_resumes_from_its_cursor(local: Any) -> None:
    services, database, indexer, index, recall, _ = local
    pump = OutboxPump(OutboxFeed(database), indexer, backoff_seconds=0)
    m = services.memory.write(ctx(), "u-1", a_write(content="Lin prefers green tea")).memory

    # The write only: the indexer's own index-status change is not fed back to it.
    assert pump.drain() == 1
    held_version = services.stores.memory.version("acme", "u-1", m.memory_id)
    assert held_version is not None and held_version.index_status.value == "indexed"
    found = recall.recall(ctx(), "u-1", RecallRequest(query="green tea"))
    assert [i.memory.memory_id for i in found.items] == [m.memory_id]
    # A new pump on the same file (a restart) starts after the cursor: nothing twice.
    again = OutboxPump(OutboxFeed(database), indexer, backoff_seconds=0)
    assert again.backlog() == 0 and again.drain() == 0

    services.memory.delete(ctx(), "u-1", m.memory_id)
    again.drain()
    assert recall.recall(ctx(), "u-1", RecallRequest(query="green tea")).items == []
    held = index.get("acme", m.chain_id)
    assert held is not None and held[1]["doc_type"] == "tombstone"


class Failing:
    """Fails the first change of every batch ``times`` times, then indexes for real."""

    def __init__(self, inner: Indexer, times: int) -> None:
        self.inner, self.times, self.calls = inner, times, 0

    def process(self, changes: list[Change]) -> BatchOutcome:
        self.calls += 1
        if self.times > 0:
            self.times -= 1
            return BatchOutcome(failed_sequence_numbers=[changes[0].position])
        return self.inner.process(changes)


def test_a_failing_change_is_retried_then_dropped_by_ids_only(local: Any, tmp_path: Path) -> None:
    services, database, indexer, *_ = local
    services.memory.write(ctx(), "u-1", a_write(content="SECRET-LESS marker text"))
    failures = tmp_path / "failures.jsonl"
    pump = OutboxPump(
        OutboxFeed(database),
        Failing(indexer, 99),
        max_retries=2,
        on_failure=failures,
        backoff_seconds=0,
    )

    pump.drain()

    assert pump.dropped == 1
    (entry,) = [json.loads(line) for line in failures.read_text().splitlines()]
    assert entry["tenant_id"] == "acme" and entry["memory_id"]
    assert "marker" not in failures.read_text()


def test_a_change_that_fails_a_few_times_is_delivered_once_it_works(local: Any) -> None:
    services, database, indexer, index, *_ = local
    m = services.memory.write(ctx(), "u-1", a_write(content="Lin likes oolong")).memory
    handler = Failing(indexer, 2)
    pump = OutboxPump(OutboxFeed(database), handler, max_retries=5, backoff_seconds=0)

    pump.drain()

    assert handler.calls == 3 and pump.dropped == 0  # 2 failures, then the write
    assert index.get("acme", m.chain_id) is not None


def test_doctor_passes_a_healthy_store_and_names_each_broken_invariant(
    local: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    import io

    services, database, indexer, index, _, clock = local
    now = int(clock.now().timestamp())
    kept = services.memory.write(ctx(), "u-1", a_write(content="kept")).memory
    other = services.memory.write(
        ctx(), "u-1", a_write(request_id="r-2", canonical_key="k2", content="other")
    ).memory
    OutboxPump(OutboxFeed(database), indexer, backoff_seconds=0).drain()
    out = io.StringIO()
    assert doctor(database, index, out, now) == 0, out.getvalue()

    # Corruption production cannot create, forged to prove the doctor sees it: a live chain
    # whose current version is marked deleted, and a pointer to a chain that is gone.
    with database.write() as conn:
        conn.execute(
            "UPDATE memory_versions SET status = 'deleted', "
            "body = json_set(body, '$.status', 'deleted') WHERE memory_id = ?",
            (kept.memory_id,),
        )
        conn.execute("DELETE FROM memory_chains WHERE chain_id = ?", (other.chain_id,))
    out = io.StringIO()

    assert doctor(database, index, out, now) == 1
    report = out.getvalue()
    assert f"current version {kept.memory_id} is deleted" in report
    assert f"names chain {other.chain_id}, which does not exist" in report
    assert "no such chain in the store" in report


def test_concurrent_requests_on_threads_each_get_their_own_answer(services: Services) -> None:
    """Powertools keeps the event being resolved on a class; without per-thread state two
    requests on threads answer with each other's path parameters."""
    from memvault.api.deps import deps

    make_resolver_thread_safe()
    deps.use(services)
    try:
        subjects = [f"u-{i}" for i in range(12)]
        for s in subjects:
            call("POST", f"/v1/subjects/{s}/memories", claims(subject=s), memory_body())
        barrier = threading.Barrier(len(subjects))
        seen: dict[str, list[str]] = {}

        def read(s: str) -> None:
            barrier.wait()
            answers = [
                call("GET", f"/v1/subjects/{s}/memories", claims(subject=s)) for _ in range(5)
            ]
            seen[s] = [
                a.body["items"][0]["subject_id"] if a.status == 200 else str(a.status)
                for a in answers
            ]

        threads = [threading.Thread(target=read, args=(s,)) for s in subjects]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        deps.use(None)

    assert seen == {s: [s] * 5 for s in subjects}


def test_a_route_first_requested_on_threads_at_once_builds_its_middleware_once(
    services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Powertools builds a route's middleware stack in place on the route's first request,
    unlocked. Threads making a route's first requests at once each wrapped the stack the
    others were building; every later request to that route then ran the nested stack and
    answered 500. CI saw it once: 62 of the 64 first PATCHes of a memory answered 500.

    The threads here enter the build together; whichever order they run in, a second build
    is the nesting the race made, and without the lock-and-recheck it happens every time."""
    from memvault.api.app import app
    from memvault.api.deps import deps

    make_resolver_thread_safe()
    route = next(
        r for r in app._dynamic_routes if r.method == "PATCH" and r.path.endswith("<memory_id>")
    )
    monkeypatch.setattr(route, "_middleware_stack", route.func)
    monkeypatch.setattr(route, "_middleware_stack_built", False)
    barrier = threading.Barrier(4)

    def first_request() -> None:
        barrier.wait()
        route._build_middleware_stack(router_middlewares=app._router_middlewares, app=app)

    threads = [threading.Thread(target=first_request) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    deps.use(services)
    try:
        written = call("POST", "/v1/subjects/u-1/memories", claims(), memory_body())
        memory_id = written.body["memory_id"]
        answers = [
            call(
                "PATCH",
                f"/v1/subjects/u-1/memories/{memory_id}",
                claims(),
                {"expected_version": 1, "content": f"Likes the colour number {n}"},
            )
            for n in range(2)
        ]
    finally:
        deps.use(None)

    assert [(a.status, a.code) for a in answers] == [(200, None), (409, "version_conflict")]


class _LostLauncher:
    """A purge queued for the background worker when the process died: never run."""

    def launch(self, tenant_id: str, deletion_id: str, *, resume: bool = False) -> None:
        return None


def test_a_deletion_a_crash_cut_short_is_finished_by_resume(local: Any) -> None:
    """The fault harness found it: a job whose purge was lost stayed BLOCKED for ever (its
    client already had the 202), and a forgotten subject's job could never be resumed."""
    import io

    from memvault.services.deletion import resume_unfinished
    from memvault_local.admin import resume_deletions
    from memvault_wire.memory import DeletionState

    services, *_ = local
    kept = services.memory.purge
    services.memory.purge = _LostLauncher()
    m = services.memory.write(ctx(), "u-1", a_write(canonical_key=None)).memory
    deleted = services.memory.delete(ctx(), "u-1", m.memory_id)
    forgotten = services.memory.forget(ctx("acme", "u-2"), "u-2")
    services.memory.purge = kept
    assert {j.deletion_id for j in services.purge.unfinished()} == {
        deleted.deletion_id,
        forgotten.deletion_id,
    }

    resumed = resume_unfinished(services.purge, services.memory.purge)  # what a start does

    assert len(resumed) == 2
    for job in (deleted, forgotten):
        done = services.purge.load("acme", job.deletion_id)
        assert done.status is DeletionState.COMPLETED, done
    out = io.StringIO()
    assert resume_deletions(services, out) == 0
    assert out.getvalue() == "no unfinished deletions\n"
