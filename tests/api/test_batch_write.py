"""``POST /v1/subjects/{subject_id}/memories/batch``: up to 25 writes in one request, each
made exactly as ``POST .../memories`` makes it. Through real-shaped API Gateway proxy
events, on both stores (SQLite, and DynamoDB on moto)."""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest

from tests.support.api import ALL, Answer, call, claims, memory_body

pytestmark = pytest.mark.usefixtures("api")
BASE = "/v1/subjects/u-1/memories"
BATCH = f"{BASE}/batch"
SECRET = "AKIAIOSFODNN7EXAMPLE"


def turn(i: int, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "request_id": f"turn-{i}",
        "kind": "episodic",
        "content": f"Turn {i}: we talked about the trip to Lisbon",
        "source": {"type": "user_statement", "ref": f"D1:{i}", "thread": "c1/s1", "turn": i},
        "consent": True,
    }
    body.update(overrides)
    return body


def batch(*writes: dict[str, Any], who: Any = None) -> Answer:
    return call("POST", BATCH, who or claims(), {"memories": list(writes)})


def listed(who: Any = None) -> list[dict[str, Any]]:
    answer = call("GET", BASE, who or claims(), query={"limit": "100"})
    assert answer.status == 200, answer.body
    items: list[dict[str, Any]] = answer.body["items"]
    return items


def test_a_batch_writes_every_memory_in_order_and_each_reads_back() -> None:
    answer = batch(turn(1), turn(2), turn(3))
    assert answer.status == 200, answer.body
    assert (answer.body["written"], answer.body["replayed"], answer.body["refused"]) == (3, 0, 0)
    items = answer.body["items"]
    assert [i["status"] for i in items] == [201, 201, 201]
    assert [i["memory"]["source"]["ref"] for i in items] == ["D1:1", "D1:2", "D1:3"]
    assert [i["replayed"] for i in items] == [False] * 3
    for item in items:
        got = call("GET", f"{BASE}/{item['memory']['memory_id']}", claims())
        assert got.status == 200
        assert got.body == item["memory"]
    assert len(listed()) == 3


def test_a_retried_batch_replays_every_write_and_writes_nothing_new() -> None:
    first = batch(turn(1), turn(2))
    again = batch(turn(1), turn(2))
    assert (again.body["written"], again.body["replayed"]) == (0, 2)
    assert [i["replayed"] for i in again.body["items"]] == [True, True]
    assert [i["memory"] for i in again.body["items"]] == [i["memory"] for i in first.body["items"]]
    assert len(listed()) == 2


def test_a_write_already_made_alone_is_replayed_inside_a_batch() -> None:
    alone = call("POST", BASE, claims(), turn(1))
    assert alone.status == 201
    answer = batch(turn(1), turn(2))
    assert [i["replayed"] for i in answer.body["items"]] == [True, False]
    assert answer.body["items"][0]["memory"] == alone.body


def test_a_refused_write_takes_its_place_and_the_others_are_written() -> None:
    answer = batch(
        turn(1),
        turn(2, content=f"my key is {SECRET}"),
        turn(3, consent=False, kind="semantic"),
        turn(4),
    )
    assert answer.status == 200, answer.body
    items = answer.body["items"]
    assert [(i["status"], (i["error"] or {}).get("code")) for i in items] == [
        (201, None),
        (422, "secret_detected"),
        (422, "consent_required"),
        (201, None),
    ]
    assert items[1]["memory"] is None
    assert (answer.body["written"], answer.body["refused"]) == (2, 2)
    assert sorted(m["source"]["ref"] for m in listed()) == ["D1:1", "D1:4"]
    assert SECRET not in json.dumps(answer.body)


def test_each_refusal_is_the_one_the_single_write_gives() -> None:
    """The batch answers each write as ``POST .../memories`` does: the same status and code
    for the same body and token, write by write."""
    bodies = [
        turn(1, content=f"token {SECRET}"),
        turn(2, sensitivity="pii"),  # above the token's ceiling (internal)
        turn(3, source={"type": "human_review", "ref": "r-1"}),  # a claim this token may not make
        turn(4, kind="semantic", consent=False),
        turn(5, artifact_id="art_00000000000000000000000000000000"),  # no such artifact
        memory_body(request_id="fact-1"),
    ]
    agent = claims(agent_role="planner")
    answer = batch(*bodies, who=agent)
    assert answer.status == 200, answer.body
    for i, body in enumerate(bodies):
        alone = call(
            "POST", "/v1/subjects/u-9/memories", claims(subject="u-9", agent_role="planner"), body
        )
        item = answer.body["items"][i]
        assert (item["status"], (item["error"] or {}).get("code")) == (
            alone.status,
            alone.code,
        ), (i, item, alone.body)
    assert any(i["status"] >= 400 for i in answer.body["items"])


def test_a_request_id_reused_with_another_payload_is_refused_for_that_write_only() -> None:
    batch(turn(1))
    answer = batch(turn(1, content="something else entirely"), turn(2))
    codes = [(i["status"], (i["error"] or {}).get("code")) for i in answer.body["items"]]
    assert codes == [(409, "idempotency_key_reused"), (201, None)]


