"""Traces and feedback, on both stores (DynamoDB on moto, the embedded SQLite store), the
embedded index and the hashing embedder. moto ignores TTL: expiry is the adapters' own
check on read (tests/storage/test_traces_port.py)."""

from __future__ import annotations

import dataclasses
import json
import sqlite3
import uuid
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from moto import mock_aws

from memvault.embeddings.hashing import HashingEmbedder
from memvault_wire.errors import NotFound, SecretDetected
from memvault_wire.memory import CopyState, DeletionState, MemoryPatch, Sensitivity
from memvault_wire.recall import RecallRequest
from memvault_wire.trace import FeedbackRequest
from tests.support.backends import STORES
from tests.support.harness import a_write, ctx
from tests.support.recall import RecallRig, make_rig


class _NoPurge:
    def launch(self, tenant_id: str, deletion_id: str, *, resume: bool = False) -> None:
        return None


@pytest.fixture(params=STORES)
def rig(request: pytest.FixtureRequest) -> Iterator[RecallRig]:
    with mock_aws():
        built = make_rig(
            "embedded",
            HashingEmbedder(),
            store=request.param,
            recall_relevance_floor=0.1,
            trace_query_salt="pepper",
        )
        yield built
        if built.services.stores.database is not None:
            built.services.stores.database.close()


def write(rig: RecallRig, content: str, **kw: Any) -> Any:
    body = {"request_id": uuid.uuid4().hex, "canonical_key": None, "scope": {}, "tags": []}
    return rig.services.memory.write(
        ctx(), "u-1", a_write(content=content, **{**body, **kw})
    ).memory


def recall(rig: RecallRig, query: str, **kw: Any) -> Any:
    return rig.services.recall.recall(ctx(), "u-1", RecallRequest(query=query, **kw))


def stored_trace_text(rig: RecallRig) -> str:
    """Every trace and audit record the store holds, as text (the embedded store's
    deferred trace writes flushed first: a check for absence must not pass on a trace
    still in flight)."""
    database = rig.services.stores.database
    if database is not None:
        rig.services.stores.traces.flush()
        conn = sqlite3.connect(database.path)
        rows = [
            *conn.execute("SELECT * FROM trace_items").fetchall(),
            *conn.execute("SELECT * FROM audit_events").fetchall(),
        ]
        conn.close()
        return json.dumps(rows, ensure_ascii=False)
    name = rig.settings.table_prefix + "audit"
    items = rig.client.scan(TableName=name)["Items"]
    return json.dumps(items, ensure_ascii=False)


def test_feedback_on_a_wrong_recall_and_its_correction_are_linked_by_ids(rig: RecallRig) -> None:
    wrong = write(rig, "The team standup is on Mondays at nine", canonical_key="standup-day")
    write(rig, "The team retro is on Fridays")
    rig.sync()
    served = recall(rig, "when is the team standup", run_id="run-7", task_id="plan-week")
    assert served.recall_id and wrong.memory_id in [i.memory.memory_id for i in served.items]
    traces = rig.services.traces
    fb = traces.give_feedback(
        ctx(),
        "u-1",
        FeedbackRequest(
            recall_id=served.recall_id,
            memory_id=wrong.memory_id,
            verdict="wrong",
            correction=MemoryPatch(
                expected_version=1, content="The team standup is on Tuesdays at nine"
            ),
        ),
    )
    assert fb.recall_id == served.recall_id and fb.version == 1 and fb.correction_version == 2
    trace = traces.memory_trace(ctx(), "u-1", wrong.memory_id)
    v1 = next(v for v in trace.versions if v.version == 1)
    assert [(s.recall_id, s.run_id, s.task_id) for s in v1.served_by] == [
        (served.recall_id, "run-7", "plan-week")
    ]
    assert trace.last_used is not None and trace.last_used.recall_id == served.recall_id
    assert [(f.feedback_id, f.verdict) for f in trace.feedback] == [(fb.feedback_id, "wrong")]
    correction = next(e for e in trace.events if e.action == "memory.correct")
    assert correction.memory_id == fb.correction_memory_id
    assert correction.detail is not None
    assert correction.detail["prompted_by"] == fb.feedback_id
    assert correction.detail["previous_version"] == 1 and correction.version == 2
    assert correction.detail["conflict"] == "compare_and_set"
    written = next(e for e in trace.events if e.action == "memory.write")
    assert written.detail is not None and written.detail["rule"] == "consented_write"
    assert written.detail["secret_scan"] == "clean" and written.detail["status"] == "active"
    # The recall's own trace names what it returned, at which version and rank.
    shown = traces.recall_trace(ctx(), served.recall_id)
    assert (wrong.memory_id, 1) in [(r.memory_id, r.version) for r in shown.returned]
    assert shown.run_id == "run-7" and shown.candidates["fused"] >= 1
    assert [f.feedback_id for f in traces.list_feedback(ctx(), "u-1", 10)] == [fb.feedback_id]
    # Feedback by run id finds the same recall.
    by_run = traces.give_feedback(
        ctx(), "u-1", FeedbackRequest(run_id="run-7", memory_id=wrong.memory_id, verdict="outdated")
    )
    assert by_run.recall_id == served.recall_id


