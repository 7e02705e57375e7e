"""The tenant comes from the verified token and nothing else: a request header that names
another tenant changes nothing, with a body that is otherwise valid (so no 422 hides it).

Through real-shaped API Gateway events into the handler, and through the local stand-in
for API Gateway (the WSGI adapter), which forwards the request's headers into the event.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from werkzeug.test import Client

from memvault.api.events import proxy_event
from memvault.handlers.api import handler as lambda_handler
from memvault.identity.claims import Claims
from memvault.services.memory import MemoryService
from memvault_local.adapter import ApiGatewayAdapter
from tests.support.api import Answer, call, claims, invoke, memory_body
from tests.support.harness import a_write, ctx

pytestmark = pytest.mark.usefixtures("api")
BASE = "/v1/subjects/u-1/memories"

#: Headers a careless handler might read a tenant from, all naming the other tenant (each
#: name once: HTTP header names are case-insensitive, and a repeated one is joined).
OTHER_TENANT = "globex"
TENANT_HEADERS = {
    "X-Tenant-Id": OTHER_TENANT,
    "x-memvault-tenant": OTHER_TENANT,
    "X-Memvault-Tenant-Id": OTHER_TENANT,
    "tenant-id": OTHER_TENANT,
    "X-Tenant": OTHER_TENANT,
    "X-Amzn-Tenant-Id": OTHER_TENANT,
}


def with_headers(
    method: str, path: str, who: Claims, body: Any = None, headers: dict[str, str] | None = None
) -> Answer:
    text = json.dumps(body) if body is not None else None
    return invoke(
        proxy_event(method, path, claims=who, body=text, headers=headers or TENANT_HEADERS)
    )


def test_a_tenant_header_does_not_move_a_write_to_another_tenant() -> None:
    written = with_headers("POST", BASE, claims("acme"), memory_body())
    assert written.status == 201, written.body
    memory_id = written.body["memory_id"]

    # It landed in the token's tenant ...
    assert call("GET", f"{BASE}/{memory_id}", claims("acme")).status == 200
    assert [m["memory_id"] for m in call("GET", BASE, claims("acme")).body["items"]] == [memory_id]
    # ... and the tenant the headers named sees nothing of it.
    assert call("GET", BASE, claims(OTHER_TENANT)).body["items"] == []
    assert call("GET", "/v1/subjects/u-1/export", claims(OTHER_TENANT)).body["memories"] == []
    answer = call("GET", f"{BASE}/{memory_id}", claims(OTHER_TENANT))
    assert (answer.status, answer.code) == (404, "not_found")


def test_a_tenant_header_does_not_reach_another_tenants_memories() -> None:
    theirs = call("POST", BASE, claims(OTHER_TENANT), memory_body(content="globex's own fact"))
    assert theirs.status == 201
    their_id = theirs.body["memory_id"]
    mine = call("POST", BASE, claims("acme"), memory_body(request_id="mine"))
    assert mine.status == 201

    acme = claims("acme")
    got = with_headers("GET", f"{BASE}/{their_id}", acme)
    assert (got.status, got.code) == (404, "not_found")
    history = with_headers("GET", f"{BASE}/{their_id}/history", acme)
    assert (history.status, history.code) == (404, "not_found")
    listed = with_headers("GET", BASE, acme)
    assert [m["memory_id"] for m in listed.body["items"]] == [mine.body["memory_id"]]
    exported = with_headers("GET", "/v1/subjects/u-1/export", acme)
    assert [m["memory_id"] for m in exported.body["memories"]] == [mine.body["memory_id"]]
    corrected = with_headers(
        "PATCH", f"{BASE}/{their_id}", acme, {"expected_version": 1, "content": "overwritten"}
    )
    assert (corrected.status, corrected.code) == (404, "not_found")
    deleted = with_headers("DELETE", f"{BASE}/{their_id}", acme)
    assert (deleted.status, deleted.code) == (404, "not_found")
    forgot = with_headers("DELETE", BASE, acme)
    assert forgot.status == 202  # forgets acme's u-1, not globex's

    still = call("GET", f"{BASE}/{their_id}", claims(OTHER_TENANT))
    assert (still.status, still.body["content"], still.body["version"]) == (
        200,
        "globex's own fact",
        1,
    )


class FixedVerifier:
    """Stands in for the JWT verifier: every bearer token is these claims."""

    def __init__(self, who: Claims) -> None:
        self.who = who

    def verify(self, token: str) -> Claims:
        return self.who


def test_the_local_gateway_adapter_takes_the_tenant_from_the_token_only(
    api: MemoryService,
) -> None:
    adapter = ApiGatewayAdapter(FixedVerifier(claims("acme")), lambda_handler)  # type: ignore[arg-type]
    client = Client(adapter)
    headers = {"Authorization": "Bearer any", **TENANT_HEADERS}

    written = client.post(BASE, data=json.dumps(memory_body()), headers=headers)
    assert written.status_code == 201, written.get_data(as_text=True)
    memory_id = json.loads(written.get_data(as_text=True))["memory_id"]

    assert [m.memory_id for m in api.list_memories(ctx("acme"), "u-1").items] == [memory_id]
    assert api.list_memories(ctx(OTHER_TENANT), "u-1").items == []
    listed = client.get(BASE, headers=headers)
    assert [m["memory_id"] for m in json.loads(listed.get_data(as_text=True))["items"]] == [
        memory_id
    ]

    theirs = api.write(
        ctx(OTHER_TENANT), "u-1", a_write(request_id="theirs", content="globex's own fact")
    ).memory
    got = client.get(f"{BASE}/{theirs.memory_id}", headers=headers)
    assert got.status_code == 404


def test_the_local_gateway_adapter_refuses_a_body_that_is_not_utf8(api: MemoryService) -> None:
    """A fresh probe (stop 49): invalid UTF-8 was repaired (U+FFFD) and the write answered
    201, storing another text than the bytes sent. It is a 422 naming the byte, and
    nothing is written."""
    adapter = ApiGatewayAdapter(FixedVerifier(claims("acme")), lambda_handler)  # type: ignore[arg-type]
    client = Client(adapter)
    raw = json.dumps(memory_body(content="caf\u00e9 order"), ensure_ascii=False).encode()
    raw = raw.replace(b"\xc3\xa9", b"\xe9")  # Latin-1, not UTF-8
    answer = client.post(
        BASE,
        data=raw,
        headers={"Authorization": "Bearer any", "Content-Type": "application/json"},
    )
    body = json.loads(answer.get_data(as_text=True))
    assert answer.status_code == 422, body
    assert body["error"]["code"] == "validation_failed"
    assert "not valid UTF-8" in body["error"]["message"]
    assert api.list_memories(ctx("acme"), "u-1").items == []
