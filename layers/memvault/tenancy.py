"""Pool mode: data access through credentials scoped to the caller's tenant.

Each tenant's services are built on a session of the tenant-access role, assumed with
the session tag ``tenant_id=<tenant>``; the role's policy lets DynamoDB reach only items
whose partition key starts with ``<tenant>#`` (``dynamodb:LeadingKeys``), S3 only the
tenant's prefix, KMS only the tenant's encryption context. So a bug in our code that
names another tenant's key is refused by IAM, not only by our checks. Sessions are
cached per tenant while the function is warm and renewed before they expire.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import boto3
from botocore.config import Config

from memvault.clock import Clock, SystemClock
from memvault.config import Settings
from memvault.observability import logger
from memvault.services.bundle import Services
from memvault.wiring import build_services

TENANT_TAG = "tenant_id"
SESSION_SECONDS = 3600
RENEW_BEFORE = timedelta(minutes=5)


@dataclass
class _Scoped:
    services: Services
    expires_at: datetime


class TenantScopedServices:
    def __init__(self, settings: Settings, *, sts: Any = None, clock: Clock | None = None) -> None:
        if not settings.tenant_role_arn:
            raise ValueError("tenant_role_arn is not configured")
        self.settings = settings
        self.sts = sts or boto3.client("sts", region_name=settings.aws_region)
        self.clock = clock or SystemClock()
        self._cache: dict[str, _Scoped] = {}

    def for_tenant(self, tenant_id: str) -> Services:
        now = self.clock.now()
        cached = self._cache.get(tenant_id)
        # A URL presigned with these credentials dies with them: renew while the longest
        # URL we hand out would still outlive the session.
        margin = RENEW_BEFORE + timedelta(
            seconds=max(self.settings.upload_url_seconds, self.settings.download_url_seconds)
        )
        if cached is not None and cached.expires_at - margin > now:
            return cached.services
        credentials = self.sts.assume_role(
            RoleArn=self.settings.tenant_role_arn,
            RoleSessionName=f"memvault-{tenant_id}"[:64].replace("#", "-"),
            DurationSeconds=SESSION_SECONDS,
            Tags=[{"Key": TENANT_TAG, "Value": tenant_id}],
        )["Credentials"]
        session = boto3.Session(
            aws_access_key_id=credentials["AccessKeyId"],
            aws_secret_access_key=credentials["SecretAccessKey"],
            aws_session_token=credentials["SessionToken"],
            region_name=self.settings.aws_region,
        )
        # Both DynamoDB and S3 (and through S3, KMS) run on the tenant's session.
        services = build_services(
            self.settings,
            client=session.client("dynamodb", endpoint_url=self.settings.dynamodb_endpoint),
            s3=session.client("s3", config=Config(signature_version="s3v4")),
            clock=self.clock,
        )
        self._cache[tenant_id] = _Scoped(services, credentials["Expiration"])
        logger.info("tenant session assumed", extra={"tenant_id": tenant_id})
        return services
