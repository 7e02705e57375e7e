"""On AWS, a deletion whose Step Functions start was lost after the delete committed is
started by the scheduled sweeper, and one whose execution did start is left alone.

The fault harness found that nothing resumed such a job (its reads were already blocked
by the tombstone; its copies stayed). moto's Step Functions refuses a second execution
of the same name as AWS does, which is what keeps the sweeper from starting a job twice.
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
from memvault.models.memory import DeletionState
from memvault.services.deletion import StepFunctionsPurgeLauncher
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
    again = handler({}, None)  # the next schedule: nothing is started twice

    executions = sfn.list_executions(stateMachineArn=arn)["executions"]
    names = sorted(e["name"] for e in executions)
    assert names == sorted([started.deletion_id, lost.deletion_id])
    # The Pass state never runs the purge, so both jobs still wait: each schedule launches
    # both, and Step Functions refuses every start of a name it already ran.
    assert answer["purge_launches"] == again["purge_launches"] == 2
