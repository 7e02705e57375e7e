"""Edge cases of the memory lifecycle (purge resume, version lifetimes, forget races, paging,
identifiers, delete rights), run state and context manifests, each pinned by a test that
failed without its fix."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from memvault.models.access import Scope
from memvault.services.bundle import Services
from memvault.services.memory import MemoryService
from memvault.storage.dynamodb import keys
from memvault.storage.ports.memory import fact_id
from memvault_wire.context import ContextRequest
from memvault_wire.errors import NotFound, SecretDetected, ValidationFailed, VersionConflict
from memvault_wire.memory import CopyState, DeletionState, MemoryPatch
from memvault_wire.run import Advance, CreateRun, RecordOperation, RunStatus
from tests.support.harness import FakeClock, a_write, ctx
from tests.support.scan import all_items, stored_text

EVERYTHING = frozenset(Scope) - {Scope.SUBJECTS_ANY}


def test_deleting_again_resumes_a_purge_that_failed(service: MemoryService, ddb: Any) -> None:
    m = service.write(ctx(), "u-1", a_write(content="must really go")).memory
    real = service.repo.purge_version
    calls = {"n": 0}

    def flaky(*args: Any, **kwargs: Any) -> None:
        calls["n"] += 1
        if calls["n"] <= 4:  # the first try and all three retries of the step
            raise TimeoutError("throttled")
        real(*args, **kwargs)

    service.repo.purge_version = flaky  # type: ignore[method-assign]
    failed = service.delete(ctx(), "u-1", m.memory_id)
    assert failed.status is DeletionState.FAILED
    assert "must really go" in stored_text(ddb)

    again = service.delete(ctx(), "u-1", m.memory_id)
    assert again.deletion_id == failed.deletion_id
    assert again.status is DeletionState.COMPLETED
    assert all(c.status is not CopyState.FAILED for c in again.copies)
    assert "must really go" not in stored_text(ddb)


@pytest.mark.aws  # reads the DynamoDB items themselves
def test_a_short_lived_new_version_does_not_orphan_a_longer_lived_old_one(
    service: MemoryService, clock: FakeClock
) -> None:
    v1 = service.write(ctx(), "u-1", a_write(ttl_seconds=300 * 86400)).memory
    service.write(ctx(), "u-1", a_write(request_id="r2", content="short", ttl_seconds=3600))
    chain = next(
        i
        for i in all_items(service.repo.db.client)["memory"]
        if i["sk"]["S"] == keys.chain_sk(v1.chain_id)
    )
    assert int(chain["ttl"]["N"]) >= int(v1.expires_at.timestamp())


@pytest.mark.aws  # reads the DynamoDB items themselves
def test_a_correction_with_a_longer_life_keeps_its_canonical_pointer_alive(
    service: MemoryService,
) -> None:
    v1 = service.write(ctx(), "u-1", a_write(ttl_seconds=3600)).memory
    v2 = service.correct(
        ctx(),
        "u-1",
        v1.memory_id,
        MemoryPatch(expected_version=1, content="longer", ttl_seconds=86400 * 30),
    )
    items = all_items(service.repo.db.client)["memory"]
    # The fact's pointer is its chain head (keyed by fact and generation): no item apart.
    assert not [i for i in items if i["sk"]["S"].startswith("KEY#")]
    fact = fact_id(v1.kind.value, v1.canonical_key or "", v1.scope)
    assert service.repo.pointer("acme", "u-1", fact) == v1.chain_id
    (head,) = [i for i in items if i["sk"]["S"].startswith("CHAIN#")]
    assert int(head["ttl"]["N"]) >= int(v2.expires_at.timestamp())


def test_a_write_that_loses_the_race_with_forget_is_refused_not_kept(
    service: MemoryService,
) -> None:
    real = service.repo.subject_epoch
    forgot = {"done": False}

    def forget_meanwhile(tenant: str, subject: str) -> int:
        epoch = real(tenant, subject)
        if not forgot["done"]:
            forgot["done"] = True
            service.forget(ctx(), "u-1")
        return epoch

    service.repo.subject_epoch = forget_meanwhile  # type: ignore[method-assign]
    with pytest.raises(VersionConflict) as raised:
        service.write(ctx(), "u-1", a_write(content="sent before the forget"))
    assert raised.value.details == {"reason": "subject_forgotten"}
    service.repo.subject_epoch = real  # type: ignore[method-assign]
    assert service.list_memories(ctx(), "u-1").items == []


@pytest.mark.aws  # reads the DynamoDB items themselves
def test_listing_reads_whole_pages_not_one_item_at_a_time(service: MemoryService) -> None:
    v = service.write(ctx(), "u-1", a_write()).memory
    for i in range(40):
        v = service.correct(
            ctx(), "u-1", v.memory_id, MemoryPatch(expected_version=i + 1, content=f"v{i}")
        )
    service.write(ctx(), "u-1", a_write(request_id="other", canonical_key="other"))
    queries = {"n": 0}
    real = service.repo.db.query

    def counted(*args: Any, **kwargs: Any) -> Any:
        queries["n"] += 1
        return real(*args, **kwargs)

    service.repo.db.query = counted  # type: ignore[method-assign]
    page = service.list_memories(ctx(), "u-1", limit=2)
    assert len(page.items) == 2
    assert queries["n"] <= 2


def test_credentials_in_identifiers_are_refused(service: MemoryService, ddb: Any) -> None:
    with pytest.raises(SecretDetected):
        service.write(ctx(), "u-1", a_write(artifact_id="AKIAIOSFODNN7EXAMPLE"))
    with pytest.raises(SecretDetected):
        service.write(
            ctx(), "u-1", a_write(request_id="ghp_" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8")
        )
    assert "AKIAIOSFODNN7EXAMPLE" not in stored_text(ddb)


def test_a_caller_who_cannot_read_a_memory_cannot_delete_it(service: MemoryService) -> None:
    m = service.write(ctx(), "u-1", a_write(visibility=["payments"])).memory
    with pytest.raises(NotFound):
        service.delete(ctx(agent_role="writer"), "u-1", m.memory_id)
    assert service.get(ctx(agent_role="payments"), "u-1", m.memory_id) == m


def test_run_state_keeps_nested_nulls_and_refuses_unstorable_numbers(services: Services) -> None:
    me = ctx(scopes=EVERYTHING)
    services.runs.create(me, "r", CreateRun(subject_id="u-1", plan_version="p"))
    cp = services.runs.advance(
        me,
        "r",
        Advance(
            expected_version=1,
            status=RunStatus.RUNNING,
            step="s",
            state={"a": None, "b": {"c": None}},
        ),
    )
    assert services.runs.get(me, "r").state == cp.state == {"a": None, "b": {"c": None}}
    for bad in ({"x": float("nan")}, {"x": 10**40}):
        with pytest.raises(ValidationError):
            Advance(expected_version=2, status=RunStatus.RUNNING, step="s", state=bad)


def test_another_subjects_run_is_not_found(services: Services) -> None:
    services.runs.create(ctx(scopes=EVERYTHING), "r", CreateRun(subject_id="u-1", plan_version="p"))
    with pytest.raises(NotFound):
        services.runs.get(ctx("acme", "u-2", scopes=EVERYTHING), "r")


def test_reproduction_keeps_operations_recorded_before_the_assembly(
    services: Services, clock: FakeClock
) -> None:
    me = ctx(scopes=EVERYTHING)
    services.runs.create(me, "r", CreateRun(subject_id="u-1", plan_version="p"))
    services.runs.advance(me, "r", Advance(expected_version=1, status=RunStatus.RUNNING, step="s"))
    clock.advance(seconds=5)
    services.runs.record_operation(
        me, "r", "op", RecordOperation(status="COMMITTED", result_ref="tx")
    )  # type: ignore[arg-type]
    clock.advance(seconds=5)
    assembled = services.context.assemble(
        me, "u-1", ContextRequest(goal="g", token_budget=2000, run_id="r", memory_limit=0)
    )
    assert "op -> tx" in assembled.sections["run_state"][0].content
    again = services.context.reproduce(me, "u-1", assembled.manifest)
    assert again.sections == assembled.sections


def test_a_forged_manifest_is_a_clear_error(services: Services) -> None:
    me = ctx(scopes=EVERYTHING)
    assembled = services.context.assemble(
        me, "u-1", ContextRequest(goal="g", token_budget=2000, memory_limit=0)
    )
    forged = assembled.manifest.model_copy(
        update={"items": [{"id": "evidence:7", "section": "evidence", "version": None}]}
    )
    with pytest.raises(ValidationFailed):
        services.context.reproduce(me, "u-1", forged)
    unknown = assembled.manifest.model_copy(update={"items": [{"id": "x", "section": "nope"}]})
    with pytest.raises(ValidationFailed):
        services.context.reproduce(me, "u-1", unknown)


@pytest.mark.parametrize(
    "entry",
    [
        {"id": "run_state", "section": "run_state", "version": None},
        {"id": "run_state", "section": "run_state", "version": "2"},
        {"id": 7, "section": "session", "version": 1},
        {"id": "session:s:message", "section": "session", "version": 1},
        # A probe: these reached the stores (sqlite3.ProgrammingError, OverflowError).
        {"id": {"a": 1}, "section": "memories", "version": 1},
        {"id": ["x"], "section": "memories", "version": 1},
        {"id": "session:s:msg:99999999999999999999999", "section": "session", "version": 1},
        {"id": "run:r", "section": "run_state", "version": 10**30},
    ],
)
def test_a_manifest_entry_of_the_wrong_shape_is_a_clear_error(
    services: Services, entry: dict[str, object]
) -> None:
    """A run-state entry with a null version used to end in an AssertionError, and an id
    that is not text in an AttributeError: both answered 500."""
    me = ctx(scopes=EVERYTHING)
    services.runs.create(me, "r", CreateRun(subject_id="u-1", plan_version="p"))
    assembled = services.context.assemble(
        me, "u-1", ContextRequest(goal="g", token_budget=2000, run_id="r", memory_limit=0)
    )
    forged = assembled.manifest.model_copy(update={"items": [entry]})
    with pytest.raises(ValidationFailed):
        services.context.reproduce(me, "u-1", forged)
