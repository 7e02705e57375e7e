"""Artifacts: staged uploads straight to S3 under the tenant's KMS key, committed only
when the stored bytes match the declared size and sha256, read by pinned version.

Object key ``<tenant>/<subject>/<artifact_id>``; encryption context
``{"tenant_id": <tenant>, "artifact_id": <id>}`` (the tenant's key refuses any other
tenant's context). Metadata in the ``artifacts`` table, partition ``<tenant>#<subject>``:
``ART#<id>`` (state, sha256, pinned S3 version, references) and ``REQ#<request_id>``.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
from datetime import datetime, timedelta
from typing import Any, Protocol

from botocore.exceptions import ClientError

from memvault.clock import Clock, IdSource, iso, parse_iso
from memvault.config import Settings
from memvault.errors import (
    ArtifactReferenced,
    ChecksumMismatch,
    Forbidden,
    IdempotencyKeyReused,
    MediaTypeNotAllowed,
    NotFound,
    PayloadTooLarge,
    UploadIncomplete,
)
from memvault.models.access import AccessContext, Scope
from memvault.models.artifact import (
    Artifact,
    ArtifactOut,
    ArtifactState,
    Download,
    StartUpload,
    Upload,
)
from memvault.models.memory import (
    CopyState,
    CopyStatus,
    DeletionJob,
    DeletionScope,
    DeletionState,
    Sensitivity,
)
from memvault.observability import logger
from memvault.storage.dynamo import Dynamo, TransactionConflict, Tx, to_item
from memvault.storage.dynamodb.memory import DynamoMemoryStore

_NOT_FOUND = "no such artifact for this subject"


class TenantKeys(Protocol):
    """The KMS key that encrypts a tenant's objects (an alias or key id)."""

    def key_for(self, tenant_id: str) -> str: ...


