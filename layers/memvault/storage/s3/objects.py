"""Objects in S3, each encrypted with SSE-KMS under its tenant's key and encryption
context, moved by presigned URLs: the bytes never pass through a Lambda.

The bucket is versioned: every PUT makes a new version, the commit pins one. The
presigned PUT signs the tenant's key, the encryption context, that no S3 Bucket Key is
used (its data key would carry only the bucket ARN as context) and the sha256 the client
must send (``x-amz-checksum-sha256``, which S3 checks on arrival; moto does not, so
``head`` reports no verified digest and the service hashes the bytes itself).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any, Protocol

from botocore.exceptions import ClientError

from memvault.storage.ports.objects import ObjectHead, ObjectMissing, ObjectRef, SignedRequest

_MISSING = {"404", "NoSuchKey", "NotFound", "NoSuchVersion"}
_CHUNK = 1024 * 1024


class TenantKeys(Protocol):
    """The KMS key that encrypts a tenant's objects (an alias or key id)."""

    def key_for(self, tenant_id: str) -> str: ...


class AliasKeys:
    """On AWS the CDK app creates ``alias/memvault/<tenant>`` for each tenant."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix

    def key_for(self, tenant_id: str) -> str:
        return f"{self.prefix}{tenant_id}"


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _missing(err: ClientError) -> bool:
    return err.response.get("Error", {}).get("Code") in _MISSING


class S3ObjectStore:
    def __init__(self, s3: Any, bucket: str, keys: TenantKeys) -> None:
        self.s3 = s3
        self.bucket = bucket
        self.keys = keys

    def upload_url(
        self,
        ref: ObjectRef,
        *,
        media_type: str,
        size_bytes: int,
        sha256: str,
        expires_in: int,
    ) -> SignedRequest:
        # The size is bound by the checksum: only bytes with this sha256 are accepted.
        context = _b64(json.dumps(ref.encryption_context()).encode())
        checksum = _b64(bytes.fromhex(sha256))
        key_id = self.keys.key_for(ref.tenant_id)
        url = self.s3.generate_presigned_url(
            "put_object",
            ExpiresIn=expires_in,
            Params={
                "Bucket": self.bucket,
                "Key": ref.key,
                "ContentType": media_type,
                "ServerSideEncryption": "aws:kms",
                "SSEKMSKeyId": key_id,
                "SSEKMSEncryptionContext": context,
                # Never under an S3 Bucket Key: its data key's only context is the bucket
                # ARN, which the tenant key refuses (the tenant's context is required).
                "BucketKeyEnabled": False,
                "ChecksumSHA256": checksum,
            },
        )
        return SignedRequest(
            method="PUT",
            url=url,
            headers={
                "Content-Type": media_type,
                "x-amz-server-side-encryption": "aws:kms",
                "x-amz-server-side-encryption-aws-kms-key-id": key_id,
                "x-amz-server-side-encryption-context": context,
                "x-amz-server-side-encryption-bucket-key-enabled": "false",
                "x-amz-checksum-sha256": checksum,
            },
        )

    def head(self, ref: ObjectRef) -> ObjectHead | None:
        try:
            head = self.s3.head_object(Bucket=self.bucket, Key=ref.key)
        except ClientError as err:
            if _missing(err):
                return None
            raise
        return ObjectHead(version=head["VersionId"], size=int(head["ContentLength"]))

    def read(self, ref: ObjectRef, version: str) -> Iterator[bytes]:
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=ref.key, VersionId=version)["Body"]
        except ClientError as err:
            if _missing(err):
                raise ObjectMissing(ref.key) from None
            raise
        return _chunks(body)

    def download_url(self, ref: ObjectRef, version: str, *, expires_in: int) -> SignedRequest:
        url = self.s3.generate_presigned_url(
            "get_object",
            ExpiresIn=expires_in,
            Params={"Bucket": self.bucket, "Key": ref.key, "VersionId": version},
        )
        return SignedRequest(method="GET", url=url)

    def delete_version(self, ref: ObjectRef, version: str) -> None:
        self.s3.delete_object(Bucket=self.bucket, Key=ref.key, VersionId=version)

    def delete_all(self, ref: ObjectRef) -> int:
        removed = 0
        for page in self.s3.get_paginator("list_object_versions").paginate(
            Bucket=self.bucket, Prefix=ref.key
        ):
            for entry in page.get("Versions", []) + page.get("DeleteMarkers", []):
                if entry["Key"] == ref.key:  # the prefix also matches longer keys
                    self.s3.delete_object(
                        Bucket=self.bucket, Key=ref.key, VersionId=entry["VersionId"]
                    )
                    removed += 1
        return removed

    def tenant_key(self, tenant_id: str) -> str:
        return self.keys.key_for(tenant_id)


def _chunks(body: Any) -> Iterator[bytes]:
    try:
        yield from iter(lambda: body.read(_CHUNK), b"")
    finally:
        body.close()
