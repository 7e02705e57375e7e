"""A stateful property test of run state against a plain model of the declared state
machine: random advances (fresh or stale), operation records and event deliveries."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule
from moto import mock_aws

from memvault.models.access import Scope
from memvault_wire.errors import IllegalTransition, OperationConflict, VersionConflict
from memvault_wire.run import (
    OPERATION_TRANSITIONS,
    TERMINAL,
    TRANSITIONS,
    Advance,
    CreateRun,
    OperationStatus,
    RecordOperation,
    RunEvent,
    RunStatus,
)
from tests.support.harness import ctx, make_services

ME = ctx(scopes=frozenset({Scope.RUNS_WRITE}))
# Legal moves are rare among random targets; weight them so runs get somewhere.
TARGETS = st.sampled_from(list(RunStatus))


class RunModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self._mock = mock_aws()
        self._mock.start()
        services, _, _ = make_services()
        self.runs = services.runs
        self.runs.create(ME, "run", CreateRun(subject_id="u-1", plan_version="p"))
        self.status = RunStatus.CREATED
        self.version = 1
        self.pending: list[str] = []
        self.operations: dict[str, tuple[OperationStatus, str | None]] = {}
        self.events: dict[str, tuple[str, str | None]] = {}

    def teardown(self) -> None:
        self._mock.stop()

    @rule(
        to=TARGETS,
        stale=st.booleans(),
        approvals=st.lists(st.sampled_from(["a1", "a2"]), max_size=2, unique=True),
    )
    def advance(self, to: RunStatus, stale: bool, approvals: list[str]) -> None:
        target = to
        expected = self.version - 1 if stale else self.version
        body = Advance(
            expected_version=max(expected, 1), status=target, step="s", pending_approvals=approvals
        )
        legal = self.status not in TERMINAL and target in TRANSITIONS[self.status]
        try:
            cp = self.runs.advance(ME, "run", body)
        except VersionConflict:
            assert stale and self.version > 1
            return
        except IllegalTransition:
            assert not legal
            assert not (stale and self.version > 1)
            return
        assert legal
        assert not (stale and self.version > 1)
        self.status, self.version, self.pending = target, self.version + 1, approvals
        assert cp.version == self.version

    @rule(
        op=st.sampled_from(["op1", "op2"]),
        status=st.sampled_from(list(OperationStatus)),
        ref=st.sampled_from(["r1", "r2"]),
    )
    def record(self, op: str, status: OperationStatus, ref: str) -> None:
        result_ref = ref if status is OperationStatus.COMMITTED else None
        before = self.operations.get(op)
        try:
            _, changed = self.runs.record_operation(
                ME, "run", op, RecordOperation(status=status, result_ref=result_ref)
            )
        except OperationConflict:
            assert before is not None
            assert before != (status, result_ref)
            assert status not in OPERATION_TRANSITIONS[before[0]] or status is before[0]
            return
        if before == (status, result_ref):
            assert not changed
        else:
            assert changed
            assert before is None or status in OPERATION_TRANSITIONS[before[0]]
            self.operations[op] = (status, result_ref)

    @rule(
        event_id=st.sampled_from(["e1", "e2", "e3"]),
        kind=st.sampled_from(["approval.granted", "approval.rejected", "cancel.requested"]),
        approval=st.sampled_from(["a1", "a2"]),
    )
    def event(self, event_id: str, kind: str, approval: str) -> None:
        approval_id = None if kind == "cancel.requested" else approval
        if event_id in self.events and self.events[event_id] != (kind, approval_id):
            return  # reusing an event id with other content is refused; tested elsewhere
        out: dict[str, Any] = self.runs.deliver_event(
            ME, "run", RunEvent(event_id=event_id, type=kind, approval_id=approval_id)
        )  # type: ignore[arg-type]
        if event_id in self.events:
            assert out["duplicate"]
            assert out["checkpoint"].version == self.version
            return
        self.events[event_id] = (kind, approval_id)
        applies = self.status not in TERMINAL and (
            kind == "cancel.requested" or approval_id in self.pending
        )
        assert out["applied"] == applies
        if not applies:
            return
        self.version += 1
        if kind == "cancel.requested":
            self.status = RunStatus.CANCELLED
            return
        self.pending = [a for a in self.pending if a != approval_id]
        if kind == "approval.rejected":
            self.status = RunStatus.FAILED
        elif self.status is RunStatus.WAITING_APPROVAL and not self.pending:
            self.status = RunStatus.RUNNING

    @invariant()
    def the_checkpoint_matches_the_model(self) -> None:
        cp = self.runs.get(ME, "run")
        assert (cp.status, cp.version, cp.pending_approvals) == (
            self.status,
            self.version,
            self.pending,
        )
        assert {o.operation_id: (o.status, o.result_ref) for o in cp.operations} == self.operations
        assert self.runs.version(ME, "run", self.version).status is self.status


RunModel.TestCase.settings = settings(
    max_examples=25,
    stateful_step_count=25,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_run_state_matches_its_model = RunModel.TestCase
