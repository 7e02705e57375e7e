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
from memvault.errors import NotFound
from memvault.models.memory import CopyState, DeletionState, Memory, MemoryPatch
from memvault.models.recall import RecallRequest
from memvault.search.backend import SearchFilter
from memvault.services.deletion import PurgeRunner
from tests.support.harness import a_write, ctx
from tests.support.recall import RecallRig, make_rig

EMBEDDER = HashingEmbedder()


class RecordingLauncher:
    """A purge launcher that starts nothing: the purge has not run yet."""

    def __init__(self) -> None:
        self.launched: list[str] = []

    def launch(self, tenant_id: str, deletion_id: str, *, resume: bool = False) -> None:
        self.launched.append(deletion_id)


@pytest.fixture(params=["dynamodb", "sqlite"])
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
