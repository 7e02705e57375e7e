"""What provenance a caller may claim, derived from its verified identity.

A memory's source type decides its trust: ``user_confirmed`` and ``human_review`` go
straight to active at the top of the ranking, ``model_inferred`` waits as a candidate.
So the source is not whatever the caller says; it is checked against who the token says
the caller is:

- an **agent** (a token with an ``agent_role``) may claim ``user_statement`` (with a
  ``source.ref`` to what the user said), ``tool_result`` or ``model_inferred``;
- the **user** (a token without an agent role, acting for its own subject) may also
  claim ``user_confirmed``;
- a **reviewer** (a token without an agent role holding ``subjects:any``: a person or
  service of the tenant acting for any subject) may claim anything, ``human_review``
  included.

Confirming a candidate needs a person (user or reviewer); a session's ``system``
messages need the tenant's service (the reviewer kind of token). A source says where the
content came from, so a correction that changes the content takes the corrector's
provenance: the source it sends (checked as above), or, when it sends none, its own
(``model_inferred`` for an agent, so its edit waits as a candidate; ``user_statement``
for the user; ``human_review`` for a reviewer). A correction that leaves the content
alone (tags, visibility, lifetime) keeps the source, unless it sends one.
"""

from __future__ import annotations

from enum import StrEnum

from memvault.models.access import AccessContext, Scope
from memvault_wire.errors import ProvenanceNotAllowed, ValidationFailed
from memvault_wire.memory import MemoryStatus, Sensitivity, Source, SourceType


class Caller(StrEnum):
    AGENT = "agent"
    USER = "user"
    REVIEWER = "reviewer"


_MAY_CLAIM: dict[Caller, frozenset[SourceType]] = {
    Caller.AGENT: frozenset(
        {SourceType.USER_STATEMENT, SourceType.TOOL_RESULT, SourceType.MODEL_INFERRED}
    ),
    Caller.USER: frozenset(
        {
            SourceType.USER_STATEMENT,
            SourceType.USER_CONFIRMED,
            SourceType.TOOL_RESULT,
            SourceType.MODEL_INFERRED,
        }
    ),
    Caller.REVIEWER: frozenset(SourceType),
}

#: The source a correction takes when the corrector sends none and may not keep the old.
_OWN: dict[Caller, SourceType] = {
    Caller.AGENT: SourceType.MODEL_INFERRED,
    Caller.USER: SourceType.USER_STATEMENT,
    Caller.REVIEWER: SourceType.HUMAN_REVIEW,
}


def caller_kind(ctx: AccessContext) -> Caller:
    if ctx.agent_role is not None:
        return Caller.AGENT
    if Scope.SUBJECTS_ANY in ctx.scopes:
        return Caller.REVIEWER
    return Caller.USER


def _article(word: str) -> str:
    """The article for a caller kind (agent, user, reviewer): "a user", "an agent"."""
    return "an" if word[:1] in "aeio" else "a"


def check_claim(ctx: AccessContext, source: Source) -> None:
    """Refuse a source the caller's identity does not allow it to claim."""
    kind = caller_kind(ctx)
    if source.type not in _MAY_CLAIM[kind]:
        allowed = sorted(t.value for t in _MAY_CLAIM[kind])
        raise ProvenanceNotAllowed(
            f"{_article(kind.value)} {kind.value} token may not claim source type "
            f"'{source.type.value}'; "
            f"it may claim {', '.join(allowed)}",
            {"source_type": source.type.value, "caller": kind.value, "allowed": allowed},
        )
    if kind is Caller.AGENT and source.type is SourceType.USER_STATEMENT and not source.ref:
        raise ValidationFailed(
            "an agent that records what the user said must point to it: set source.ref "
            "(a message or turn id)",
            {"field": "source.ref"},
        )


def check_confirm(ctx: AccessContext) -> None:
    """Only a person (the user, or a reviewer) turns a candidate into an active memory."""
    if caller_kind(ctx) is Caller.AGENT:
        raise ProvenanceNotAllowed(
            "an agent token may not confirm a candidate memory; the user or a reviewer "
            "confirms it (a token without agent_role)",
            {"caller": Caller.AGENT.value, "action": "confirm"},
        )