@pytest.mark.parametrize(
    ("memories", "where"),
    [
        ([], "body.memories"),
        ([turn(i) for i in range(26)], "body.memories"),
        ([turn(1), turn(2, request_id="turn-1")], "body"),
        ([turn(1), {**turn(2), "content": ""}], "body.memories.1.content"),
        ([turn(1), {**turn(2), "surprise": 1}], "body.memories.1.surprise"),
    ],
    ids=["empty", "26 writes", "a request_id twice", "a write invalid", "an unknown field"],
)
def test_a_malformed_batch_is_refused_whole_and_writes_nothing(
    memories: list[dict[str, Any]], where: str
) -> None:
    answer = call("POST", BATCH, claims(), {"memories": memories})
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body
    locations = [e["location"] for e in answer.body["error"]["details"]["errors"]]
    assert any(loc.startswith(where) for loc in locations), locations
    assert listed() == []


def test_a_batch_over_the_body_limit_is_refused_whole_and_names_the_limit() -> None:
    writes = [turn(i, content="x" * 4000) for i in range(20)]
    answer = call("POST", BATCH, claims(), {"memories": writes})
    assert (answer.status, answer.code) == (413, "payload_too_large")
    assert answer.body["error"]["details"]["max_bytes"] == 64 * 1024
    assert listed() == []


def test_the_shared_request_id_is_named_by_position_not_by_value() -> None:
    answer = call(
        "POST", BATCH, claims(), {"memories": [turn(1), turn(2), turn(3, request_id="turn-1")]}
    )
    text = json.dumps(answer.body)
    assert "0 and 2" in text
    assert "turn-1" not in text


def test_another_subject_token_and_a_token_without_write_scope_write_nothing() -> None:
    other = batch(turn(1), who=claims(subject="u-2"))
    assert (other.status, other.code) == (403, "forbidden")
    reader = batch(turn(1), who=claims(scope="memory:read"))
    assert (reader.status, reader.code) == (403, "forbidden")
    assert listed() == []


def test_another_tenant_writes_into_its_own_tenant_only() -> None:
    answer = batch(turn(1), who=claims(tenant="globex"))
    assert answer.status == 200
    assert listed() == []
    assert len(listed(claims(tenant="globex"))) == 1


def test_a_batch_under_a_fact_the_token_may_not_read_is_refused_for_that_write() -> None:
    """A fact above the token's ceiling: the write under its key is refused as the single
    write refuses it (409 fact_not_writable), and the fact stays as it was."""
    owner = claims(max_sensitivity="pii")
    fact = call("POST", BASE, owner, memory_body(sensitivity="pii"))
    assert fact.status == 201
    answer = batch(memory_body(request_id="atk-1", content="Prefers coffee"), turn(2), who=claims())
    codes = [(i["status"], (i["error"] or {}).get("code")) for i in answer.body["items"]]
    assert codes == [(409, "fact_not_writable"), (201, None)]
    assert "Prefers coffee" not in json.dumps(call("GET", BASE, owner).body)
    assert "Prefers Chinese" not in json.dumps(answer.body)


def test_the_log_counts_refusals_without_content(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.INFO, logger="memvault"):
        batch(turn(1, content=f"secret {SECRET} and more"), turn(2))
    logged = " ".join(r.getMessage() + json.dumps(r.__dict__, default=str) for r in caplog.records)
    assert "batch writes refused" in logged
    assert SECRET not in logged
    assert "Lisbon" not in logged


def test_the_whole_scope_set_is_enough() -> None:
    assert batch(turn(1), who=claims(scope=ALL)).status == 200


GITHUB_TOKEN = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
SLACK_KEY = "xoxb-598747174292-4741166773731-2080opxn7yftd8ng1ab91nq1"


@pytest.mark.parametrize("path", [BASE, BATCH])
@pytest.mark.parametrize(
    "raw",
    [
        # an unknown field named by a credential
        lambda w: json.dumps({**w, GITHUB_TOKEN: 1}),
        # a scope key that fails the key pattern, and is a credential
        lambda w: json.dumps({**w, "scope": {"AKIAIOSFODNN7EXAMPLE": "w1"}}),
        # a key given twice, a credential
        lambda w: json.dumps(w)[:-1] + f', "{GITHUB_TOKEN}": 1, "{GITHUB_TOKEN}": 2}}',
        # a scope key that is a credential the key pattern lets through
        lambda w: json.dumps({**w, "scope": {SLACK_KEY: "w1"}}),
        # a scope key that is a phone number, without consent
        lambda w: json.dumps({**w, "consent": False, "scope": {"4155550199": "w1"}}),
    ],
    ids=["unknown field", "scope key pattern", "key twice", "scope key credential", "pii key"],
)
def test_a_refusal_never_repeats_a_credential_or_personal_data_used_as_a_name(
    path: str, raw: Any
) -> None:
    """A fresh probe of the batch route: names the caller chose (an unknown field, a scope
    key, a key given twice) came back in the refusal, credentials and phone numbers
    included. The refusal now names them by their place."""
    write = turn(1)
    body = raw(write)
    if path == BATCH:
        body = '{"memories": [' + body + "]}"
    answer = call("POST", path, claims(), raw_body=body)
    shown = json.dumps(answer.body)
    assert answer.status in (200, 422), shown
    if path == BATCH and answer.status == 200:
        assert answer.body["refused"] == 1
    for held in (GITHUB_TOKEN, "AKIAIOSFODNN7EXAMPLE", SLACK_KEY[:12], "4155550199"):
        assert held not in shown, shown
    assert listed() == []
