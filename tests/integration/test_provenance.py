"""Provenance comes from the verified identity, not from what the caller says.

Before this rule an agent token could write ``user_confirmed`` or ``human_review``
memories (straight to active, top trust), confirm its own ``model_inferred`` candidate,
and edit a user's memory while keeping the user's source. Runs on both stores.
"""

from __future__ import annotations

from typing import Any

import pytest

from memvault.models.access import Scope
from memvault.services.memory import MemoryService
from memvault_wire.errors import MemvaultError, ProvenanceNotAllowed, ValidationFailed
from memvault_wire.memory import MemoryPatch, MemoryStatus, Sensitivity, Source, SourceType
from tests.support.harness import ALL_SCOPES, a_write, ctx

AGENT = ctx(agent_role="planner", principal="agent-planner")
USER = ctx(principal="user-u-1")
REVIEWER = ctx(subject=None, scopes=ALL_SCOPES | {Scope.SUBJECTS_ANY}, principal="reviewer")


def _source(kind: str, ref: str | None = "msg-1") -> dict[str, Any]:
    return {"type": kind, "ref": ref}


def _refused(raised: pytest.ExceptionInfo[MemvaultError]) -> dict[str, Any]:
    assert (raised.value.code, raised.value.status) == ("provenance_not_allowed", 403)
    return raised.value.details


@pytest.mark.parametrize("claimed", ["user_confirmed", "human_review"])
def test_an_agent_may_not_claim_a_persons_confirmation(
    service: MemoryService, claimed: str
) -> None:
    with pytest.raises(ProvenanceNotAllowed) as raised:
        service.write(AGENT, "u-1", a_write(source=_source(claimed)))
    details = _refused(raised)
    assert details["caller"] == "agent" and details["source_type"] == claimed
    assert raised.value.message.startswith(f"an agent token may not claim source type '{claimed}'")
    assert details["allowed"] == ["model_inferred", "tool_result", "user_statement"]
    assert service.list_memories(USER, "u-1").items == []  # nothing was stored


def test_an_agent_recording_the_users_words_must_point_to_them(service: MemoryService) -> None:
    with pytest.raises(ValidationFailed) as raised:
        service.write(AGENT, "u-1", a_write(source=_source("user_statement", None)))
    assert raised.value.details == {"field": "source.ref"}
    stored = service.write(AGENT, "u-1", a_write(source=_source("user_statement"))).memory
    assert stored.status is MemoryStatus.ACTIVE


def test_the_user_may_confirm_but_only_a_reviewer_may_claim_human_review(
    service: MemoryService,
) -> None:
    mine = service.write(USER, "u-1", a_write(source=_source("user_confirmed"))).memory
    assert mine.source.type is SourceType.USER_CONFIRMED
    with pytest.raises(ProvenanceNotAllowed) as raised:
        service.write(
            USER,
            "u-1",
            a_write(request_id="r-2", canonical_key="k2", source=_source("human_review")),
        )
    assert _refused(raised)["caller"] == "user"
    assert raised.value.message.startswith("a user token may not claim")
    reviewed = service.write(
        REVIEWER,
        "u-1",
        a_write(request_id="r-3", canonical_key="k3", source=_source("human_review")),
    ).memory
    assert reviewed.source.type is SourceType.HUMAN_REVIEW


def test_an_agent_cannot_confirm_its_own_inference_but_the_user_can(
    service: MemoryService,
) -> None:
    guess = service.write(AGENT, "u-1", a_write(source=_source("model_inferred"))).memory
    assert guess.status is MemoryStatus.CANDIDATE

    with pytest.raises(ProvenanceNotAllowed) as raised:
        service.correct(
            AGENT, "u-1", guess.memory_id, MemoryPatch(expected_version=1, status="active")
        )
    assert _refused(raised)["action"] == "confirm"
    held = service.get(USER, "u-1", guess.memory_id)
    assert held.status is MemoryStatus.CANDIDATE and held.version == 1

    confirmed = service.correct(
        USER, "u-1", guess.memory_id, MemoryPatch(expected_version=1, status="active")
    )
    assert confirmed.status is MemoryStatus.ACTIVE


