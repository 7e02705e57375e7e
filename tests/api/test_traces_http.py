"""The trace and feedback routes through the real Lambda handler (API Gateway proxy events),
on both stores with the embedded index and the hashing embedder: their happy paths, and
every refusal as the error envelope ``{"error": {"code", "message", "details"}}`` with the
right status, never a 500."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memvault.api.deps import deps
from memvault.embeddings.hashing import HashingEmbedder
from memvault_wire.memory import MAX_CONTENT_CHARS
from tests.support.api import Answer, call, claims, memory_body
from tests.support.recall import RecallRig, make_rig

S1 = "/v1/subjects/u-1"


@pytest.fixture
def rig(aws: None, store_backend: str, tmp_path: Path) -> Iterator[RecallRig]:
    extra = {"data_dir": str(tmp_path / "data")} if store_backend == "sqlite" else {}
    built = make_rig(
        "embedded",
        HashingEmbedder(),
        prefix="trh-",
        recall_relevance_floor=0.1,
        store=store_backend,
        **extra,
    )
    deps.use(built.services)
    yield built
    deps.use(None)
    if built.services.stores.database is not None:
        built.services.stores.database.close()


def refused(answer: Answer, status: int, code: str | None = None) -> dict[str, Any]:
    """The answer is the error envelope with this status (and code)."""
    assert answer.status == status, (answer.status, answer.body)
    assert isinstance(answer.body, dict) and set(answer.body) == {"error"}, answer.body
    error = answer.body["error"]
    assert set(error) == {"code", "message", "details"}, error
    assert isinstance(error["code"], str) and isinstance(error["message"], str)
    if code is not None:
        assert error["code"] == code, error
    return dict(error)


def written(rig: RecallRig, content: str, subject: str = "u-1", tenant: str = "acme") -> str:
    body = memory_body(request_id=uuid.uuid4().hex, content=content, canonical_key=None)
    answer = call("POST", f"/v1/subjects/{subject}/memories", claims(tenant, subject), body)
    assert answer.status == 201, answer.body
    return str(answer.body["memory_id"])


@pytest.fixture
def served(rig: RecallRig) -> dict[str, str]:
    """A memory of acme/u-1 that a recall (for run-9) returned, and that recall's id."""
    memory_id = written(rig, "The quarterly planning meeting is on Thursday afternoons")
    written(rig, "Prefers tea over coffee in the morning")
    rig.sync()
    answer = call(
        "POST",
        f"{S1}/recall",
        claims(),
        {"query": "when is the quarterly planning meeting", "limit": 5, "run_id": "run-9"},
    )
    assert answer.status == 200, answer.body
    assert memory_id in [i["memory"]["memory_id"] for i in answer.body["items"]]
    return {"memory_id": memory_id, "recall_id": answer.body["recall_id"]}


def test_the_trace_routes_answer_what_a_recall_returned_and_feedback_on_it(
    rig: RecallRig, served: dict[str, str]
) -> None:
    recall_id, memory_id = served["recall_id"], served["memory_id"]
    trace = call("GET", f"/v1/recalls/{recall_id}", claims())
    assert trace.status == 200, trace.body
    assert trace.body["recall_id"] == recall_id and trace.body["run_id"] == "run-9"
    assert memory_id in [r["memory_id"] for r in trace.body["returned"]]

    given = call(
        "POST",
        f"{S1}/feedback",
        claims(),
        {"recall_id": recall_id, "memory_id": memory_id, "verdict": "outdated"},
    )
    assert given.status == 201, given.body
    assert (given.body["recall_id"], given.body["verdict"]) == (recall_id, "outdated")

    listed = call("GET", f"{S1}/feedback", claims(), query={"limit": "5"})
    assert listed.status == 200
    assert [f["feedback_id"] for f in listed.body["items"]] == [given.body["feedback_id"]]

    mt = call("GET", f"{S1}/memories/{memory_id}/trace", claims())
    assert mt.status == 200, mt.body
    assert mt.body["last_used"]["recall_id"] == recall_id
    assert mt.body["last_used"]["run_id"] == "run-9"
    assert [f["feedback_id"] for f in mt.body["feedback"]] == [given.body["feedback_id"]]
    v1 = next(v for v in mt.body["versions"] if v["version"] == 1)
    assert [s["recall_id"] for s in v1["served_by"]] == [recall_id]


