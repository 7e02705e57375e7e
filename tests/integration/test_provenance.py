"""Provenance comes from the verified identity, not from what the caller says.

Before this rule an agent token could write ``user_confirmed`` or ``human_review``
memories (straight to active, top trust), confirm its own ``model_inferred`` candidate,
and edit a user's memory while keeping the user's source. Runs on both stores.
"""

from __future__ import annotations

from typing import Any

import pytest

from memvault.errors import MemvaultError, ProvenanceNotAllowed, ValidationFailed
from memvault.models.access import Scope
from memvault.models.memory import MemoryPatch, MemoryStatus, SourceType
from memvault.services.memory import MemoryService
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


def test_an_agents_edit_of_the_users_memory_takes_the_agents_provenance(
    service: MemoryService,
) -> None:
    said = service.write(USER, "u-1", a_write(source=_source("user_confirmed"))).memory

    edited = service.correct(
        AGENT,
        "u-1",
        said.memory_id,
        MemoryPatch(expected_version=1, content="Prefers English for internal documents"),
    )

    # Not the user's confirmation any more: the agent's inference, waiting for a person.
    assert edited.source.type is SourceType.MODEL_INFERRED and edited.source.ref is None
    assert edited.status is MemoryStatus.CANDIDATE
    with pytest.raises(ProvenanceNotAllowed):
        service.correct(
            AGENT,
            "u-1",
            edited.memory_id,
            MemoryPatch(expected_version=2, source=_source("user_confirmed")),
        )


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
