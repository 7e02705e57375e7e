"""The run store's port: a run's current checkpoint (the compare-and-set point), its
immutable version history, its operation records and its event receipts, as domain
operations.

Every write is atomic in the adapter (one DynamoDB transaction, one SQLite transaction).
A refused condition raises ``ConditionFailed`` naming its ``Conflict`` causes; nothing of
the operation is written then. The service keeps the rules (the declared state machine,
scopes, the subject check, payload bounds); the store keeps the conditions that make them
exact under concurrency.

Expiry is checked on read: a record past its ``ttl`` (epoch seconds) is never returned,
whatever the store's own expiry has deleted so far.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault_wire.run import ArtifactRef, Checkpoint, Operation, OperationStatus


def run_key(subject_id: str, run_id: str) -> str:
    """Where a run is kept: under its subject. Callers choose run ids, so an id is unique
    per subject, not per tenant; otherwise creating a run whose id another subject holds
    would answer 409 and tell the caller that run exists. Neither id may hold ``/``, so
    the key is unambiguous, and never equal to a bare id (runs kept before ids were
    scoped are found under their bare id; see ``RunService``)."""
    return f"{subject_id}/{run_id}"


def run_reference(run_id: str) -> str:
    """How a run is named among an artifact's references."""
    return f"run:{run_id}"


def live(ttl: int | None, now: datetime) -> bool:
    """Whether a record with this expiry may still be served at ``now``."""
    return ttl is None or ttl > int(now.timestamp())


@dataclass(frozen=True)
class SubjectEpoch:
    """A write's condition: ``subject_id``'s epoch is still ``epoch`` (no forget since).
    A run's creation and advances take it from their checkpoint (``subject_epoch``)."""

    subject_id: str
    epoch: int


def epoch_of(cp: Checkpoint) -> SubjectEpoch | None:
    """The condition a write to ``cp``'s run commits on: its subject's epoch is still the
    run's (``None`` for a checkpoint that carries none: no condition)."""
    return None if cp.subject_epoch is None else SubjectEpoch(cp.subject_id, cp.subject_epoch)


@dataclass(frozen=True)
class StoredRun:
    """A run's current checkpoint (``operations`` left empty) as stored."""

    checkpoint: Checkpoint
    #: The digest of the create request: a retried create with the same payload is the
    #: same run.
    fingerprint: str | None
    #: Set once the run has finished: when every record of the run expires.
    ttl: int | None = None


@dataclass(frozen=True)
class EventReceipt:
    """Proof that an external event was delivered, written with its effect."""

    event_id: str
    type: str
    fingerprint: str
    applied: bool
    received_at: datetime
    #: The run's version once the event was handled (the new one when it applied).
    version: int
    ttl: int | None = None


@dataclass(frozen=True)
class Advancement:
    """One new version of a run, committed atomically: the head by compare-and-set, the
    version in the history, a reference counted on each newly named artifact, and the
    receipt of the event that caused it, if any."""

    #: The new checkpoint: its version is ``expected_version + 1``.
    checkpoint: Checkpoint
    expected_version: int
    #: Artifacts this version names and no earlier one did; each must be committed for
    #: the run's subject with the given sha256.
    new_references: Sequence[ArtifactRef] = ()
    receipt: EventReceipt | None = None
    #: The run's retention once this version ends it (head, history, receipt).
    ttl: int | None = None
    #: The subject's last forget time: a newly named artifact must be made after it
    #: (one made at or before it belongs to that forget).
    artifacts_after: datetime | None = None


class ArtifactsNotCommitted(ConditionFailed):
    """``Conflict.ARTIFACT``, naming the artifacts that are not committed with the
    expected digest (and any other cause refused at the same time)."""

    def __init__(self, artifact_ids: Iterable[str], *more: Conflict) -> None:
        super().__init__(Conflict.ARTIFACT, *more)
        self.artifact_ids = tuple(sorted(set(artifact_ids)))


@dataclass(frozen=True)
class RunsForgotten:
    runs: int
    records: int


class RunStore(Protocol):
    """Run state's source of truth. Every key is led by the tenant."""

    # -- reads (consistent; expired records are absent)

    def head(self, tenant_id: str, run_id: str, *, now: datetime) -> StoredRun | None: ...

    def version(
        self, tenant_id: str, run_id: str, version: int, *, now: datetime
    ) -> Checkpoint | None:
        """One past version exactly as it was committed."""
        ...

    def operations(self, tenant_id: str, run_id: str, *, now: datetime) -> list[Operation]:
        """Every recorded operation of the run, by operation id."""
        ...

    def operation(
        self, tenant_id: str, run_id: str, operation_id: str, *, now: datetime
    ) -> Operation | None: ...

    def receipt(
        self, tenant_id: str, run_id: str, event_id: str, *, now: datetime
    ) -> EventReceipt | None: ...

    def receipts(
        self,
        tenant_id: str,
        run_id: str,
        *,
        now: datetime,
        cursor: str | None = None,
        limit: int = 100,
    ) -> tuple[list[EventReceipt], str | None]:
        """One page of the run's event receipts, by event id (the order both stores keep
        them in): at most ``limit``, those after ``cursor``. The cursor returned is the
        event id the page stopped after, None when no receipt follows it (so a page is
        never followed by an empty one). A receipt holds no payload: none is stored."""
        ...

    # -- writes (each atomic)

    def create(self, tenant_id: str, checkpoint: Checkpoint, fingerprint: str) -> None:
        """The run's first version: head and history. ``Conflict.EXISTS`` when any record
        of a run with this id is still kept (expired or not); ``Conflict.EPOCH`` when the
        subject's epoch is no longer the checkpoint's ``subject_epoch`` (every write of a
        run below is conditioned so, when its checkpoint or ``epoch`` gives one)."""
        ...

    def advance(self, tenant_id: str, step: Advancement) -> None:
        """``Conflict.VERSION`` when the head is not at ``expected_version`` (or absent);
        ``ArtifactsNotCommitted`` when a new reference is refused; ``Conflict.IDEMPOTENCY``
        when the receipt's event was recorded meanwhile. Causes refused together are
        raised together."""
        ...

    def record_event(
        self,
        tenant_id: str,
        run_id: str,
        receipt: EventReceipt,
        *,
        at_version: int,
        epoch: SubjectEpoch | None = None,
    ) -> None:
        """The receipt of an event that changes nothing, while the run is still at
        ``at_version`` (``Conflict.VERSION`` otherwise); ``Conflict.IDEMPOTENCY`` when the
        event was recorded already."""
        ...

    def put_operation(
        self,
        tenant_id: str,
        run_id: str,
        operation: Operation,
        *,
        expected: OperationStatus | None,
        ttl: int | None = None,
        epoch: SubjectEpoch | None = None,
    ) -> None:
        """Record an operation's status: a new one when ``expected`` is None
        (``Conflict.EXISTS`` if recorded meanwhile), else only while it is still
        ``expected`` (``Conflict.STATE``)."""
        ...

    def retain(self, tenant_id: str, run_id: str, ttl: int) -> int:
        """Give every record of the run that has no expiry yet this one (a finished run's
        history, operations and receipts expire with it); idempotent. Returns how many
        records changed."""
        ...

    def forget_subject(
        self,
        tenant_id: str,
        subject_id: str,
        before: datetime,
        *,
        retired_epoch: int | None = None,
    ) -> RunsForgotten:
        """Delete every record of every run of the subject the forget covers (created under
        an epoch at or below ``retired_epoch``; one without an epoch, created at or before
        ``before``: ``purged_by``), and of any run of theirs left without its head; runs
        created after the forget stay. Idempotent."""
        ...
