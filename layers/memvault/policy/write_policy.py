"""The write policy, applied to every new version before anything is stored.

Order matters for the caller: a declared or detected secret is refused first (it must
never be stored, whatever the consent), then personal data in an agent role (a
``visibility`` entry), then consent is required (with a PII-specific reason when personal
data was recognised), then the lifetime is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from memvault.config import Settings
from memvault.policy.echo import echoable
from memvault.policy.pii import PiiFinding, find_pii, find_structured_pii, personal_id_findings
from memvault.policy.secrets import find_secrets
from memvault_wire.errors import ConsentRequired, SecretDetected, ValidationFailed
from memvault_wire.memory import MemoryStatus, Sensitivity, Source, SourceType


@dataclass(frozen=True)
class Draft:
    """The fields of a version-to-be that the policy judges."""

    content: str
    canonical_key: str | None
    tags: list[str]
    scope: dict[str, str]
    source: Source
    sensitivity: Sensitivity
    consent: bool
    #: Set when the caller confirmed a model-inferred memory (or it was active before).
    confirmed: bool = False
    #: Free-text identifiers that are stored too (request id, artifact id).
    identifiers: dict[str, str | None] = field(default_factory=dict)
    #: The agent roles the memory is visible to (``visibility``): stored with it, kept in
    #: the search index and shown to its readers.
    visibility: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Decision:
    sensitivity: Sensitivity
    status: MemoryStatus
    pii_types: tuple[str, ...]


def _text_fields(draft: Draft) -> list[tuple[str, str]]:
    fields = [("content", draft.content)]
    if draft.canonical_key:
        fields.append(("canonical_key", draft.canonical_key))
    fields += [(f"tags[{i}]", tag) for i, tag in enumerate(draft.tags)]
    fields += [(f"scope.{key}", f"{key}: {value}") for key, value in draft.scope.items()]
    if draft.source.ref:
        fields.append(("source.ref", draft.source.ref))
    if draft.source.thread:
        fields.append(("source.thread", draft.source.thread))
    return fields


def _shown(field: str, scope: dict[str, str]) -> str:
    """A field as a refusal names it: a scope entry by its key, unless the key is or holds
    what the refusal is about (a credential, personal data): then by its place, so that
    the answer never repeats it. Judged for the fields a refusal names only."""
    keys = list(scope)
    key = field.removeprefix("scope.")
    if key == field or key not in keys or echoable(key):
        return field
    return f"scope.<key {keys.index(key)}>"


def evaluate(draft: Draft) -> Decision:
    if draft.sensitivity is Sensitivity.SECRET:
        raise SecretDetected(
            "secrets are never stored as memory; keep them in a secret manager and store a "
            "reference to it instead",
            {"field": "sensitivity"},
        )
    fields = _text_fields(draft)
    # Identifiers are scanned for credentials too, but not for personal data: digit runs
    # in random ids look like phone numbers.
    identifiers = [(name, value) for name, value in draft.identifiers.items() if value]
    roles = [(f"visibility[{i}]", role) for i, role in enumerate(draft.visibility)]
    secrets = find_secrets(fields + identifiers + roles)
    if secrets:
        raise SecretDetected(
            "the memory contains what looks like a credential; remove it (store a reference "
            "to a secret manager instead) and write again",
            {
                "findings": [
                    {"field": _shown(s.field, draft.scope), "type": s.secret_type} for s in secrets
                ]
            },
        )
    _refuse_personal_roles(roles)
    pii = _unique(find_pii(fields) + find_structured_pii(draft.scope, "scope"))
    pii_types = tuple(sorted({p.pii_type for p in pii}))
    if not draft.consent:
        if pii or draft.sensitivity is Sensitivity.PII:
            raise ConsentRequired(
                "the memory contains personal data; it can be stored only with the subject's "
                "consent (set consent: true once it is given)",
                {
                    "reason": "pii",
                    "pii_types": list(pii_types),
                    "fields": [_shown(p.field, draft.scope) for p in pii],
                },
            )
        raise ConsentRequired(
            "long-term memory is kept only with the subject's consent; set consent: true once "
            "it is given",
            {"reason": "long_term_memory"},
        )
    sensitivity = Sensitivity.PII if pii else draft.sensitivity
    inferred = draft.source.type is SourceType.MODEL_INFERRED
    status = MemoryStatus.CANDIDATE if inferred and not draft.confirmed else MemoryStatus.ACTIVE
    return Decision(sensitivity=sensitivity, status=status, pii_types=pii_types)


def _unique(findings: list[PiiFinding]) -> list[PiiFinding]:
    return list(dict.fromkeys(findings))


def _refuse_personal_roles(roles: list[tuple[str, str]]) -> None:
    """A ``visibility`` entry names an agent role, matched against the ``agent_role`` of
    tokens: an identifier, not content. It is kept in the search index and shown with the
    memory, and no consent or classification of the memory could withhold it from the
    agents it names, so personal data in one (an e-mail address as a role) is refused
    outright, as in every other id, rather than kept with consent."""
    found = personal_id_findings(roles)
    if found:
        first = found[0]
        raise ValidationFailed(
            f"{first.field} holds personal data ({first.pii_type}); a visibility entry is an "
            "agent role (the agent_role of the tokens that may read the memory), not a "
            "person: name the role (planner, billing-agent) and keep the person's details "
            "in the content",
            {
                "field": first.field,
                "reason": "pii_in_id",
                "pii_types": sorted({f.pii_type for f in found}),
            },
        )


def expiry(now: datetime, ttl_seconds: int | None, settings: Settings) -> datetime:
    ttl = settings.default_ttl_seconds if ttl_seconds is None else ttl_seconds
    if ttl > settings.max_ttl_seconds:
        raise ValidationFailed(
            f"ttl_seconds may be at most {settings.max_ttl_seconds} in this deployment",
            {"field": "ttl_seconds", "max": settings.max_ttl_seconds},
        )
    return now + timedelta(seconds=ttl)
