"""Run state: a declared state machine, compare-and-set advances, exact operation
records, idempotent events."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from memvault.models.access import Scope
from memvault.services.bundle import Services
from memvault.services.runs import RunService
from memvault_wire.errors import (
    ArtifactNotCommitted,
    ArtifactReferenced,
    Forbidden,
    IdempotencyKeyReused,
    IllegalTransition,
    NotFound,
    OperationConflict,
    PayloadTooLarge,
    ValidationFailed,
    VersionConflict,
)
from memvault_wire.memory import CopyState
from memvault_wire.run import Advance, CreateRun, RecordOperation, RunEvent, RunStatus
from tests.support.artifacts import committed_artifact
from tests.support.harness import FakeClock, ctx

SHA = "a" * 64
RUN_SCOPES = frozenset({Scope.RUNS_WRITE})


@pytest.fixture
def runs(services: Services) -> RunService:
    return services.runs


def me() -> Any:
    return ctx(scopes=RUN_SCOPES)


def start(runs: RunService, run_id: str = "run-1") -> None:
    runs.create(
        me(), run_id, CreateRun(subject_id="u-1", plan_version="p1", budget={"tokens": 10_000})
    )
    runs.advance(me(), run_id, Advance(expected_version=1, status=RunStatus.RUNNING, step="plan"))


def test_create_is_idempotent_and_refuses_another_payload(runs: RunService) -> None:
    body = CreateRun(subject_id="u-1", plan_version="p1", budget={"tokens": 100})
    first, created = runs.create(me(), "run-1", body)
    again, created_again = runs.create(me(), "run-1", body)
    assert created and not created_again
    assert (again.version, again.status) == (first.version, RunStatus.CREATED)
    with pytest.raises(IdempotencyKeyReused):
        runs.create(me(), "run-1", CreateRun(subject_id="u-1", plan_version="p2"))


def test_a_checkpoint_advances_only_at_the_expected_version(runs: RunService) -> None:
    start(runs)
    with pytest.raises(VersionConflict) as raised:
        runs.advance(me(), "run-1", Advance(expected_version=1, status=RunStatus.RUNNING, step="x"))
    assert raised.value.details["current"]["version"] == 2
    assert raised.value.details["current"]["status"] == "RUNNING"
    advanced = runs.advance(
        me(),
        "run-1",
        Advance(
            expected_version=2,
            status=RunStatus.WAITING_APPROVAL,
            step="refund",
            pending_approvals=["approval-1"],
        ),
    )
    assert (advanced.version, advanced.pending_approvals) == (3, ["approval-1"])
    assert runs.get(me(), "run-1") == advanced


def test_two_workers_at_the_same_version_have_exactly_one_winner(runs: RunService) -> None:
    """moto is serialised by the harness (see SerializedClient); the race is ours."""
    start(runs)

    def advance(i: int) -> str:
        try:
            runs.advance(
                me(),
                "run-1",
                Advance(expected_version=2, status=RunStatus.RUNNING, step=f"worker-{i}"),
            )
        except VersionConflict:
            return "conflict"
        return "won"

    with ThreadPoolExecutor(max_workers=10) as pool:
        outcomes = list(pool.map(advance, range(10)))
    assert outcomes.count("won") == 1
    assert runs.get(me(), "run-1").version == 3
    assert runs.version(me(), "run-1", 3).step.startswith("worker-")


@pytest.mark.parametrize(
    ("path", "illegal"),
    [
        ([], RunStatus.SUCCEEDED),  # CREATED cannot succeed without running
        ([], RunStatus.WAITING_APPROVAL),
        ([RunStatus.RUNNING, RunStatus.WAITING_APPROVAL], RunStatus.SUCCEEDED),
    ],
)
def test_an_illegal_transition_is_refused(
    runs: RunService, path: list[RunStatus], illegal: RunStatus
) -> None:
    runs.create(me(), "r", CreateRun(subject_id="u-1", plan_version="p1"))
    for version, status in enumerate(path, start=1):
        runs.advance(me(), "r", Advance(expected_version=version, status=status, step="s"))
    with pytest.raises(IllegalTransition) as raised:
        runs.advance(me(), "r", Advance(expected_version=len(path) + 1, status=illegal, step="s"))
    assert raised.value.details["to"] == illegal.value


@pytest.mark.parametrize("end", [RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED])
def test_a_terminal_run_never_advances(runs: RunService, end: RunStatus) -> None:
    start(runs)
    runs.advance(me(), "run-1", Advance(expected_version=2, status=end, step="end"))
    for target in RunStatus:
        with pytest.raises(IllegalTransition, match="never advances"):
            runs.advance(me(), "run-1", Advance(expected_version=3, status=target, step="again"))


def test_the_history_keeps_every_version(runs: RunService) -> None:
    start(runs)
    assert runs.version(me(), "run-1", 1).status is RunStatus.CREATED
    assert runs.version(me(), "run-1", 2).status is RunStatus.RUNNING
    with pytest.raises(NotFound):
        runs.version(me(), "run-1", 3)


def test_a_large_payload_belongs_in_the_artifact_store(
    runs: RunService, services: Services
) -> None:
    start(runs)
    with pytest.raises(PayloadTooLarge) as raised:
        runs.advance(
            me(),
            "run-1",
            Advance(
                expected_version=2,
                status=RunStatus.RUNNING,
                step="tool",
                state={"tool_result": "x" * 40_000},
            ),
        )
    assert "artifact" in raised.value.message

    who = ctx(scopes=frozenset(Scope) - {Scope.SUBJECTS_ANY})
    artifact_id, sha = committed_artifact(services.artifacts, who, "u-1", b"x" * 40_000)
    ok = runs.advance(
        me(),
        "run-1",
        Advance(
            expected_version=2,
            status=RunStatus.RUNNING,
            step="tool",
            artifact_refs=[{"artifact_id": artifact_id, "sha256": sha}],
        ),
    )  # type: ignore[list-item]
    assert ok.artifact_refs[0].sha256 == sha
    assert len(ok.model_dump_json()) < 2_000
    # The checkpoint now references the artifact: it cannot be deleted under the run.
    with pytest.raises(ArtifactReferenced):
        services.artifacts.delete(who, "u-1", artifact_id)


def test_a_checkpoint_may_reference_only_a_committed_artifact_with_its_hash(
    runs: RunService, services: Services
) -> None:
    start(runs)
    who = ctx(scopes=frozenset(Scope) - {Scope.SUBJECTS_ANY})
    artifact_id, sha = committed_artifact(services.artifacts, who, "u-1", b"result")
    for ref in (
        {"artifact_id": "art_" + "0" * 32, "sha256": sha},
        {"artifact_id": artifact_id, "sha256": "f" * 64},
    ):
        with pytest.raises(ArtifactNotCommitted):
            runs.advance(
                me(),
                "run-1",
                Advance(
                    expected_version=2, status=RunStatus.RUNNING, step="tool", artifact_refs=[ref]
                ),
            )  # type: ignore[list-item]
    assert runs.get(me(), "run-1").version == 2  # nothing changed


def test_operation_status_rules(runs: RunService) -> None:
    start(runs)

    def record(status: str, ref: str | None = None) -> tuple[Any, bool]:
        return runs.record_operation(
            me(), "run-1", "refund-42", RecordOperation(status=status, result_ref=ref)
        )  # type: ignore[arg-type]

    assert record("PENDING")[1]
    assert record("UNKNOWN")[1]
    committed, changed = record("COMMITTED", "payments:tx-9")
    assert changed
    assert committed.status.value == "COMMITTED"
    same, changed_again = record("COMMITTED", "payments:tx-9")
    assert not changed_again  # the same result twice is a no-op
    assert same.updated_at == committed.updated_at
    with pytest.raises(OperationConflict):
        record("COMMITTED", "payments:tx-10")  # a different result is refused
    with pytest.raises(OperationConflict):
        record("PENDING")
    with pytest.raises(ValidationFailed):
        runs.record_operation(me(), "run-1", "op-2", RecordOperation(status="COMMITTED"))  # type: ignore[arg-type]
    assert [o.operation_id for o in runs.get(me(), "run-1").operations] == ["refund-42"]


def test_a_duplicate_event_is_acknowledged_and_changes_nothing(runs: RunService) -> None:
    start(runs)
    runs.advance(
        me(),
        "run-1",
        Advance(
            expected_version=2,
            status=RunStatus.WAITING_APPROVAL,
            step="refund",
            pending_approvals=["a-1"],
        ),
    )
    granted = RunEvent(event_id="evt-1", type="approval.granted", approval_id="a-1")

    first = runs.deliver_event(me(), "run-1", granted)
    assert (first["duplicate"], first["applied"]) == (False, True)
    assert first["checkpoint"].status is RunStatus.RUNNING
    assert first["checkpoint"].version == 4

    again = runs.deliver_event(me(), "run-1", granted)
    assert (again["duplicate"], again["checkpoint"].version) == (True, 4)
    assert runs.get(me(), "run-1").version == 4
    with pytest.raises(IdempotencyKeyReused):
        runs.deliver_event(me(), "run-1", RunEvent(event_id="evt-1", type="cancel.requested"))


def test_an_event_for_a_finished_run_is_recorded_without_effect(runs: RunService) -> None:
    start(runs)
    runs.advance(
        me(), "run-1", Advance(expected_version=2, status=RunStatus.SUCCEEDED, step="done")
    )
    out = runs.deliver_event(me(), "run-1", RunEvent(event_id="e", type="cancel.requested"))
    assert (out["applied"], out["checkpoint"].status) == (False, RunStatus.SUCCEEDED)


def test_runs_are_tenant_scoped(runs: RunService) -> None:
    start(runs)
    with pytest.raises(NotFound):
        runs.get(ctx("globex", scopes=RUN_SCOPES), "run-1")


def test_a_finished_runs_records_all_expire_with_its_retention(runs: RunService, ddb: Any) -> None:
    from tests.support.scan import all_items

    start(runs)
    runs.record_operation(me(), "run-1", "op", RecordOperation(status="PENDING"))  # type: ignore[arg-type]
    runs.deliver_event(me(), "run-1", RunEvent(event_id="e", type="cancel.requested"))
    items = all_items(ddb)["runs"]
    assert len(items) == 6  # checkpoint, 3 versions, operation, event receipt
    assert all("ttl" in i for i in items)


def test_an_active_runs_records_do_not_expire(runs: RunService, ddb: Any) -> None:
    from tests.support.scan import all_items

    start(runs)
    assert all("ttl" not in i for i in all_items(ddb)["runs"])


def test_a_finished_run_past_its_retention_is_gone_at_once(
    runs: RunService, clock: FakeClock
) -> None:
    """Expiry is checked on read: DynamoDB's TTL may take days to delete the items."""
    start(runs)
    runs.advance(me(), "run-1", Advance(expected_version=2, status=RunStatus.SUCCEEDED, step="e"))
    clock.advance(days=runs.settings.run_retention_days - 1)
    assert runs.get(me(), "run-1").status is RunStatus.SUCCEEDED
    clock.advance(days=2)
    with pytest.raises(NotFound):
        runs.get(me(), "run-1")
    with pytest.raises(NotFound):
        runs.version(me(), "run-1", 1)


