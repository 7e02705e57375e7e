"""The purge pipeline: a Step Functions standard workflow built from the runtime's one
ordered list of steps (``memvault.services.purge_pipeline.PURGE_PIPELINE``).

``Begin`` marks the deletion job PURGING; then one Lambda task per step, in the list's
order, each retried with its own policy and, once its retries are spent, caught into its
own ``Record failure <copy>`` task (the job records which copy failed, and why) and the
shared ``Purge failed`` state; after the last step, ``Finish``. Every task invokes the
purge function with ids only; the execution log holds no execution data.
"""

from __future__ import annotations

import re
from typing import Any

from aws_cdk import ArnFormat, Duration, Stack
from aws_cdk import aws_iam as iam
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_stepfunctions as sfn
from aws_cdk import aws_stepfunctions_tasks as tasks

from constructs import Construct
from infra import settings
from memvault.services.purge_pipeline import BEGIN, FAIL, FINISH, PURGE_PIPELINE, STEP, PipelineStep

#: Where the runtime finds the state machine it starts (one execution per deletion id).
STATE_MACHINE_ENV = "MEMVAULT_PURGE_STATE_MACHINE_ARN"


def _ids() -> dict[str, str]:
    return {
        "tenant_id": sfn.JsonPath.string_at("$.tenant_id"),
        "deletion_id": sfn.JsonPath.string_at("$.deletion_id"),
    }


class PurgePipeline(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        function: lambda_.IFunction,
        starters: list[lambda_.Function],
    ) -> None:
        super().__init__(scope, construct_id)
        self.function = function
        self.starters = starters
        failed = sfn.Fail(
            self,
            "Purge failed",
            error="PurgeFailed",
            cause="a purge step failed after its retries; the deletion job records which",
        )
        # Begin and Finish are retried on Lambda's own faults (throttles included) and any
        # other error fails the run, which leaves the job unfinished for the sweeper to
        # launch again under the next execution name (never a stranded job).
        begin = self._task("Begin", {"action": BEGIN, **_ids()})
        begin.add_catch(failed, errors=["States.ALL"], result_path="$.error")
        chain = sfn.Chain.start(begin)
        for step in PURGE_PIPELINE:
            chain = chain.next(self._step(step, failed))
        finish = self._task("Finish", {"action": FINISH, **_ids()})
        finish.add_catch(failed, errors=["States.ALL"], result_path="$.error")
        chain = chain.next(finish).next(sfn.Succeed(self, "Purged"))
        stack = Stack.of(self)
        # Named after the stack, so that the executions' ARNs are known before deployment.
        self.name = re.sub(r"[^A-Za-z0-9_-]", "-", f"{stack.stack_name}-purge")[:80]
        self.log_group = logs.LogGroup(
            self,
            "ExecutionLogs",
            # The vended-logs prefix keeps log delivery out of the account's (size-limited)
            # CloudWatch Logs resource policy.
            log_group_name=f"/aws/vendedlogs/states/{self.name}",
            retention=settings.PURGE_LOG_RETENTION,
        )
        self.state_machine = sfn.StateMachine(
            self,
            "StateMachine",
            state_machine_name=self.name,
            state_machine_type=sfn.StateMachineType.STANDARD,
            definition_body=sfn.DefinitionBody.from_chainable(chain),
            comment="memvault purge pipeline (layers/memvault/purge/pipeline.py)",
            timeout=settings.PURGE_EXECUTION_TIMEOUT,
            tracing_enabled=True,
            logs=sfn.LogOptions(
                destination=self.log_group,
                level=sfn.LogLevel.ALL,
                include_execution_data=False,  # the tenant's and the deletion's ids only
            ),
        )
        # The API starts one execution per deletion (named after its id, so a second
        # start is a no-op) and may read back how it went.
        self.executions_arn = stack.format_arn(
            service="states",
            resource="execution",
            resource_name=f"{self.name}:*",
            arn_format=ArnFormat.COLON_RESOURCE_NAME,
        )
        for fn in starters:
            self.state_machine.grant_start_execution(fn)
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    sid="ReadPurgeExecutions",
                    actions=["states:DescribeExecution"],
                    resources=[self.executions_arn],
                )
            )
            fn.add_environment(STATE_MACHINE_ENV, self.state_machine.state_machine_arn)

    def _task(
        self, name: str, payload: dict[str, Any], *, service_retries: bool = True
    ) -> tasks.LambdaInvoke:
        task = tasks.LambdaInvoke(
            self,
            name,
            lambda_function=self.function,
            payload=sfn.TaskInput.from_object(payload),
            result_path=sfn.JsonPath.DISCARD,
            # CDK's own retrier leaves out throttles (Lambda.TooManyRequestsException).
            retry_on_service_exceptions=False,
        )
        if service_retries:
            task.add_retry(
                errors=list(settings.PURGE_LAMBDA_ERRORS),
                interval=Duration.seconds(settings.PURGE_LAMBDA_RETRY_INTERVAL_SECONDS),
                max_attempts=settings.PURGE_LAMBDA_RETRY_ATTEMPTS,
                backoff_rate=2.0,
                jitter_strategy=sfn.JitterType.FULL,
            )
        return task

    def _step(self, step: PipelineStep, failed: sfn.Fail) -> tasks.LambdaInvoke:
        task = self._task(
            f"Purge {step.copy}",
            {"action": STEP, "copy": step.copy, **_ids()},
            service_retries=False,  # one Retry, with the step's own policy, covers both
        )
        task.add_retry(
            errors=list(settings.PURGE_RETRY_ERRORS),
            interval=Duration.seconds(step.retry.interval_seconds),
            max_attempts=step.retry.max_attempts,
            backoff_rate=step.retry.backoff_rate,
        )
        record = self._task(
            f"Record failure {step.copy}",
            {
                "action": FAIL,
                "copy": step.copy,
                **_ids(),
                "error": sfn.JsonPath.object_at("$.error"),
            },
        )
        # A record that cannot be written after its retries still ends the run as failed
        # (the copy stays PENDING; the sweeper's next attempt clears it).
        record.add_catch(failed, errors=["States.ALL"], result_path="$.error")
        task.add_catch(record.next(failed), errors=["States.ALL"], result_path="$.error")
        return task
