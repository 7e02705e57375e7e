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
from memvault.models.memory import MemoryPatch, MemoryStatus, Source, SourceType
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
    # With the source it came from (what the user said), the agent's edit is a version.
    edited = service.correct(
        AGENT,
        "u-1",
        said.memory_id,
        MemoryPatch(
            expected_version=1,
            content="Prefers English for internal documents",
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