def test_records_written_after_a_run_finished_expire_with_it(
    runs: RunService, ddb: Any, clock: FakeClock
) -> None:
    from tests.support.scan import all_items

    start(runs)
    runs.advance(me(), "run-1", Advance(expected_version=2, status=RunStatus.SUCCEEDED, step="e"))
    clock.advance(hours=1)
    runs.record_operation(me(), "run-1", "late", RecordOperation(status="UNKNOWN"))  # type: ignore[arg-type]
    runs.deliver_event(me(), "run-1", RunEvent(event_id="e", type="cancel.requested"))
    items = all_items(ddb)["runs"]
    assert len(items) == 6  # checkpoint, 3 versions, operation, event receipt
    assert len({i["ttl"]["N"] for i in items if "ttl" in i}) == 1
    assert all("ttl" in i for i in items)


def test_run_ids_are_scoped_by_subject_so_another_subjects_id_tells_nothing(
    runs: RunService,
) -> None:
    """Security review (issue 18): with run ids unique per tenant, creating a run whose id
    another subject held answered 409, so any subject could probe which run ids exist.
    Now each subject has its own ids: the same id is a new, separate run."""
    runs.create(me(), "live", CreateRun(subject_id="u-1", plan_version="p1"))
    runs.advance(me(), "live", Advance(expected_version=1, status=RunStatus.RUNNING, step="a"))
    other = ctx("acme", "u-2", scopes=RUN_SCOPES)

    taken, created = runs.create(other, "live", CreateRun(subject_id="u-2", plan_version="p9"))
    fresh, created_fresh = runs.create(
        other, "never-used", CreateRun(subject_id="u-2", plan_version="p9")
    )
    assert created and created_fresh
    assert (taken.version, taken.status, taken.subject_id) == (1, RunStatus.CREATED, "u-2")
    assert (fresh.version, fresh.status) == (taken.version, taken.status)
    # Each subject reads and moves only its own run of that id.
    assert runs.get(me(), "live").version == 2
    assert runs.get(other, "live").plan_version == "p9"
    runs.advance(other, "live", Advance(expected_version=1, status=RunStatus.CANCELLED, step="x"))
    assert runs.get(me(), "live").status is RunStatus.RUNNING
    # The run's own subject still learns that its payload differs.
    with pytest.raises(IdempotencyKeyReused, match="another payload"):
        runs.create(me(), "live", CreateRun(subject_id="u-1", plan_version="p2"))


