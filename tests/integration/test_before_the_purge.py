"""Between a delete (or forget) and its purge, nothing of the memory is served.

The harness normally runs the purge inline, before the request returns, which hides this
window: here the purge launcher only records what it was asked to start, so every read
(GET of each version, list, history, export, recall) meets the table exactly as the
delete or forget left it, and the index still holds the live document. The tombstone
and the retired epoch alone must keep the memory out.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from memvault.embeddings.hashing import HashingEmbedder
from memvault.search.backend import SearchFilter
from memvault.services.deletion import PurgeRunner
from memvault_wire.artifact import StartUpload
from memvault_wire.errors import IdempotencyKeyReused, NotFound, SessionExpired
from memvault_wire.memory import CopyState, DeletionState, Memory, MemoryPatch
from memvault_wire.recall import RecallRequest
from memvault_wire.run import Advance, CreateRun, RunStatus
from memvault_wire.session import AppendMessage, Role
from tests.support.backends import STORES
from tests.support.harness import a_write, ctx
from tests.support.recall import RecallRig, make_rig

EMBEDDER = HashingEmbedder()


class RecordingLauncher:
    """A purge launcher that starts nothing: the purge has not run yet."""

    def __init__(self) -> None:
        self.launched: list[str] = []

    def launch(self, tenant_id: str, deletion_id: str, *, resume: bool = False) -> None:
        self.launched.append(deletion_id)


@pytest.fixture(params=STORES)
def rig(request: pytest.FixtureRequest) -> Iterator[RecallRig]:
    with mock_aws():
        yield make_rig("embedded", EMBEDDER, recall_relevance_floor=0.1, store=request.param)


@pytest.fixture
def launcher(rig: RecallRig) -> RecordingLauncher:
    recording = RecordingLauncher()
    rig.services.memory.purge = recording
    return recording


def write(rig: RecallRig, content: str, **kw: Any) -> Memory:
    body = {"request_id": uuid.uuid4().hex, "canonical_key": None, "scope": {}, "tags": []}
    return rig.services.memory.write(
        ctx(), "u-1", a_write(content=content, **{**body, **kw})
    ).memory


def recalled(rig: RecallRig, query: str) -> list[str]:
    result = rig.services.recall.recall(ctx(), "u-1", RecallRequest(query=query))
    return [i.memory.memory_id for i in result.items]


def indexed_hits(rig: RecallRig, query: str) -> set[str]:
    """Chains the index itself proposes for the query, before any re-validation."""
    from memvault.clock import iso

    flt = SearchFilter(
        tenant_id="acme",
        subject_id="u-1",
        now=iso(rig.clock.now()),
        max_sensitivity_rank=1,
        agent_role=None,
    )
    found = rig.index.search(flt, query, EMBEDDER.embed([query])[0], 10)
    return {h.chain_id for h in [*found.keyword, *found.vector]}


def served_anywhere(rig: RecallRig, gone: list[Memory], query: str) -> list[str]:
    """Every way the memory could still be served; an empty list when none is."""
    memory = rig.services.memory
    ids = {m.memory_id for m in gone}
    leaks: list[str] = []
    for m in gone:
        try:
            memory.get(ctx(), "u-1", m.memory_id)
            leaks.append(f"GET {m.memory_id}")
        except NotFound:
            pass
        try:
            memory.history(ctx(), "u-1", m.memory_id)
            leaks.append(f"history {m.memory_id}")
        except NotFound:
            pass
    listed = {m.memory_id for m in memory.list_memories(ctx(), "u-1", limit=100).items}
    leaks += [f"list {i}" for i in listed & ids]
    exported = memory.export(ctx(), "u-1")["memories"]
    leaks += [f"export {e['memory_id']}" for e in exported if e["memory_id"] in ids]
    # The index may still propose the chain (it is a derived copy); serving it is not.
    leaks += [f"recall {i}" for i in recalled(rig, query) if i in ids]
    # A retry of the request that wrote a version: anything but not_found (its replay, or
    # 409 telling a guessed payload from the stored one) answers about the deleted fact.
    for m in gone:
        if m.request_id is None:
            continue
        try:
            memory.write(ctx(), "u-1", a_write(request_id=m.request_id, content="a guess"))
            leaks.append(f"replay {m.memory_id}")
        except IdempotencyKeyReused:
            leaks.append(f"replay {m.memory_id} (409)")
        except NotFound:
            pass
    return leaks


def test_a_deleted_memory_is_served_nowhere_before_its_purge_runs(
    rig: RecallRig, launcher: RecordingLauncher
) -> None:
    v1 = write(rig, "Lin's desk is by the north window", canonical_key="desk-location")
    v2 = rig.services.memory.correct(
        ctx(),
        "u-1",
        v1.memory_id,
        MemoryPatch(expected_version=1, content="Lin's desk is by the south window"),
    )
    kept = write(rig, "Lin's desk lamp is a green one", canonical_key="desk-lamp")
    rig.sync()
    query = "where is Lin's desk window"
    assert v2.memory_id in recalled(rig, query)
    assert served_anywhere(rig, [v1, v2], query) != []  # served while it lives

    job = rig.services.memory.delete(ctx(), "u-1", v1.memory_id)

    assert launcher.launched == [job.deletion_id]
    assert job.status is DeletionState.BLOCKED
    assert {c.name: c.status for c in job.copies}["primary"] is CopyState.PENDING
    # The stream has not run either: the index still proposes the live document.
    assert v1.chain_id in indexed_hits(rig, query)
    assert served_anywhere(rig, [v1, v2], query) == []
    # Once the stream carries the delete mark, still nothing.
    rig.sync()
    assert served_anywhere(rig, [v1, v2], query) == []
    # The memory beside it is untouched.
    assert rig.services.memory.get(ctx(), "u-1", kept.memory_id).content == kept.content
    assert kept.memory_id in recalled(rig, "Lin's desk lamp green")


def test_deleting_by_an_old_version_id_blocks_the_whole_chain_before_the_purge(
    rig: RecallRig, launcher: RecordingLauncher
) -> None:
    v1 = write(rig, "Lin's team standup is at nine", canonical_key="standup-time")
    v2 = rig.services.memory.correct(
        ctx(), "u-1", v1.memory_id, MemoryPatch(expected_version=1, content="standup at ten")
    )
    v3 = rig.services.memory.correct(
        ctx(), "u-1", v2.memory_id, MemoryPatch(expected_version=2, content="standup at eleven")
    )
    rig.sync()

    rig.services.memory.delete(ctx(), "u-1", v2.memory_id)

    assert len(launcher.launched) == 1
    assert served_anywhere(rig, [v1, v2, v3], "when is Lin's team standup") == []
    # The key is free again: a new fact starts a new chain at version 1.
    fresh = write(rig, "standup moved to noon", canonical_key="standup-time")
    assert (fresh.version, fresh.chain_id != v1.chain_id) == (1, True)


def test_a_forgotten_subject_is_recalled_nowhere_before_the_purge_runs(
    rig: RecallRig, launcher: RecordingLauncher
) -> None:
    parked = write(rig, "Lin parks the car on level three")
    rig.sync()
    query = "where does Lin park the car"
    assert recalled(rig, query) == [parked.memory_id]

    job = rig.services.memory.forget(ctx(), "u-1")

    assert launcher.launched == [job.deletion_id] and job.status is DeletionState.BLOCKED
    assert parked.chain_id in indexed_hits(rig, query)  # the index still has it
    assert served_anywhere(rig, [parked], query) == []
    rig.sync()
    assert served_anywhere(rig, [parked], query) == []

    # What the subject says after being forgotten is theirs again, and only that.
    again = write(rig, "Lin parks the car on level four now")
    rig.sync()
    assert recalled(rig, query) == [again.memory_id]


class FailingIndexStep:
    """The index step, failing every attempt: the index keeps whatever it held."""

    copy = "index"

    def run(self, job: Any) -> Any:
        raise ConnectionError("the index did not answer")


def test_when_only_the_index_step_fails_the_live_document_left_behind_is_never_served(
    rig: RecallRig, launcher: RecordingLauncher
) -> None:
    v1 = write(rig, "Lin's spare house key is under the blue pot", canonical_key="spare-key")
    v2 = rig.services.memory.correct(
        ctx(),
        "u-1",
        v1.memory_id,
        MemoryPatch(expected_version=1, content="Lin's spare house key is under the red pot"),
    )
    rig.sync()
    job = rig.services.memory.delete(ctx(), "u-1", v2.memory_id)
    repo = rig.services.memory.repo
    steps = [
        FailingIndexStep() if s.copy == "index" else s for s in rig.services.purge.handlers.values()
    ]

    failed = PurgeRunner(repo, rig.clock, steps, sleep=lambda s: None).run("acme", job.deletion_id)

    copies = {c.name: c.status for c in failed.copies}
    assert failed.status is DeletionState.FAILED
    assert (copies["primary"], copies["versions"], copies["index"]) == (
        CopyState.DONE,
        CopyState.DONE,
        CopyState.FAILED,
    )
    held = rig.index.get("acme", v1.chain_id)
    assert held is not None and held[1]["doc_type"] == "memory"  # still live in the index
    query = "where is Lin's spare house key"
    assert v1.chain_id in indexed_hits(rig, query)
    assert served_anywhere(rig, [v1, v2], query) == []


def test_a_forgotten_subjects_sessions_runs_and_artifacts_are_gone_at_once_and_the_purge_keeps_what_came_after(  # noqa: E501
    rig: RecallRig, launcher: RecordingLauncher
) -> None:
    """A forget covers the subject's sessions, runs and artifacts the moment it is
    acknowledged, not when its purge runs: each is then absent on every route, and its
    id stays taken until the purge. The purge, whenever it runs, removes only what the
    forget covered: what the subject began after it (here in the very same instant, as
    the clock does not move) is another life of theirs and stays."""
    services = rig.services
    me = ctx()

    def say(text: str) -> AppendMessage:
        return AppendMessage(request_id=uuid.uuid4().hex, role=Role.USER, content=text)

    def upload(request_id: str) -> str:
        body = StartUpload(
            request_id=request_id, media_type="text/plain", size_bytes=4, sha256="ab" * 32
        )
        return str(services.artifacts.start(me, "u-1", body)[0].artifact_id)

    services.sessions.append(me, "u-1", "s-1", say("book the flight"))
    services.runs.create(me, "r-1", CreateRun(subject_id="u-1", plan_version="p1"))
    old_artifact = upload("up-1")

    job = services.memory.forget(me, "u-1")
    assert launcher.launched == [job.deletion_id]

    with pytest.raises(NotFound):
        services.sessions.read(me, "u-1", "s-1")
    with pytest.raises(NotFound):
        services.sessions.end(me, "u-1", "s-1")
    with pytest.raises(SessionExpired):
        services.sessions.append(me, "u-1", "s-1", say("and a hotel"))
    with pytest.raises(NotFound):
        services.runs.get(me, "r-1")
    with pytest.raises(NotFound):
        services.runs.advance(
            me, "r-1", Advance(expected_version=1, status=RunStatus.RUNNING, step="go")
        )
    with pytest.raises(IdempotencyKeyReused):  # the id is taken until the purge
        services.runs.create(me, "r-1", CreateRun(subject_id="u-1", plan_version="p1"))
    with pytest.raises(NotFound):
        services.artifacts.get(me, "u-1", old_artifact)
    with pytest.raises(NotFound):  # nor does its upload's request id bring it back
        upload("up-1")

    # After the forget, in the same instant: the subject's new life.
    services.sessions.append(me, "u-1", "s-2", say("a new trip"))
    services.runs.create(me, "r-2", CreateRun(subject_id="u-1", plan_version="p1"))
    new_artifact = upload("up-2")

    done = services.purge.run("acme", job.deletion_id)
    assert done.status is DeletionState.COMPLETED

    assert services.sessions.read(me, "u-1", "s-2").message_count == 1
    assert services.runs.get(me, "r-2").version == 1
    assert services.artifacts.get(me, "u-1", new_artifact).artifact_id == new_artifact
    # The purge freed the forgotten ids: they start afresh.
    again, created = services.sessions.append(me, "u-1", "s-1", say("hello again"))
    assert created and again.message_count == 1
    assert services.runs.create(me, "r-1", CreateRun(subject_id="u-1", plan_version="p1"))[1]
    with pytest.raises(NotFound):
        services.artifacts.get(me, "u-1", old_artifact)


def test_a_second_forget_in_the_same_instant_covers_what_came_between(
    rig: RecallRig, launcher: RecordingLauncher
) -> None:
    """What is begun after a forget is stamped past it, and a later forget is stamped
    past the one before: so a second forget covers what came between the two even when
    the clock has not moved (or a clock is behind another)."""
    services = rig.services
    me = ctx()
    first = services.memory.forget(me, "u-1")
    services.sessions.append(
        me, "u-1", "s-1", AppendMessage(request_id="m-1", role=Role.USER, content="hi")
    )
    services.runs.create(me, "r-1", CreateRun(subject_id="u-1", plan_version="p1"))
    assert services.sessions.read(me, "u-1", "s-1").message_count == 1

    second = services.memory.forget(me, "u-1")

    assert second.requested_at > first.requested_at
    with pytest.raises(NotFound):
        services.sessions.read(me, "u-1", "s-1")
    with pytest.raises(NotFound):
        services.runs.get(me, "r-1")
    for job in (first, second):
        services.purge.run("acme", job.deletion_id)
    with pytest.raises(NotFound):
        services.sessions.read(me, "u-1", "s-1")
    assert services.runs.create(me, "r-1", CreateRun(subject_id="u-1", plan_version="p1"))[1]