def test_a_deleted_and_a_superseded_document_in_the_index_are_counted_as_dropped(
    rig: RecallRig,
) -> None:
    rig.services.memory.purge = _NoPurge()  # the index keeps its documents on purpose
    gone = write(rig, "Coffee order: oat flat white")
    old = write(rig, "Coffee order: double espresso")
    rig.sync()
    rig.services.memory.delete(ctx(), "u-1", gone.memory_id)
    rig.services.memory.correct(
        ctx(), "u-1", old.memory_id, MemoryPatch(expected_version=1, content="Coffee: tea now")
    )
    served = recall(rig, "coffee order")
    trace = rig.services.stores.traces.recall("acme", "u-1", served.recall_id, rig.clock.now())
    assert trace is not None
    reasons = {(d.chain_id, d.reason) for d in trace.dropped}
    assert (gone.chain_id, "deleted") in reasons
    assert (old.chain_id, "superseded") in reasons
    assert trace.candidates["keyword"] + trace.candidates["vector"] >= 2


def test_no_trace_audit_or_log_holds_content_query_or_secrets(
    rig: RecallRig, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    content_marker, query_marker = "zqcontent7f3a", "zqquery91bd"
    secret = "ghp_" + "Zq9x" * 9
    m = write(rig, f"Likes {content_marker} biscuits", canonical_key="biscuits")
    with pytest.raises(SecretDetected):
        write(rig, f"token {secret}")
    rig.sync()
    served = recall(rig, f"biscuits {query_marker} {secret}", task_id="t-1")
    recall(rig, f"{content_marker} biscuits")
    traces = rig.services.traces
    fb = traces.give_feedback(
        ctx(),
        "u-1",
        FeedbackRequest(
            recall_id=served.recall_id,
            memory_id=m.memory_id,
            verdict="wrong",
            correction=MemoryPatch(expected_version=1, content=f"Likes {content_marker} cake"),
        ),
    )
    assembled = rig.services.context.assemble(
        ctx(), "u-1", _context_request(f"{query_marker} biscuits")
    )
    assert len(assembled.manifest.recall_ids) == 1  # the manifest names its recall
    text = stored_trace_text(rig)
    assert served.recall_id in text and fb.feedback_id in text  # the records are there
    logs = capsys.readouterr().out + capsys.readouterr().err + caplog.text
    for marker in (content_marker, query_marker, secret, "biscuits"):
        assert marker not in text
        assert marker not in logs


def _context_request(query: str) -> Any:
    from memvault_wire.context import ContextRequest

    return ContextRequest(goal="g", token_budget=2000, query=query)


def test_forgetting_a_subject_removes_their_traces_and_the_job_lists_the_copy(
    rig: RecallRig,
) -> None:
    m = write(rig, "Walks the dog at seven")
    rig.sync()
    served = recall(rig, "walks the dog")
    rig.services.traces.give_feedback(
        ctx(),
        "u-1",
        FeedbackRequest(recall_id=served.recall_id, memory_id=m.memory_id, verdict="helpful"),
    )
    store = rig.services.stores.traces
    assert store.served("acme", "u-1", m.chain_id, rig.clock.now())
    job = rig.services.memory.forget(ctx(), "u-1")
    job = rig.services.purge.run("acme", job.deletion_id)
    assert job.status is DeletionState.COMPLETED
    copy = next(c for c in job.copies if c.name == "traces")
    assert copy.status is CopyState.DONE and "3 trace item(s)" in (copy.reason or "")
    now = rig.clock.now()
    assert store.recall("acme", "u-1", served.recall_id, now) is None
    assert store.served("acme", "u-1", m.chain_id, now) == []
    assert store.feedback("acme", "u-1", now) == []
    assert served.recall_id not in stored_trace_text(rig)


def test_a_recall_that_overlapped_a_forget_leaves_no_trace(rig: RecallRig) -> None:
    """A recall judged under the epoch a forget retired, whose trace is stamped after the
    forget was asked (it ran alongside it), is removed by the forget's purge too, and so
    is feedback given so: each records the epoch it was judged under, and the purge cuts
    by that epoch as well as by time. (Here the overlapping records are stored by hand,
    after the forget.)"""
    m = write(rig, "Walks the dog at seven")
    rig.sync()
    served = recall(rig, "walks the dog")
    store = rig.services.stores.traces
    first = store.recall("acme", "u-1", served.recall_id, rig.clock.now())
    assert first is not None and first.subject_epoch == 0
    assert [s.memory_id for s in first.returned] == [m.memory_id]
    rig.services.traces.give_feedback(
        ctx(),
        "u-1",
        FeedbackRequest(recall_id=served.recall_id, memory_id=m.memory_id, verdict="helpful"),
    )
    (given,) = store.feedback("acme", "u-1", rig.clock.now())
    assert given.subject_epoch == 0
    launcher = rig.services.memory.purge
    rig.services.memory.purge = _NoPurge()  # the purge runs below, after the overlap
    job = rig.services.memory.forget(ctx(), "u-1")
    rig.services.memory.purge = launcher
    overlap = dataclasses.replace(
        first, recall_id="rcl_" + "0" * 32, at=job.requested_at + timedelta(seconds=1)
    )
    store.record_recall(overlap)
    late = dataclasses.replace(
        given, feedback_id="fbk_" + "0" * 32, at=job.requested_at + timedelta(seconds=1)
    )
    store.add_feedback(late)
    job = rig.services.purge.run("acme", job.deletion_id)
    assert job.status is DeletionState.COMPLETED
    later = job.requested_at + timedelta(seconds=2)
    assert store.recall("acme", "u-1", overlap.recall_id, later) is None
    assert store.served("acme", "u-1", m.chain_id, later) == []
    assert store.feedback("acme", "u-1", later) == []
    again = write(rig, "Feeds the cat at eight")
    rig.sync()
    after = recall(rig, "feeds the cat")
    trace = store.recall("acme", "u-1", after.recall_id, rig.clock.now())
    assert [i.memory.memory_id for i in after.items] == [again.memory_id]
    assert trace is not None and trace.subject_epoch == 1


def test_a_recall_after_a_forget_keeps_nothing_of_what_the_forget_retired(
    rig: RecallRig,
) -> None:
    """Between a forget and its purge, the index still holds the subject's documents and
    the table their versions, stamped with the retired epoch. A recall then finds them,
    re-validation refuses them, and its trace, written under the new epoch, outlives the
    forget's purge: it must name none of them and count none of them. Without the cut, it
    kept their ids as dropped candidates and counted them among the hits (no content, but
    a record of what the subject had held)."""
    old = [write(rig, f"Walks the dog at seven, day {n}") for n in range(3)]
    rig.sync()
    launcher = rig.services.memory.purge
    rig.services.memory.purge = _NoPurge()  # the purge has not run yet
    job = rig.services.memory.forget(ctx(), "u-1")
    rig.services.memory.purge = launcher
    rig.clock.advance(seconds=1)  # a recall after the forget, not alongside it
    after = recall(rig, "walks the dog")
    assert after.items == []
    store = rig.services.stores.traces
    trace = store.recall("acme", "u-1", after.recall_id, rig.clock.now())
    assert trace is not None and trace.subject_epoch == 1
    assert trace.dropped == ()
    assert trace.candidates["keyword"] == trace.candidates["vector"] == 0
    assert trace.candidates["fused"] == trace.candidates["validated"] == 0
    job = rig.services.purge.run("acme", job.deletion_id)
    assert job.status is DeletionState.COMPLETED
    kept = store.recall("acme", "u-1", after.recall_id, rig.clock.now())
    assert kept is not None  # the trace outlived the purge, as it should
    for m in old:
        assert m.memory_id not in repr(kept) and m.chain_id not in repr(kept)


def test_deleting_a_memory_removes_its_served_links(rig: RecallRig) -> None:
    m = write(rig, "Keeps the garden tidy on weekends")
    rig.sync()
    served = recall(rig, "garden tidy")
    job = rig.services.memory.delete(ctx(), "u-1", m.memory_id, prompted_by=served.recall_id)
    assert next(c for c in job.copies if c.name == "traces").status is CopyState.DONE
    assert rig.services.stores.traces.served("acme", "u-1", m.chain_id, rig.clock.now()) == []
    everything = ctx(max_sensitivity=Sensitivity.PII)  # may read every memory
    trace = rig.services.traces.memory_trace(everything, "u-1", m.memory_id)
    assert trace.state == "deleted" and trace.deletion is not None
    deleted = next(e for e in trace.events if e.action == "memory.delete")
    assert deleted.detail == {"prompted_by": served.recall_id}


def test_a_delete_right_after_a_recall_leaves_no_served_link(rig: RecallRig) -> None:
    """Nothing reads the recall's trace between the recall and the delete: on the embedded
    store the trace may still be on its way to the file when the delete's traces step
    runs, and that step must cover it."""
    m = write(rig, "Keeps the garden tidy on weekends")
    rig.sync()
    served = recall(rig, "garden tidy")
    assert [i.memory.memory_id for i in served.items] == [m.memory_id]
    job = rig.services.memory.delete(ctx(), "u-1", m.memory_id)
    assert next(c for c in job.copies if c.name == "traces").status is CopyState.DONE
    assert rig.services.stores.traces.served("acme", "u-1", m.chain_id, rig.clock.now()) == []


def test_a_deleted_memorys_trail_shows_only_to_a_reader_of_everything(rig: RecallRig) -> None:
    """Once the versions are gone nothing says what they held, so their trail (writers,
    personal-data classes, versions) is not shown to a token that could not have read
    them: not below the top ceiling, not to an agent role, and to nobody after a forget."""
    owner = ctx(max_sensitivity=Sensitivity.PII)
    secret = rig.services.memory.write(
        owner,
        "u-1",
        a_write(
            request_id="pii-1",
            canonical_key=None,
            scope={},
            content="my email is alice@example.com",
            sensitivity="pii",
        ),
    ).memory
    rig.services.memory.delete(owner, "u-1", secret.memory_id)
    for reader in (ctx(), ctx(agent_role="agent-b", max_sensitivity=Sensitivity.PII)):
        with pytest.raises(NotFound):
            rig.services.traces.memory_trace(reader, "u-1", secret.memory_id)
    shown = rig.services.traces.memory_trace(owner, "u-1", secret.memory_id)
    assert shown.state == "deleted"
    job = rig.services.memory.forget(owner, "u-1")
    rig.services.purge.run("acme", job.deletion_id)
    with pytest.raises(NotFound):
        rig.services.traces.memory_trace(owner, "u-1", secret.memory_id)


def test_a_live_memorys_trace_shows_only_the_versions_the_reader_may_read(
    rig: RecallRig,
) -> None:
    owner = ctx(max_sensitivity=Sensitivity.PII)
    first = rig.services.memory.write(
        owner,
        "u-1",
        a_write(
            request_id="pii-2",
            canonical_key="contact",
            scope={},
            content="call me at bob@example.com",
            sensitivity="pii",
        ),
    ).memory
    second = rig.services.memory.correct(
        owner,
        "u-1",
        first.memory_id,
        MemoryPatch(expected_version=1, content="prefers phone calls", sensitivity="internal"),
    )
    low = rig.services.traces.memory_trace(ctx(), "u-1", second.memory_id)
    assert [v.memory_id for v in low.versions] == [second.memory_id]
    assert {e.memory_id for e in low.events} == {second.memory_id}
    details = [e.detail or {} for e in low.events]
    assert all(d.get("sensitivity") != "pii" and not d.get("pii_classes") for d in details)
    full = rig.services.traces.memory_trace(owner, "u-1", second.memory_id)
    assert {e.memory_id for e in full.events} == {first.memory_id, second.memory_id}


def test_a_readers_own_recall_trace_tells_nothing_of_a_fact_it_may_not_read(
    rig: RecallRig,
) -> None:
    """Recalling a canonical key finds the fact that holds it by its pointer, before any
    access check. For a fact the caller may not read, the trace must read exactly as for
    a key no fact holds: no drop, no reason ("ceiling", "visibility") and no count
    (probe 8, M2: ``exact_key: 1, dropped_withheld: 1`` against 0 told a reader, one
    guessed key at a time, that a hidden fact holds it)."""
    owner = ctx(max_sensitivity=Sensitivity.PII, agent_role="payments")
    for key, extra in (
        ("home-address", {"sensitivity": "pii", "content": "Lives at 12 Elm Street"}),
        ("payroll-bank", {"visibility": ["payments"], "content": "Salary goes to Bank A"}),
    ):
        rig.services.memory.write(
            owner,
            "u-1",
            a_write(request_id=key, canonical_key=key, scope={}, **extra),
        )
    rig.sync()
    reader = ctx(agent_role="planner")  # internal ceiling, a role outside the list

    def traced(query: str) -> Any:
        served = rig.services.recall.recall(reader, "u-1", RecallRequest(query=query))
        assert served.items == [] and served.recall_id
        return rig.services.traces.recall_trace(reader, served.recall_id)

    hidden = traced("home-address payroll-bank")
    absent = traced("office-address payroll-day")
    for trace in (hidden, absent):
        assert trace.dropped == [] and trace.dropped_withheld == 0
        assert trace.candidates["exact_key"] == 0
    assert hidden.candidates == absent.candidates
    shown = hidden.model_dump_json()
    assert '"ceiling"' not in shown and '"visibility"' not in shown
    # A reader who may read both facts recalls them by key.
    served = rig.services.recall.recall(
        owner, "u-1", RecallRequest(query="home-address payroll-bank")
    )
    assert len(served.items) == 2
    assert rig.services.traces.recall_trace(owner, served.recall_id).candidates["exact_key"] == 2


def test_prompted_by_and_feedback_refuse_another_subjects_or_tenants_ids(rig: RecallRig) -> None:
    m = write(rig, "Reads science fiction")
    rig.sync()
    served = recall(rig, "science fiction")
    other = rig.services.memory.write(
        ctx("acme", "u-2"), "u-2", a_write(request_id="o-1", canonical_key=None)
    ).memory
    with pytest.raises(NotFound):  # u-2's correction cannot cite u-1's recall
        rig.services.memory.correct(
            ctx("acme", "u-2"),
            "u-2",
            other.memory_id,
            MemoryPatch(expected_version=1, tags=["x"], prompted_by=served.recall_id),
        )
    with pytest.raises(NotFound):  # another tenant never finds the recall
        rig.services.traces.recall_trace(ctx("globex", "u-1"), served.recall_id)
    with pytest.raises(NotFound):
        rig.services.traces.give_feedback(
            ctx("globex", "u-1"),
            "u-1",
            FeedbackRequest(recall_id=served.recall_id, memory_id=m.memory_id, verdict="wrong"),
        )


def test_tracing_off_writes_no_trace() -> None:
    with mock_aws():
        rig = make_rig("embedded", HashingEmbedder(), recall_relevance_floor=0.1, tracing=False)
        write(rig, "Plays chess on Sundays")
        rig.sync()
        assert recall(rig, "chess").recall_id is None
        assert "RECALL#" not in stored_trace_text(rig)


def test_a_memorys_served_by_list_names_only_the_readers_own_recalls(rig: RecallRig) -> None:
    """A probe read another agent's recall ids (and the runs they were for) off a memory's
    trace, then fetched those recalls' traces. A reader that does not see everything of
    the subject sees only the recalls it made itself."""
    memory = write(rig, "the quarterly report is due on friday")
    rig.sync()
    planner = ctx(agent_role="planner", principal="agent-planner")
    coder = ctx(agent_role="coder", principal="agent-coder")
    request = RecallRequest(query="quarterly report due", run_id="run-planner-7")
    theirs = rig.services.recall.recall(planner, "u-1", request)
    mine = rig.services.recall.recall(coder, "u-1", RecallRequest(query="report due friday"))
    assert theirs.items and mine.items

    def served(who: Any) -> list[tuple[str, str | None]]:
        trace = rig.services.traces.memory_trace(who, "u-1", memory.memory_id)
        return [(s.recall_id, s.run_id) for v in trace.versions for s in v.served_by]

    assert served(coder) == [(mine.recall_id, None)]
    assert served(planner) == [(theirs.recall_id, "run-planner-7")]
    everything = ctx(max_sensitivity=Sensitivity.PII)
    assert {r for r, _ in served(everything)} == {theirs.recall_id, mine.recall_id}