class AliasKeys:
    """On AWS the CDK app creates ``alias/memvault/<tenant>`` for each tenant."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def key_for(self, tenant_id: str) -> str:
        return f"{self.prefix}{tenant_id}"


def encryption_context(tenant_id: str, artifact_id: str) -> dict[str, str]:
    return {"tenant_id": tenant_id, "artifact_id": artifact_id}


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


class ArtifactService:
    def __init__(
        self, db: Dynamo, s3: Any, keys: TenantKeys, settings: Settings, clock: Clock, ids: IdSource
    ) -> None:
        self.db = db
        self.s3 = s3
        self.keys = keys
        self.settings = settings
        self.clock = clock
        self.ids = ids

    # ------------------------------------------------------------------ start

    def start(
        self, ctx: AccessContext, subject_id: str, body: StartUpload
    ) -> tuple[ArtifactOut, bool]:
        ctx.require(Scope.ARTIFACTS_WRITE)
        ctx.require_subject(subject_id)
        max_bytes, media_types = self.settings.artifact_limits(ctx.tenant_id)
        if body.size_bytes > max_bytes:
            raise PayloadTooLarge(
                f"artifacts may be at most {max_bytes} bytes", {"max_bytes": max_bytes}
            )
        if body.media_type not in media_types:
            raise MediaTypeNotAllowed(
                "this media type is not accepted here", {"allowed": list(media_types)}
            )
        pk = f"{ctx.tenant_id}#{subject_id}"
        fingerprint = hashlib.sha256(
            json.dumps(
                body.model_dump(mode="json", exclude={"request_id"}), sort_keys=True
            ).encode()
        ).hexdigest()
        receipt = self.db.get("artifacts", pk, f"REQ#{body.request_id}")
        if receipt is not None:
            return self._replay(ctx, subject_id, receipt, fingerprint), False
        now = self.clock.now()
        artifact_id = self.ids.new_id("art")
        staged_until = int(
            (now + timedelta(seconds=self.settings.staged_upload_seconds)).timestamp()
        )
        row = {
            "pk": pk,
            "sk": f"ART#{artifact_id}",
            "artifact_id": artifact_id,
            "tenant_id": ctx.tenant_id,
            "subject_id": subject_id,
            "media_type": body.media_type,
            "size_bytes": body.size_bytes,
            "sha256": body.sha256,
            "state": ArtifactState.STAGED.value,
            "s3_key": f"{ctx.tenant_id}/{subject_id}/{artifact_id}",
            "name": body.name,
            "sensitivity": body.sensitivity.value,
            "retention_days": body.retention_days,
            "created_at": iso(now),
            "created_by": ctx.principal,
            # Not the table's TTL attribute: DynamoDB would drop the row and leave the object.
            "staged_until": staged_until,
        }
        tx = Tx()
        tx.add(
            "receipt",
            {
                "Put": {
                    "TableName": self.db.names["artifacts"],
                    "Item": to_item(
                        {
                            "pk": pk,
                            "sk": f"REQ#{body.request_id}",
                            "artifact_id": artifact_id,
                            "fingerprint": fingerprint,
                            "ttl": staged_until,
                        }
                    ),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        )
        tx.add(
            "artifact",
            {
                "Put": {
                    "TableName": self.db.names["artifacts"],
                    "Item": to_item(row),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        )
        try:
            self.db.transact(tx)
        except TransactionConflict:
            again = self.db.get("artifacts", pk, f"REQ#{body.request_id}")
            if again is None:
                raise
            return self._replay(ctx, subject_id, again, fingerprint), False
        logger.info(
            "artifact upload started",
            extra={
                "tenant_id": ctx.tenant_id,
                "subject_id": subject_id,
                "artifact_id": artifact_id,
                "size_bytes": body.size_bytes,
            },
        )
        return self._out(row, upload=self._upload(ctx.tenant_id, row)), True

    def _replay(
        self, ctx: AccessContext, subject_id: str, receipt: dict[str, Any], fingerprint: str
    ) -> ArtifactOut:
        if receipt["fingerprint"] != fingerprint:
            raise IdempotencyKeyReused(
                "this request_id started another upload", {"artifact_id": receipt["artifact_id"]}
            )
        row = self._row(ctx, subject_id, receipt["artifact_id"])
        upload = self._upload(ctx.tenant_id, row) if row["state"] == ArtifactState.STAGED else None
        return self._out(row, upload=upload)

    def _upload(self, tenant_id: str, row: dict[str, Any]) -> Upload:
        context = _b64(json.dumps(encryption_context(tenant_id, row["artifact_id"])).encode())
        checksum = _b64(bytes.fromhex(row["sha256"]))
        key_id = self.keys.key_for(tenant_id)
        url = self.s3.generate_presigned_url(
            "put_object",
            ExpiresIn=self.settings.upload_url_seconds,
            Params={
                "Bucket": self.settings.artifacts_bucket,
                "Key": row["s3_key"],
                "ContentType": row["media_type"],
                "ServerSideEncryption": "aws:kms",
                "SSEKMSKeyId": key_id,
                "SSEKMSEncryptionContext": context,
                "ChecksumSHA256": checksum,
            },
        )
        return Upload(
            url=url,
            expires_at=self.clock.now() + timedelta(seconds=self.settings.upload_url_seconds),
            headers={
                "Content-Type": row["media_type"],
                "x-amz-server-side-encryption": "aws:kms",
                "x-amz-server-side-encryption-aws-kms-key-id": key_id,
                "x-amz-server-side-encryption-context": context,
                "x-amz-checksum-sha256": checksum,
            },
        )

    # ----------------------------------------------------------------- commit

    def commit(self, ctx: AccessContext, subject_id: str, artifact_id: str) -> ArtifactOut:
        """Commit only what S3 holds now and matches the declared size and sha256 (moto
        does not check ``x-amz-checksum-sha256``; this check does not rely on it)."""
        ctx.require(Scope.ARTIFACTS_WRITE)
        ctx.require_subject(subject_id)
        row = self._row(ctx, subject_id, artifact_id)
        if row["state"] == ArtifactState.COMMITTED:
            return self._out(row)
        if int(row.get("staged_until", 0)) < int(self.clock.now().timestamp()):
            raise UploadIncomplete(
                "the upload window has closed; start a new upload", {"artifact_id": artifact_id}
            )
        bucket = self.settings.artifacts_bucket
        try:
            head = self.s3.head_object(Bucket=bucket, Key=row["s3_key"])
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") in ("404", "NoSuchKey", "NotFound"):
                raise UploadIncomplete(
                    "no upload has arrived; PUT the bytes to the upload URL "
                    "with its headers, then commit"
                ) from None
            raise
        version = head.get("VersionId")
        body = self.s3.get_object(Bucket=bucket, Key=row["s3_key"], VersionId=version)["Body"]
        digest, size = hashlib.sha256(), 0
        for chunk in iter(lambda: body.read(1024 * 1024), b""):
            digest.update(chunk)
            size += len(chunk)
        if size != row["size_bytes"] or digest.hexdigest() != row["sha256"]:
            # The wrong bytes are not kept; the client uploads again and retries.
            self.s3.delete_object(Bucket=bucket, Key=row["s3_key"], VersionId=version)
            raise ChecksumMismatch(
                "the uploaded bytes do not match the declared size and sha256; nothing was "
                "committed: upload again and retry",
                {"expected_size": row["size_bytes"], "actual_size": size},
            )
        retention = row.get("retention_days")
        expires = (
            int((self.clock.now() + timedelta(days=retention)).timestamp()) if retention else None
        )
        # A concurrent commit may have won; the row then says what it is.
        with contextlib.suppress(TransactionConflict):
            self.db.update(
                "artifacts",
                row["pk"],
                row["sk"],
                "SET #state = :committed, s3_version = :v, committed_at = :now, "
                "retain_until = :ttl REMOVE staged_until",
                names={"#state": "state"},
                values={
                    ":committed": ArtifactState.COMMITTED.value,
                    ":v": version,
                    ":now": iso(self.clock.now()),
                    ":ttl": expires,
                    ":staged": ArtifactState.STAGED.value,
                },
                condition="#state = :staged",
            )
        logger.info(
            "artifact committed",
            extra={"tenant_id": ctx.tenant_id, "artifact_id": artifact_id, "size_bytes": size},
        )
        return self._out(self._row(ctx, subject_id, artifact_id))

    # ------------------------------------------------------------------- read

    def get(self, ctx: AccessContext, subject_id: str, artifact_id: str) -> ArtifactOut:
        """The artifact's metadata and, when committed, a short-lived URL for exactly the
        committed version, issued after checking the caller now."""
        ctx.require(Scope.MEMORY_READ)
        ctx.require_subject(subject_id)
        row = self._row(ctx, subject_id, artifact_id)
        if not ctx.may_read(Sensitivity(row["sensitivity"]), []):
            raise NotFound(_NOT_FOUND, {"artifact_id": artifact_id})
        download = None
        if row["state"] == ArtifactState.COMMITTED:
            seconds = self.settings.download_url_seconds
            url = self.s3.generate_presigned_url(
                "get_object",
                ExpiresIn=seconds,
                Params={
                    "Bucket": self.settings.artifacts_bucket,
                    "Key": row["s3_key"],
                    "VersionId": row["s3_version"],
                },
            )
            download = Download(url=url, expires_at=self.clock.now() + timedelta(seconds=seconds))
        return self._out(row, download=download)

    # ----------------------------------------------------------------- delete

    def delete(self, ctx: AccessContext, subject_id: str, artifact_id: str) -> DeletionJob:
        if not ({Scope.ARTIFACTS_WRITE, Scope.MEMORY_DELETE} & ctx.scopes):
            raise Forbidden(
                "deleting an artifact needs artifacts:write or memory:delete",
                {"required_scope": "artifacts:write"},
            )
        ctx.require_subject(subject_id)
        row = self._row(ctx, subject_id, artifact_id)
        if row.get("referenced_by"):
            raise ArtifactReferenced(
                "a live memory or checkpoint references this artifact; it lives until the last "
                "reference is deleted",
                {"referenced_by": sorted(row["referenced_by"])},
            )
        now = self.clock.now()
        try:
            self._mark_deleted(row)
        except TransactionConflict:
            raise ArtifactReferenced(
                "a record referenced this artifact while it was being deleted; it stays",
                {"artifact_id": artifact_id},
            ) from None
        # If this fails midway the row already says DELETED (never served again) and the
        # sweeper removes what is left of the object.
        removed = self._delete_object(row["s3_key"])
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
        DynamoMemoryStore(self.db).put_job(job)
        return job

    def release(self, tenant_id: str, subject_id: str, artifact_id: str, ref: str) -> bool:
        """Drop one reference (idempotent); delete the artifact when it was the last.
        Returns whether the artifact was deleted."""
        pk, sk = f"{tenant_id}#{subject_id}", f"ART#{artifact_id}"
        try:
            out = self.db.client.update_item(
                TableName=self.db.names["artifacts"],
                Key={"pk": {"S": pk}, "sk": {"S": sk}},
                UpdateExpression="DELETE referenced_by :ref",
                ConditionExpression="attribute_exists(pk)",
                ExpressionAttributeValues={":ref": {"SS": [ref]}},
                ReturnValues="ALL_NEW",
            )
        except self.db.client.exceptions.ConditionalCheckFailedException:
            return False  # gone already
        row = out["Attributes"]
        if row.get("referenced_by") or row["state"]["S"] != ArtifactState.COMMITTED.value:
            return False
        try:
            self.db.update(
                "artifacts",
                pk,
                sk,
                "SET #state = :deleted",
                names={"#state": "state"},
                values={":deleted": ArtifactState.DELETED.value},
                condition="attribute_not_exists(referenced_by)",
            )
        except TransactionConflict:
            return False  # referenced again meanwhile: it lives on
        self._delete_object(row["s3_key"]["S"])
        logger.info(
            "artifact deleted with its last reference",
            extra={"tenant_id": tenant_id, "artifact_id": artifact_id},
        )
        return True

    def _mark_deleted(self, row: dict[str, Any]) -> None:
        self.db.update(
            "artifacts",
            row["pk"],
            row["sk"],
            "SET #state = :deleted",
            names={"#state": "state"},
            values={":deleted": ArtifactState.DELETED.value},
            condition="attribute_not_exists(referenced_by)",
        )

    def forget_subject(self, tenant_id: str, subject_id: str) -> int:
        """Forgetting a subject deletes every artifact of theirs, referenced or not."""
        removed = 0
        pk = f"{tenant_id}#{subject_id}"
        for row in list(self.db.query_all("artifacts", pk, "ART#")):
            if row["state"] != ArtifactState.DELETED.value:
                self.db.update(
                    "artifacts",
                    pk,
                    row["sk"],
                    "SET #state = :deleted REMOVE referenced_by",
                    names={"#state": "state"},
                    values={":deleted": ArtifactState.DELETED.value},
                )
            self._delete_object(row["s3_key"])
            removed += 1
        return removed

    def _delete_object(self, key: str) -> int:
        """Remove every version and delete marker of one object key; returns how many."""
        bucket = self.settings.artifacts_bucket
        removed = 0
        for page in self.s3.get_paginator("list_object_versions").paginate(
            Bucket=bucket, Prefix=key
        ):
            for entry in page.get("Versions", []) + page.get("DeleteMarkers", []):
                if entry["Key"] == key:
                    self.s3.delete_object(Bucket=bucket, Key=key, VersionId=entry["VersionId"])
                    removed += 1
        return removed

    def sweep_staged(self, now: datetime | None = None) -> int:
        """Remove uploads staged and never committed within their bound, objects included."""
        cutoff = int((now or self.clock.now()).timestamp())
        swept = 0
        kwargs: dict[str, Any] = {
            "TableName": self.db.names["artifacts"],
            # Expired staged uploads, and deleted artifacts whose objects may remain.
            "FilterExpression": "(#state = :staged AND staged_until < :now) OR #state = :deleted",
            "ExpressionAttributeNames": {"#state": "state"},
            "ExpressionAttributeValues": {
                ":staged": {"S": ArtifactState.STAGED.value},
                ":deleted": {"S": ArtifactState.DELETED.value},
                ":now": {"N": str(cutoff)},
            },
        }
        while True:
            page = self.db.client.scan(**kwargs)
            for item in page["Items"]:
                swept += self._sweep_one(item, cutoff)
            if "LastEvaluatedKey" not in page:
                return swept
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def _sweep_one(self, item: dict[str, Any], cutoff: int) -> int:
        key = {"pk": item["pk"], "sk": item["sk"]}
        table = self.db.names["artifacts"]
        if item["state"]["S"] == ArtifactState.STAGED.value:
            # Claim the row first: a commit that wins the race keeps its artifact.
            try:
                self.db.client.update_item(
                    TableName=table,
                    Key=key,
                    UpdateExpression="SET #state = :deleted",
                    ConditionExpression="#state = :staged AND staged_until < :now",
                    ExpressionAttributeNames={"#state": "state"},
                    ExpressionAttributeValues={
                        ":deleted": {"S": ArtifactState.DELETED.value},
                        ":staged": {"S": ArtifactState.STAGED.value},
                        ":now": {"N": str(cutoff)},
                    },
                )
            except self.db.client.exceptions.ConditionalCheckFailedException:
                return 0
        self._delete_object(item["s3_key"]["S"])
        self.db.client.delete_item(TableName=table, Key=key)
        return 1

    # ---------------------------------------------------------------- helpers

    def _row(self, ctx: AccessContext, subject_id: str, artifact_id: str) -> dict[str, Any]:
        row = self.db.get("artifacts", f"{ctx.tenant_id}#{subject_id}", f"ART#{artifact_id}")
        if row is None or row["state"] == ArtifactState.DELETED:
            raise NotFound(_NOT_FOUND, {"artifact_id": artifact_id})
        return row

    def _out(
        self, row: dict[str, Any], *, upload: Upload | None = None, download: Download | None = None
    ) -> ArtifactOut:
        return ArtifactOut(
            artifact_id=row["artifact_id"],
            subject_id=row["subject_id"],
            media_type=row["media_type"],
            size_bytes=row["size_bytes"],
            sha256=row["sha256"],
            version=row.get("s3_version"),
            state=ArtifactState(row["state"]),
            name=row.get("name"),
            sensitivity=Sensitivity(row["sensitivity"]),
            created_at=parse_iso(row["created_at"]),
            referenced_by=sorted(row.get("referenced_by") or []),
            upload=upload,
            download=download,
        )


__all__ = ["AliasKeys", "Artifact", "ArtifactService", "TenantKeys", "encryption_context"]