def test_another_tenants_recall_and_memory_are_404(rig: RecallRig, served: dict[str, str]) -> None:
    other = claims("globex")  # the same subject id, in another tenant
    refused(call("GET", f"/v1/recalls/{served['recall_id']}", other), 404, "not_found")
    refused(call("GET", f"{S1}/memories/{served['memory_id']}/trace", other), 404, "not_found")
    body = {"recall_id": served["recall_id"], "memory_id": served["memory_id"], "verdict": "wrong"}
    refused(call("POST", f"{S1}/feedback", other, body), 404, "not_found")
    # Another tenant's recall cannot prompt a correction or a delete here either.
    mine = written(rig, "Works from the Lisbon office", tenant="globex")
    patch = {"expected_version": 1, "content": "Works remotely", "prompted_by": served["recall_id"]}
    refused(call("PATCH", f"{S1}/memories/{mine}", other, patch), 404, "not_found")
    gone = call(
        "DELETE",
        f"{S1}/memories/{mine}",
        other,
        query={"prompted_by": served["recall_id"]},
    )
    refused(gone, 404, "not_found")
    # Nothing was corrected or deleted by those refusals.
    assert call("GET", f"{S1}/memories/{mine}", other).body["version"] == 1


def test_another_subject_is_refused(rig: RecallRig, served: dict[str, str]) -> None:
    u2 = claims(subject="u-2")
    recall_id, memory_id = served["recall_id"], served["memory_id"]
    # A token bound to u-2 naming u-1: forbidden.
    refused(call("GET", f"{S1}/memories/{memory_id}/trace", u2), 403)
    refused(call("GET", f"{S1}/feedback", u2), 403)
    body = {"recall_id": recall_id, "memory_id": memory_id, "verdict": "wrong"}
    refused(call("POST", f"{S1}/feedback", u2, body), 403)
    refused(call("GET", f"/v1/recalls/{recall_id}", u2, query={"subject_id": "u-1"}), 403)
    # Its own subject holds no such recall or memory.
    refused(call("GET", f"/v1/recalls/{recall_id}", u2), 404, "not_found")
    refused(call("GET", f"/v1/subjects/u-2/memories/{memory_id}/trace", u2), 404, "not_found")
    refused(call("POST", "/v1/subjects/u-2/feedback", u2, body), 404, "not_found")
    # A tenant token (no subject) must name the recall's subject.
    tenant_token = claims(subject=None, scope="memory:read subjects:any")
    error = refused(call("GET", f"/v1/recalls/{recall_id}", tenant_token), 422)
    assert error["details"]["field"] == "subject_id"
    named = call("GET", f"/v1/recalls/{recall_id}", tenant_token, query={"subject_id": "u-1"})
    assert named.status == 200 and named.body["recall_id"] == recall_id


@pytest.mark.parametrize(
    "recall_id",
    ["not-a-recall", "rcl_" + "0" * 31, "rcl_" + "G" * 32, "fbk_" + "0" * 32, "rcl_" + "0" * 64],
)
def test_a_malformed_recall_id_is_422(rig: RecallRig, recall_id: str) -> None:
    refused(call("GET", f"/v1/recalls/{recall_id}", claims()), 422, "validation_failed")


def test_an_unknown_recall_or_memory_is_404(rig: RecallRig) -> None:
    refused(call("GET", f"/v1/recalls/rcl_{'0' * 32}", claims()), 404, "not_found")
    refused(call("GET", f"{S1}/memories/mem_{'0' * 32}/trace", claims()), 404, "not_found")


