"""The artifact metadata store's port: artifact rows, upload receipts, references and the
state changes of an artifact's life (STAGED → COMMITTED → DELETED → removed).

The bytes live in an ``ObjectStore`` (``ports/objects.py``); this store holds what is
exact about them: the declared size and sha256, the pinned object version, and the
references of the memories and checkpoints that name the artifact. A reference is added
inside the transaction of the record that makes it (each adapter exports a module-level
``add_reference`` for the memory and run stores of its own kind), so a record never
points at an upload that is not committed.

Every state change is conditional and atomic in the adapter; a refused condition raises
``ConditionFailed`` naming its ``Conflict``. Expiry is checked on read: an upload receipt
past its ``expires_at`` is absent, whatever the store's own expiry has done so far.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from memvault_wire.artifact import ArtifactState
from memvault_wire.memory import Sensitivity


@dataclass(frozen=True)
class ArtifactRecord:
    tenant_id: str
    subject_id: str
    artifact_id: str
    media_type: str
    size_bytes: int
    sha256: str
    state: ArtifactState
    sensitivity: Sensitivity
    created_at: datetime
    created_by: str
    name: str | None = None
    retention_days: int | None = None
    #: Epoch seconds: a STAGED upload not committed by then is swept (never the store's
    #: own TTL: that would drop the row and leave the object behind). On a DELETED row:
    #: when its upload window closed (no upload URL was issued after it).
    staged_until: int | None = None
    #: The object version the commit pinned; downloads serve exactly this one.
    version: str | None = None
    committed_at: datetime | None = None
    #: Epoch seconds: the end of the artifact's retention, when it asked for one.
    retain_until: int | None = None
    #: ``memory:<chain_id>``, ``run:<subject_id>/<run_id>``: the records that keep the
    #: artifact alive.
    referenced_by: frozenset[str] = field(default_factory=frozenset)
    #: The subject's epoch the upload was started under (``None`` for one started before
    #: artifacts carried it): a forget retires it, and the artifact with it. Staging is
    #: conditioned on it (``EPOCH``), and a reference only counts on an artifact of the
    #: referencing record's epoch.
    subject_epoch: int | None = None


@dataclass(frozen=True)
class UploadReceipt:
    """One start request's outcome: the same ``request_id`` replays it while it lives."""

    request_id: str
    artifact_id: str
    #: The request's payload hash: the same id with another payload is refused.
    fingerprint: str
    #: Epoch seconds; the receipt lives as long as its upload window.
    expires_at: int


class ArtifactStore(Protocol):
    """Artifact metadata, partitioned by (tenant, subject)."""

    # -- reads (consistent)

    def artifact(self, tenant_id: str, subject_id: str, artifact_id: str) -> ArtifactRecord | None:
        """The artifact's row in whatever state (DELETED included), or ``None``."""
        ...

    def receipt(
        self, tenant_id: str, subject_id: str, request_id: str, now: datetime
    ) -> UploadReceipt | None:
        """The unexpired receipt of a start request, or ``None``."""
        ...

    def sweepable(self, now: datetime) -> Iterator[ArtifactRecord]:
        """Every tenant's STAGED artifacts whose upload window closed before ``now``, and
        DELETED ones (their objects may remain). For the sweeper only: a full scan."""
        ...

    # -- writes (each atomic)

    def stage(self, record: ArtifactRecord, receipt: UploadReceipt, now: datetime) -> None:
        """Create the STAGED artifact with its receipt. ``IDEMPOTENCY``: an unexpired
        receipt holds the request id (an expired one is replaced); ``EXISTS``: the
        artifact id is taken; ``EPOCH``: the subject's epoch is no longer the record's
        ``subject_epoch`` (forgotten meanwhile)."""
        ...

    def commit(
        self,
        tenant_id: str,
        subject_id: str,
        artifact_id: str,
        *,
        version: str,
        at: datetime,
        retain_until: int | None,
    ) -> None:
        """STAGED → COMMITTED at the pinned object version. ``ABSENT``: no such artifact;
        ``STATE``: it is no longer STAGED (committed by another, or swept)."""
        ...

    def add_reference(
        self,
        tenant_id: str,
        subject_id: str,
        artifact_id: str,
        ref: str,
        sha256: str | None = None,
    ) -> None:
        """Count a reference on its own (idempotent). ``ARTIFACT``: the artifact is not
        COMMITTED, or has another sha256 than the one given. Memories and checkpoints add
        theirs inside their own transactions with the adapter's ``add_reference``."""
        ...

    def mark_deleted(
        self, tenant_id: str, subject_id: str, artifact_id: str, *, at: datetime | None = None
    ) -> None:
        """→ DELETED, while nothing references it. ``ABSENT``: no such artifact, or it is
        DELETED already; ``REFERENCED``: a record references it. With ``at`` (the delete's
        time), ``staged_until`` becomes it: the upload window closed then, and no upload
        URL was issued after it."""
        ...

    def release(self, tenant_id: str, subject_id: str, artifact_id: str, ref: str) -> bool:
        """Drop one reference (idempotent); when it was the last of a COMMITTED artifact,
        the artifact becomes DELETED. Returns whether this call made it DELETED (its
        objects are then the caller's to remove)."""
        ...

    def claim_expired(
        self, tenant_id: str, subject_id: str, artifact_id: str, now: datetime
    ) -> bool:
        """STAGED with its window closed before ``now`` → DELETED; False when it is not
        (a commit that won the race keeps its artifact)."""
        ...

    def remove(self, tenant_id: str, subject_id: str, artifact_id: str) -> bool:
        """Remove a DELETED artifact's row, once its objects are gone; False when there is
        no DELETED row (absent, or in another state: never removed then)."""
        ...

    def forget_subject(
        self,
        tenant_id: str,
        subject_id: str,
        before: datetime,
        *,
        retired_epoch: int | None = None,
    ) -> list[str]:
        """Forgetting a subject at ``before``, retiring ``retired_epoch``: every artifact of
        theirs the forget covers (started under that epoch or earlier; one without an
        epoch, made at or before ``before``: ``purged_by``) becomes DELETED, referenced or
        not (its references dropped), and the upload receipts of those go. Artifacts
        made after the forget are another life of the subject and stay. Returns the ids
        of the forget's artifact rows (DELETED ones included), whose objects the caller
        removes before removing the rows. The rows it makes DELETED keep ``before`` as
        ``staged_until``: their upload windows closed then."""
        ...