def test_a_tenant_service_names_the_runs_subject(runs: RunService) -> None:
    service = ctx("acme", None, scopes=RUN_SCOPES | {Scope.SUBJECTS_ANY})
    runs.create(service, "r", CreateRun(subject_id="u-1", plan_version="p1"))
    runs.create(service, "r", CreateRun(subject_id="u-2", plan_version="p2"))
    assert runs.get(service, "r", "u-2").plan_version == "p2"
    assert runs.get(me(), "r").plan_version == "p1"
    with pytest.raises(ValidationFailed, match="subject_id"):
        runs.get(service, "r")
    # A subject's token cannot reach another subject's run by naming it.
    with pytest.raises(Forbidden):
        runs.get(me(), "r", "u-2")


def test_a_run_kept_under_its_bare_id_is_still_found_by_its_subject(
    runs: RunService, clock: FakeClock
) -> None:
    """Runs created before ids were scoped by subject are kept under the bare id; their
    subject still finds and advances them, and nobody else sees them."""
    from memvault_wire.run import Checkpoint

    now = clock.now()
    old = Checkpoint(
        run_id="old-run", subject_id="u-1", version=1, status=RunStatus.CREATED,
        step="created", plan_version="p1", budget={}, pending_approvals=[], state={},
        artifact_refs=[], created_at=now, updated_at=now,
    )  # fmt: skip
    runs.store.create("acme", old, "fingerprint")
    assert runs.get(me(), "old-run").run_id == "old-run"
    moved = runs.advance(
        me(), "old-run", Advance(expected_version=1, status=RunStatus.RUNNING, step="go")
    )
    assert moved.version == 2 and runs.store.head("acme", "old-run", now=now) is not None
    other = ctx("acme", "u-2", scopes=RUN_SCOPES)
    with pytest.raises(NotFound):
        runs.get(other, "old-run")
    _, created = runs.create(other, "old-run", CreateRun(subject_id="u-2", plan_version="p1"))
    assert created


