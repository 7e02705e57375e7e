"""What a deployment serves: one tenant (silo) or many (pool), read from CDK context."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, HttpUrl, StrictInt, model_validator

from infra import settings

TENANT_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,63}$"
#: One address; more recipients subscribe to the alarm topic (its ARN is a stack output).
EMAIL_PATTERN = r"^[^@\s,;]+@[^@\s,;]+\.[A-Za-z]{2,}$"
#: A standard SNS topic (CloudWatch alarms cannot publish to a FIFO topic).
SNS_TOPIC_ARN_PATTERN = r"^arn:aws[a-z-]*:sns:[a-z]{2}(-[a-z]+)+-\d:\d{12}:[A-Za-z0-9_-]{1,256}$"
#: Lambda function names: letters, digits, hyphens and underscores, at most 64.
FUNCTION_NAME_LIMIT = 64


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
    #: Reserved concurrency per function (by its name in settings.FUNCTIONS); a function
    #: not named here reserves none and draws on the account's unreserved pool.
    reserved_concurrency: dict[str, Annotated[StrictInt, Field(ge=1)]] = Field(default_factory=dict)
    #: Alarm notifications: an email subscription to the stack's alarm topic, and/or an
    #: existing topic the alarms publish to besides it.
    alarm_email: str | None = Field(default=None, pattern=EMAIL_PATTERN)
    alarm_topic_arn: str | None = Field(default=None, pattern=SNS_TOPIC_ARN_PATTERN)
    #: Recall's reranker (opt-in): a Bedrock reranking model id, such as
    #: ``amazon.rerank-v1:0`` or ``cohere.rerank-v3-5:0``, enabled in the account's region.
    rerank_model: str | None = Field(default=None, pattern=r"^[a-z0-9-]+\.[a-z0-9.:-]{1,100}$")

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
        unknown = sorted(set(self.reserved_concurrency) - set(settings.FUNCTIONS))
        if unknown:
            raise ValueError(
                f"reserved_concurrency names no such function: {', '.join(unknown)} "
                f"(the functions: {', '.join(settings.FUNCTIONS)})"
            )
        return self

    @property
    def silo_tenant(self) -> str | None:
        return self.tenants[0].tenant_id if self.mode == "silo" else None

    @property
    def stack_name(self) -> str:
        suffix = self.tenants[0].tenant_id if self.mode == "silo" else "pool"
        return f"Memvault-{suffix}"

    @property
    def reserved_concurrency_total(self) -> int:
        """What the functions reserve together; the account's concurrency quota must be at
        least this plus the 100 that Lambda keeps unreserved."""
        return sum(self.reserved_concurrency.values())

    @property
    def direct_function_name(self) -> str:
        """The direct-invocation function's physical name (a stack output), so that agent
        runtimes know what to invoke: ``<stack name>-direct``, shortened with a digest of
        the full name where that would pass Lambda's 64 characters."""
        suffix = "-direct"
        base = re.sub(r"[^A-Za-z0-9_-]", "-", self.stack_name)
        if len(base) + len(suffix) > FUNCTION_NAME_LIMIT:
            digest = hashlib.sha256(base.encode()).hexdigest()[:8]
            base = f"{base[: FUNCTION_NAME_LIMIT - len(suffix) - len(digest) - 1]}-{digest}"
        return f"{base}{suffix}"


def _reserved_concurrency(value: Any) -> dict[str, Any]:
    """``reserved_concurrency`` as given: absent or ``false`` (none), ``true`` (each
    function's reservation in ``settings.FUNCTIONS``), or a JSON object of function name
    to count (a dict where cdk.json gives one)."""
    if isinstance(value, dict):
        return value
    text = "" if value is None else str(value).strip()
    if text.lower() in ("", "false"):
        return {}
    if text.lower() == "true":
        return {name: limits["reserved"] for name, limits in settings.FUNCTIONS.items()}
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ValueError(
            "reserved_concurrency: true, false, or a JSON object of function name to count, "
            f'such as \'{{"api": 100, "purge": 5}}\'; got {text!r}'
        )
    return parsed


def from_context(get: Any, base_dir: Path) -> Deployment:
    """Read the deployment from CDK context (``--context mode=pool`` and so on).

    silo: ``tenant`` (required), ``issuer`` and ``jwks_url`` for its token issuer.
    pool: ``tenants_file``, a JSON list of tenants (see ``infra/tenants.example.json``).
    Both: ``production``, ``table_prefix``, ``enable_waf``, ``search_instance_type``,
    ``search_data_nodes``, and:

    ``reserved_concurrency``: none by default, so that a new account (whose concurrency
    quota may be 10, or 1000) can deploy. ``true`` reserves each function's count in
    ``settings.FUNCTIONS`` (216 in all); a JSON object reserves only what it names, such as
    ``'{"api": 100, "purge": 5}'`` (function names: api, authorizer, direct, sweeper,
    indexer, purge; counts of at least 1). Lambda keeps 100 of the account's concurrency
    unreserved, so the sum of the reservations plus 100 must not exceed the account's
    quota (``aws lambda get-account-settings``: ``ConcurrentExecutions``), or the deploy
    fails on the first function past it.

    ``alarm_email``: an address subscribed to the stack's alarm topic (it confirms by
    mail). ``alarm_topic_arn``: an existing standard SNS topic in the stack's region that
    every alarm also publishes to (its policy, and its key's if encrypted, must let
    CloudWatch publish). See docs/deploy.md.

    ``rerank_model``: a Bedrock reranking model id (``amazon.rerank-v1:0``,
    ``cohere.rerank-v3-5:0``) that reorders recall's best items; off by default. The API
    and direct functions may then call ``bedrock:Rerank`` (an action that takes no
    resource) and invoke that one model.
    """
    mode = get("mode") or "silo"
    common = {
        "mode": mode,
        "production": str(get("production")).lower() == "true",
        "table_prefix": get("table_prefix") or "memvault-",
        "enable_waf": str(get("enable_waf")).lower() == "true",
        "search_instance_type": get("search_instance_type") or settings.SEARCH_INSTANCE_TYPE,
        "search_data_nodes": int(get("search_data_nodes") or settings.SEARCH_DATA_NODES),
        "reserved_concurrency": _reserved_concurrency(get("reserved_concurrency")),
        "alarm_email": get("alarm_email") or None,
        "alarm_topic_arn": get("alarm_topic_arn") or None,
        "rerank_model": get("rerank_model") or None,
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
