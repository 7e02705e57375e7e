"""MemvaultSaver's own guarantees, on the real local stack over HTTP."""

from __future__ import annotations

import asyncio
import itertools
import operator
import threading
import uuid
from collections.abc import Iterator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import Checkpoint, empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from memvault_client import AsyncMemvaultClient, ConsentRequired, MemvaultClient, VersionConflict
from memvault_client.langgraph import CheckpointConflict, CheckpointWithheld, MemvaultSaver
from memvault_local.devkeys import DevKey
from memvault_local.process import RunningStack
from tests.langgraph_adapters.conftest import SCOPES, TENANT, mint


@pytest.fixture
def client(stack: RunningStack, subject: str) -> Iterator[MemvaultClient]:
    with MemvaultClient(stack.url, token=mint(stack, subject)) as mv:
        yield mv


def _checkpoint(**values: Any) -> Checkpoint:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=-1))
    cp["channel_values"] = dict(values)
    cp["channel_versions"] = dict.fromkeys(values, 1)
    return cp


def _config(thread: str, checkpoint_id: str | None = None) -> RunnableConfig:
    conf: dict[str, Any] = {"thread_id": thread, "checkpoint_ns": ""}
    if checkpoint_id is not None:
        conf["checkpoint_id"] = checkpoint_id
    return {"configurable": conf}


def test_two_workers_resuming_one_thread_cannot_fork_it(stack: RunningStack, subject: str) -> None:
    thread = f"t-{uuid.uuid4().hex}"
    token = mint(stack, subject)
    with MemvaultClient(stack.url, token=token) as mv:
        root = MemvaultSaver(subject_id=subject, client=mv).put(
            _config(thread), _checkpoint(n=0), {"source": "input", "step": -1}, {}
        )
    parent = root["configurable"]["checkpoint_id"]
    barrier = threading.Barrier(2)
    outcomes: dict[str, Any] = {}

    def worker(name: str) -> None:
        with MemvaultClient(stack.url, token=token) as mv:
            saver = MemvaultSaver(subject_id=subject, client=mv)
            child = _checkpoint(n=1, by=name)
            barrier.wait()
            try:
                saver.put(_config(thread, parent), child, {"source": "loop", "step": 0}, {})
                outcomes[name] = child["id"]
            except CheckpointConflict as conflict:
                outcomes[name] = conflict
                # The loser re-reads the thread and continues from the new head.
                head = saver.get_tuple(_config(thread))
                outcomes[f"{name}-head"] = head.checkpoint["id"] if head else None
                assert head is not None
                retry = _checkpoint(n=2, by=name)
                saver.put(_config(thread, head.checkpoint["id"]), retry, {"step": 1}, {})
                outcomes[f"{name}-retry"] = retry["id"]

    workers = [threading.Thread(target=worker, args=(n,)) for n in ("a", "b")]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
    conflicts = [v for v in outcomes.values() if isinstance(v, CheckpointConflict)]
    winners = [k for k, v in outcomes.items() if k in ("a", "b") and isinstance(v, str)]
    assert len(conflicts) == 1 and len(winners) == 1, outcomes
    assert isinstance(conflicts[0], VersionConflict)  # the SDK's class, for its callers
    assert conflicts[0].current_checkpoint_id == outcomes[winners[0]]
    loser_name = next(k for k, v in outcomes.items() if isinstance(v, CheckpointConflict))
    assert outcomes[f"{loser_name}-head"] == outcomes[winners[0]]
    loser = next(k for k, v in outcomes.items() if isinstance(v, CheckpointConflict))
    with MemvaultClient(stack.url, token=token) as mv:
        history = list(MemvaultSaver(subject_id=subject, client=mv).list(_config(thread)))
    ids = [t.checkpoint["id"] for t in history]
    # One line of descent: retry <- winner <- root, each the parent of the next.
    assert ids == [outcomes[f"{loser}-retry"], outcomes[winners[0]], parent]
    for child, older in itertools.pairwise(history):
        assert child.parent_config is not None
        assert child.parent_config["configurable"]["checkpoint_id"] == older.checkpoint["id"]


