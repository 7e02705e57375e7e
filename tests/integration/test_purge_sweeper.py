"""On AWS the scheduled sweeper brings every unfinished deletion to an end: one whose
Step Functions start was lost after the delete committed is started, one whose execution
still runs is left alone, and one whose execution ended before the job completed (a
throttle at Begin, an index outage past the retries, a crash between steps) is started
again under the next name, a bounded number of times.

The fault harness found that nothing resumed a lost start, and the deploy rehearsal that
nothing resumed a failed execution (the sweeper relaunched under the closed name, which
Step Functions refused, and the launcher swallowed). moto's Step Functions refuses a
second execution of the same name as AWS does; its plain backend keeps executions
RUNNING until stopped, which is how these tests end one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from moto import mock_aws

from memvault.config import get_settings
from memvault.services.deletion import StepFunctionsPurgeLauncher
from memvault_wire.memory import DeletionState
from tests.support.harness import a_write, ctx, make_services

pytestmark = pytest.mark.aws


class _Lost:
    def launch(self, tenant_id: str, deletion_id: str, *, resume: bool = False) -> None:
        return None  # the API function died between the commit and StartExecution


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[Any, str]]:
    with mock_aws():
        sfn = boto3.client("stepfunctions", region_name="us-east-1")
        definition = {"StartAt": "Purge", "States": {"Purge": {"Type": "Pass", "End": True}}}
        arn = sfn.create_state_machine(
            name="memvault-purge",
            definition=json.dumps(definition),
            roleArn="arn:aws:iam::123456789012:role/purge",
        )["stateMachineArn"]
        # Only these settings, read afresh: the handler's get_settings() is cached for
        # the process, and an earlier test may have filled the cache or left a variable.
        for name in [n for n in os.environ if n.startswith("MEMVAULT_")]:
            monkeypatch.delenv(name)
        get_settings.cache_clear()
        for name, value in {
            "MEMVAULT_TABLE_PREFIX": "test-",
            "MEMVAULT_ARTIFACTS_BUCKET": "test-artifacts",
            "MEMVAULT_PURGE_STATE_MACHINE_ARN": arn,
        }.items():
            monkeypatch.setenv(name, value)
        yield sfn, arn
        get_settings.cache_clear()


def test_the_sweeper_starts_the_purge_whose_start_was_lost_and_only_that(
    machine: tuple[Any, str],
) -> None:
    from functions.sweeper.index import handler

    sfn, arn = machine
    services, _, clock = make_services()
    launcher = StepFunctionsPurgeLauncher(sfn, arn, clock)
    m1 = services.memory.write(ctx(), "u-1", a_write(request_id="a", canonical_key="k1")).memory
    m2 = services.memory.write(ctx(), "u-1", a_write(request_id="b", canonical_key="k2")).memory
    services.memory.purge = launcher
    started = services.memory.delete(ctx(), "u-1", m1.memory_id)  # its execution started
    services.memory.purge = _Lost()
    lost = services.memory.delete(ctx(), "u-1", m2.memory_id)
    assert services.purge.load("acme", lost.deletion_id).status in (
        DeletionState.REQUESTED,
        DeletionState.BLOCKED,
    )

    answer = handler({}, None)
    again = handler({}, None)  # the next schedule: a running execution is left alone

    executions = sfn.list_executions(stateMachineArn=arn)["executions"]
    names = sorted(e["name"] for e in executions)
    assert names == sorted([started.deletion_id, lost.deletion_id])
    assert {e["status"] for e in executions} == {"RUNNING"}
    assert answer["purge_launches"] == again["purge_launches"] == 2


def _ended(sfn: Any, arn: str, name: str, status: str) -> None:
    """moto's plain Step Functions keeps every execution RUNNING; stopping one is how a
    test ends it (ABORTED stands for any end: FAILED, TIMED_OUT, a crash)."""
    executions = sfn.list_executions(stateMachineArn=arn)["executions"]
    execution = next(e for e in executions if e["name"] == name)
    assert status == "ABORTED"
    sfn.stop_execution(executionArn=execution["executionArn"])


def test_a_purge_whose_execution_ended_unfinished_is_relaunched_under_a_new_name(
    machine: tuple[Any, str],
) -> None:
    """An execution that failed (a throttle at Begin, an index outage past the retries)
    left its job BLOCKED or FAILED; its name is closed for good. The sweeper starts the
    next attempt, ``<deletion id>-2``, and never the closed name again."""
    from functions.sweeper.index import handler

    sfn, arn = machine
    services, _, clock = make_services()
    launcher = StepFunctionsPurgeLauncher(sfn, arn, clock)
    memory = services.memory.write(ctx(), "u-1", a_write(request_id="a")).memory
    services.memory.purge = launcher
    job = services.memory.delete(ctx(), "u-1", memory.memory_id)
    _ended(sfn, arn, job.deletion_id, "ABORTED")

    assert handler({}, None)["purge_launches"] == 1
    names = sorted(e["name"] for e in sfn.list_executions(stateMachineArn=arn)["executions"])
    assert names == [job.deletion_id, f"{job.deletion_id}-2"]
    # A second delete of the same memory while attempt 2 runs starts nothing new.
    services.memory.delete(ctx(), "u-1", memory.memory_id)
    assert len(sfn.list_executions(stateMachineArn=arn)["executions"]) == 2


def test_relaunches_stop_after_the_bound(machine: tuple[Any, str]) -> None:
    sfn, arn = machine
    services, _, clock = make_services()
    launcher = StepFunctionsPurgeLauncher(sfn, arn, clock, max_attempts=3)
    memory = services.memory.write(ctx(), "u-1", a_write(request_id="a")).memory
    services.memory.purge = launcher
    job = services.memory.delete(ctx(), "u-1", memory.memory_id)
    for attempt in range(1, 6):
        name = launcher.execution_name(job.deletion_id, attempt)
        if attempt <= 3:
            _ended(sfn, arn, name, "ABORTED")
        launcher.launch("acme", job.deletion_id, resume=True)
    names = {e["name"] for e in sfn.list_executions(stateMachineArn=arn)["executions"]}
    assert names == {job.deletion_id, f"{job.deletion_id}-2", f"{job.deletion_id}-3"}
