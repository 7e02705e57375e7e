"""Deletion jobs and the purge steps that clear every copy after the tombstone.

The tombstone (written with the job, in one transaction) already blocks reads; the
steps here make the data physically gone, copy by copy, each idempotent by
(deletion id, copy). ``memvault.services.purge_pipeline.PURGE_PIPELINE`` orders them and gives
each its retry policy; Step Functions runs that list on AWS, ``PurgeRunner`` locally.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from memvault.clock import Clock
from memvault.observability import logger, metrics
from memvault.search.backend import FAILED, SearchIndex
from memvault.search.documents import IndexOp, Stage
from memvault.services.purge_pipeline import PURGE_PIPELINE, PipelineStep
from memvault.storage.ports.errors import ConditionFailed
from memvault.storage.ports.memory import Chain, MemoryRecords
from memvault.storage.ports.runs import RunStore
from memvault.storage.ports.sessions import SessionStore
from memvault.storage.ports.traces import TraceStore
from memvault_wire.memory import CopyState, DeletionJob, DeletionScope, DeletionState

#: Copies a new job starts with, and the state each starts in: every pipeline step's
#: copy, and the copies that never hold content.
INITIAL_COPIES: dict[str, tuple[CopyState, str | None]] = {
    **{step.copy: (CopyState.PENDING, None) for step in PURGE_PIPELINE},
    "idempotency": (
        CopyState.NOT_APPLICABLE,
        "idempotency records keep a request hash and ids, never a copy of the content",
    ),
}


class PurgeStepFailed(Exception):
    """A step could not clear its copy on this attempt (Step Functions retries it)."""


@dataclass(frozen=True)
class StepResult:
    state: CopyState
    reason: str | None = None
    count: int = 0


class PurgeStep(Protocol):
    copy: str

    def run(self, job: DeletionJob) -> StepResult: ...


def _chains_in_scope(repo: MemoryRecords, job: DeletionJob) -> tuple[list[Chain], int | None]:
    """The chains a job covers; for a subject job also the retired epoch."""
    if job.scope is DeletionScope.MEMORY:
        chain = repo.chain(job.tenant_id, job.subject_id, job.target)
        return ([chain] if chain else []), None
    retired = int(job.target.removeprefix("epoch:"))
    _, chains = repo.subject_items(job.tenant_id, job.subject_id)
    return [c for c in chains if c.subject_epoch <= retired], retired


def retired_epoch(job: DeletionJob) -> int | None:
    """The subject epoch a forget retired (its job's target, ``epoch:<n>``): what its purge
    of sessions, runs and artifacts takes (``purged_by``)."""
    target = job.target.removeprefix("epoch:")
    return int(target) if job.scope is DeletionScope.SUBJECT and target.isdigit() else None


class ArtifactReleaser(Protocol):
    def release(self, tenant_id: str, subject_id: str, artifact_id: str, ref: str) -> bool: ...

    def forget_subject(
        self,
        tenant_id: str,
        subject_id: str,
        before: datetime,
        *,
        retired_epoch: int | None = None,
    ) -> int: ...


class ArtifactsStep:
    """Release the references the chains in scope hold; an artifact whose last reference
    goes is deleted with all its object versions. Runs before the versions are purged,
    while they still name their artifacts."""

    copy = "artifacts"

    def __init__(self, repo: MemoryRecords, releaser: ArtifactReleaser) -> None:
        self.repo = repo
        self.releaser = releaser

    def run(self, job: DeletionJob) -> StepResult:
        if job.scope is DeletionScope.SUBJECT:
            gone = self.releaser.forget_subject(
                job.tenant_id, job.subject_id, job.requested_at, retired_epoch=retired_epoch(job)
            )
            return StepResult(
                CopyState.DONE if gone else CopyState.NOT_APPLICABLE,
                f"{gone} artifact(s) of the subject deleted",
                gone,
            )
        chains, _ = _chains_in_scope(self.repo, job)
        # The chain head keeps every artifact its versions ever named, so a version
        # removed by TTL before the delete cannot leave a reference behind.
        refs = {(a, f"memory:{c.chain_id}") for c in chains for a in c.artifact_ids}
        if not refs:
            return StepResult(CopyState.NOT_APPLICABLE, "no artifact referenced")
        deleted = sum(
            self.releaser.release(job.tenant_id, job.subject_id, artifact, ref)
            for artifact, ref in sorted(refs)
        )
        return StepResult(
            CopyState.DONE,
            f"{len(refs)} reference(s) released, "
            f"{deleted} artifact(s) deleted with their last reference",
            len(refs),
        )


class PrimaryStep:
    """Tombstone every chain in scope (a memory job's chain already is) and remove the
    current version of each."""

    copy = "primary"

    def __init__(self, repo: MemoryRecords, clock: Clock) -> None:
        self.repo = repo
        self.clock = clock

    def run(self, job: DeletionJob) -> StepResult:
        chains, _ = _chains_in_scope(self.repo, job)
        for chain in chains:
            if chain.live:
                chain = self._tombstone(job, chain)
            self.repo.purge_version(
                job.tenant_id,
                job.subject_id,
                chain.current_memory_id,
                chain.chain_id,
                job.deletion_id,
                self.clock.now(),
            )
        return StepResult(CopyState.DONE, count=len(chains))

    def _tombstone(self, job: DeletionJob, chain: Chain) -> Chain:
        for _ in range(5):
            release = (
                bool(chain.fact)
                and self.repo.pointer(job.tenant_id, job.subject_id, chain.fact or "")
                == chain.chain_id
            )
            try:
                self.repo.tombstone_chain(
                    job.tenant_id,
                    job.subject_id,
                    chain,
                    job.deletion_id,
                    self.clock.now(),
                    release_pointer=release,
                    job=None,
                    audit=None,
                    audit_expires_at=None,
                )
                return chain
            except ConditionFailed:
                fresh = self.repo.chain(job.tenant_id, job.subject_id, chain.chain_id)
                if fresh is None or not fresh.live:
                    return fresh or chain
                chain = fresh
        raise RuntimeError("chain kept changing while it was being tombstoned")


class VersionsStep:
    """Remove every version of every chain in scope, and any stray version of a retired epoch."""

    copy = "versions"

    def __init__(self, repo: MemoryRecords, clock: Clock) -> None:
        self.repo = repo
        self.clock = clock

    def run(self, job: DeletionJob) -> StepResult:
        chains, retired = _chains_in_scope(self.repo, job)
        targets = {(m, c.chain_id) for c in chains for m in c.versions}
        if retired is not None:
            versions, _ = self.repo.subject_items(job.tenant_id, job.subject_id)
            targets |= {(v.memory_id, v.chain_id) for v in versions if v.subject_epoch <= retired}
        for memory_id, chain_id in sorted(targets):
            self.repo.purge_version(
                job.tenant_id,
                job.subject_id,
                memory_id,
                chain_id,
                job.deletion_id,
                self.clock.now(),
            )
        return StepResult(CopyState.DONE, count=len(targets))


class IndexStep:
    """Overwrite the search document of every chain in scope with a tombstone, at a
    version above any live one, then read each back: the index never keeps a recallable
    copy, and a late stream record of the chain is refused afterwards."""

    copy = "index"

    def __init__(self, repo: MemoryRecords, index: SearchIndex | None) -> None:
        self.repo = repo
        self.index = index

    def run(self, job: DeletionJob) -> StepResult:
        if self.index is None:
            return StepResult(CopyState.NOT_APPLICABLE, "no search index is configured")
        chains, _ = _chains_in_scope(self.repo, job)
        ops = [
            IndexOp(
                chain_id=c.chain_id,
                tenant_id=job.tenant_id,
                subject_id=job.subject_id,
                memory_id=c.current_memory_id,
                memory_version=c.current_version,
                stage=Stage.PURGED,
            )
            for c in chains
        ]
        failed = [r for r in self.index.apply(ops) if r.outcome == FAILED]
        if failed:
            raise PurgeStepFailed(f"{len(failed)} index document(s) not overwritten")
        self.index.refresh()
        live = [
            op.chain_id
            for op in ops
            if (held := self.index.get(job.tenant_id, op.chain_id)) is not None
            and held[1].get("doc_type") != "tombstone"
        ]
        if live:
            raise PurgeStepFailed(f"{len(live)} index document(s) still live after the write")
        return StepResult(
            CopyState.DONE if ops else CopyState.NOT_APPLICABLE,
            f"{len(ops)} document(s) tombstoned" if ops else "nothing was indexed",
            len(ops),
        )


class CacheStep:
    copy = "cache"

    def run(self, job: DeletionJob) -> StepResult:
        return StepResult(
            CopyState.NOT_APPLICABLE,
            "recall keeps no result cache: every answer is read from the index and the table",
        )


class SessionsStep:
    """Forgetting a subject ends every session of theirs begun under the epoch it retired
    (or earlier; messages and summaries; later sessions are not the forget's); a single
    memory's deletion leaves sessions alone (they have their own lifetime)."""

    copy = "sessions"

    def __init__(self, store: SessionStore) -> None:
        self.store = store

    def run(self, job: DeletionJob) -> StepResult:
        if job.scope is not DeletionScope.SUBJECT:
            return StepResult(CopyState.NOT_APPLICABLE, "sessions are not in a memory's scope")
        removed = self.store.forget_subject(
            job.tenant_id, job.subject_id, job.requested_at, retired_epoch=retired_epoch(job)
        )
        return StepResult(CopyState.DONE, f"{removed} session item(s) deleted", removed)


class RunsStep:
    """Forgetting a subject deletes the run state of their runs created under the epoch it
    retired or earlier (checkpoints, versions, operations, events); their artifacts went
    with the artifacts step."""

    copy = "runs"

    def __init__(self, runs: RunStore) -> None:
        self.runs = runs

    def run(self, job: DeletionJob) -> StepResult:
        if job.scope is not DeletionScope.SUBJECT:
            return StepResult(CopyState.NOT_APPLICABLE, "run state is not in a memory's scope")
        gone = self.runs.forget_subject(
            job.tenant_id, job.subject_id, job.requested_at, retired_epoch=retired_epoch(job)
        )
        return StepResult(
            CopyState.DONE if gone.runs else CopyState.NOT_APPLICABLE,
            f"{gone.runs} run(s), {gone.records} item(s) deleted",
            gone.records,
        )


class TracesStep:
    """Forgetting a subject removes their recall traces, served links and feedback made
    by the time of the forget, and every trace, link and feedback judged under the epoch
    it retired, however late (one that overlapped the forget); deleting one memory
    removes its chain's served links and the feedback about it. Recall traces that listed
    the chain keep its ids (never content) until their own expiry: they record what
    another answer was built from."""

    copy = "traces"

    def __init__(self, repo: MemoryRecords, traces: TraceStore | None) -> None:
        self.repo = repo
        self.traces = traces

    def run(self, job: DeletionJob) -> StepResult:
        if self.traces is None:
            return StepResult(CopyState.NOT_APPLICABLE, "no trace store is configured")
        if job.scope is DeletionScope.SUBJECT:
            gone = self.traces.forget_subject(
                job.tenant_id, job.subject_id, job.requested_at, retired_epoch(job)
            )
            return StepResult(CopyState.DONE, f"{gone} trace item(s) deleted", gone)
        if job.scope is DeletionScope.MEMORY:
            gone = self.traces.forget_chain(job.tenant_id, job.subject_id, job.target)
            return StepResult(
                CopyState.DONE, f"{gone} served link(s) and feedback item(s) deleted", gone
            )
        return StepResult(CopyState.NOT_APPLICABLE, "traces hold no artifact")


def default_steps(
    repo: MemoryRecords,
    clock: Clock,
    releaser: ArtifactReleaser,
    index: SearchIndex | None = None,
    *,
    sessions: SessionStore,
    runs: RunStore,
    traces: TraceStore | None = None,
) -> list[PurgeStep]:
    """One handler per pipeline step, in the pipeline's order."""
    handlers: dict[str, PurgeStep] = {
        "artifacts": ArtifactsStep(repo, releaser),
        "primary": PrimaryStep(repo, clock),
        "versions": VersionsStep(repo, clock),
        "index": IndexStep(repo, index),
        "cache": CacheStep(),
        "sessions": SessionsStep(sessions),
        "runs": RunsStep(runs),
        "traces": TracesStep(repo, traces),
    }
    return [handlers[step.copy] for step in PURGE_PIPELINE]


class PurgeRunner:
    """Runs the purge of one job: the pipeline's steps in order, each retried by its
    policy. Safe to run again (resume) at any point: a copy already cleared is skipped.

    ``begin``, ``attempt``, ``fail`` and ``finish`` are also what the Step Functions tasks
    call, one per state, so both runners record the same history."""

    def __init__(
        self,
        repo: MemoryRecords,
        clock: Clock,
        steps: list[PurgeStep],
        *,
        pipeline: tuple[PipelineStep, ...] = PURGE_PIPELINE,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.repo = repo
        self.clock = clock
        self.handlers = {s.copy: s for s in steps}
        self.pipeline = pipeline
        self.sleep = sleep

    def run(self, tenant_id: str, deletion_id: str) -> DeletionJob:
        job = self.begin(tenant_id, deletion_id)
        if job.status is DeletionState.COMPLETED:
            return job
        for spec in self.pipeline:
            delays = spec.retry.delays()
            for attempt in range(len(delays) + 1):
                try:
                    self.attempt(job, spec.copy)
                    break
                except PurgeStepFailed as err:
                    if attempt == len(delays):
                        self.fail(tenant_id, deletion_id, spec.copy, str(err))
                        return self._reload(tenant_id, deletion_id)
                    self.sleep(delays[attempt])
        return self.finish(tenant_id, deletion_id)

    def unfinished(self, tenant_id: str | None = None) -> list[DeletionJob]:
        """Every logged deletion whose job has not reached COMPLETED, oldest first: one a
        crash interrupted (REQUESTED, BLOCKED, PURGING: its delete committed, its purge did
        not finish) or whose retries ran out (FAILED)."""
        jobs = []
        for entry in self.repo.deletion_log(tenant_id):
            job = self.repo.job(entry.tenant_id, entry.deletion_id)
            if job is not None and job.status is not DeletionState.COMPLETED:
                jobs.append(job)
        return jobs

    def load(self, tenant_id: str, deletion_id: str) -> DeletionJob:
        job = self.repo.job(tenant_id, deletion_id)
        if job is None:
            raise LookupError(deletion_id)
        return job

    def begin(self, tenant_id: str, deletion_id: str) -> DeletionJob:
        job = self.load(tenant_id, deletion_id)
        if job.status is not DeletionState.COMPLETED:
            self.repo.set_job_state(tenant_id, deletion_id, DeletionState.PURGING, self.clock.now())
        return job

    def attempt(self, job: DeletionJob, copy: str) -> None:
        """One try at one copy; raises ``PurgeStepFailed`` (recorded) when it fails."""
        current = next((c for c in job.copies if c.name == copy), None)
        if current is not None and current.status in (CopyState.DONE, CopyState.NOT_APPLICABLE):
            return
        step = self.handlers[copy]
        try:
            result = step.run(job)
        except Exception as err:
            reason = f"{type(err).__name__} in step '{copy}'"
            if isinstance(err, PurgeStepFailed):
                reason += f": {err}"
            self.repo.set_copy(
                job.tenant_id,
                job.deletion_id,
                copy,
                CopyState.PENDING,
                self.clock.now(),
                f"attempt failed ({reason}); retrying",
                attempt=True,
            )
            logger.warning(
                "purge attempt failed",
                extra={"deletion_id": job.deletion_id, "copy": copy, "error": type(err).__name__},
            )
            raise PurgeStepFailed(reason) from err
        self.repo.set_copy(
            job.tenant_id,
            job.deletion_id,
            copy,
            result.state,
            self.clock.now(),
            result.reason,
            attempt=True,
        )
        logger.info(
            "purge step done",
            extra={"deletion_id": job.deletion_id, "copy": copy, "count": result.count},
        )

    def fail(self, tenant_id: str, deletion_id: str, copy: str, reason: str) -> DeletionJob:
        """Retries are spent: the copy and the job are FAILED (the tombstone still blocks
        every read); deleting again, or ``memvault`` resume, runs the job again."""
        self.repo.set_copy(
            tenant_id,
            deletion_id,
            copy,
            CopyState.FAILED,
            self.clock.now(),
            f"{reason}; retries exhausted: deleting the memory again, restarting the local "
            "stack or `memvault resume` runs the job again",
        )
        self.repo.set_job_state(tenant_id, deletion_id, DeletionState.FAILED, self.clock.now())
        metrics.add_metric(name="PurgeFailed", unit="Count", value=1)
        logger.error("purge failed", extra={"deletion_id": deletion_id, "copy": copy})
        return self._reload(tenant_id, deletion_id)

    def finish(self, tenant_id: str, deletion_id: str) -> DeletionJob:
        """COMPLETED only when no copy is PENDING or FAILED."""
        final = self._reload(tenant_id, deletion_id)
        if final.status is DeletionState.COMPLETED:
            return final
        if all(c.status in (CopyState.DONE, CopyState.NOT_APPLICABLE) for c in final.copies):
            self.repo.set_job_state(
                tenant_id, deletion_id, DeletionState.COMPLETED, self.clock.now()
            )
            final = self._reload(tenant_id, deletion_id)
        return final

    def _reload(self, tenant_id: str, deletion_id: str) -> DeletionJob:
        return self.load(tenant_id, deletion_id)


def resume_unfinished(
    runner: PurgeRunner, launcher: PurgeLauncher, tenant_id: str | None = None
) -> list[DeletionJob]:
    """Launch the purge of every unfinished deletion again (what a process does when it
    starts: a crash may have cut a purge short, or lost a job queued for the background
    worker after its client had the 202; on AWS, what the scheduled sweeper does: a start
    lost after the commit, an execution whose retries ran out, one cut short between
    steps). Safe at any time: the runner skips the copies already cleared, and a job
    already running is not started twice (each launcher sees to that)."""
    jobs = runner.unfinished(tenant_id)
    for job in jobs:
        launcher.launch(job.tenant_id, job.deletion_id, resume=True)
    if jobs:
        logger.info("unfinished deletions resumed", extra={"count": len(jobs)})
    return jobs


class PurgeLauncher(Protocol):
    """Starts the purge of a recorded job: in-process locally, Step Functions on AWS."""

    def launch(self, tenant_id: str, deletion_id: str, *, resume: bool = False) -> None: ...


class InlinePurgeLauncher:
    """Runs the purge before the request returns (tests)."""

    def __init__(self, run: Callable[[str, str], object]) -> None:
        self._run = run

    def launch(self, tenant_id: str, deletion_id: str, *, resume: bool = False) -> None:
        self._run(tenant_id, deletion_id)


class BackgroundPurgeLauncher:
    """Local mode: the pipeline runs on a worker thread; the request returns at once and
    the job reaches COMPLETED by itself, as a Step Functions execution would."""

    def __init__(self, run: Callable[[str, str], object], workers: int = 2) -> None:
        self._run = run
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="purge")
        self._lock = threading.Lock()
        self._running: set[str] = set()

    def launch(self, tenant_id: str, deletion_id: str, *, resume: bool = False) -> None:
        with self._lock:
            if deletion_id in self._running:
                return  # a second start of a running job is a no-op, as on AWS
            self._running.add(deletion_id)
        self._pool.submit(self._guarded, tenant_id, deletion_id)

    def _guarded(self, tenant_id: str, deletion_id: str) -> None:
        try:
            self._run(tenant_id, deletion_id)
        except Exception:
            logger.exception("purge run crashed", extra={"deletion_id": deletion_id})
        finally:
            with self._lock:
                self._running.discard(deletion_id)

    def drain(self) -> None:
        """Wait for every purge started so far (tests, shutdown)."""
        self._pool.submit(lambda: None).result()
        while True:
            with self._lock:
                if not self._running:
                    return
            time.sleep(0.01)


class StepFunctionsPurgeLauncher:
    """AWS: one standard-workflow execution per attempt at a job, named after the
    deletion id (``del_…``, then ``del_…-2``, ``del_…-3`` …), so that every caller that
    launches the same job (the API's delete, a second delete, the scheduled sweeper)
    derives the same next name, and two of them racing are told apart by Step Functions
    (``ExecutionAlreadyExists``), never by a clock.

    A launch first reads how the job's newest execution went: one still running is left
    alone; one that ended (failed, timed out, aborted, or succeeded while the job is not
    COMPLETED: a crash between steps) is followed by the next name. After
    ``max_attempts`` executions the job is left to an operator: ``launch`` logs and counts
    ``PurgeAbandoned`` (alarmed) and starts nothing, so a copy that can never be cleared
    does not start executions forever. A closed name is never reused silently."""

    def __init__(
        self, client: Any, state_machine_arn: str, clock: Clock, *, max_attempts: int = 24
    ) -> None:
        self.client = client
        self.arn = state_machine_arn
        self.clock = clock
        self.max_attempts = max_attempts
        # arn:aws:states:<region>:<account>:stateMachine:<name>
        self._executions = state_machine_arn.replace(":stateMachine:", ":execution:", 1)

    @staticmethod
    def execution_name(deletion_id: str, attempt: int) -> str:
        return deletion_id if attempt == 1 else f"{deletion_id}-{attempt}"

    def _status(self, name: str) -> str | None:
        try:
            answer = self.client.describe_execution(executionArn=f"{self._executions}:{name}")
        except self.client.exceptions.ExecutionDoesNotExist:
            return None
        return str(answer["status"])

    def next_attempt(self, deletion_id: str) -> int | None:
        """The attempt to start now, or None while the newest execution still runs."""
        attempt = 1
        while (status := self._status(self.execution_name(deletion_id, attempt))) is not None:
            if status == "RUNNING":
                return None
            attempt += 1
        return attempt

    def launch(self, tenant_id: str, deletion_id: str, *, resume: bool = False) -> None:
        import json

        attempt = self.next_attempt(deletion_id)
        if attempt is None:
            return
        if attempt > self.max_attempts:
            metrics.add_metric(name="PurgeAbandoned", unit="Count", value=1)
            logger.error(
                "purge attempts exhausted; the job needs an operator",
                extra={"deletion_id": deletion_id, "attempts": attempt - 1},
            )
            return
        try:
            self.client.start_execution(
                stateMachineArn=self.arn,
                name=self.execution_name(deletion_id, attempt),
                input=json.dumps({"tenant_id": tenant_id, "deletion_id": deletion_id}),
            )
        except self.client.exceptions.ExecutionAlreadyExists:
            return  # another caller started this attempt first
        if attempt > 1:
            logger.info("purge relaunched", extra={"deletion_id": deletion_id, "attempt": attempt})