def test_repeated_writes_of_a_task_are_stored_once(client: MemvaultClient, subject: str) -> None:
    saver = MemvaultSaver(subject_id=subject, client=client)
    thread = f"t-{uuid.uuid4().hex}"
    stored = saver.put(_config(thread), _checkpoint(), {"step": -1}, {})
    saver.put_writes(stored, [("a", 1), ("b", 2)], "task-1")
    before = client.get_run(saver.checkpoint_run_id(thread, "", 0), subject_id=subject).version
    saver.put_writes(stored, [("a", 1), ("b", 2)], "task-1")  # a replay
    saver.put_writes(stored, [("a", 3)], "task-2")
    found = saver.get_tuple(stored)
    assert found is not None
    assert sorted(found.pending_writes or []) == [
        ("task-1", "a", 1),
        ("task-1", "b", 2),
        ("task-2", "a", 3),
    ]
    # The replay advanced nothing; task-2's writes advanced the run once.
    run = client.get_run(saver.checkpoint_run_id(thread, "", 0), subject_id=subject)
    assert run.version == before + 1


def test_an_oversized_checkpoint_goes_through_the_artifact_store(
    client: MemvaultClient, subject: str
) -> None:
    saver = MemvaultSaver(subject_id=subject, client=client)
    thread = f"t-{uuid.uuid4().hex}"
    big = "".join(uuid.uuid4().hex for _ in range(4000))  # 128 KB: 4x the run's bound
    cp = _checkpoint(doc=big, small="s")
    stored = saver.put(_config(thread), cp, {"source": "input", "step": -1}, {})
    run = client.get_run(saver.checkpoint_run_id(thread, "", 0), subject_id=subject)
    assert len(run.artifact_refs) == 1
    assert "a" in run.state["checkpoint"] and "b" not in run.state["checkpoint"]
    found = MemvaultSaver(subject_id=subject, client=client).get_tuple(stored)
    assert found is not None
    assert found.checkpoint == cp


def test_writes_that_arrive_after_later_checkpoints_stay_with_their_own(
    client: MemvaultClient, subject: str
) -> None:
    """LangGraph (durability "async") sends a task's writes in the background, not
    ordered with the checkpoint puts after them: they may reach the saver when the thread
    is two or more checkpoints further on. They belong to their checkpoint, not a fork."""
    saver = MemvaultSaver(subject_id=subject, client=client)
    thread = f"t-{uuid.uuid4().hex}"
    c1 = saver.put(_config(thread), _checkpoint(n=1), {"step": -1}, {})
    c2 = saver.put(c1, _checkpoint(n=2), {"step": 0}, {})
    c3 = saver.put(c2, _checkpoint(n=3), {"step": 1}, {})
    saver.put_writes(c3, [("x", "head")], "task-3")
    saver.put_writes(c1, [("a", 1), ("b", 2)], "task-1")  # two checkpoints late
    saver.put_writes(c1, [("a", 1), ("b", 2)], "task-1")  # a replay adds nothing
    saver.put_writes(c2, [("c", 3)], "task-2")  # one late
    c4 = saver.put(c3, _checkpoint(n=4), {"step": 2}, {})
    saver.put_writes(c1, [("d", 4)], "task-1b")  # now three late, on another head

    def pending(config: RunnableConfig) -> list[tuple[str, str, Any]]:
        found = saver.get_tuple(config)
        assert found is not None
        return sorted(found.pending_writes or [])

    assert pending(c1) == [("task-1", "a", 1), ("task-1", "b", 2), ("task-1b", "d", 4)]
    assert pending(c2) == [("task-2", "c", 3)]
    assert pending(c3) == [("task-3", "x", "head")]
    assert pending(c4) == []
    listed = {
        t.checkpoint["id"]: sorted(t.pending_writes or []) for t in saver.list(_config(thread))
    }
    assert listed[c1["configurable"]["checkpoint_id"]] == pending(c1)
    assert listed[c2["configurable"]["checkpoint_id"]] == pending(c2)


def test_writes_for_a_checkpoint_off_the_thread_line_are_refused(
    client: MemvaultClient, subject: str
) -> None:
    """A put that lost a race never lands; writes for it must not land either."""
    saver = MemvaultSaver(subject_id=subject, client=client, writes_wait_s=0.3)
    thread = f"t-{uuid.uuid4().hex}"
    c1 = saver.put(_config(thread), _checkpoint(n=1), {"step": -1}, {})
    lost = _checkpoint(n=2, by="loser")  # made before the winner, so older than the head
    c2 = saver.put(c1, _checkpoint(n=2, by="winner"), {"step": 0}, {})
    with pytest.raises(CheckpointConflict) as refused:
        saver.put_writes(_config(thread, lost["id"]), [("a", 1)], "task-lost")
    assert refused.value.current_checkpoint_id == c2["configurable"]["checkpoint_id"]
    for config in (c1, c2):
        found = saver.get_tuple(config)
        assert found is not None and not found.pending_writes