def test_an_agent_cannot_mark_its_own_inference_active_over_an_active_memory(
    service: MemoryService,
) -> None:
    """A correction that names the agent's inference as its source and asks for status
    active confirms that inference: a person's act, even when the version it replaces is
    already active (so no candidate is being turned)."""
    said = service.write(AGENT, "u-1", a_write(source=_source("user_statement"))).memory
    with pytest.raises(ProvenanceNotAllowed) as raised:
        service.correct(
            AGENT,
            "u-1",
            said.memory_id,
            MemoryPatch(
                expected_version=1,
                status="active",
                source=Source(type=SourceType.MODEL_INFERRED),
                content="Prefers English for internal technical documents",
            ),
        )
    assert _refused(raised)["action"] == "confirm"
    held = service.get(USER, "u-1", said.memory_id)
    assert held.version == 1 and held.source.type is SourceType.USER_STATEMENT


def test_an_agents_rewrite_of_a_confirmed_inference_is_not_confirmed_by_it(
    service: MemoryService,
) -> None:
    """Found by the stateful governance test: a person confirmed an agent's inference, and
    the agent then rewrote its content. The rewrite kept the source (model_inferred, as
    before), so it counted as already confirmed and went in active: new content no person
    had seen replaced the confirmed fact. Rewritten content is a new inference, a
    candidate, which may not replace an active memory."""
    guess = service.write(AGENT, "u-1", a_write(source=_source("model_inferred", None))).memory
    confirmed = service.correct(
        USER, "u-1", guess.memory_id, MemoryPatch(expected_version=1, status="active")
    )
    assert confirmed.status is MemoryStatus.ACTIVE

    with pytest.raises(ProvenanceNotAllowed) as refused:
        service.correct(
            AGENT,
            "u-1",
            confirmed.memory_id,
            MemoryPatch(expected_version=2, content="Prefers English for internal documents"),
        )
    assert refused.value.details["action"] == "supersede_active"
    current = service.get(USER, "u-1", confirmed.memory_id)
    assert (current.version, current.content) == (2, confirmed.content)
    # The person who confirmed it may still rewrite it, and a change that keeps the
    # content (its lifetime) stays confirmed.
    kept = service.correct(
        AGENT, "u-1", confirmed.memory_id, MemoryPatch(expected_version=2, ttl_seconds=3600)
    )
    assert kept.status is MemoryStatus.ACTIVE
    rewritten = service.correct(
        USER, "u-1", kept.memory_id, MemoryPatch(expected_version=3, content="Prefers tea")
    )
    assert rewritten.status is MemoryStatus.ACTIVE


def test_an_agents_unconfirmed_edit_may_not_replace_the_users_memory(
    service: MemoryService,
) -> None:
    """A fresh probe: an agent's content edit of what the user confirmed took the agent's
    provenance (``model_inferred``, a candidate) and at once superseded the user's active
    version, so the fact stopped being recalled on a guess nobody confirmed. The edit is
    refused, the user's version stays current, and the inference may go in as a memory of
    its own (a candidate) or with the source it came from."""
    said = service.write(USER, "u-1", a_write(source=_source("user_confirmed"))).memory

    with pytest.raises(ProvenanceNotAllowed) as refused:
        service.correct(
            AGENT,
            "u-1",
            said.memory_id,
            MemoryPatch(expected_version=1, content="Prefers English for internal documents"),
        )
    assert refused.value.details["action"] == "supersede_active"
    current = service.get(USER, "u-1", said.memory_id)
    assert current.version == 1 and current.status is MemoryStatus.ACTIVE
    # Nor may an agent's inference written under the fact's canonical key replace it.
    with pytest.raises(ProvenanceNotAllowed):
        service.write(
            AGENT,
            "u-1",
            a_write(request_id="r-inferred", source=_source("model_inferred")),
        )
    # Its own memory, waiting for a person: allowed.
    own = service.write(
        AGENT,
        "u-1",
        a_write(request_id="r-own", canonical_key=None, source=_source("model_inferred")),
    ).memory
    assert own.status is MemoryStatus.CANDIDATE and own.chain_id != said.chain_id
    # On what the user said (not confirmed), the agent's edit with the source it came from
    # is a version.
    stated = service.write(
        USER, "u-1", a_write(request_id="r-stated", canonical_key="home-city")
    ).memory
    edited = service.correct(
        AGENT,
        "u-1",
        stated.memory_id,
        MemoryPatch(
            expected_version=1,
            content="Lives in Hangzhou now",
            source=Source(type=SourceType.USER_STATEMENT, ref="msg-9"),
        ),
    )
    assert edited.version == 2 and edited.status is MemoryStatus.ACTIVE


