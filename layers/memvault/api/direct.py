"""Direct invocation by agent runtimes (no API Gateway).

The event is an envelope naming an operation, its parameters and body, and the caller's
JWT, verified here exactly as the authorizer would. In a silo deployment the stack's
configured tenant may stand in for a token: IAM already decided who may invoke the
function, and the tenant can then only be that one. Either way the request runs through
the same routes as HTTP, so validation and errors are identical.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memvault.api.events import proxy_event
from memvault.identity.claims import Claims
from memvault_wire.errors import MemvaultError, Unauthorized, ValidationFailed
from memvault_wire.operations import OPERATIONS

if TYPE_CHECKING:
    from memvault.config import Settings
    from memvault.identity.authorizer import Verifier

_PARAM = r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}$"


class SiloCaller(BaseModel):
    """Who is calling, in a silo deployment without a token (the tenant is the stack's)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    sub: str = Field(min_length=1, max_length=256)
    subject_id: str | None = None
    scope: str = Field(min_length=1)
    agent_role: str | None = None
    max_sensitivity: Literal["public", "internal", "pii"] = "internal"


class Envelope(BaseModel):
    model_config = ConfigDict(extra="forbid", defer_build=True)

    operation: str
    token: str | None = Field(default=None, min_length=1)
    caller: SiloCaller | None = None
    params: dict[str, str] = Field(default_factory=dict)
    query: dict[str, str] = Field(default_factory=dict)
    body: dict[str, Any] | None = None


def _claims(envelope: Envelope, settings: Settings, verifier: Callable[[], Verifier]) -> Claims:
    if envelope.token is not None:
        claims = verifier().verify(envelope.token)
        if settings.silo_tenant_id and claims.tenant_id != settings.silo_tenant_id:
            raise Unauthorized("the token is for another tenant than this deployment's")
        return claims
    if settings.silo_tenant_id and envelope.caller is not None:
        return Claims.parse({"tenant_id": settings.silo_tenant_id, **envelope.caller.model_dump()})
    raise Unauthorized(
        "send the caller's JWT as 'token'"
        + (" (or, in this silo deployment, a 'caller')" if settings.silo_tenant_id else "")
    )


def _path(envelope: Envelope) -> tuple[str, str]:
    if envelope.operation not in OPERATIONS:
        raise ValidationFailed(
            f"unknown operation; use one of: {', '.join(sorted(OPERATIONS))}",
            {"field": "operation"},
        )
    method, template = OPERATIONS[envelope.operation]
    for name, value in envelope.params.items():
        if not re.match(_PARAM, value):
            raise ValidationFailed(f"params.{name} is not a valid id", {"field": f"params.{name}"})
    try:
        return method, template.format(**envelope.params)
    except KeyError as missing:
        raise ValidationFailed(
            f"this operation needs params.{missing.args[0]}", {"field": f"params.{missing.args[0]}"}
        ) from None


def handle_direct(
    event: dict[str, Any],
    context: Any,
    *,
    settings: Settings,
    verifier: Callable[[], Verifier],
    api: Callable[[dict[str, Any], Any], dict[str, Any]],
) -> dict[str, Any]:
    """Answer ``{"statusCode": ..., "headers": ..., "body": <parsed JSON>}``."""
    try:
        try:
            envelope = Envelope.model_validate(event)
        except ValidationError as err:
            fields = sorted({".".join(str(p) for p in e["loc"]) for e in err.errors()})
            raise ValidationFailed(
                "the invocation envelope is malformed at: " + ", ".join(fields),
                {"fields": fields},
            ) from None
        method, path = _path(envelope)
        claims = None if envelope.operation == "health" else _claims(envelope, settings, verifier)
        response = api(
            proxy_event(
                method,
                path,
                claims=claims,
                stage="direct",
                query=envelope.query or None,
                body=json.dumps(envelope.body) if envelope.body is not None else None,
            ),
            context,
        )
    except MemvaultError as err:
        return {"statusCode": err.status, "headers": {}, "body": err.to_body()}
    raw = response.get("body")
    return {
        "statusCode": response["statusCode"],
        "headers": response.get("headers") or {},
        "body": json.loads(raw) if raw else None,
    }
