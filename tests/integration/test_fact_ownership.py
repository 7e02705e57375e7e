"""A caller may change a fact only when it may read the fact's current version.

A write with a ``canonical_key`` supersedes the live fact under that key. Before this
rule a token below the fact's sensitivity, or outside its visibility list, could find the
hidden fact through the 409's details (its memory id and version), supersede it with its
own text (which privileged readers were then served), and delete the whole chain by
deleting that version. Now such a write is refused with ``fact_not_writable`` (409),
whose details name the key only: no id, no version, no content. Runs on both stores.
"""

from __future__ import annotations

import pytest

from memvault.services.memory import MemoryService
from memvault_wire.errors import MemvaultError, NotFound
from memvault_wire.memory import Sensitivity
from tests.support.harness import a_write, ctx

PII = ctx(max_sensitivity=Sensitivity.PII)
LOW = ctx(max_sensitivity=Sensitivity.INTERNAL, principal="agent-low")
PLANNER = ctx(agent_role="planner")
OTHER_ROLE = ctx(agent_role="scraper", principal="agent-scraper")

HIDDEN_PII = "Reach Lin at lin@example.com for the payroll files"


def _refused(raised: pytest.ExceptionInfo[MemvaultError], key: str) -> None:
    err = raised.value
    assert (err.code, err.status) == ("fact_not_writable", 409)
    assert err.details == {"canonical_key": key}
    assert "mem_" not in str(err.to_body()) and "version" not in str(err.details)


def test_a_fact_above_the_callers_ceiling_cannot_be_superseded_or_probed(
    service: MemoryService,
) -> None:
    hidden = service.write(PII, "u-1", a_write(content=HIDDEN_PII, canonical_key="contact"))
    assert hidden.memory.sensitivity is Sensitivity.PII
    with pytest.raises(NotFound):
        service.get(LOW, "u-1", hidden.memory.memory_id)

    # Without a version: no silent supersede.
    with pytest.raises(MemvaultError) as raised:
        service.write(
            LOW, "u-1", a_write(request_id="r-low", content="call me", canonical_key="contact")
        )
    _refused(raised, "contact")
    # With a guessed version, right or wrong: the same answer, so nothing is learnt.
    for guess in (1, 7):
        with pytest.raises(MemvaultError) as raised:
            service.write(
                LOW,
                "u-1",
                a_write(
                    request_id=f"r-guess-{guess}",
                    content="call me",
                    canonical_key="contact",
                    expected_version=guess,
                ),
            )
        _refused(raised, "contact")

    # The privileged reader still gets the original, at version 1.
    current = service.get(PII, "u-1", hidden.memory.memory_id)
    assert (current.version, current.content) == (1, HIDDEN_PII)


def test_a_fact_outside_the_callers_visibility_cannot_be_superseded(
    service: MemoryService,
) -> None:
    hidden = service.write(
        PLANNER,
        "u-1",
        a_write(
            canonical_key="plan-style", content="Plans in weekly steps", visibility=["planner"]
        ),
    )
    with pytest.raises(MemvaultError) as raised:
        service.write(
            OTHER_ROLE,
            "u-1",
            a_write(request_id="r-scraper", canonical_key="plan-style", content="Plans daily"),
        )
    _refused(raised, "plan-style")
    # Nothing of the refused write was stored: the request id is free for another payload.
    other = service.write(
        OTHER_ROLE, "u-1", a_write(request_id="r-scraper", canonical_key="scraper-notes")
    )
    assert other.created

    # A caller that may read the fact supersedes it as before.
    again = service.write(
        PLANNER,
        "u-1",
        a_write(
            request_id="r-planner-2",
            canonical_key="plan-style",
            content="Plans in daily steps",
            visibility=["planner"],
            expected_version=1,
        ),
    )
    assert again.memory.version == 2 and again.memory.chain_id == hidden.memory.chain_id


def test_an_agent_below_the_top_ceiling_forgets_no_subject(service: MemoryService) -> None:
    """Probe 8 (M6): forgetting erases the subject's sessions, runs and artifacts too, of
    every sensitivity. An internal-ceiling agent that could read every memory (all
    internal) forgot a subject whose pii session message, pii artifact and pii run it
    could neither read nor delete directly. It is refused whatever the subject holds (the
    refusal must not tell it whether such things exist); the same agent at the pii
    ceiling, and the subject's own token at any ceiling, may forget."""
    service.write(ctx("acme", "u-3"), "u-3", a_write(request_id="r-u3", canonical_key="plan-a"))
    internal_agent = ctx("acme", "u-3", agent_role="planner")
    with pytest.raises(MemvaultError) as raised:
        service.forget(internal_agent, "u-3")
    assert (raised.value.code, raised.value.status) == ("forbidden", 403)
    assert raised.value.to_body()["error"]["details"]["max_sensitivity"] == "internal"
    top_agent = ctx("acme", "u-3", agent_role="planner", max_sensitivity=Sensitivity.PII)
    assert service.forget(top_agent, "u-3").scope.value == "subject"


def test_an_agent_forgets_a_subject_only_when_it_may_read_every_memory(
    service: MemoryService,
) -> None:
    """Security review (issue 18): an agent token below a memory's ceiling, or outside its
    visibility, forgot the whole subject, facts it could not read included. An agent may
    only delete what it may read; the subject's own token (no agent role) may always ask
    for erasure, whatever its ceiling."""
    hidden = service.write(PII, "u-1", a_write(content=HIDDEN_PII, canonical_key="contact"))
    planned = service.write(
        PLANNER,
        "u-1",
        a_write(request_id="r-plan", canonical_key="plan", visibility=["planner"]),
    )
    low_agent = ctx(agent_role="planner", principal="agent-low")  # internal ceiling
    for caller in (low_agent, OTHER_ROLE):
        with pytest.raises(MemvaultError) as raised:
            service.forget(caller, "u-1")
        assert (raised.value.code, raised.value.status) == ("forbidden", 403)
        assert "mem_" not in str(raised.value.to_body())
    assert service.get(PII, "u-1", hidden.memory.memory_id).version == 1
    assert service.get(PLANNER, "u-1", planned.memory.memory_id).version == 1

    # An agent that may read everything the subject holds may forget it.
    owner_2 = ctx("acme", "u-2", max_sensitivity=Sensitivity.PII)
    service.write(owner_2, "u-2", a_write(request_id="r-u2", content=HIDDEN_PII, canonical_key="c"))
    able = ctx("acme", "u-2", agent_role="planner", max_sensitivity=Sensitivity.PII)
    assert service.forget(able, "u-2").scope.value == "subject"

    job = service.forget(LOW, "u-1")  # the subject's own token, internal ceiling
    assert job.scope.value == "subject"
    with pytest.raises(NotFound):
        service.get(PII, "u-1", hidden.memory.memory_id)
    with pytest.raises(NotFound):
        service.get(PLANNER, "u-1", planned.memory.memory_id)
