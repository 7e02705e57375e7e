"""Request models enforce the API contract's bounds before any rule runs."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from memvault.models.access import AccessContext, Scope
from memvault_wire.memory import (
    CopyState,
    CopyStatus,
    MemoryPatch,
    MemoryWrite,
    Sensitivity,
)
from tests.support.harness import FakeClock, a_write, ctx

BAD_WRITES: dict[str, dict[str, Any]] = {
    "empty request id": {"request_id": ""},
    "request id over 100 chars": {"request_id": "r" * 101},
    "unknown kind": {"kind": "session"},
    "content over 4000 chars": {"content": "x" * 4001},
    "blank content": {"content": "   \n"},
    "canonical key over 100 chars": {"canonical_key": "k" * 101},
    "ttl of zero": {"ttl_seconds": 0},
    "ttl over 365 days": {"ttl_seconds": 365 * 86400 + 1},
    "confidence over 1": {"confidence": 1.5},
    "unknown source type": {"source": {"type": "rumour"}},
    "unknown field": {"owner": "someone-else"},
    "tenant in the body": {"tenant_id": "other"},
    "scope value not a string": {"scope": {"workspace": 3}},
    "too many tags": {"tags": [f"t{i}" for i in range(21)]},
    "expected version without canonical key": {"canonical_key": None, "expected_version": 2},
}


@pytest.mark.parametrize("override", BAD_WRITES.values(), ids=BAD_WRITES.keys())
def test_write_outside_the_contract_is_rejected(override: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        a_write(**override)


def test_write_at_the_contract_bounds_is_accepted() -> None:
    body = a_write(
        request_id="r" * 100,
        content="x" * 4000,
        canonical_key="k" * 100,
        ttl_seconds=365 * 86400,
        confidence=1.0,
    )
    assert len(body.content) == 4000


def test_a_correction_must_change_something() -> None:
    with pytest.raises(ValidationError):
        MemoryPatch.model_validate({"expected_version": 1})
    assert (
        MemoryPatch.model_validate({"expected_version": 1, "status": "active"}).status == "active"
    )
    with pytest.raises(ValidationError):
        MemoryPatch.model_validate({"expected_version": 1, "status": "deleted"})


def test_a_correction_cannot_change_the_facts_identity() -> None:
    for field in ("kind", "canonical_key", "scope"):
        with pytest.raises(ValidationError):
            MemoryPatch.model_validate({"expected_version": 1, field: "x"})


def test_tenant_and_subject_ids_cannot_carry_key_separators() -> None:
    for bad in ("a#b", "a/b", "", "-leading"):
        with pytest.raises(ValidationError):
            AccessContext(tenant_id=bad, principal="p")
    assert AccessContext(tenant_id="acme", principal="p", subject_id="user@example.com")


def test_access_context_reads_up_to_its_sensitivity_and_matching_roles() -> None:
    reader = ctx(agent_role="writer", max_sensitivity=Sensitivity.INTERNAL)
    assert reader.may_read(Sensitivity.INTERNAL, [])
    assert reader.may_read(Sensitivity.PUBLIC, ["writer"])
    assert not reader.may_read(Sensitivity.PII, [])
    assert not reader.may_read(Sensitivity.INTERNAL, ["payments"])
    # A visibility list restricts agents: a person (no agent role) reads it, within its
    # ceiling.
    assert ctx(agent_role=None).may_read(Sensitivity.INTERNAL, ["writer"])
    assert not ctx(agent_role=None).may_read(Sensitivity.PII, ["writer"])


def test_copy_status_speaks_the_contracts_field_name() -> None:
    status = CopyStatus(name="index", status=CopyState.PENDING, updated_at=FakeClock().now())
    assert status.model_dump(mode="json")["copy"] == "index"


def test_scopes_parse_from_their_wire_names() -> None:
    assert Scope("memory:write") is Scope.MEMORY_WRITE
    assert isinstance(MemoryWrite.model_json_schema(), dict)
