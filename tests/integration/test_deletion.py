"""Delete and forget: a tombstone blocks reads at once, the job records each copy, and
the primary copies are physically gone when the job says COMPLETED."""

from __future__ import annotations

from typing import Any

import pytest

from memvault.models.access import Scope
from memvault.services.bundle import Services
from memvault.services.deletion import PurgeRunner, StepResult
from memvault.services.memory import MemoryService
from memvault.storage.dynamodb import keys
from memvault_wire.errors import NotFound
from memvault_wire.memory import CopyState, DeletionJob, DeletionState, Sensitivity
from tests.support.harness import a_write, ctx
from tests.support.scan import all_items, stored_text


def copies(job: DeletionJob) -> dict[str, CopyState]:
    return {c.name: c.status for c in job.copies}


def test_delete_blocks_every_version_and_purges_them(service: MemoryService, ddb: Any) -> None:
    v1 = service.write(ctx(), "u-1", a_write(content="first wording")).memory
    v2 = service.write(ctx(), "u-1", a_write(request_id="r2", content="second wording")).memory

    job = service.delete(ctx(), "u-1", v1.memory_id)

    assert job.status is DeletionState.COMPLETED
    assert copies(job) == {
        "artifacts": CopyState.NOT_APPLICABLE,
        "primary": CopyState.DONE,
        "versions": CopyState.DONE,
        "idempotency": CopyState.NOT_APPLICABLE,
        # No search index in this harness; no cache kept; sessions and runs are a
        # subject's, not a memory's.
        "index": CopyState.NOT_APPLICABLE,
        "cache": CopyState.NOT_APPLICABLE,
        "sessions": CopyState.NOT_APPLICABLE,
        "runs": CopyState.NOT_APPLICABLE,
        # The chain's served links and feedback (none here, but the copy is cleared).
        "traces": CopyState.DONE,
    }
    assert service.deletion_status(ctx(), job.deletion_id) == job
    text = stored_text(ddb)
    assert "first wording" not in text and "second wording" not in text
    memory_items = all_items(ddb)["memory"]
    versions = [i for i in memory_items if i["sk"]["S"].startswith("MEM#")]
    # What is left of each version is an ids-only tombstone.
    assert {i["memory_id"]["S"] for i in versions} == {v1.memory_id, v2.memory_id}
    assert all(
        set(i)
        == {"pk", "sk", "type", "memory_id", "chain_id", "status", "deletion_id", "purged_at"}
        for i in versions
    )
    tombstone = [i for i in memory_items if i["sk"]["S"] == keys.chain_sk(v2.chain_id)]
    assert tombstone[0]["state"]["S"] == "deleted"
    assert "ttl" not in tombstone[0]  # the tombstone outlives the data


def test_deleting_twice_is_one_deletion(service: MemoryService) -> None:
    m = service.write(ctx(), "u-1", a_write()).memory
    first = service.delete(ctx(), "u-1", m.memory_id)
    again = service.delete(ctx(), "u-1", m.memory_id)
    assert again.deletion_id == first.deletion_id


def test_a_deleted_memory_is_as_absent_as_an_unknown_one_to_anyone_but_its_deleter(
    service: MemoryService,
) -> None:
    """Deleting again answers the same deletion to whoever asked for it; to another caller
    a deleted id is 404 exactly like an id never used (before, a 202 with the job told a
    caller who may not read the memory that it had existed)."""
    owner = ctx(max_sensitivity=Sensitivity.PII)
    m = service.write(owner, "u-1", a_write(sensitivity="pii")).memory
    first = service.delete(owner, "u-1", m.memory_id)
    unknown_id = "mem_" + "0" * 32
    for stranger in (
        ctx(agent_role="writer", principal="agent-writer"),  # may not read it
        ctx(agent_role="reader", principal="agent-r", max_sensitivity=Sensitivity.PII),
        # The deleter's own sub, with a lower ceiling or an agent role (a console's dev
        # tokens, or a service's, share one sub): other requesters, as a probe found.
        owner.model_copy(update={"max_sensitivity": Sensitivity.PUBLIC}),
        owner.model_copy(update={"agent_role": "planner"}),
    ):
        with pytest.raises(NotFound) as deleted:
            service.delete(stranger, "u-1", m.memory_id)
        with pytest.raises(NotFound) as unknown:
            service.delete(stranger, "u-1", unknown_id)
        assert deleted.value.message == unknown.value.message
        assert deleted.value.details == {"memory_id": m.memory_id}
        assert unknown.value.details == {"memory_id": unknown_id}
    assert service.delete(owner, "u-1", m.memory_id).deletion_id == first.deletion_id


def test_after_delete_the_key_starts_a_new_fact(service: MemoryService) -> None:
    old = service.write(ctx(), "u-1", a_write()).memory
    service.delete(ctx(), "u-1", old.memory_id)
    new = service.write(ctx(), "u-1", a_write(request_id="r2")).memory
    assert new.version == 1 and new.chain_id != old.chain_id
    assert [m.memory_id for m in service.history(ctx(), "u-1", new.memory_id)] == [new.memory_id]


