"""The access context: who is calling, built only from verified identity claims."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from memvault_wire.errors import Forbidden, ValidationFailed
from memvault_wire.memory import Sensitivity
from memvault_wire.types import AgentRole, SubjectId, TenantId


class Scope(StrEnum):
    MEMORY_READ = "memory:read"
    MEMORY_WRITE = "memory:write"
    MEMORY_DELETE = "memory:delete"
    SESSIONS_WRITE = "sessions:write"
    RUNS_WRITE = "runs:write"
    ARTIFACTS_WRITE = "artifacts:write"
    SUBJECTS_ANY = "subjects:any"


class AccessContext(BaseModel):
    """Verified caller. ``tenant_id`` here is the only source of the tenant anywhere."""

    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)

    tenant_id: TenantId
    principal: str = Field(min_length=1, max_length=256)
    #: When set, the caller may act only for this subject (unless it has ``subjects:any``).
    subject_id: SubjectId | None = None
    scopes: frozenset[Scope] = frozenset()
    agent_role: AgentRole | None = None
    max_sensitivity: Sensitivity = Sensitivity.INTERNAL

    @property
    def requester(self) -> str:
        """Who asked, as a deletion job records it: the principal with its agent role and
        ceiling. Tokens that share a ``sub`` (a service's, or a console's dev tokens) with
        another role or a lower ceiling are other requesters: a repeat delete is answered
        only to the requester that may read what it deleted."""
        role = f"/{self.agent_role}" if self.agent_role else ""
        return f"{self.principal}{role}@{self.max_sensitivity.value}"

    def require(self, scope: Scope) -> None:
        if scope not in self.scopes:
            raise Forbidden(
                f"this operation needs the scope '{scope.value}' in the token",
                {"required_scope": scope.value},
            )

    def require_subject(self, subject_id: str) -> None:
        if Scope.SUBJECTS_ANY in self.scopes:
            return
        if self.subject_id is None or self.subject_id != subject_id:
            raise Forbidden(
                "the token may not act for this subject; use a token for this subject "
                "or one with the scope 'subjects:any'",
                {"subject_id": subject_id},
            )

    def named_subject(self, subject_id: str | None, why: str) -> str:
        """The subject a request by id means: the named one (checked against the token),
        else the token's own. A token without a subject must name one; ``why`` says so."""
        if subject_id is not None:
            self.require_subject(subject_id)
            return subject_id
        if self.subject_id is None:
            raise ValidationFailed(why, {"field": "subject_id"})
        return self.subject_id

    def may_read(self, sensitivity: Sensitivity, visibility: list[str]) -> bool:
        if sensitivity.rank > self.max_sensitivity.rank:
            return False
        # A visibility list names the agent roles that may read: it restricts agents. A
        # person (the subject's own token, a reviewer: no agent role) reads it, so that no
        # agent can hide a user's fact from the user by narrowing it to some role.
        return not visibility or self.agent_role is None or self.agent_role in visibility
