"""Every stored text field is scanned for credentials, on every path: a run's step,
state (keys and values, at any depth), plan and budget, an operation's result reference,
an artifact's name, a session message's request id; and a memory's source reference.
Before, only memory and message contents were. Runs on both stores."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from memvault.services.bundle import Services
from memvault_wire.artifact import StartUpload
from memvault_wire.errors import SecretDetected
from memvault_wire.memory import MemoryPatch
from memvault_wire.run import Advance, CreateRun, RecordOperation, RunStatus
from memvault_wire.session import AppendMessage
from tests.support.harness import a_write, ctx

KEY = "github_pat_11ABCDEFG0123456789_abcdefghijABCDEFGHIJ0123456789abcdefghijABCDEFGHIJ012345678"
PROSE = "数据库口令\uff1aPg_admin_77!"  # a full-width colon


def _refused(raised: pytest.ExceptionInfo[SecretDetected], field: str) -> None:
    assert (raised.value.code, raised.value.status) == ("secret_detected", 422)
    assert field in {f["field"] for f in raised.value.details["findings"]}
    assert KEY not in str(raised.value.to_body()) and "Pg_admin" not in str(raised.value.to_body())


@pytest.fixture
def run(services: Services) -> Any:
    services.runs.create(ctx(), "run-1", CreateRun(subject_id="u-1", plan_version="p1"))
    return services.runs


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"step": f"deploy with {KEY}"}, "step"),
        ({"state": {"notes": ["ok", {"db": PROSE}]}}, "state.notes[1].db"),
        ({"state": {f"token={KEY}": 1}}, "state (key)"),
        ({"pending_approvals": [f"approve {KEY}"]}, "pending_approvals[0]"),
    ],
)
def test_a_checkpoint_carrying_a_credential_is_refused(
    run: Any, changes: dict[str, Any], field: str
) -> None:
    body = Advance(expected_version=1, status=RunStatus.RUNNING, step="plan").model_copy(
        update=changes
    )
    with pytest.raises(SecretDetected) as raised:
        run.advance(ctx(), "run-1", body)
    _refused(raised, field)
    assert run.get(ctx(), "run-1").version == 1  # nothing advanced


def test_a_run_or_operation_carrying_a_credential_is_refused(run: Any) -> None:
    with pytest.raises(SecretDetected) as raised:
        run.create(ctx(), "run-2", CreateRun(subject_id="u-1", plan_version="p1", budget={KEY: 1}))
    _refused(raised, "budget (key)")
    with pytest.raises(SecretDetected) as raised:
        run.record_operation(
            ctx(), "run-1", "op-1", RecordOperation(status="PENDING", result_ref=f"s3://b/{KEY}")
        )
    _refused(raised, "result_ref")


def test_an_artifact_named_with_a_credential_is_refused(services: Services) -> None:
    data = b"rows"
    body = StartUpload(
        request_id="up-1",
        media_type="text/plain",
        size_bytes=len(data),
        sha256=hashlib.sha256(data).hexdigest(),
        name=f"dump {PROSE}.txt",
    )
    with pytest.raises(SecretDetected) as raised:
        services.artifacts.start(ctx(), "u-1", body)
    _refused(raised, "name")


def test_a_message_whose_request_id_is_a_credential_is_refused(services: Services) -> None:
    message = AppendMessage(request_id=KEY, role="user", content="hello")
    with pytest.raises(SecretDetected) as raised:
        services.sessions.append(ctx(), "u-1", "s-1", message)
    _refused(raised, "request_id")


def test_a_memory_whose_source_ref_holds_a_credential_is_refused(services: Services) -> None:
    write = a_write(source={"type": "tool_result", "ref": f"https://ci.example/run?token={KEY}"})
    with pytest.raises(SecretDetected) as raised:
        services.memory.write(ctx(), "u-1", write)
    _refused(raised, "source.ref")


def test_a_memory_whose_visibility_holds_a_credential_is_refused(services: Services) -> None:
    """Probe 8: a GitHub token was stored as an agent role, on a write and a correction,
    and returned to every reader of the memory."""
    token = "ghp_" + "Zq7vN2kLx9RtWb4M" * 2 + "Ab1x"
    with pytest.raises(SecretDetected) as raised:
        services.memory.write(ctx(), "u-1", a_write(visibility=["planner", token]))
    assert raised.value.details["findings"][0]["field"] == "visibility[1]"
    assert token not in str(raised.value.to_body())
    assert services.memory.list_memories(ctx(), "u-1").items == []
    written = services.memory.write(ctx(), "u-1", a_write(visibility=["planner"])).memory
    with pytest.raises(SecretDetected) as raised:
        services.memory.correct(
            ctx(), "u-1", written.memory_id, MemoryPatch(expected_version=1, visibility=[token])
        )
    assert raised.value.details["findings"][0]["field"] == "visibility[0]"
    assert services.memory.get(ctx(), "u-1", written.memory_id).visibility == ["planner"]
