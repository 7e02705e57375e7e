"""Session, run and working-memory routes through real-shaped API Gateway events."""

from __future__ import annotations

import pytest

from tests.support.api import call, claims, memory_body
from tests.support.harness import FakeClock

pytestmark = pytest.mark.usefixtures("api")
ALL = "memory:read memory:write memory:delete sessions:write runs:write"
SESSION = "/v1/subjects/u-1/sessions/s-1"


def test_session_append_read_and_end() -> None:
    me = claims(scope=ALL)
    first = call(
        "POST", f"{SESSION}/messages", me, {"request_id": "r1", "role": "user", "content": "hello"}
    )
    assert (first.status, first.headers["Idempotent-Replay"]) == (201, "false")
    replay = call(
        "POST", f"{SESSION}/messages", me, {"request_id": "r1", "role": "user", "content": "hello"}
    )
    assert replay.headers["Idempotent-Replay"] == "true"
    read = call("GET", SESSION, me)
    assert [m["content"] for m in read.body["messages"]] == ["hello"]
    assert {"idle_expires_at", "expires_at"} <= set(read.body)
    ended = call("DELETE", SESSION, me)
    assert (ended.status, ended.body["deleted_items"]) == (200, 3)
    assert call("GET", SESSION, me).code == "not_found"


def test_another_subjects_token_is_refused_a_sessions_append(clock: FakeClock) -> None:
    mine = claims(subject="u-1", scope=ALL)
    first = call(
        "POST", f"{SESSION}/messages", mine, {"request_id": "r1", "role": "user", "content": "hi"}
    )
    assert first.status == 201
    before = call("GET", SESSION, mine).body
    clock.advance(minutes=10)

    intruder = claims(subject="u-2", scope=ALL)
    answer = call(
        "POST",
        f"{SESSION}/messages",
        intruder,
        {"request_id": "r2", "role": "user", "content": "not yours"},
    )

    assert (answer.status, answer.code) == (403, "forbidden")
    after = call("GET", SESSION, mine).body
    assert after["message_count"] == before["message_count"] == 1
    assert after["idle_expires_at"] == before["idle_expires_at"]
    assert after["last_activity_at"] == before["last_activity_at"]
    assert [m["content"] for m in after["messages"]] == ["hi"]


def test_run_lifecycle_and_its_error_codes() -> None:
    me = claims(scope=ALL)
    created = call("PUT", "/v1/runs/run-9", me, {"subject_id": "u-1", "plan_version": "p1"})
    assert (created.status, created.body["status"]) == (201, "CREATED")
    again = call("PUT", "/v1/runs/run-9", me, {"subject_id": "u-1", "plan_version": "p1"})
    assert again.status == 200
    clash = call("PUT", "/v1/runs/run-9", me, {"subject_id": "u-1", "plan_version": "p2"})
    assert (clash.status, clash.code) == (409, "idempotency_key_reused")

    illegal = call(
        "POST",
        "/v1/runs/run-9/checkpoints",
        me,
        {"expected_version": 1, "status": "SUCCEEDED", "step": "x"},
    )
    assert (illegal.status, illegal.code) == (422, "illegal_transition")
    ok = call(
        "POST",
        "/v1/runs/run-9/checkpoints",
        me,
        {"expected_version": 1, "status": "RUNNING", "step": "go"},
    )
    assert (ok.status, ok.body["version"]) == (200, 2)
    stale = call(
        "POST",
        "/v1/runs/run-9/checkpoints",
        me,
        {"expected_version": 1, "status": "RUNNING", "step": "go"},
    )
    assert (stale.status, stale.code) == (409, "version_conflict")
    assert stale.body["error"]["details"]["current"]["version"] == 2

    op = call(
        "PUT",
        "/v1/runs/run-9/operations/charge-1",
        me,
        {"status": "COMMITTED", "result_ref": "tx-1"},
    )
    assert op.status == 200
    other = call(
        "PUT",
        "/v1/runs/run-9/operations/charge-1",
        me,
        {"status": "COMMITTED", "result_ref": "tx-2"},
    )
    assert (other.status, other.code) == (409, "operation_conflict")
    event = {"event_id": "e-1", "type": "cancel.requested"}
    assert call("POST", "/v1/runs/run-9/events", me, event).body["applied"] is True
    dup = call("POST", "/v1/runs/run-9/events", me, event)
    assert (dup.body["duplicate"], dup.body["checkpoint"]["version"]) == (True, 3)
    assert call("GET", "/v1/runs/run-9", claims("globex", scope=ALL)).code == "not_found"


def test_run_ids_belong_to_their_subject_over_http() -> None:
    """Another subject's run id gives nothing away: the same id is that caller's own new
    run (201), exactly as a never-used id is; a tenant service names the subject."""
    mine, theirs = claims(subject="u-1", scope=ALL), claims(subject="u-2", scope=ALL)
    assert (
        call("PUT", "/v1/runs/job-1", mine, {"subject_id": "u-1", "plan_version": "p1"}).status
        == 201
    )
    taken = call("PUT", "/v1/runs/job-1", theirs, {"subject_id": "u-2", "plan_version": "p1"})
    fresh = call("PUT", "/v1/runs/job-2", theirs, {"subject_id": "u-2", "plan_version": "p1"})
    assert (taken.status, fresh.status) == (201, 201)
    assert {k: v for k, v in taken.body.items() if k != "run_id"} == {
        k: v for k, v in fresh.body.items() if k != "run_id"
    }
    service = claims(subject=None, scope=f"{ALL} subjects:any")
    assert call("GET", "/v1/runs/job-1", service).code == "validation_failed"
    named = call("GET", "/v1/runs/job-1", service, query={"subject_id": "u-2"})
    assert (named.status, named.body["subject_id"]) == (200, "u-2")
    assert call("GET", "/v1/runs/job-1", mine, query={"subject_id": "u-2"}).status == 403


def test_context_assembly_over_http() -> None:
    me = claims(scope=ALL)
    call("POST", "/v1/subjects/u-1/memories", me, memory_body())
    call("POST", f"{SESSION}/messages", me, {"request_id": "r1", "role": "user", "content": "hi"})
    out = call(
        "POST",
        "/v1/subjects/u-1/context",
        me,
        {"goal": "Write the internal doc", "token_budget": 2000, "session_id": "s-1"},
    )
    assert out.status == 200
    assert [s for s, items in out.body["sections"].items() if items] == [
        "policy",
        "goal",
        "session",
        "memories",
    ]
    assert out.body["manifest"]["tokenizer"] == "cl100k_base (bpe-openai)"
    again = call("POST", "/v1/subjects/u-1/context/reproduce", me, out.body["manifest"])
    assert again.body["sections"] == out.body["sections"]
