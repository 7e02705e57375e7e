"""Deletion jobs and the purge steps that clear every copy after the tombstone.

The tombstone (written with the job, in one transaction) already blocks reads; the
steps here make the data physically gone, copy by copy, each idempotent by
(deletion id, copy). Later copies (index, cache, artifacts, sessions) add their own
steps to ``PURGE_STEPS``; the list order is the order the pipeline runs in.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from memvault.clock import Clock
from memvault.models.memory import CopyState, DeletionJob, DeletionScope, DeletionState
from memvault.observability import logger
from memvault.storage.dynamo import TransactionConflict
from memvault.storage.memory_repo import Chain, MemoryRepository

#: Copies a new job starts with, and the state each starts in.
INITIAL_COPIES: dict[str, tuple[CopyState, str | None]] = {
    "artifacts": (CopyState.PENDING, None),
    "primary": (CopyState.PENDING, None),
    "versions": (CopyState.PENDING, None),
    "idempotency": (
        CopyState.NOT_APPLICABLE,
        "idempotency records keep a request hash and ids, never a copy of the content",
    ),
}


@dataclass(frozen=True)
class StepResult:
    state: CopyState
    reason: str | None = None
    count: int = 0


class PurgeStep(Protocol):
    copy: str

    def run(self, job: DeletionJob) -> StepResult: ...


def _chains_in_scope(repo: MemoryRepository, job: DeletionJob) -> tuple[list[Chain], int | None]:
    """The chains a job covers; for a subject job also the retired epoch."""
    if job.scope is DeletionScope.MEMORY:
        chain = repo.chain(job.tenant_id, job.subject_id, job.target)
        return ([chain] if chain else []), None
    retired = int(job.target.removeprefix("epoch:"))
    _, chains = repo.subject_items(job.tenant_id, job.subject_id)
    return [c for c in chains if c.subject_epoch <= retired], retired


class ArtifactReleaser(Protocol):
    def release(self, tenant_id: str, subject_id: str, artifact_id: str, ref: str) -> bool: ...

    def forget_subject(self, tenant_id: str, subject_id: str) -> int: ...


class ArtifactsStep:
    """Release the references the chains in scope hold; an artifact whose last reference
    goes is deleted with all its object versions. Runs before the versions are purged,
    while they still name their artifacts."""

    copy = "artifacts"

    def __init__(self, repo: MemoryRepository, releaser: ArtifactReleaser) -> None:
        self.repo = repo
        self.releaser = releaser

    def run(self, job: DeletionJob) -> StepResult:
        if job.scope is DeletionScope.SUBJECT:
            gone = self.releaser.forget_subject(job.tenant_id, job.subject_id)
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

    def __init__(self, repo: MemoryRepository, clock: Clock) -> None:
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
                bool(chain.pointer_sk)
                and self.repo.pointer(job.tenant_id, job.subject_id, chain.pointer_sk or "")
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
            except TransactionConflict:
                fresh = self.repo.chain(job.tenant_id, job.subject_id, chain.chain_id)
                if fresh is None or not fresh.live:
                    return fresh or chain
                chain = fresh
        raise RuntimeError("chain kept changing while it was being tombstoned")


class VersionsStep:
    """Remove every version of every chain in scope, and any stray version of a retired epoch."""

    copy = "versions"

    def __init__(self, repo: MemoryRepository, clock: Clock) -> None:
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


def default_steps(
    repo: MemoryRepository, clock: Clock, releaser: ArtifactReleaser
) -> list[PurgeStep]:
    return [ArtifactsStep(repo, releaser), PrimaryStep(repo, clock), VersionsStep(repo, clock)]


class PurgeRunner:
    """Runs the purge steps of one job in order; safe to run again (resume) at any point."""

    def __init__(self, repo: MemoryRepository, clock: Clock, steps: list[PurgeStep]) -> None:
        self.repo = repo
        self.clock = clock
        self.steps = steps

    def run(self, tenant_id: str, deletion_id: str) -> DeletionJob:
        job = self.repo.job(tenant_id, deletion_id)
        if job is None:
            raise LookupError(deletion_id)
        if job.status is DeletionState.COMPLETED:
            return job
        self.repo.set_job_state(tenant_id, deletion_id, DeletionState.PURGING, self.clock.now())
        done = {
            c.name for c in job.copies if c.status in (CopyState.DONE, CopyState.NOT_APPLICABLE)
        }
        for step in self.steps:
            if step.copy in done:
                continue
            try:
                result = step.run(job)
            except Exception as err:
                reason = f"{type(err).__name__} in step '{step.copy}'; resume the job to retry"
                self.repo.set_copy(
                    tenant_id, deletion_id, step.copy, CopyState.FAILED, self.clock.now(), reason
                )
                self.repo.set_job_state(
                    tenant_id, deletion_id, DeletionState.FAILED, self.clock.now()
                )
                logger.warning(
                    "purge step failed",
                    extra={
                        "deletion_id": deletion_id,
                        "copy": step.copy,
                        "error": type(err).__name__,
                    },
                )
                return self._reload(tenant_id, deletion_id)
            self.repo.set_copy(
                tenant_id, deletion_id, step.copy, result.state, self.clock.now(), result.reason
            )
            logger.info(
                "purge step done",
                extra={
                    "deletion_id": deletion_id,
                    "copy": step.copy,
                    "count": result.count,
                },
            )
        final = self._reload(tenant_id, deletion_id)
        if all(c.status in (CopyState.DONE, CopyState.NOT_APPLICABLE) for c in final.copies):
            self.repo.set_job_state(
                tenant_id, deletion_id, DeletionState.COMPLETED, self.clock.now()
            )
            final = self._reload(tenant_id, deletion_id)
        return final

    def _reload(self, tenant_id: str, deletion_id: str) -> DeletionJob:
        job = self.repo.job(tenant_id, deletion_id)
        assert job is not None
        return job


class PurgeLauncher(Protocol):
    """Starts the purge of a recorded job: in-process locally, Step Functions on AWS."""

    def launch(self, tenant_id: str, deletion_id: str) -> None: ...


class InlinePurgeLauncher:
    def __init__(self, run: Callable[[str, str], object]) -> None:
        self._run = run

    def launch(self, tenant_id: str, deletion_id: str) -> None:
        self._run(tenant_id, deletion_id)