def test_an_artifact_is_named_with_its_one_digest(runs: RunService, services: Services) -> None:
    start(runs)
    who = ctx(scopes=frozenset(Scope) - {Scope.SUBJECTS_ANY})
    artifact_id, sha = committed_artifact(services.artifacts, who, "u-1", b"result")
    ref = {"artifact_id": artifact_id, "sha256": sha}
    twice = runs.advance(
        me(),
        "run-1",
        Advance(expected_version=2, status=RunStatus.RUNNING, step="a", artifact_refs=[ref, ref]),  # type: ignore[list-item]
    )
    assert len(twice.artifact_refs) == 2
    for refs in (
        [ref, {**ref, "sha256": "f" * 64}],  # two digests for one artifact
        [{**ref, "sha256": "f" * 64}],  # another digest than the counted reference's
    ):
        with pytest.raises(ArtifactNotCommitted) as raised:
            runs.advance(
                me(),
                "run-1",
                Advance(expected_version=3, status=RunStatus.RUNNING, step="b", artifact_refs=refs),  # type: ignore[arg-type]
            )
        assert raised.value.details == {"artifact_ids": [artifact_id]}
    assert runs.get(me(), "run-1").version == 3


def test_forgetting_a_subject_deletes_their_runs_and_only_theirs(
    runs: RunService, services: Services
) -> None:
    start(runs)
    runs.record_operation(me(), "run-1", "op", RecordOperation(status="PENDING"))  # type: ignore[arg-type]
    other = ctx("acme", "u-2", scopes=RUN_SCOPES)
    runs.create(other, "run-2", CreateRun(subject_id="u-2", plan_version="p1"))

    job = services.memory.forget(ctx(), "u-1")

    runs_copy = next(c for c in job.copies if c.name == "runs")
    assert runs_copy.status is CopyState.DONE
    with pytest.raises(NotFound):
        runs.get(me(), "run-1")
    assert runs.get(other, "run-2").version == 1


