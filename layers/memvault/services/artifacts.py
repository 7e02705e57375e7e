"""Artifacts: staged uploads straight to the object store under the tenant's key,
committed only when the stored bytes match the declared size and sha256, read by pinned
version, reference-counted with the memories and checkpoints that name them.

The metadata (``ArtifactStore``) and the bytes (``ObjectStore``) are two ports; this
service holds the rules: scopes, limits and media types, the upload window, what commit
checks, who may read, and that an artifact lives while anything references it. Objects
are addressed ``<tenant>/<subject>/<artifact_id>`` and encrypted under the tenant's key
with the encryption context ``{"tenant_id", "artifact_id"}``.

An upload URL dies with its artifact's commit and with its deletion. The local object
server asks before and after it stores a PUT (``upload_open``, ``settle_upload``). A
presigned S3 PUT cannot be revoked, so a deleted artifact's row stays (DELETED, served to
no one) until every upload URL issued for it has expired, and each sweep until then
removes whatever arrived under its key (``_remove_when_done``): nothing written through
an old URL outlives the sweep after its expiry. After a commit, a PUT through a URL
still valid on S3 adds a version that is never served (downloads are pinned to the
committed one) and goes with the artifact.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from datetime import datetime, timedelta
from typing import Protocol

from memvault.clock import Clock, IdSource, made_after_forget
from memvault.config import Settings
from memvault.models.access import AccessContext, Scope
from memvault.observability import logger
from memvault.policy.pii import find_pii, refuse_personal_ids
from memvault.policy.secrets import refuse_secrets
from memvault.storage.ports.artifacts import ArtifactRecord, ArtifactStore, UploadReceipt
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.ports.memory import ForgetState
from memvault.storage.ports.objects import ObjectRef, ObjectStore
from memvault_wire.artifact import (
    Artifact,
    ArtifactOut,
    ArtifactState,
    Download,
    StartUpload,
    Upload,
)
from memvault_wire.errors import (
    ArtifactReferenced,
    ChecksumMismatch,
    ConsentRequired,
    Forbidden,
    IdempotencyKeyReused,
    MediaTypeNotAllowed,
    NotFound,
    PayloadTooLarge,
    SecretDetected,
    UploadIncomplete,
    VersionConflict,
)
from memvault_wire.memory import (
    CopyState,
    CopyStatus,
    DeletionJob,
    DeletionScope,
    DeletionState,
    Sensitivity,
)

_NOT_FOUND = "no such artifact for this subject"
#: Seconds past an upload URL's expiry that the service still expects a PUT through it:
#: the clock skew between the signer and the object store.
URL_CLOCK_SKEW = 300


class DeletionJobRecorder(Protocol):
    """Where an artifact's deletion job is recorded, and when the subject was last
    forgotten (the memory store's deletion jobs and subject records)."""

    def put_job(self, job: DeletionJob) -> None: ...

    def forgotten_at(self, tenant_id: str, subject_id: str) -> datetime | None: ...

    def forget_state(self, tenant_id: str, subject_id: str) -> ForgetState: ...


def _ref(record: ArtifactRecord) -> ObjectRef:
    return ObjectRef(record.tenant_id, record.subject_id, record.artifact_id)


def _epoch(ts: datetime) -> int:
    return int(ts.timestamp())


class ArtifactService:
    def __init__(
        self,
        store: ArtifactStore,
        objects: ObjectStore,
        jobs: DeletionJobRecorder,
        settings: Settings,
        clock: Clock,
        ids: IdSource,
    ) -> None:
        self.store = store
        self.objects = objects
        self.jobs = jobs
        self.settings = settings
        self.clock = clock
        self.ids = ids

    # ------------------------------------------------------------------ start

    def start(
        self, ctx: AccessContext, subject_id: str, body: StartUpload
    ) -> tuple[ArtifactOut, bool]:
        ctx.require(Scope.ARTIFACTS_WRITE)
        ctx.require_subject(subject_id)
        sensitivity = _checked_metadata(subject_id, body)
        self._check_limits(ctx.tenant_id, body)
        fingerprint = _upload_fingerprint(body)
        now = self.clock.now()
        receipt = self.store.receipt(ctx.tenant_id, subject_id, body.request_id, now)
        if receipt is not None:
            return self._replay(ctx, subject_id, receipt, fingerprint), False
        staged_until = _epoch(now + timedelta(seconds=self.settings.staged_upload_seconds))
        # Staged under the subject's epoch: the upload is kept only if no forget lands first.
        forgets = self.jobs.forget_state(ctx.tenant_id, subject_id)
        record = ArtifactRecord(
            tenant_id=ctx.tenant_id,
            subject_id=subject_id,
            artifact_id=self.ids.new_id("art"),
            media_type=body.media_type,
            size_bytes=body.size_bytes,
            sha256=body.sha256,
            state=ArtifactState.STAGED,
            sensitivity=sensitivity,
            created_at=made_after_forget(now, forgets.forgotten_at),
            created_by=ctx.principal,
            name=body.name,
            retention_days=body.retention_days,
            staged_until=staged_until,
            subject_epoch=forgets.epoch,
        )
        try:
            self.store.stage(
                record,
                UploadReceipt(body.request_id, record.artifact_id, fingerprint, staged_until),
                now,
            )
        except ConditionFailed as failed:
            if Conflict.EPOCH in failed:
                # The subject was forgotten meanwhile: nothing was stored (as for a memory).
                raise VersionConflict(
                    "the subject was forgotten while this upload was being started; nothing "
                    "was stored",
                    {"reason": "subject_forgotten"},
                ) from None
            again = self.store.receipt(ctx.tenant_id, subject_id, body.request_id, now)
            if Conflict.IDEMPOTENCY not in failed or again is None:
                raise
            return self._replay(ctx, subject_id, again, fingerprint), False
        logger.info(
            "artifact upload started",
            extra={
                "tenant_id": ctx.tenant_id,
                "subject_id": subject_id,
                "artifact_id": record.artifact_id,
                "size_bytes": body.size_bytes,
            },
        )
        return self._out(ctx, record, upload=self._upload(record)), True

    def _check_limits(self, tenant_id: str, body: StartUpload) -> None:
        """Refuse an upload over the tenant's size bound or of a media type it does not
        accept."""
        max_bytes, media_types = self.settings.artifact_limits(tenant_id)
        if body.size_bytes > max_bytes:
            raise PayloadTooLarge(
                f"artifacts may be at most {max_bytes} bytes", {"max_bytes": max_bytes}
            )
        if body.media_type not in media_types:
            raise MediaTypeNotAllowed(
                "this media type is not accepted here", {"allowed": list(media_types)}
            )

    def _replay(
        self, ctx: AccessContext, subject_id: str, receipt: UploadReceipt, fingerprint: str
    ) -> ArtifactOut:
        # Readable first: a caller below the artifact's sensitivity learns nothing from its
        # request id: not the artifact, its id, nor that the id was used with another payload.
        try:
            record = self._row(ctx, subject_id, receipt.artifact_id)
        except NotFound:
            raise NotFound(_NOT_FOUND, {}) from None
        if receipt.fingerprint != fingerprint:
            raise IdempotencyKeyReused(
                "this request_id started another upload", {"artifact_id": receipt.artifact_id}
            )
        upload = self._upload(record) if record.state is ArtifactState.STAGED else None
        return self._out(ctx, record, upload=upload)

    def _upload(self, record: ArtifactRecord) -> Upload:
        seconds = self.settings.upload_url_seconds
        signed = self.objects.upload_url(
            _ref(record),
            media_type=record.media_type,
            size_bytes=record.size_bytes,
            sha256=record.sha256,
            expires_in=seconds,
        )
        return Upload(
            method=signed.method,
            url=signed.url,
            headers=dict(signed.headers),
            expires_at=self.clock.now() + timedelta(seconds=seconds),
        )

    # ----------------------------------------------------------------- commit

    def commit(self, ctx: AccessContext, subject_id: str, artifact_id: str) -> ArtifactOut:
        """Commit only what the object store holds now and matches the declared size and
        sha256; the bytes are hashed here unless the store verified them on arrival (moto
        does not check ``x-amz-checksum-sha256``; this check does not rely on it)."""
        ctx.require(Scope.ARTIFACTS_WRITE)
        ctx.require_subject(subject_id)
        record = self._row(ctx, subject_id, artifact_id)
        if record.state is ArtifactState.COMMITTED:
            return self._out(ctx, record)
        now = self.clock.now()
        if (record.staged_until or 0) < _epoch(now):
            raise UploadIncomplete(
                "the upload window has closed; start a new upload", {"artifact_id": artifact_id}
            )
        ref = _ref(record)
        head = self.objects.head(ref)
        if head is None:
            raise UploadIncomplete(
                "no upload has arrived; PUT the bytes to the upload URL with its headers, "
                "then commit"
            )
        size, sha256 = head.size, head.sha256
        if sha256 is None:
            digest, size = hashlib.sha256(), 0
            for chunk in self.objects.read(ref, head.version):
                digest.update(chunk)
                size += len(chunk)
            sha256 = digest.hexdigest()
        if size != record.size_bytes or sha256 != record.sha256:
            # The wrong bytes are not kept; the client uploads again and retries.
            self.objects.delete_version(ref, head.version)
            raise ChecksumMismatch(
                "the uploaded bytes do not match the declared size and sha256; nothing was "
                "committed: upload again and retry",
                {"expected_size": record.size_bytes, "actual_size": size},
            )
        retain_until = (
            _epoch(now + timedelta(days=record.retention_days)) if record.retention_days else None
        )
        # A concurrent commit may have won (or the sweeper claimed it); the row says what.
        with contextlib.suppress(ConditionFailed):
            self.store.commit(
                ctx.tenant_id,
                subject_id,
                artifact_id,
                version=head.version,
                at=now,
                retain_until=retain_until,
            )
        logger.info(
            "artifact committed",
            extra={"tenant_id": ctx.tenant_id, "artifact_id": artifact_id, "size_bytes": size},
        )
        return self._out(ctx, self._row(ctx, subject_id, artifact_id))

    # ------------------------------------------------------------------- read

    def get(self, ctx: AccessContext, subject_id: str, artifact_id: str) -> ArtifactOut:
        """The artifact's metadata and, when committed, a short-lived URL for exactly the
        committed version, issued after checking the caller now."""
        ctx.require(Scope.MEMORY_READ)
        ctx.require_subject(subject_id)
        record = self._row(ctx, subject_id, artifact_id)
        download = None
        if record.state is ArtifactState.COMMITTED and record.version is not None:
            seconds = self.settings.download_url_seconds
            signed = self.objects.download_url(_ref(record), record.version, expires_in=seconds)
            download = Download(
                url=signed.url, expires_at=self.clock.now() + timedelta(seconds=seconds)
            )
        return self._out(ctx, record, download=download)

    # ----------------------------------------------------------------- delete

    def delete(self, ctx: AccessContext, subject_id: str, artifact_id: str) -> DeletionJob:
        if not ({Scope.ARTIFACTS_WRITE, Scope.MEMORY_DELETE} & ctx.scopes):
            raise Forbidden(
                "deleting an artifact needs artifacts:write or memory:delete",
                {"required_scope": "artifacts:write"},
            )
        ctx.require_subject(subject_id)
        record = self._row(ctx, subject_id, artifact_id)
        if record.referenced_by:
            raise ArtifactReferenced(
                "a live memory or checkpoint references this artifact; it lives until the last "
                "reference is deleted",
                {
                    "references": len(record.referenced_by),
                    "referenced_by": _named_references(ctx, record),
                },
            )
        now = self.clock.now()
        try:
            self.store.mark_deleted(ctx.tenant_id, subject_id, artifact_id, at=now)
        except ConditionFailed as failed:
            if Conflict.ABSENT in failed:
                raise NotFound(_NOT_FOUND, {"artifact_id": artifact_id}) from None
            raise ArtifactReferenced(
                "a record referenced this artifact while it was being deleted; it stays",
                {"artifact_id": artifact_id},
            ) from None
        # If this fails midway the row already says DELETED (never served again) and the
        # sweeper removes what is left of the object, then the row: not before every
        # upload URL issued for it has expired (``_remove_when_done``).
        removed = self.objects.delete_all(_ref(record))
        job = DeletionJob(
            deletion_id=self.ids.new_id("del"),
            tenant_id=ctx.tenant_id,
            subject_id=subject_id,
            scope=DeletionScope.ARTIFACT,
            target=artifact_id,
            status=DeletionState.COMPLETED,
            requested_by=ctx.principal,
            requested_at=now,
            completed_at=now,
            copies=[
                CopyStatus(
                    name="artifacts",
                    status=CopyState.DONE,
                    updated_at=now,
                    reason=f"{removed} object version(s) removed",
                )
            ],
        )
        self.jobs.put_job(job)
        # The row stays DELETED (served to no one) until every upload URL issued for it
        # has expired; the sweeper then removes it with anything a URL stored meanwhile.
        return job

    def release(self, tenant_id: str, subject_id: str, artifact_id: str, ref: str) -> bool:
        """Drop one reference (idempotent); delete the artifact when it was the last.
        Returns whether the artifact was deleted."""
        if not self.store.release(tenant_id, subject_id, artifact_id, ref):
            return False
        self._purge(ObjectRef(tenant_id, subject_id, artifact_id))
        logger.info(
            "artifact deleted with its last reference",
            extra={"tenant_id": tenant_id, "artifact_id": artifact_id},
        )
        return True

    def forget_subject(
        self,
        tenant_id: str,
        subject_id: str,
        before: datetime,
        *,
        retired_epoch: int | None = None,
    ) -> int:
        """Forgetting a subject at ``before`` (retiring ``retired_epoch``) deletes every
        artifact of theirs the forget covers, referenced or not; later uploads are not
        the forget's."""
        forgotten = self.store.forget_subject(
            tenant_id, subject_id, before, retired_epoch=retired_epoch
        )
        for artifact_id in forgotten:
            self._purge(ObjectRef(tenant_id, subject_id, artifact_id))
        return len(forgotten)

    def sweep_staged(self, now: datetime | None = None) -> int:
        """Remove uploads staged and never committed within their window, and what is left
        of deleted artifacts, objects included; returns how many rows went. A deleted
        artifact's objects are removed again on every round until no upload URL issued
        for it can store bytes any more, and only then its row (``_purge``)."""
        cutoff = now or self.clock.now()
        swept = 0
        for record in self.store.sweepable(cutoff):
            # Claim a staged row first: a commit that wins the race keeps its artifact.
            if record.state is ArtifactState.STAGED and not self.store.claim_expired(
                record.tenant_id, record.subject_id, record.artifact_id, cutoff
            ):
                continue
            removed = self.objects.delete_all(_ref(record))
            if removed and record.state is ArtifactState.DELETED:
                logger.info(
                    "objects under a deleted artifact removed",
                    extra={
                        "tenant_id": record.tenant_id,
                        "artifact_id": record.artifact_id,
                        "count": removed,
                    },
                )
            swept += self._remove_when_done(_ref(record), cutoff)
        return swept

    def _purge(self, ref: ObjectRef) -> int:
        """Every object version of a DELETED artifact, then its row once it is done."""
        removed = self.objects.delete_all(ref)
        self._remove_when_done(ref, self.clock.now())
        return removed

    def _remove_when_done(self, ref: ObjectRef, now: datetime) -> bool:
        """Remove a DELETED artifact's row once no upload URL issued for it can store
        bytes any more. A presigned S3 PUT cannot be revoked: a client holding one may
        write the declared bytes again after the delete, under the artifact's key, where
        nothing references them. Until the last URL expired the row stays (DELETED,
        served to no one) and each sweep removes whatever arrived; the last sweep runs
        after the last URL died, so nothing can arrive after it. (The local object server
        refuses such a PUT outright: ``upload_open``.)"""
        record = self.store.artifact(ref.tenant_id, ref.subject_id, ref.artifact_id)
        if record is None or record.state is not ArtifactState.DELETED:
            return False
        if _epoch(now) <= self._last_upload_at(record):
            return False
        # The final pass: whatever a URL stored since the last one goes with the row.
        self.objects.delete_all(ref)
        return self.store.remove(ref.tenant_id, ref.subject_id, ref.artifact_id)

    def _last_upload_at(self, record: ArtifactRecord) -> int:
        """Epoch seconds by which every upload URL issued for the artifact has expired.
        URLs are issued only while it is STAGED: at the start, and on a replay while its
        window is open; so the last one was issued by the end of its window
        (``staged_until``; a delete or a forget closes it then), or by its commit."""
        if record.staged_until is not None:
            closed = record.staged_until
        else:
            closed = _epoch(record.committed_at or record.created_at)
        return closed + self.settings.upload_url_seconds + URL_CLOCK_SKEW

    # ----------------------------------------------------------- upload URLs

    def upload_open(self, ref: ObjectRef) -> bool:
        """Whether an upload URL for ``ref`` may still store bytes: only while its artifact
        is STAGED, its window open and its subject not forgotten since. A URL dies with
        its artifact's commit and with its deletion (the local object server asks this
        before it stores anything)."""
        record = self.store.artifact(ref.tenant_id, ref.subject_id, ref.artifact_id)
        return record is not None and self._takes_uploads(record)

    def settle_upload(self, ref: ObjectRef, version: str) -> bool:
        """After ``version`` arrived under ``ref``: keep it while its artifact is STAGED,
        or committed at exactly this version (a commit that read it as it landed);
        otherwise remove it (the artifact was committed or deleted while the bytes
        streamed in) and return False."""
        record = self.store.artifact(ref.tenant_id, ref.subject_id, ref.artifact_id)
        kept = record is not None and (
            self._takes_uploads(record)
            or (record.state is ArtifactState.COMMITTED and record.version == version)
        )
        if not kept:
            self.objects.delete_version(ref, version)
            logger.info(
                "upload refused: its artifact was committed or deleted",
                extra={"tenant_id": ref.tenant_id, "artifact_id": ref.artifact_id},
            )
        return kept

    def _takes_uploads(self, record: ArtifactRecord) -> bool:
        return (
            record.state is ArtifactState.STAGED
            and (record.staged_until or 0) >= _epoch(self.clock.now())
            and not self._forgotten(record)
        )

    # ---------------------------------------------------------------- helpers

    def _forgotten(self, record: ArtifactRecord) -> bool:
        """Whether the artifact is a forget's: started under a subject epoch retired since
        (one started before artifacts carried it: made by the last forget's time)."""
        state = self.jobs.forget_state(record.tenant_id, record.subject_id)
        return state.covers(record.subject_epoch, record.created_at)

    def _row(self, ctx: AccessContext, subject_id: str, artifact_id: str) -> ArtifactRecord:
        """The artifact, if the caller may read it. Above the caller's ``max_sensitivity``
        it is absent for every route (replay, commit, read, delete): what a caller may not
        read, it may not change or learn about either. One made by the time its subject
        was forgotten is absent too, from the forget on, before its purge has run."""
        record = self.store.artifact(ctx.tenant_id, subject_id, artifact_id)
        if (
            record is None
            or record.state is ArtifactState.DELETED
            or not ctx.may_read(record.sensitivity, [])
            or self._forgotten(record)
        ):
            raise NotFound(_NOT_FOUND, {"artifact_id": artifact_id})
        return record

    @staticmethod
    def _out(
        ctx: AccessContext,
        record: ArtifactRecord,
        *,
        upload: Upload | None = None,
        download: Download | None = None,
    ) -> ArtifactOut:
        return ArtifactOut(
            artifact_id=record.artifact_id,
            subject_id=record.subject_id,
            media_type=record.media_type,
            size_bytes=record.size_bytes,
            sha256=record.sha256,
            version=record.version,
            state=record.state,
            name=record.name,
            sensitivity=Sensitivity(record.sensitivity),
            created_at=record.created_at,
            referenced_by=_named_references(ctx, record),
            references=len(record.referenced_by),
            upload=upload,
            download=download,
        )


__all__ = ["Artifact", "ArtifactService", "DeletionJobRecorder"]


def _named_references(ctx: AccessContext, record: ArtifactRecord) -> list[str]:
    """The records that reference the artifact, named only to a reader that may read
    every record that could: a memory may be above this reader's ceiling or outside its
    agent role, a run above its ceiling, and its id would tell the reader it exists."""
    if ctx.agent_role is None and ctx.max_sensitivity.rank >= Sensitivity.PII.rank:
        return sorted(record.referenced_by)
    return []


def _checked_metadata(subject_id: str, body: StartUpload) -> Sensitivity:
    """Refuse an upload declared secret, or whose metadata holds a secret or a personal
    id; the artifact's class (:func:`_classify_name`)."""
    if body.sensitivity is Sensitivity.SECRET:
        # As for a memory: a secret is never stored (and one above every ceiling
        # would be absent even to its owner's commit and delete).
        raise SecretDetected(
            "secrets are never stored as artifacts; keep them in a secret manager and "
            "store a reference to it instead",
            {"field": "sensitivity"},
        )
    refuse_secrets(
        [
            ("request_id", body.request_id),
            ("name", body.name),
            ("media_type", body.media_type),
            ("subject_id", subject_id),
        ],
        "the artifact's metadata",
    )
    sensitivity = _classify_name(body)
    refuse_personal_ids(
        [("request_id", body.request_id), ("subject_id", subject_id)], "the artifact"
    )
    return sensitivity


def _upload_fingerprint(body: StartUpload) -> str:
    """The digest of what an upload asks for: a retry with the same request id must ask
    for the same."""
    return hashlib.sha256(
        json.dumps(
            # Consent is no part of what was asked for (a retry that adds it is the
            # same upload), as for runs; fingerprints from before it existed hold.
            body.model_dump(mode="json", exclude={"request_id", "consent"}),
            sort_keys=True,
        ).encode()
    ).hexdigest()


def _classify_name(body: StartUpload) -> Sensitivity:
    """The artifact's class: as declared, and at least ``pii`` when its name holds
    personal data. A name is shown to every reader of the artifact, so personal data in
    it is kept only with the subject's consent (the write policy of memories, sessions
    and runs) and only in an artifact classified ``pii`` (which only readers with that
    ceiling see)."""
    found = find_pii([("name", body.name)]) if body.name else []
    if not found:
        return body.sensitivity
    if not body.consent:
        raise ConsentRequired(
            "the artifact's name holds personal data; it can be kept only with the "
            "subject's consent (set consent: true once it is given), or name the artifact "
            "without it",
            {
                "reason": "pii",
                "pii_types": sorted({f.pii_type for f in found}),
                "fields": ["name"],
            },
        )
    return max(body.sensitivity, Sensitivity.PII, key=lambda s: s.rank)


def readable_artifacts(
    store: ArtifactStore | None, ctx: AccessContext, subject_id: str, artifact_ids: list[str]
) -> bool:
    """Whether the caller may read every artifact it names (a reference from a memory or a
    checkpoint). One above its ceiling is answered as one that does not exist: a reference
    would otherwise confirm it (and its digest) and pin it against its owner's delete.
    Whether each exists and is committed is the write's own condition."""
    if store is None:
        return True
    for artifact_id in artifact_ids:
        record = store.artifact(ctx.tenant_id, subject_id, artifact_id)
        if record is not None and not ctx.may_read(record.sensitivity, []):
            return False
    return True