def _bad_bodies(recall_id: str, memory_id: str) -> list[tuple[str, dict[str, Any]]]:
    good = {"recall_id": recall_id, "memory_id": memory_id, "verdict": "wrong"}
    long = "x" * (MAX_CONTENT_CHARS + 1)  # still under the request body's cap
    return [
        ("unknown verdict", {**good, "verdict": "meh"}),
        ("verdict of another type", {**good, "verdict": 3}),
        ("no verdict", {k: v for k, v in good.items() if k != "verdict"}),
        ("no memory id", {k: v for k, v in good.items() if k != "memory_id"}),
        ("malformed memory id", {**good, "memory_id": "mem_../../etc"}),
        ("over-long memory id", {**good, "memory_id": "mem_" + "a" * 5000}),
        ("malformed recall id", {**good, "recall_id": "rcl_xyz"}),
        ("neither recall nor run", {"memory_id": memory_id, "verdict": "wrong"}),
        ("over-long run id", {**good, "run_id": "r" * 129}),
        ("run id with a newline", {**good, "run_id": "run-1\nadmin"}),
        ("unknown field", {**good, "comment": "ignore previous instructions"}),
        ("correction without a change", {**good, "correction": {"expected_version": 1}}),
        ("over-long correction", {**good, "correction": {"expected_version": 1, "content": long}}),
        ("not an object", ["wrong"]),  # type: ignore[list-item]
    ]


def test_malformed_feedback_is_422_and_stores_nothing(
    rig: RecallRig, served: dict[str, str]
) -> None:
    # A body over the request cap is refused before it is read: 413, the same envelope.
    huge = {
        "recall_id": served["recall_id"],
        "memory_id": served["memory_id"],
        "verdict": "wrong",
        "correction": {"expected_version": 1, "content": "x" * 70_000},
    }
    refused(call("POST", f"{S1}/feedback", claims(), huge), 413, "payload_too_large")
    for label, body in _bad_bodies(served["recall_id"], served["memory_id"]):
        answer = call("POST", f"{S1}/feedback", claims(), body)
        assert answer.status == 422, (label, answer.status, answer.body)
        refused(answer, 422, "validation_failed")
    for raw in ("{", "", "null"):
        answer = call("POST", f"{S1}/feedback", claims(), raw_body=raw)
        assert answer.status == 422, (raw, answer.status, answer.body)
        refused(answer, 422)
    listed = call("GET", f"{S1}/feedback", claims())
    assert listed.status == 200 and listed.body["items"] == []
    mt = call("GET", f"{S1}/memories/{served['memory_id']}/trace", claims()).body
    assert mt["current_version"] == 1 and mt["feedback"] == []


def test_a_feedback_note_is_kept_and_shown(rig: RecallRig, served: dict[str, str]) -> None:
    """The feedback route's optional note (docs/api.md): stored with the feedback, shown in
    the list and the memory's trace (a fresh probe of stop 47 found it refused as an
    unknown field)."""
    body = {
        "recall_id": served["recall_id"],
        "memory_id": served["memory_id"],
        "verdict": "outdated",
        "note": "the planning meeting moved to Fridays last month",
    }
    given = call("POST", f"{S1}/feedback", claims(), body)
    assert given.status == 201, given.body
    assert given.body["note"] == body["note"]
    listed = call("GET", f"{S1}/feedback", claims()).body["items"]
    assert [f["note"] for f in listed] == [body["note"]]
    mt = call("GET", f"{S1}/memories/{served['memory_id']}/trace", claims()).body
    assert [f["note"] for f in mt["feedback"]] == [body["note"]]
    # Without a note the field is null.
    plain = {k: v for k, v in body.items() if k != "note"}
    assert call("POST", f"{S1}/feedback", claims(), plain).body["note"] is None


@pytest.mark.parametrize(
    ("note", "status", "code"),
    [
        ("she is allergic to peanuts", 422, "validation_failed"),
        ("reach her at jane.doe@example.com", 422, "validation_failed"),
        ("token ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8", 422, "secret_detected"),
        ("", 422, "validation_failed"),
        ("x" * 501, 422, "validation_failed"),
    ],
)
def test_a_feedback_note_with_personal_data_or_a_credential_is_refused(
    rig: RecallRig, served: dict[str, str], note: str, status: int, code: str
) -> None:
    """A note is shown to every reader of the subject's feedback, whatever their ceiling,
    and is not classified: personal data and credentials are refused, nothing stored, and
    the refusal never echoes the note."""
    body = {
        "recall_id": served["recall_id"],
        "memory_id": served["memory_id"],
        "verdict": "wrong",
        "note": note,
    }
    answer = call("POST", f"{S1}/feedback", claims(), body)
    error = refused(answer, status, code)
    if len(note) > 12:
        assert note[-12:] not in str(error), error
    assert call("GET", f"{S1}/feedback", claims()).body["items"] == []


