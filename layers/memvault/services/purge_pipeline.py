"""The purge pipeline's one ordered list of steps, with the retry policy of each.

The CDK app builds the Step Functions state machine from this list (one Lambda task per
step, retried with these intervals and backoff, any final failure caught into the
``fail`` action); the local runner executes the same list in the same order with the
same policy. Changing the pipeline means changing this list, nothing else.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    """Step Functions' ``Retry`` fields: retries after the first attempt, the wait before
    the first retry, and the factor each later wait grows by."""

    max_attempts: int = 3
    interval_seconds: int = 1
    backoff_rate: float = 2.0

    def delays(self) -> list[float]:
        return [self.interval_seconds * self.backoff_rate**n for n in range(self.max_attempts)]


@dataclass(frozen=True)
class PipelineStep:
    #: The copy the step clears, as reported in ``GET /v1/deletions/{id}``.
    copy: str
    retry: RetryPolicy = RetryPolicy()
    description: str = ""


PURGE_PIPELINE: tuple[PipelineStep, ...] = (
    PipelineStep(
        "artifacts",
        description="release the references the records in scope hold; delete each artifact "
        "whose last reference goes, with every object version",
    ),
    PipelineStep(
        "primary", description="tombstone every chain in scope; purge its current version"
    ),
    PipelineStep("versions", description="purge every other version of those chains"),
    PipelineStep(
        "index",
        RetryPolicy(max_attempts=5, interval_seconds=2, backoff_rate=2.0),
        description="overwrite each chain's search document with a tombstone",
    ),
    PipelineStep("cache", description="recall result caches (none is kept)"),
    PipelineStep("sessions", description="the subject's sessions, messages and summaries"),
    PipelineStep("runs", description="the subject's run state and checkpoints"),
    PipelineStep(
        "traces",
        description="recall traces, served links and feedback: the subject's (forget) or "
        "the chain's links and feedback (one memory)",
    ),
)

#: Lambda actions around the steps: mark PURGING, record a caught failure, finish.
BEGIN = "begin"
STEP = "step"
FAIL = "fail"
FINISH = "finish"


def step_named(copy: str) -> PipelineStep:
    for step in PURGE_PIPELINE:
        if step.copy == copy:
            return step
    raise KeyError(copy)
