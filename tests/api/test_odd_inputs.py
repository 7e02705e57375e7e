"""Inputs a hostile probe sent that used to answer 500: each now gets a 4xx with a stable
code and a message that says what to send instead. Runs on both stores (the number-range
cases failed only on DynamoDB, whose numbers stop at 1e-130 and 1e126)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from memvault.api.events import proxy_event
from memvault.identity.claims import Claims
from tests.support.api import Answer, invoke, memory_body

WHO = Claims.parse(
    {
        "tenant_id": "acme",
        "sub": "agent-client-1",
        "subject_id": "u-1",
        "scope": "memory:read memory:write runs:write",
    }
)
MEMORIES = "/v1/subjects/u-1/memories"


def _send(
    method: str,
    path: str,
    body: str | None,
    content_type: str | None = "application/json",
    query: dict[str, str] | None = None,
) -> Answer:
    event = proxy_event(method, path, claims=WHO, body=body, query=query)
    for where in ("headers", "multiValueHeaders"):
        event[where] = {k: v for k, v in event[where].items() if k.lower() != "content-type"}
    if content_type is not None:
        event["headers"]["Content-Type"] = content_type
        event["multiValueHeaders"]["Content-Type"] = [content_type]
    return invoke(event)


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/xml", "multipart/form-data", "application/x-www-form-urlencoded"],
)
def test_a_body_that_is_not_declared_json_is_a_415(api: Any, content_type: str) -> None:
    answer = _send("POST", MEMORIES, json.dumps(memory_body()), content_type)
    assert (answer.status, answer.code) == (415, "media_type_not_allowed"), answer.body
    assert "application/json" in answer.body["error"]["message"]


@pytest.mark.parametrize(
    "content_type", ["APPLICATION/JSON", "Application/Json; charset=UTF-8", None]
)
def test_json_is_json_whatever_the_case_of_its_media_type(
    api: Any, content_type: str | None
) -> None:
    answer = _send("POST", MEMORIES, json.dumps(memory_body()), content_type)
    assert answer.status == 201, answer.body


def test_json_nested_2000_levels_is_refused_before_it_is_parsed(api: Any) -> None:
    deep = "[" * 2000 + "]" * 2000
    body = json.dumps(memory_body()).replace('"tags": ["preference"]', f'"tags": {deep}')
    answer = _send("POST", MEMORIES, body)
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body
    # Brackets inside strings are text, not nesting.
    text = json.dumps(memory_body(request_id="r-brackets", content="[" * 500 + "x" + "]" * 500))
    assert _send("POST", MEMORIES, text).status == 201


def test_a_next_token_hiding_deep_json_is_a_422(api: Any) -> None:
    token = base64.urlsafe_b64encode(("[" * 5000 + "]" * 5000).encode()).decode()
    answer = _send("GET", MEMORIES, None, query={"next_token": token})
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body


@pytest.mark.parametrize("confidence", [1e-200, 1e-131])
def test_a_confidence_the_store_cannot_hold_is_a_422(api: Any, confidence: float) -> None:
    answer = _send("POST", MEMORIES, json.dumps(memory_body(confidence=confidence)))
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body
    ok = _send("POST", MEMORIES, json.dumps(memory_body(request_id="r-ok", confidence=1e-9)))
    assert ok.status == 201, ok.body


@pytest.mark.parametrize(
    ("body", "path"),
    [
        ({"subject_id": "u-1", "plan_version": "p1", "budget": {"tokens": 1e200}}, "/v1/runs/r-1"),
        ({"subject_id": "u-1", "plan_version": "p1", "budget": {"usd": 1e-200}}, "/v1/runs/r-2"),
    ],
)
def test_budgets_beyond_the_stores_number_range_are_a_422(
    api: Any, body: dict[str, Any], path: str
) -> None:
    answer = _send("PUT", path, json.dumps(body))
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body


def test_run_state_beyond_the_stores_number_range_is_a_422(api: Any) -> None:
    created = _send("PUT", "/v1/runs/r-3", json.dumps({"subject_id": "u-1", "plan_version": "p"}))
    assert created.status == 201, created.body
    advance = {"expected_version": 1, "status": "RUNNING", "step": "s", "state": {"x": [1e300]}}
    answer = _send("POST", "/v1/runs/r-3/checkpoints", json.dumps(advance))
    assert (answer.status, answer.code) == (422, "validation_failed"), answer.body
