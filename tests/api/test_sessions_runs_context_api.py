"""Session, run and working-memory routes through real-shaped API Gateway events."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from memvault.services.bundle import Services
from memvault.services.memory import MemoryService
from memvault.storage.ports.runs import run_key
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


EVENTS = "/v1/runs/run-ev/events"
CANARY = "zqpayloadcanary"


def _run_with_events() -> None:
    """run-ev of u-1 with three receipts: e-c applied an approval (version 4), e-a and
    e-b were recorded changing nothing, each with a payload holding the canary."""
    me = claims(scope=ALL)
    created = call("PUT", "/v1/runs/run-ev", me, {"subject_id": "u-1", "plan_version": "p"})
    assert created.status == 201
    running = {"expected_version": 1, "status": "RUNNING", "step": "go"}
    assert call("POST", "/v1/runs/run-ev/checkpoints", me, running).status == 200
    waiting = {
        "expected_version": 2,
        "status": "WAITING_APPROVAL",
        "step": "approve",
        "pending_approvals": ["a-1"],
    }
    assert call("POST", "/v1/runs/run-ev/checkpoints", me, waiting).status == 200
    events = [
        {"event_id": "e-c", "type": "approval.granted", "approval_id": "a-1"},
        {"event_id": "e-a", "type": "github.push", "payload": {"note": CANARY}},
        {"event_id": "e-b", "type": "ci.passed", "payload": {"log": [CANARY, 1]}},
    ]
    for event in events:
        assert call("POST", EVENTS, me, event).status == 200


def test_a_runs_events_are_listed_in_pages_without_their_payloads() -> None:
    _run_with_events()
    me = claims(scope=ALL)
    first = call("GET", EVENTS, me, query={"limit": "2"})
    assert first.status == 200
    assert [e["event_id"] for e in first.body["items"]] == ["e-a", "e-b"]
    assert first.body["next_token"]
    second = call("GET", EVENTS, me, query={"limit": "2", "next_token": first.body["next_token"]})
    assert second.status == 200
    assert (second.body["items"], second.body["next_token"]) == (
        [
            {
                "event_id": "e-c",
                "type": "approval.granted",
                "received_at": second.body["items"][0]["received_at"],
                "applied": True,
                "version": 4,
            }
        ],
        None,
    )
    assert {k: v for k, v in first.body["items"][0].items() if k != "received_at"} == {
        "event_id": "e-a",
        "type": "github.push",
        "applied": False,
        "version": 4,
    }
    # The payload is never stored: nothing of it (nor its hash) is answered.
    for page in (first, second, call("GET", EVENTS, me)):
        assert CANARY not in json.dumps(page.body)
        for item in page.body["items"]:
            assert set(item) == {"event_id", "type", "received_at", "applied", "version"}
    everything = call("GET", EVENTS, me).body
    assert [e["event_id"] for e in everything["items"]] == ["e-a", "e-b", "e-c"]
    assert everything["next_token"] is None
    # A tenant service (no subject) names the run's subject, as on every run route.
    service = claims(subject=None, scope=f"{ALL} subjects:any")
    assert call("GET", EVENTS, service).code == "validation_failed"
    named = call("GET", EVENTS, service, query={"subject_id": "u-1"})
    assert named.status == 200 and named.body == everything


def test_a_runs_events_are_refused_to_everyone_else() -> None:
    _run_with_events()
    # Another tenant: 404, never 403.
    other_tenant = call("GET", EVENTS, claims("globex", scope=ALL))
    assert (other_tenant.status, other_tenant.code) == (404, "not_found")
    # Another subject: run ids are the subject's own, so this one's run-ev does not exist.
    other_subject = call("GET", EVENTS, claims(subject="u-2", scope=ALL))
    assert (other_subject.status, other_subject.code) == (404, "not_found")
    naming = call("GET", EVENTS, claims(subject="u-2", scope=ALL), query={"subject_id": "u-1"})
    assert (naming.status, naming.code) == (403, "forbidden")
    no_scope = call("GET", EVENTS, claims(scope="memory:read memory:write"))
    assert (no_scope.status, no_scope.code) == (403, "forbidden")
    absent = call("GET", "/v1/runs/run-none/events", claims(scope=ALL))
    assert (absent.status, absent.code) == (404, "not_found")
    for answer in (other_tenant, other_subject, naming, no_scope):
        assert "e-a" not in json.dumps(answer.body)


@pytest.mark.parametrize(
    "query",
    [
        {"limit": "0"},
        {"limit": "101"},
        {"limit": "ten"},
        {"next_token": "not-a-token"},
        {"next_token": "eyJ2IjogMX0"},  # {"v": 1}: no event id in it
    ],
)
def test_a_bad_limit_or_next_token_for_run_events_is_refused(query: dict[str, str]) -> None:
    _run_with_events()
    answer = call("GET", EVENTS, claims(scope=ALL), query=query)
    assert (answer.status, answer.code) == (422, "validation_failed")


def test_a_forgotten_subjects_run_events_are_not_found_before_the_purge(
    api: MemoryService, services: Services, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The forget cut-off: from the forget on, the subject's runs are absent, whether or
    not the purge has reached the run store yet."""
    monkeypatch.setattr(api, "purge", _NoPurge())
    _run_with_events()
    me = claims(scope=ALL)
    assert call("GET", EVENTS, me).status == 200
    assert call("DELETE", "/v1/subjects/u-1/memories", me).status == 202
    gone = call("GET", EVENTS, me)
    assert (gone.status, gone.code) == (404, "not_found")
    # The receipts are still in the store: the cut-off answered, not the purge.
    key = run_key("u-1", "run-ev")
    kept, _ = services.stores.runs.receipts("acme", key, now=datetime.now(UTC))
    assert [r.event_id for r in kept] == ["e-a", "e-b", "e-c"]


