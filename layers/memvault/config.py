"""Configuration: one pydantic settings model, validated once at start.

Every knob is an environment variable ``MEMVAULT_<NAME>``; nothing else in the code
reads the environment.
"""

from __future__ import annotations

from functools import lru_cache

from pydantic import Field, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DAY = 86_400


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMVAULT_", extra="ignore", frozen=True)

    #: Table names are ``<table_prefix><name>`` (``memvault-memory`` by default).
    table_prefix: str = Field(default="memvault-", pattern=r"^[A-Za-z0-9_.-]{0,200}$")
    aws_region: str = "us-east-1"
    #: Another DynamoDB-compatible endpoint (the local stack, DynamoDB Local); unset on AWS.
    dynamodb_endpoint: str | None = None

    #: Expiry applied when a write names no ``ttl_seconds``.
    default_ttl_seconds: int = Field(default=90 * DAY, ge=1)
    #: Upper bound on any memory's lifetime; the API contract allows at most 365 days.
    max_ttl_seconds: int = Field(default=365 * DAY, ge=1, le=365 * DAY)
    #: How long a request id is remembered; must outlast any client's retry window.
    idempotency_ttl_seconds: int = Field(default=7 * DAY, ge=3600)
    #: Retention of audit events (the deletion log is kept without expiry).
    audit_retention_days: int = Field(default=400, ge=1)
    #: Longest version chain kept for one fact (the chain item lists every version id).
    max_versions_per_chain: int = Field(default=1000, ge=2, le=5000)

    #: Token verification (RS256): the issuer's JWKS address, expected issuer and audience.
    jwks_url: str | None = None
    jwt_issuer: str | None = None
    jwt_audience: str = "memvault"
    #: Clock skew tolerated on ``exp``/``nbf``/``iat``; bounded so that expiry stays real.
    jwt_leeway_seconds: int = Field(default=60, ge=0, le=300)
    #: How long fetched signing keys are kept before the JWKS is read again.
    jwks_cache_seconds: int = Field(default=300, ge=0, le=86_400)
    #: Silo deployments: the one tenant this stack serves (direct invocation may omit a token).
    silo_tenant_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]*$")
    #: Largest request body accepted, in bytes (413 ``payload_too_large`` beyond).
    max_body_bytes: int = Field(default=64 * 1024, ge=1024, le=6 * 1024 * 1024)

    @model_validator(mode="after")
    def _default_within_max(self) -> Settings:
        if self.default_ttl_seconds > self.max_ttl_seconds:
            raise ValueError("default_ttl_seconds must not exceed max_ttl_seconds")
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
