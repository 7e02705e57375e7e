"""Lambda handler behind the purge state machine: one action per task.

Event: ``{"action": "begin" | "step" | "fail" | "finish", "tenant_id", "deletion_id",
"copy" (step, fail), "error" (fail: the caught ``{"Error", "Cause"}``)}``. A step that
cannot clear its copy raises ``PurgeStepFailed``; the state machine retries it with the
step's policy and, once retries are spent, calls ``fail``. Answers carry ids only.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from memvault.observability import logger, metrics, tracer
from memvault.services.purge_pipeline import BEGIN, FAIL, FINISH, STEP, step_named

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from memvault.services.deletion import PurgeRunner


@lru_cache(maxsize=1)
def _runner() -> PurgeRunner:
    from memvault.wiring import build_purge_runner

    return build_purge_runner()


def handle(event: dict[str, Any], runner: PurgeRunner) -> dict[str, Any]:
    action = event["action"]
    tenant_id, deletion_id = event["tenant_id"], event["deletion_id"]
    logger.append_keys(deletion_id=deletion_id, action=action, copy=event.get("copy"))
    if action == BEGIN:
        job = runner.begin(tenant_id, deletion_id)
    elif action == STEP:
        copy = step_named(event["copy"]).copy
        runner.attempt(runner.load(tenant_id, deletion_id), copy)
        job = runner.load(tenant_id, deletion_id)
    elif action == FAIL:
        error = event.get("error") or {}
        kind = error.get("Error", "error") if isinstance(error, dict) else "error"
        job = runner.fail(tenant_id, deletion_id, step_named(event["copy"]).copy, str(kind))
    elif action == FINISH:
        job = runner.finish(tenant_id, deletion_id)
    else:
        raise ValueError(f"unknown purge action {action!r}")
    return {"deletion_id": deletion_id, "status": job.status.value}


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, _runner())
