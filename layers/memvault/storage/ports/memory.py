"""The memory store's port: version chains, canonical pointers, idempotency, subject
epochs, deletion jobs and the audit trail, as domain operations.

Every operation that changes what may be read is atomic in the adapter (one DynamoDB
transaction, one SQLite transaction): a crash at any point leaves all of it or none of
it. A refused condition raises ``ConditionFailed`` naming its ``Conflict`` causes.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol

from memvault.clock import covered_by
from memvault_wire.memory import CopyState, DeletionJob, DeletionState, Memory

LIVE = "live"
TOMBSTONED = "deleted"


def fact_id(kind: str, canonical_key: str, scope: Mapping[str, str]) -> str:
    """The identity of a fact: (kind, canonical key, scope). Different scopes are
    different facts; the canonical pointer is keyed by this digest."""
    identity = json.dumps([kind, canonical_key, sorted(scope.items())], ensure_ascii=False)
    return hashlib.sha256(identity.encode()).hexdigest()[:40]


#: Keyed chains (those with a canonical key) have ids of this form, which name their fact
#: and a generation: ``chk_<fact digest, 24 hex>_<generation, 6 digits>_<8 random hex>``.
#: A fact's first chain is generation 0; a chain that replaces a dead one (deleted, or of a
#: forgotten epoch) is the next generation. An adapter may key the chain head by fact and
#: generation, so that claiming the fact and creating the head are one conditional write.
KEYED_CHAIN_PREFIX = "chk_"
_FACT_DIGITS = 24
_GENERATION_DIGITS = 6


def keyed_chain_id(fact: str, replacing: str | None, fresh_id: str) -> str:
    """The id of a new chain for ``fact``: the generation after ``replacing`` (the chain the
    fact's pointer names now, dead) or 0, made unique by ``fresh_id``'s random part."""
    generation = 0
    if replacing is not None and replacing.startswith(KEYED_CHAIN_PREFIX):
        generation = chain_generation(replacing) + 1
    if generation >= 10**_GENERATION_DIGITS:
        raise ValueError("a fact's chain generations are exhausted")
    suffix = hashlib.sha256(fresh_id.encode()).hexdigest()[:8]
    return f"{keyed_chain_prefix(fact)}{generation:0{_GENERATION_DIGITS}d}_{suffix}"


def keyed_chain_prefix(fact: str) -> str:
    """What every chain id of ``fact`` starts with."""
    return f"{KEYED_CHAIN_PREFIX}{fact[:_FACT_DIGITS]}_"


def chain_generation(chain_id: str) -> int:
    """The generation of a keyed chain id."""
    return int(chain_id.split("_")[2])


def keyed_chain_slot(chain_id: str) -> str | None:
    """A keyed chain id without its random part (fact and generation), else ``None``."""
    if not chain_id.startswith(KEYED_CHAIN_PREFIX):
        return None
    parts = chain_id.split("_")
    if len(parts) != 4:
        return None
    return "_".join(parts[:3])


def request_memory_id(tenant_id: str, subject_id: str, request_id: str) -> str:
    """The memory id an idempotent write of ``request_id`` creates: one memory per
    (tenant, subject, request id) is then one item per id, and a retry finds it."""
    identity = json.dumps(["memory-write", tenant_id, subject_id, request_id])
    return f"mem_{hashlib.sha256(identity.encode()).hexdigest()[:32]}"


@dataclass(frozen=True)
class Chain:
    """Head of a version chain: the compare-and-set point and the tombstone."""

    chain_id: str
    state: str
    current_memory_id: str
    current_version: int
    versions: list[str]
    #: The fact this chain holds the pointer of (``fact_id``), if it has a canonical key.
    fact: str | None
    subject_epoch: int
    deletion_id: str | None
    #: The chain's expiry (epoch seconds): never earlier than its longest-lived version's.
    ttl: int | None = None
    #: Every artifact any version of the chain referenced.
    artifact_ids: tuple[str, ...] = ()

    @property
    def live(self) -> bool:
        return self.state == LIVE


@dataclass(frozen=True)
class IdempotencyRecord:
    request_id: str
    payload_hash: str
    memory_id: str


@dataclass(frozen=True)
class AuditEvent:
    """Ids and counts only: the audit trail never holds memory content."""

    event_id: str
    at: datetime
    action: str
    actor: str
    tenant_id: str
    subject_id: str
    memory_id: str | None = None
    chain_id: str | None = None
    version: int | None = None
    deletion_id: str | None = None
    request_id: str | None = None
    #: The decision behind it (write trace): rule names, PII classes, versions, the
    #: feedback or recall that prompted it. Names and ids only, never matched text.
    detail: Mapping[str, Any] | None = None


@dataclass(frozen=True)
class DeletionLogEntry:
    """What a restore from backup replays (ids, who, when; no content, no expiry)."""

    deletion_id: str
    tenant_id: str
    subject_id: str
    scope: str
    target: str
    requested_by: str
    requested_at: datetime


@dataclass(frozen=True)
class StoredVersion:
    """A version as recall re-validates it: the memory (``None`` once purged to an
    ids-only tombstone) and the version that replaced it, if any."""

    memory_id: str
    chain_id: str
    memory: Memory | None
    superseded_by: str | None


@dataclass(frozen=True)
class NewVersion:
    """Everything one version write commits, atomically."""

    memory: Memory
    #: The chain's current version before this write; ``None`` starts a new chain.
    expected_version: int | None
    previous: Memory | None
    #: The fact whose pointer to claim, and the chain it must point to now (or None).
    fact: str | None
    fact_expected_chain: str | None
    #: With a record, ``memory.memory_id`` must be ``request_memory_id`` of its request id.
    idempotency: IdempotencyRecord | None
    idempotency_expires_at: datetime | None
    audit: AuditEvent
    audit_expires_at: datetime
    #: When the chain began earlier: its TTL so far (the new one is never earlier).
    chain_ttl: int | None = None
    #: The subject's last forget time, read with the epoch: an artifact the version
    #: names must have been made after it (one made before belongs to that forget).
    artifacts_after: datetime | None = None

    @property
    def head_ttl(self) -> int:
        """Chain head and pointer live as long as the longest-lived version, so that no
        version is ever left without its chain (reads and deletes go through it)."""
        return max(int(self.memory.expires_at.timestamp()), self.chain_ttl or 0)


@dataclass(frozen=True)
class ListFilter:
    statuses: Sequence[str]
    kind: str | None = None
    canonical_key: str | None = None
    tag: str | None = None


@dataclass(frozen=True, slots=True)
class IndexStatusUpdate:
    """The index status the indexer records on one version, if it is still current."""

    tenant_id: str
    subject_id: str
    memory_id: str
    status: str
    version: int
    indexed_version: int
    embedding_model: str
    at: datetime
    index_status: str


@dataclass(frozen=True)
class ForgetState:
    """A subject's epoch and its last forget's time, read together: what sessions, runs
    and artifacts ask so that a forget covers them at once, before its purge.

    Each of them is written under the subject's epoch, by a write whose own transaction
    checks that the epoch is still that one, as a memory's is: a forget retires the
    epoch in one conditional write, so a write that reaches the store after it fails its
    condition, and everything written before it is under a retired epoch."""

    epoch: int
    forgotten_at: datetime | None

    def covers(self, epoch: int | None, made_at: datetime) -> bool:
        """Whether a record written under ``epoch`` (at ``made_at``) is a forget's: its
        epoch was retired since. A record kept before records carried their epoch
        (``None``) is a forget's when it was made at or before the last forget."""
        if epoch is not None:
            return epoch < self.epoch
        return covered_by(made_at, self.forgotten_at)


def purged_by(
    epoch: int | None, made_at: datetime, *, retired_epoch: int | None, before: datetime
) -> bool:
    """Whether a forget's purge takes a record written under ``epoch`` at ``made_at``: the
    forget retired ``retired_epoch`` at ``before``. A record kept before records carried
    their epoch (or a purge that names none) goes by its time instead."""
    if epoch is not None and retired_epoch is not None:
        return epoch <= retired_epoch
    return covered_by(made_at, before)


class SubjectForgets(Protocol):
    """When a subject was last forgotten: what sessions, runs and artifacts ask so that a
    forget covers them at once, before its purge (the memory store answers it)."""

    def forgotten_at(self, tenant_id: str, subject_id: str) -> datetime | None: ...

    def forget_state(self, tenant_id: str, subject_id: str) -> ForgetState:
        """The subject's epoch and last forget time, in one consistent read."""
        ...


class MemoryStore(Protocol):
    """Long-term memory's source of truth."""

    def reachable(self) -> bool: ...

    # -- reads (consistent)

    def subject_epoch(self, tenant_id: str, subject_id: str) -> int: ...

    def forgotten_at(self, tenant_id: str, subject_id: str) -> datetime | None:
        """When the subject was last forgotten (its latest forget's ``requested_at``), or
        None. Sessions, runs and artifacts made at or before it are that forget's: served
        to no one from then on, and removed by its purge."""
        ...

    def forget_state(self, tenant_id: str, subject_id: str) -> ForgetState:
        """The subject's epoch and ``forgotten_at``, in one consistent read."""
        ...

    def locate(self, tenant_id: str, subject_id: str, memory_id: str) -> tuple[str, int] | None:
        """The chain and subject epoch of a version, purged or not."""
        ...

    def version(self, tenant_id: str, subject_id: str, memory_id: str) -> Memory | None:
        """A version with its content; ``None`` when absent or purged."""
        ...

    def versions(self, tenant_id: str, subject_id: str, memory_ids: list[str]) -> list[Memory]: ...

    def chain(self, tenant_id: str, subject_id: str, chain_id: str) -> Chain | None: ...

    def pointer(self, tenant_id: str, subject_id: str, fact: str) -> str | None:
        """The chain the fact's canonical pointer names."""
        ...

    def pointers(self, tenant_id: str, subject_id: str, facts: Sequence[str]) -> list[str]:
        """The chains the facts' pointers name (those that have one)."""
        ...

    def revalidation(
        self,
        tenant_id: str,
        subject_id: str,
        memory_ids: Sequence[str],
        chain_ids: Sequence[str],
    ) -> tuple[int, dict[str, StoredVersion], list[Chain]]:
        """One consistent read for recall: the subject epoch, the named versions (by id)
        and the named chain heads."""
        ...

    def idempotency(
        self, tenant_id: str, subject_id: str, request_id: str
    ) -> IdempotencyRecord | None: ...

    def list_versions(
        self,
        tenant_id: str,
        subject_id: str,
        *,
        now: datetime,
        where: ListFilter,
        cursor: str | None,
        page_size: int,
    ) -> tuple[list[Memory], str | None]:
        """One page of unexpired versions with the given statuses, oldest id first; the
        cursor is opaque and owned by the adapter. The caller still applies read checks."""
        ...

    def subject_items(self, tenant_id: str, subject_id: str) -> tuple[list[Memory], list[Chain]]:
        """Every version (with content) and chain head of a subject (export, forget)."""
        ...

    def subject_version_ids(self, tenant_id: str, subject_id: str) -> list[tuple[str, str]]:
        """(memory id, chain id) of every version row of a subject, purged or not."""
        ...

    def rebuild_records(self, tenant_id: str | None = None) -> Iterator[dict[str, Any]]:
        """Every version record and tombstoned chain head (``type: chain``, with its
        tenant and subject), read in pages, for an index rebuild."""
        ...

    # -- writes (each atomic)

    def commit_version(self, new: NewVersion) -> None:
        """Idempotency record, new version, chain head (compare-and-set), pointer
        (compare-and-set), old version superseded, artifact reference, subject epoch
        unchanged, audit event: all or nothing."""
        ...

    def tombstone_chain(
        self,
        tenant_id: str,
        subject_id: str,
        chain: Chain,
        deletion_id: str,
        at: datetime,
        *,
        release_pointer: bool,
        job: DeletionJob | None,
        audit: AuditEvent | None,
        audit_expires_at: datetime | None,
    ) -> None:
        """Block every version of a chain at once (head tombstoned at its current
        version, current version marked deleted, pointer released if it still names the
        chain), with the deletion job, its log entry and the audit event."""
        ...

    def retire_subject_epoch(
        self,
        tenant_id: str,
        subject_id: str,
        epoch: int,
        job: DeletionJob,
        audit: AuditEvent,
        audit_expires_at: datetime,
    ) -> None:
        """Forget a subject at once: the epoch moves from ``epoch`` to ``epoch + 1``."""
        ...

    def raise_epoch(
        self, tenant_id: str, subject_id: str, above: int, deletion_id: str, at: datetime
    ) -> None:
        """Move the subject's epoch past ``above`` unless it is already, and its forget
        time to ``at`` unless it is later already (restore replay)."""
        ...

    def purge_version(
        self,
        tenant_id: str,
        subject_id: str,
        memory_id: str,
        chain_id: str,
        deletion_id: str,
        at: datetime,
    ) -> None:
        """Replace a version by an ids-only tombstone (idempotent; absent stays absent)."""
        ...

    def record_index_statuses(self, updates: Sequence[IndexStatusUpdate]) -> list[bool]:
        """Record each update's index status on its version while the version still has
        the update's ``status`` at its ``version`` and no newer index version was
        recorded; one answer per update, False where it moved on. (Batched: the indexer
        records a whole batch at once, in one transaction where the store has them.)"""
        ...


class DeletionJobs(Protocol):
    def job(self, tenant_id: str, deletion_id: str) -> DeletionJob | None: ...

    def put_job(self, job: DeletionJob) -> None:
        """Record a job that commits with no other change (an artifact deletion)."""
        ...

    def set_copy(
        self,
        tenant_id: str,
        deletion_id: str,
        copy: str,
        state: CopyState,
        at: datetime,
        reason: str | None = None,
        *,
        attempt: bool = False,
    ) -> None: ...

    def set_job_state(
        self, tenant_id: str, deletion_id: str, state: DeletionState, at: datetime
    ) -> None: ...


class AuditLog(Protocol):
    def events(self, tenant_id: str, subject_id: str) -> list[AuditEvent]: ...

    def deletion_log(self, tenant_id: str | None) -> list[DeletionLogEntry]: ...


class MemoryRecords(MemoryStore, DeletionJobs, AuditLog, Protocol):
    """The three as one adapter: a delete commits its tombstone, its job and its log entry
    in one transaction, so they cannot live in separate stores."""