def check_reclassify(
    ctx: AccessContext,
    current: tuple[Sensitivity, list[str]],
    new: tuple[Sensitivity, list[str]],
) -> None:
    """Lowering a memory's sensitivity or widening its visibility decides who else may read
    what the user said: a person's decision (the user, or a reviewer), never an agent's. An
    agent may raise the sensitivity and narrow the visibility (that only hides more)."""
    if caller_kind(ctx) is not Caller.AGENT:
        return
    (old_sensitivity, old_visibility), (new_sensitivity, new_visibility) = current, new
    lowered = new_sensitivity.rank < old_sensitivity.rank
    widened = bool(old_visibility) and (
        not new_visibility or not set(new_visibility) <= set(old_visibility)
    )
    if lowered or widened:
        raise ProvenanceNotAllowed(
            "an agent token may not lower a memory's sensitivity or widen its visibility; "
            "the user or a reviewer (a token without agent_role) reclassifies it. An agent "
            "may raise the sensitivity or narrow the visibility",
            {
                "caller": Caller.AGENT.value,
                "action": "declassify" if lowered else "widen_visibility",
            },
        )


#: Sources a person vouched for: the user's confirmation, a reviewer's decision.
_PERSON_CONFIRMED = frozenset({SourceType.USER_CONFIRMED, SourceType.HUMAN_REVIEW})


def check_supersede(
    ctx: AccessContext,
    current: tuple[MemoryStatus, SourceType],
    new: MemoryStatus,
    *,
    content_changed: bool,
) -> None:
    """What a new version may do to the one it replaces, whether it comes as a correction
    or as a write under the same canonical key:

    - an unconfirmed version (a ``model_inferred`` one, waiting as a candidate) may not
      take an active fact's place: the fact would stop being recalled on a guess no one
      confirmed;
    - a candidate turned active is a confirmation, a person's, whatever turns it (the
      status, a source claimed anew, a write over it);
    - the content a person vouched for (``user_confirmed``, ``human_review``) is changed by
      a person only: an agent's claim (``tool_result``, ``user_statement`` with a ref no one
      checks) may not replace it.
    """
    status, source = current
    if status is MemoryStatus.ACTIVE and new is MemoryStatus.CANDIDATE:
        raise ProvenanceNotAllowed(
            "an unconfirmed (model_inferred) version may not replace an active memory: "
            "write the inference as a memory of its own, without this canonical key, for "
            "the user or a reviewer to confirm; or send the source it came from "
            "(user_statement with source.ref, or tool_result)",
            {"action": "supersede_active", "current_status": status.value},
        )
    if status is MemoryStatus.CANDIDATE and new is MemoryStatus.ACTIVE:
        check_confirm(ctx)
    agent = caller_kind(ctx) is Caller.AGENT
    if agent and content_changed and status is MemoryStatus.ACTIVE and source in _PERSON_CONFIRMED:
        raise ProvenanceNotAllowed(
            "this memory's content was confirmed by a person (user_confirmed or "
            "human_review); an agent token may not replace it. Write what the agent learned "
            "as a memory of its own for the user or a reviewer to confirm",
            {"caller": Caller.AGENT.value, "action": "replace_confirmed"},
        )


def check_system_message(ctx: AccessContext) -> None:
    """A session's ``system`` messages carry the platform's instructions into assembled
    context: only the tenant's own service (``subjects:any``, no agent role) writes them."""
    if caller_kind(ctx) is not Caller.REVIEWER:
        raise ProvenanceNotAllowed(
            "only the tenant's service (a token with subjects:any and no agent_role) may "
            "append system messages; an agent or the subject appends user, assistant or "
            "tool messages",
            {"caller": caller_kind(ctx).value, "role": "system"},
        )


def corrected_source(
    ctx: AccessContext, current: Source, sent: Source | None, content_changed: bool
) -> Source:
    """The source of a correction's new version (see the module's rules)."""
    if sent is not None:
        check_claim(ctx, sent)
        return sent
    if not content_changed:
        return current
    return Source(type=_OWN[caller_kind(ctx)], ref=None)
