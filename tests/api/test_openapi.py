"""The OpenAPI document is generated from the code, served, and matches the routes."""

from __future__ import annotations

import pytest

from memvault.api.app import app
from tests.support.api import call

pytestmark = pytest.mark.usefixtures("api")

#: The routes of docs/api.md that exist so far (long-term memory, deletions, health).
CONTRACT = {
    ("POST", "/v1/subjects/{subject_id}/memories"),
    ("GET", "/v1/subjects/{subject_id}/memories"),
    ("GET", "/v1/subjects/{subject_id}/memories/{memory_id}"),
    ("PATCH", "/v1/subjects/{subject_id}/memories/{memory_id}"),
    ("GET", "/v1/subjects/{subject_id}/memories/{memory_id}/history"),
    ("DELETE", "/v1/subjects/{subject_id}/memories/{memory_id}"),
    ("DELETE", "/v1/subjects/{subject_id}/memories"),
    ("GET", "/v1/subjects/{subject_id}/export"),
    ("GET", "/v1/deletions/{deletion_id}"),
    ("GET", "/v1/health"),
    ("GET", "/v1/openapi.json"),
}


def _document() -> dict[str, object]:
    answer = call("GET", "/v1/openapi.json", None)
    assert answer.status == 200
    assert isinstance(answer.body, dict)
    return answer.body


def test_the_document_lists_exactly_the_routes_the_resolver_serves() -> None:
    doc = _document()
    documented = {
        (method.upper(), path)
        for path, operations in doc["paths"].items()  # type: ignore[attr-defined]
        for method in operations
    }
    served = {(r.method, r.openapi_path) for r in app._static_routes + app._dynamic_routes}
    assert documented == served
    assert documented >= CONTRACT


def test_every_protected_route_declares_bearer_auth_and_the_error_body() -> None:
    doc = _document()
    assert doc["components"]["securitySchemes"]["bearer"]["scheme"] == "bearer"  # type: ignore[index]
    assert doc["security"] == [{"bearer": []}]
    for path, operations in doc["paths"].items():  # type: ignore[attr-defined]
        for method, op in operations.items():
            public = path in ("/v1/health", "/v1/openapi.json")
            assert (op.get("security") == []) is public, (method, path)
            if not public:
                assert "401" in op["responses"] and "422" in op["responses"], (method, path)


def test_success_statuses_follow_the_contract() -> None:
    paths = _document()["paths"]
    assert "201" in paths["/v1/subjects/{subject_id}/memories"]["post"]["responses"]  # type: ignore[index]
    assert "202" in paths["/v1/subjects/{subject_id}/memories/{memory_id}"]["delete"]["responses"]  # type: ignore[index]


def test_a_runs_event_listing_is_documented_with_its_paging_and_no_payload() -> None:
    doc = _document()
    op = doc["paths"]["/v1/runs/{run_id}/events"]["get"]  # type: ignore[index]
    params = {p["name"]: p for p in op["parameters"]}
    assert set(params) == {"run_id", "subject_id", "limit", "next_token"}
    assert (params["limit"]["schema"]["minimum"], params["limit"]["schema"]["maximum"]) == (1, 100)
    assert {"200", "403", "404", "422"} <= set(op["responses"])
    item = doc["components"]["schemas"]["RunEventOut"]  # type: ignore[index]
    assert set(item["properties"]) == {"event_id", "type", "received_at", "applied", "version"}
