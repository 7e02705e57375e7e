"""Local stand-ins for what the CDK app creates on AWS: each tenant's KMS key (made on
first use, as ``alias/memvault/<tenant>``) and the versioned artifacts bucket."""

from __future__ import annotations

from typing import Any


class LocalTenantKeys:
    def __init__(self, kms: Any, prefix: str) -> None:
        self.kms = kms
        self.prefix = prefix
        self._known: set[str] = set()

    def key_for(self, tenant_id: str) -> str:
        alias = f"{self.prefix}{tenant_id}"
        if tenant_id not in self._known:
            try:
                self.kms.describe_key(KeyId=alias)
            except self.kms.exceptions.NotFoundException:
                key = self.kms.create_key(Description=f"memvault local key of {tenant_id}")
                self.kms.create_alias(AliasName=alias, TargetKeyId=key["KeyMetadata"]["KeyId"])
            self._known.add(tenant_id)
        return alias


def ensure_bucket(s3: Any, bucket: str) -> None:
    existing = {b["Name"] for b in s3.list_buckets().get("Buckets", [])}
    if bucket not in existing:
        s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