def test_the_deletion_log_records_ids_only_and_lives_apart_from_memory(
    service: MemoryService, ddb: Any
) -> None:
    m = service.write(ctx(), "u-1", a_write(content="a distinctive sentence")).memory
    job = service.delete(ctx(), "u-1", m.memory_id)

    log = [i for i in all_items(ddb)["audit"] if i["pk"]["S"] == "acme#~deletions"]
    assert [i["deletion_id"]["S"] for i in log] == [job.deletion_id]
    assert "ttl" not in log[0]
    assert "a distinctive sentence" not in str(all_items(ddb)["audit"])


def test_forget_subject_blocks_all_their_memories_at_once(service: MemoryService, ddb: Any) -> None:
    for i in range(5):
        service.write(
            ctx(),
            "u-1",
            a_write(request_id=f"r{i}", canonical_key=f"k{i}", content=f"fact number {i}"),
        )
    other = service.write(ctx("acme", "u-2"), "u-2", a_write(content="someone else's fact")).memory

    job = service.forget(ctx(), "u-1")

    assert job.status is DeletionState.COMPLETED
    assert service.list_memories(ctx(), "u-1").items == []
    assert "fact number" not in stored_text(ddb)
    assert service.get(ctx("acme", "u-2"), "u-2", other.memory_id) == other


def test_a_forgotten_subject_can_start_again(service: MemoryService) -> None:
    old = service.write(ctx(), "u-1", a_write()).memory
    service.forget(ctx(), "u-1")
    new = service.write(ctx(), "u-1", a_write(request_id="r-new")).memory
    assert new.chain_id != old.chain_id
    assert [m.memory_id for m in service.list_memories(ctx(), "u-1").items] == [new.memory_id]
    with pytest.raises(NotFound):
        service.get(ctx(), "u-1", old.memory_id)


def test_forget_is_unreadable_at_once_even_before_the_purge_runs(
    env: tuple[MemoryService, Any, Any],
) -> None:
    service, _, _ = env
    m = service.write(ctx(), "u-1", a_write()).memory
    launched: list[str] = []
    service.purge = type("Deferred", (), {"launch": lambda self, t, d, **kw: launched.append(d)})()

    job = service.forget(ctx(), "u-1")

    assert job.status is DeletionState.BLOCKED and launched == [job.deletion_id]
    assert copies(job)["primary"] is CopyState.PENDING
    with pytest.raises(NotFound):
        service.get(ctx(), "u-1", m.memory_id)
    assert service.export(ctx(), "u-1")["memories"] == []


class FailingTimes:
    """A purge step that fails its first ``times`` runs, as a throttled store would."""

    copy = "primary"

    def __init__(self, real: Any, times: int) -> None:
        self.real = real
        self.left = times

    def run(self, job: DeletionJob) -> StepResult:
        if self.left > 0:
            self.left -= 1
            raise TimeoutError("store timed out")
        result: StepResult = self.real.run(job)
        return result


def test_a_failed_step_leaves_the_job_failed_with_its_reason_and_resumable(
    services: Services, env: tuple[MemoryService, Any, Any], ddb: Any
) -> None:
    service, _, clock = env
    m = service.write(ctx(), "u-1", a_write(content="to be purged")).memory
    repo = service.repo
    steps = list(services.purge.handlers.values())
    primary = next(i for i, s in enumerate(steps) if s.copy == "primary")
    # Fails every attempt the retry policy allows (1 + 3 retries), then works.
    steps[primary] = FailingTimes(steps[primary], times=4)
    runner = PurgeRunner(repo, clock, steps, sleep=lambda s: None)
    service.purge = type("Deferred", (), {"launch": lambda self, t, d, **kw: None})()
    job = service.delete(ctx(), "u-1", m.memory_id)

    failed = runner.run("acme", job.deletion_id)
    assert failed.status is DeletionState.FAILED
    primary = next(c for c in failed.copies if c.name == "primary")
    assert primary.status is CopyState.FAILED and "TimeoutError" in (primary.reason or "")
    assert "to be purged" in stored_text(ddb)  # not yet purged, but already unreadable
    with pytest.raises(NotFound):
        service.get(ctx(), "u-1", m.memory_id)

    resumed = runner.run("acme", job.deletion_id)
    assert resumed.status is DeletionState.COMPLETED
    assert "to be purged" not in stored_text(ddb)
    assert runner.run("acme", job.deletion_id) == resumed  # re-running changes nothing


def test_deletion_status_is_tenant_and_subject_scoped(service: MemoryService) -> None:
    m = service.write(ctx(), "u-1", a_write()).memory
    job = service.delete(ctx(), "u-1", m.memory_id)
    with pytest.raises(NotFound):
        service.deletion_status(ctx("globex", "u-1"), job.deletion_id)
    with pytest.raises(NotFound):
        service.deletion_status(ctx("acme", "u-2"), job.deletion_id)
    tenant_service = ctx("acme", None, scopes=frozenset(Scope))
    assert service.deletion_status(tenant_service, job.deletion_id).deletion_id == job.deletion_id
    public = job.public_view()
    assert {c["copy"] for c in public["copies"]} == {
        "artifacts",
        "primary",
        "versions",
        "index",
        "cache",
        "sessions",
        "runs",
        "traces",
        "idempotency",
    }
