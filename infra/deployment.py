"""What a deployment serves: one tenant (silo) or many (pool), read from CDK context."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, model_validator

from infra import settings

TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,63}$"


class Quota(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    rate_limit: int = Field(default=settings.TENANT_RATE_LIMIT, ge=1)
    burst_limit: int = Field(default=settings.TENANT_BURST_LIMIT, ge=1)
    monthly_requests: int = Field(default=settings.TENANT_MONTHLY_QUOTA, ge=1)


class Tenant(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tenant_id: str = Field(pattern=TENANT_PATTERN)
    issuer: str = Field(min_length=1)
    jwks_url: HttpUrl
    audience: str = "memvault"
    quota: Quota = Quota()
    #: Retention defaults for this tenant's data.
    session_idle_seconds: int | None = Field(default=None, ge=60)
    session_max_seconds: int | None = Field(default=None, ge=60)


class Deployment(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    mode: Literal["silo", "pool"]
    tenants: list[Tenant] = Field(min_length=1)
    production: bool = False
    table_prefix: str = Field(default="memvault-", pattern=r"^[A-Za-z0-9_.-]{0,64}$")
    enable_waf: bool = False
    #: Recall's OpenSearch domain: data node type and count (see infra/settings.py).
    search_instance_type: str = Field(
        default=settings.SEARCH_INSTANCE_TYPE, pattern=r"^[a-z0-9]+\.[a-z0-9]+\.search$"
    )
    search_data_nodes: int = Field(default=settings.SEARCH_DATA_NODES, ge=1, le=30)

    @model_validator(mode="after")
    def _shape(self) -> Deployment:
        if self.mode == "silo" and len(self.tenants) != 1:
            raise ValueError("a silo deployment serves exactly one tenant")
        nodes = self.search_data_nodes
        if nodes > 1 and nodes % 2 and nodes % 3:
            raise ValueError("search_data_nodes spread over zones: 1, or a multiple of 2 or 3")
        ids = [t.tenant_id for t in self.tenants]
        if len(ids) != len(set(ids)):
            raise ValueError("tenant ids must be unique")
        return self

    @property
    def silo_tenant(self) -> str | None:
        return self.tenants[0].tenant_id if self.mode == "silo" else None

    @property
    def stack_name(self) -> str:
        suffix = self.tenants[0].tenant_id if self.mode == "silo" else "pool"
        return f"Memvault-{suffix}"


def from_context(get: Any, base_dir: Path) -> Deployment:
    """Read the deployment from CDK context (``--context mode=pool`` and so on).

    silo: ``tenant`` (required), ``issuer`` and ``jwks_url`` for its token issuer.
    pool: ``tenants_file``, a JSON list of tenants (see ``infra/tenants.example.json``).
    Both: ``production``, ``table_prefix``, ``enable_waf``, ``search_instance_type``,
    ``search_data_nodes``.
    """
    mode = get("mode") or "silo"
    common = {
        "mode": mode,
        "production": str(get("production")).lower() == "true",
        "table_prefix": get("table_prefix") or "memvault-",
        "enable_waf": str(get("enable_waf")).lower() == "true",
        "search_instance_type": get("search_instance_type") or settings.SEARCH_INSTANCE_TYPE,
        "search_data_nodes": int(get("search_data_nodes") or settings.SEARCH_DATA_NODES),
    }
    if mode == "pool":
        path = Path(get("tenants_file") or "infra/tenants.example.json")
        path = path if path.is_absolute() else base_dir / path
        tenants = json.loads(path.read_text())
        return Deployment.model_validate({**common, "tenants": tenants})
    tenant = get("tenant")
    if not tenant:
        raise ValueError("a silo deployment needs --context tenant=<tenant id>")
    return Deployment.model_validate(
        {
            **common,
            "tenants": [
                {
                    "tenant_id": tenant,
                    "issuer": get("issuer") or f"https://auth.example.com/{tenant}",
                    "jwks_url": get("jwks_url")
                    or f"https://auth.example.com/{tenant}/.well-known/jwks.json",
                }
            ],
        }
    )