def test_an_edit_that_leaves_the_content_alone_keeps_its_source(service: MemoryService) -> None:
    """The source says where the content came from; retagging does not change that."""
    said = service.write(USER, "u-1", a_write(source=_source("user_confirmed"))).memory
    retagged = service.correct(
        AGENT, "u-1", said.memory_id, MemoryPatch(expected_version=1, tags=["checked"])
    )
    assert retagged.source == said.source and retagged.status is MemoryStatus.ACTIVE
    # Sending a source is a claim, checked even when the content stays.
    with pytest.raises(ProvenanceNotAllowed):
        service.correct(
            AGENT,
            "u-1",
            retagged.memory_id,
            MemoryPatch(expected_version=2, tags=["x"], source=_source("human_review")),
        )


def test_the_users_own_edit_keeps_or_takes_the_users_provenance(service: MemoryService) -> None:
    said = service.write(USER, "u-1", a_write(source=_source("user_confirmed"))).memory
    retagged = service.correct(
        USER, "u-1", said.memory_id, MemoryPatch(expected_version=1, tags=["x"])
    )
    assert retagged.source.type is SourceType.USER_CONFIRMED
    reworded = service.correct(
        USER,
        "u-1",
        said.memory_id,
        MemoryPatch(expected_version=2, content="Prefers English for internal documents"),
    )
    assert reworded.source.type is SourceType.USER_STATEMENT
    assert reworded.status is MemoryStatus.ACTIVE


def test_an_agent_may_not_reclassify_a_fact_by_writing_it_again(service: MemoryService) -> None:
    """A fresh probe: PATCH refused an agent's lowering of sensitivity and widening of
    visibility, but a POST under the same canonical key did both (pii to internal, one role
    to every role). The write is refused as the correction is."""
    reader = ctx(agent_role="planner", principal="agent-planner", max_sensitivity=Sensitivity.PII)
    service.write(USER, "u-1", a_write(sensitivity="pii", visibility=["planner"], request_id="r-1"))
    for change in ({"sensitivity": "internal"}, {"visibility": []}):
        with pytest.raises(ProvenanceNotAllowed):
            service.write(
                reader,
                "u-1",
                a_write(
                    request_id=f"r-{sorted(change)[0]}",
                    source=_source("tool_result"),
                    **{"sensitivity": "pii", "visibility": ["planner"], **change},
                ),
            )


def test_an_agent_may_not_confirm_its_candidate_by_claiming_another_source(
    service: MemoryService,
) -> None:
    """A fresh probe: an agent's model_inferred candidate turned active when the agent sent
    a correction claiming tool_result, or wrote the key again as tool_result. Turning a
    candidate active is a confirmation, a person's, whatever the route."""
    inferred = service.write(
        AGENT, "u-1", a_write(request_id="r-guess", source=_source("model_inferred"))
    ).memory
    assert inferred.status is MemoryStatus.CANDIDATE
    with pytest.raises(ProvenanceNotAllowed):
        service.correct(
            AGENT,
            "u-1",
            inferred.memory_id,
            MemoryPatch(expected_version=1, source=_source("tool_result")),
        )
    with pytest.raises(ProvenanceNotAllowed):
        service.write(AGENT, "u-1", a_write(request_id="r-again", source=_source("tool_result")))
    confirmed = service.correct(
        USER, "u-1", inferred.memory_id, MemoryPatch(expected_version=1, status="active")
    )
    assert confirmed.status is MemoryStatus.ACTIVE


def test_what_a_person_confirmed_an_agent_may_not_rewrite(service: MemoryService) -> None:
    """A fresh probe: an agent replaced the user's confirmed fact by writing it again as
    tool_result, or correcting it as user_statement with a made-up ref. Content a person
    vouched for is changed by a person only; an agent may still retag it."""
    said = service.write(USER, "u-1", a_write(source=_source("user_confirmed"))).memory
    with pytest.raises(ProvenanceNotAllowed):
        service.write(
            AGENT,
            "u-1",
            a_write(request_id="r-2", content="Prefers English", source=_source("tool_result")),
        )
    with pytest.raises(ProvenanceNotAllowed):
        service.correct(
            AGENT,
            "u-1",
            said.memory_id,
            MemoryPatch(
                expected_version=1,
                content="Prefers English",
                source=_source("user_statement", ref="made-up"),
            ),
        )
    retagged = service.correct(
        AGENT, "u-1", said.memory_id, MemoryPatch(expected_version=1, tags=["checked"])
    )
    assert retagged.version == 2 and retagged.status is MemoryStatus.ACTIVE
    rewritten = service.correct(
        USER,
        "u-1",
        said.memory_id,
        MemoryPatch(expected_version=2, content="Prefers English for documents"),
    )
    assert rewritten.version == 3