def test_a_graph_interrupted_and_resumed_across_two_savers(
    stack: RunningStack, subject: str
) -> None:
    class State(TypedDict):
        log: Annotated[list[str], operator.add]

    def plan(state: State) -> dict[str, Any]:
        return {"log": ["planned"]}

    def approve(state: State) -> dict[str, Any]:
        answer = interrupt("approve?")
        return {"log": [f"approved:{answer}"]}

    def act(state: State) -> dict[str, Any]:
        return {"log": ["acted"]}

    builder = StateGraph(State)
    builder.add_node("plan", plan)
    builder.add_node("approve", approve)
    builder.add_node("act", act)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "approve")
    builder.add_edge("approve", "act")
    builder.add_edge("act", END)
    config: Any = {"configurable": {"thread_id": f"g-{uuid.uuid4().hex}"}}
    token = mint(stack, subject)

    with MemvaultClient(stack.url, token=token) as mv:
        first = builder.compile(checkpointer=MemvaultSaver(subject_id=subject, client=mv))
        out = first.invoke({"log": []}, config)
        assert out["log"] == ["planned"]
        assert "__interrupt__" in out

    async def resume() -> dict[str, Any]:
        async with AsyncMemvaultClient(stack.url, token=token) as amv:
            second = builder.compile(checkpointer=MemvaultSaver(subject_id=subject, aclient=amv))
            state = await second.aget_state(config)
            assert state.next == ("approve",)
            done: dict[str, Any] = await second.ainvoke(Command(resume="yes"), config)
            history = [s async for s in second.aget_state_history(config)]
            assert history[0].next == ()
            return done

    done = asyncio.run(resume())
    assert done["log"] == ["planned", "approved:yes", "acted"]


def test_personal_data_in_what_the_saver_stores_as_text_needs_the_savers_consent(
    stack: RunningStack, client: MemvaultClient, subject: str
) -> None:
    """Run state is under the write policy: a namespace kept in the thread's registry as
    text (here one naming the user by email) is personal data, stored only when the saver
    conveys the subject's consent (``consent=True`` sends ``consent: true`` with each
    checkpoint), and then read back whole only by a token that may read personal data."""
    thread = f"t-{uuid.uuid4().hex}"
    config: RunnableConfig = {
        "configurable": {"thread_id": thread, "checkpoint_ns": "inbox:alice@example.com"}
    }
    with pytest.raises(ConsentRequired):
        MemvaultSaver(subject_id=subject, client=client).put(
            config, _checkpoint(n=0), {"source": "input", "step": -1}, {}
        )
    token = DevKey.load_or_create(stack.home).mint(
        tenant=TENANT, subject=subject, scope=SCOPES, max_sensitivity="pii"
    )
    with MemvaultClient(stack.url, token=token) as mv:
        saver = MemvaultSaver(subject_id=subject, client=mv, consent=True)
        first = saver.put(config, _checkpoint(n=1), {"source": "input", "step": -1}, {})
        second = saver.put(first, _checkpoint(n=2), {"source": "loop", "step": 0}, {})
        head = saver.get_tuple(config)
    assert head is not None and head.checkpoint["channel_values"] == {"n": 2}
    assert head.config["configurable"]["checkpoint_id"] == second["configurable"]["checkpoint_id"]


def test_a_thread_whose_state_the_token_may_not_read_is_refused_not_lost(
    stack: RunningStack, client: MemvaultClient, subject: str
) -> None:
    """A checkpoint put with consent and personal data in its text is withheld from a token
    below ``pii``: the server answers its state empty. The saver must not take that for an
    empty thread (a get_tuple answering None, a put failing as a fork): it raises
    CheckpointWithheld, naming what to use instead."""
    thread = f"t-{uuid.uuid4().hex}"
    config: RunnableConfig = {
        "configurable": {"thread_id": thread, "checkpoint_ns": "inbox:alice@example.com"}
    }
    token = DevKey.load_or_create(stack.home).mint(
        tenant=TENANT, subject=subject, scope=SCOPES, max_sensitivity="pii"
    )
    with MemvaultClient(stack.url, token=token) as mv:
        first = MemvaultSaver(subject_id=subject, client=mv, consent=True).put(
            config, _checkpoint(n=1), {"source": "input", "step": -1}, {}
        )
    below = MemvaultSaver(subject_id=subject, client=client, consent=True)
    with pytest.raises(CheckpointWithheld) as raised:
        below.get_tuple(config)
    assert "max_sensitivity" in raised.value.message
    with pytest.raises(CheckpointWithheld):
        below.put(first, _checkpoint(n=2), {"source": "loop", "step": 0}, {})