def test_an_event_of_any_type_is_recorded_once_and_changes_nothing(runs: RunService) -> None:
    """A webhook or tool callback the agent runtime received: any dotted type, with a
    bounded JSON payload, recorded idempotently by its event_id; only the known types
    change the run."""
    start(runs)
    push = RunEvent(
        event_id="gh-1",
        type="github.pull_request.merged",
        payload={"number": 42, "labels": ["ok"], "merged": True, "by": {"login": "octo"}},
    )
    first = runs.deliver_event(me(), "run-1", push)
    assert (first["duplicate"], first["applied"]) == (False, False)
    assert first["checkpoint"].version == 2  # unchanged

    again = runs.deliver_event(me(), "run-1", push)
    assert (again["duplicate"], again["applied"]) == (True, False)
    # The payload is never stored: a redelivery with another payload is the duplicate, so
    # that no caller can confirm a guess of a payload it never saw (a fresh probe told a
    # right guess, 200, from a wrong one, 409). Another type under the id is refused.
    changed = push.model_copy(update={"payload": {"number": 43}})
    guessed = runs.deliver_event(me(), "run-1", changed)
    assert (guessed["duplicate"], guessed["applied"]) == (True, False)
    with pytest.raises(IdempotencyKeyReused):
        runs.deliver_event(me(), "run-1", push.model_copy(update={"type": "github.push"}))
    # A known type keeps its effect, with or without a payload.
    cancel = RunEvent(event_id="c-1", type="cancel.requested", payload={"reason": "user"})
    assert runs.deliver_event(me(), "run-1", cancel)["checkpoint"].status is RunStatus.CANCELLED


@pytest.mark.parametrize(
    "body",
    [
        {"event_id": "e", "type": "has space"},
        {"event_id": "e", "type": ".leading.dot"},
        {"event_id": "e", "type": "x" * 129},
        {"event_id": "e", "type": "ok", "payload": ["not", "an", "object"]},
        {"event_id": "e", "type": "ok", "payload": {"blob": "x" * 16_400}},
    ],
)
def test_an_event_type_or_payload_out_of_bounds_is_refused(body: dict[str, Any]) -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        RunEvent.model_validate(body)


def test_an_event_without_a_payload_keeps_the_digest_receipts_had_before(
    runs: RunService,
) -> None:
    """A receipt recorded before events had payloads holds the digest of the event's
    three fields: an event without a payload is fingerprinted the same way, so its
    replay is still recognised as a duplicate after the upgrade."""
    import hashlib
    import json

    from memvault.storage.ports.runs import run_key

    start(runs)
    old = {"event_id": "e-1", "type": "cancel.requested", "approval_id": None}
    before = hashlib.sha256(
        json.dumps(old, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()
    runs.deliver_event(me(), "run-1", RunEvent.model_validate(old))
    receipt = runs.store.receipt("acme", run_key("u-1", "run-1"), "e-1", now=runs.clock.now())
    assert receipt is not None and receipt.fingerprint == before
