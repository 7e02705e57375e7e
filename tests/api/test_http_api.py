"""The HTTP API through real-shaped API Gateway proxy events, against moto DynamoDB.
No code of ours is mocked: events go into the Lambda handler as API Gateway sends them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from memvault.services.memory import MemoryService
from tests.support.api import ALL, call, claims, invoke, load_event, memory_body

pytestmark = pytest.mark.usefixtures("api")
BASE = "/v1/subjects/u-1/memories"


def test_the_sample_api_gateway_event_writes_a_memory() -> None:
    answer = invoke(load_event("api_write_memory.json"))
    assert answer.status == 201
    assert answer.body["subject_id"] == "u-42"
    assert answer.body["version"] == 1
    assert "tenant_id" not in answer.body


def test_write_then_replay_returns_the_same_memory_marked_as_replay() -> None:
    first = call("POST", BASE, claims(), memory_body())
    again = call("POST", BASE, claims(), memory_body())
    assert (first.status, again.status) == (201, 201)
    assert first.headers["Idempotent-Replay"] == "false"
    assert again.headers["Idempotent-Replay"] == "true"
    assert again.body == first.body


def test_reused_request_id_with_other_payload_is_409() -> None:
    call("POST", BASE, claims(), memory_body())
    answer = call("POST", BASE, claims(), memory_body(content="Prefers English"))
    assert (answer.status, answer.code) == (409, "idempotency_key_reused")


def test_correct_history_conflict_delete_and_deletion_status() -> None:
    v1 = call("POST", BASE, claims(), memory_body()).body
    v2 = call(
        "PATCH",
        f"{BASE}/{v1['memory_id']}",
        claims(),
        {"expected_version": 1, "content": "Prefers English"},
    )
    assert (v2.status, v2.body["version"], v2.body["supersedes_id"]) == (200, 2, v1["memory_id"])

    stale = call(
        "PATCH", f"{BASE}/{v1['memory_id']}", claims(), {"expected_version": 1, "content": "stale"}
    )
    assert (stale.status, stale.code) == (409, "version_conflict")
    assert stale.body["error"]["details"]["current_version"] == 2

    history = call("GET", f"{BASE}/{v1['memory_id']}/history", claims())
    assert [(v["version"], v["status"]) for v in history.body["versions"]] == [
        (1, "superseded"),
        (2, "active"),
    ]

    deleted = call("DELETE", f"{BASE}/{v2.body['memory_id']}", claims())
    assert deleted.status == 202
    assert call("GET", f"{BASE}/{v1['memory_id']}", claims()).status == 404
    status = call("GET", f"/v1/deletions/{deleted.body['deletion_id']}", claims())
    assert status.status == 200
    assert status.body["status"] == "COMPLETED"
    assert {c["copy"]: c["status"] for c in status.body["copies"]} == {
        "artifacts": "NOT_APPLICABLE",
        "primary": "DONE",
        "versions": "DONE",
        "idempotency": "NOT_APPLICABLE",
        "index": "NOT_APPLICABLE",
        "cache": "NOT_APPLICABLE",
        "sessions": "NOT_APPLICABLE",
        "runs": "NOT_APPLICABLE",
        "traces": "DONE",
    }
    primary = next(c for c in status.body["copies"] if c["copy"] == "primary")
    assert primary["attempts"] == 1 and [e["status"] for e in primary["history"]] == ["DONE"]


def test_list_export_and_forget() -> None:
    for i in range(3):
        call("POST", BASE, claims(), memory_body(request_id=f"r{i}", canonical_key=f"k{i}"))
    listed = call("GET", BASE, claims(), query={"limit": "2"})
    assert len(listed.body["items"]) == 2
    assert listed.body["next_token"]
    rest = call("GET", BASE, claims(), query={"next_token": listed.body["next_token"]})
    assert len(rest.body["items"]) == 1
    assert len(call("GET", "/v1/subjects/u-1/export", claims()).body["memories"]) == 3

    forget = call("DELETE", BASE, claims())
    assert (forget.status, forget.body["scope"]) == (202, "subject")
    assert call("GET", BASE, claims()).body["items"] == []


def test_the_export_says_what_it_does_not_hold() -> None:
    """The export holds the subject's long-term memories the reader may read; what else is
    held about the subject (sessions, runs, artifacts, recall traces and feedback) is not
    in it, and the answer says so, with the route that reads each by id."""
    call("POST", BASE, claims(), memory_body())
    body = call("GET", "/v1/subjects/u-1/export", claims()).body
    assert len(body["memories"]) == 1
    gaps = {gap["what"]: gap for gap in body["not_included"]}
    assert set(gaps) == {"sessions", "runs", "artifacts", "recall_traces", "feedback"}
    for gap in gaps.values():
        assert gap["why"] and gap["read_with"].startswith(("GET /v1/", "POST /v1/"))


def test_another_tenants_memory_is_404_not_403() -> None:
    mine = call("POST", BASE, claims("acme"), memory_body()).body
    for method in ("GET", "DELETE"):
        answer = call(method, f"{BASE}/{mine['memory_id']}", claims("globex"))
        assert (answer.status, answer.code) == (404, "not_found")


def test_a_token_for_one_subject_is_refused_another_subjects_path() -> None:
    answer = call("GET", "/v1/subjects/u-2/memories", claims(subject="u-1"))
    assert (answer.status, answer.code) == (403, "forbidden")
    service = claims(subject=None, scope=ALL + " subjects:any")
    assert call("GET", "/v1/subjects/u-2/memories", service).status == 200


@pytest.mark.parametrize(
    ("method", "path", "scope", "body"),
    [
        ("POST", BASE, "memory:read", memory_body()),
        ("GET", BASE, "memory:write", None),
        ("DELETE", BASE, "memory:read memory:write", None),
    ],
)
def test_a_route_needs_its_scope(method: str, path: str, scope: str, body: Any) -> None:
    answer = call(method, path, claims(scope=scope), body)
    assert (answer.status, answer.code) == (403, "forbidden")


def test_no_verified_identity_is_401() -> None:
    answer = call("GET", BASE, None)
    assert (answer.status, answer.code) == (401, "unauthorized")


def test_claims_without_a_tenant_are_401() -> None:
    event = load_event("api_write_memory.json")
    del event["requestContext"]["authorizer"]["tenant_id"]
    answer = invoke(event)
    assert (answer.status, answer.code) == (401, "unauthorized")


def test_identity_is_never_taken_from_the_body_or_headers() -> None:
    event = load_event("api_write_memory.json")
    body = json.loads(event["body"])
    body["tenant_id"] = "globex"
    event["body"] = json.dumps(body)
    event["headers"]["X-Tenant-Id"] = "globex"
    answer = invoke(event)
    assert (answer.status, answer.code) == (422, "validation_failed")
    assert answer.body["error"]["details"]["errors"][0]["location"] == "body.tenant_id"


BAD_BODIES = {
    "malformed JSON": '{"request_id": ',
    "not an object": "[1, 2, 3]",
    "wrong type": json.dumps(memory_body(consent="maybe")),
    "missing field": json.dumps({k: v for k, v in memory_body().items() if k != "kind"}),
    "unknown field": json.dumps(memory_body(owner="someone")),
    "out of bounds": json.dumps(memory_body(ttl_seconds=0)),
}


@pytest.mark.parametrize("raw", BAD_BODIES.values(), ids=BAD_BODIES.keys())
def test_bad_input_is_422_validation_failed_and_never_echoed(raw: str) -> None:
    answer = call("POST", BASE, claims(), raw_body=raw)
    assert (answer.status, answer.code) == (422, "validation_failed")
    assert answer.body["error"]["details"]["errors"]
    assert '"input"' not in json.dumps(answer.body)
    assert "maybe" not in json.dumps(answer.body)


def test_bad_path_and_query_parameters_are_422() -> None:
    assert call("GET", f"{BASE}/not-a-memory-id", claims()).code == "validation_failed"
    assert call("GET", BASE, claims(), query={"limit": "1000"}).code == "validation_failed"
    assert call("GET", BASE, claims(), query={"status": "deleted"}).code == "validation_failed"
    assert call("GET", BASE, claims(), query={"next_token": "forged"}).code == "validation_failed"


def test_policy_refusals_carry_their_codes() -> None:
    secret = call("POST", BASE, claims(), memory_body(content="key AKIAIOSFODNN7EXAMPLE"))
    assert (secret.status, secret.code) == (422, "secret_detected")
    assert "AKIAIOSFODNN7EXAMPLE" not in json.dumps(secret.body)
    pii = call(
        "POST",
        BASE,
        claims(),
        memory_body(request_id="r2", consent=False, content="mail li.wei@example.com"),
    )
    assert (pii.status, pii.code) == (422, "consent_required")


def test_an_oversize_body_is_413() -> None:
    answer = call("POST", BASE, claims(), raw_body=json.dumps(memory_body(content="x" * 70_000)))
    assert (answer.status, answer.code) == (413, "payload_too_large")


def test_an_unknown_route_is_404_in_the_error_format() -> None:
    answer = call("GET", "/v1/nothing-here", claims())
    assert (answer.status, answer.code) == (404, "not_found")


def test_an_unexpected_fault_is_500_with_a_correlation_id_only(
    api: MemoryService, monkeypatch: pytest.MonkeyPatch
) -> None:
    def explode(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom with private detail: Prefers Chinese")

    monkeypatch.setattr(api, "list_memories", explode)
    answer = call("GET", BASE, claims())
    assert (answer.status, answer.code) == (500, "internal")
    assert set(answer.body["error"]["details"]) == {"correlation_id"}
    assert "private detail" not in json.dumps(answer.body)


def test_health_needs_no_token_and_reports_dependencies() -> None:
    answer = call("GET", "/v1/health", None)
    assert answer.status == 200
    assert answer.body["status"] == "ok"
    assert answer.body["dependencies"] == {"dynamodb": "ok"}