class _NoPurge:
    def launch(self, tenant_id: str, deletion_id: str, *, resume: bool = False) -> None:
        return None


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


def _assembled_over_everything() -> tuple[dict[str, object], dict[str, int]]:
    """An assembly with a run, a session message and a memory; its manifest and the
    index of each section's first item in ``items``."""
    me = claims(scope=ALL)
    assert call("POST", "/v1/subjects/u-1/memories", me, memory_body()).status == 201
    call("POST", f"{SESSION}/messages", me, {"request_id": "r1", "role": "user", "content": "hi"})
    assert call("PUT", "/v1/runs/r-1", me, {"subject_id": "u-1", "plan_version": "p"}).status == 201
    out = call(
        "POST",
        "/v1/subjects/u-1/context",
        me,
        {"goal": "g", "token_budget": 2000, "session_id": "s-1", "run_id": "r-1"},
    )
    assert out.status == 200, out.body
    manifest = out.body["manifest"]
    where: dict[str, int] = {}
    for n, item in enumerate(manifest["items"]):
        where.setdefault(item["section"], n)
    assert {"run_state", "session", "memories"} <= set(where), manifest["items"]
    return manifest, where


@pytest.mark.parametrize(
    ("section", "edit", "field"),
    [
        ("memories", {"id": {"a": 1}}, "id"),
        ("memories", {"id": ["x"]}, "id"),
        ("memories", {"id": "mem_" + "0" * 32 + "x" * 300}, "id"),
        ("session", {"id": "session:s-1:msg:99999999999999999999999"}, "id"),
        ("session", {"id": "session:s#1:msg:1"}, "id"),
        ("run_state", {"version": 10**30}, "version"),
        ("run_state", {"version": 2**53}, "version"),
        ("run_state", {"version": "1"}, "version"),
        ("memories", {"section": "nope"}, "section"),
    ],
    ids=[
        "id object",
        "id list",
        "id too long",
        "message number too large",
        "session id of another shape",
        "run version 10^30",
        "run version 2^53",
        "run version text",
        "unknown section",
    ],
)
def test_an_edited_manifest_is_a_422_naming_the_field(
    section: str, edit: dict[str, object], field: str
) -> None:
    """A probe edited a real manifest's items: an id that was an object or a list reached
    the store (sqlite3.ProgrammingError), and a message number or run version past 2^63
    an OverflowError: each answered 500."""
    manifest, where = _assembled_over_everything()
    n = where[section]
    items = list(manifest["items"])  # type: ignore[call-overload]
    items[n] = {**items[n], **edit}
    answer = call(
        "POST",
        "/v1/subjects/u-1/context/reproduce",
        claims(scope=ALL),
        {**manifest, "items": items},
    )
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body
    locations = [e["location"] for e in answer.body["error"]["details"]["errors"]]
    assert f"body.items.{n}.{field}" in locations, locations


@pytest.mark.parametrize(
    ("section", "edit"),
    [
        ("session", {"id": "session:s-1:msg:999999999999999"}),
        ("session", {"id": "session:s-2:summary"}),
        ("run_state", {"version": 2**53 - 1}),
        ("memories", {"id": "mem_" + "0" * 32}),
        ("evidence", {"id": "evidence:49"}),
    ],
    ids=[
        "no such message",
        "no such session",
        "no such run version",
        "no such memory",
        "no such evidence",
    ],
)
def test_a_well_formed_manifest_naming_what_is_not_there_is_a_4xx(
    section: str, edit: dict[str, object]
) -> None:
    manifest, where = _assembled_over_everything()
    items = list(manifest["items"])  # type: ignore[call-overload]
    n = where.get(section, 0)
    items[n] = {**items[n], "section": section, **edit}
    answer = call(
        "POST",
        "/v1/subjects/u-1/context/reproduce",
        claims(scope=ALL),
        {**manifest, "items": items},
    )
    assert answer.status in (404, 422), answer.body
