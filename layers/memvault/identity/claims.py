"""The claims memvault reads from a verified token, and the access context they make.

On API Gateway the authorizer passes these claims on as its context (flat strings);
handlers rebuild the access context from that context only, never from headers or body.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from memvault.models.access import AccessContext, Scope
from memvault_wire.errors import Unauthorized
from memvault_wire.memory import Sensitivity
from memvault_wire.types import AgentRole, SubjectId, TenantId

_READABLE_LEVELS = (Sensitivity.PUBLIC, Sensitivity.INTERNAL, Sensitivity.PII)


class Claims(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    tenant_id: TenantId
    sub: str = Field(min_length=1, max_length=256)
    subject_id: SubjectId | None = None
    scope: str = ""
    agent_role: AgentRole | None = None
    max_sensitivity: Sensitivity = Sensitivity.INTERNAL

    @field_validator("subject_id", "agent_role", mode="before")
    @classmethod
    def _empty_is_none(cls, value: Any) -> Any:
        return None if value == "" else value

    @field_validator("max_sensitivity")
    @classmethod
    def _readable_level(cls, value: Sensitivity) -> Sensitivity:
        if value not in _READABLE_LEVELS:
            raise ValueError("max_sensitivity must be public, internal or pii")
        return value

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Claims:
        try:
            return cls.model_validate(raw)
        except ValidationError as err:
            fields = sorted({str(e["loc"][0]) for e in err.errors() if e["loc"]})
            raise Unauthorized(
                "the token's claims are missing or malformed: " + ", ".join(fields),
                {"claims": fields},
            ) from None

    def access_context(self) -> AccessContext:
        known = {s.value for s in Scope}
        return AccessContext(
            tenant_id=self.tenant_id,
            principal=self.sub,
            subject_id=self.subject_id,
            scopes=frozenset(Scope(s) for s in self.scope.split() if s in known),
            agent_role=self.agent_role,
            max_sensitivity=self.max_sensitivity,
        )

    def authorizer_context(self) -> dict[str, str]:
        """Flat string values, as API Gateway passes an authorizer's context on."""
        return {
            "tenant_id": self.tenant_id,
            "sub": self.sub,
            "subject_id": self.subject_id or "",
            "scope": self.scope,
            "agent_role": self.agent_role or "",
            "max_sensitivity": self.max_sensitivity.value,
        }