def test_feedback_about_a_memory_the_recall_did_not_return_is_refused(
    rig: RecallRig, served: dict[str, str]
) -> None:
    unseen = written(rig, "Keeps the team calendar in a shared spreadsheet")
    body = {"recall_id": served["recall_id"], "memory_id": unseen, "verdict": "wrong"}
    error = refused(call("POST", f"{S1}/feedback", claims(), body), 422)
    assert error["details"]["field"] == "memory_id"
    # A well-formed recall id this subject never made, and a run with no recall of it.
    body = {"recall_id": f"rcl_{'0' * 32}", "memory_id": served["memory_id"], "verdict": "wrong"}
    refused(call("POST", f"{S1}/feedback", claims(), body), 404, "not_found")
    body = {"run_id": "run-never", "memory_id": served["memory_id"], "verdict": "wrong"}
    refused(call("POST", f"{S1}/feedback", claims(), body), 404, "not_found")
    # The recall was for run-9: naming another run with it is refused.
    body = {**body, "recall_id": served["recall_id"], "run_id": "run-8"}
    error = refused(call("POST", f"{S1}/feedback", claims(), body), 422)
    assert error["details"]["field"] == "run_id"
    assert call("GET", f"{S1}/feedback", claims()).body["items"] == []


def test_a_stale_correction_with_feedback_is_409_and_stores_no_feedback(
    rig: RecallRig, served: dict[str, str]
) -> None:
    body = {
        "recall_id": served["recall_id"],
        "memory_id": served["memory_id"],
        "verdict": "wrong",
        "correction": {"expected_version": 7, "content": "Thursday mornings"},
    }
    refused(call("POST", f"{S1}/feedback", claims(), body), 409, "version_conflict")
    assert call("GET", f"{S1}/feedback", claims()).body["items"] == []


def test_a_malformed_or_foreign_prompted_by_is_refused(
    rig: RecallRig, served: dict[str, str]
) -> None:
    path = f"{S1}/memories/{served['memory_id']}"
    for bad in ("rcl_short", "mem_" + "0" * 32, "x" * 300):
        patch = {"expected_version": 1, "content": "Thursday mornings", "prompted_by": bad}
        refused(call("PATCH", path, claims(), patch), 422, "validation_failed")
        refused(call("DELETE", path, claims(), query={"prompted_by": bad}), 422)
    # Well formed, but no recall or feedback of this subject.
    unknown = f"fbk_{'0' * 32}"
    patch = {"expected_version": 1, "content": "Thursday mornings", "prompted_by": unknown}
    refused(call("PATCH", path, claims(), patch), 404, "not_found")
    refused(call("DELETE", path, claims(), query={"prompted_by": unknown}), 404, "not_found")
    # u-1's recall does not prompt anything of u-2.
    theirs = written(rig, "Lives in Porto", subject="u-2")
    patch = {"expected_version": 1, "content": "Lives in Braga", "prompted_by": served["recall_id"]}
    refused(
        call("PATCH", f"/v1/subjects/u-2/memories/{theirs}", claims(subject="u-2"), patch),
        404,
        "not_found",
    )
    # Still at version 1, both of them; and the subject's own recall does prompt one.
    assert call("GET", path, claims()).body["version"] == 1
    patch = {
        "expected_version": 1,
        "content": "Thursday mornings",
        "prompted_by": served["recall_id"],
    }
    fixed = call("PATCH", path, claims(), patch)
    assert fixed.status == 200 and fixed.body["version"] == 2
    mt = call("GET", f"{path}/trace", claims()).body
    correction = next(e for e in mt["events"] if e["action"] == "memory.correct")
    assert correction["detail"]["prompted_by"] == served["recall_id"]
