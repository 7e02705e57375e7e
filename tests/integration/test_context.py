"""Working memory: assembled within the budget, policy and goal always kept, lowest
priority trimmed first, and reproducible from its manifest."""

from __future__ import annotations

import pytest

from memvault.models.access import Scope
from memvault.services.bundle import Services
from memvault.services.context import POLICY
from memvault.services.tokens import Cl100kCounter
from memvault_wire.context import AssembledContext, ContextRequest
from memvault_wire.errors import NotFound, ValidationFailed
from memvault_wire.run import Advance, CreateRun, RecordOperation, RunStatus
from memvault_wire.session import AppendMessage
from tests.support.harness import FakeClock, a_write, ctx

EVERYTHING = frozenset(Scope) - {Scope.SUBJECTS_ANY}


def me():  # type: ignore[no-untyped-def]
    return ctx(scopes=EVERYTHING)


@pytest.fixture
def world(services: Services, clock: FakeClock) -> Services:
    """A subject with memories, a live session and a run waiting for approval."""
    for i, text in enumerate(
        [
            "Prefers Chinese for internal technical documents",
            "Prefers English for external API documents",
            "Works in the Asia/Shanghai time zone",
        ]
    ):
        services.memory.write(
            me(), "u-1", a_write(request_id=f"m{i}", canonical_key=f"k{i}", content=text)
        )
        clock.advance(seconds=1)
    for i in range(6):
        services.sessions.append(
            me(),
            "u-1",
            "s-1",
            AppendMessage(
                request_id=f"msg{i}",
                role="user" if i % 2 == 0 else "assistant",
                content=f"message number {i} about the refund for order 77{i}",
            ),
        )
    services.runs.create(me(), "run-1", CreateRun(subject_id="u-1", plan_version="p3"))
    services.runs.advance(
        me(), "run-1", Advance(expected_version=1, status=RunStatus.RUNNING, step="refund")
    )
    services.runs.record_operation(
        me(), "run-1", "refund-77", RecordOperation(status="COMMITTED", result_ref="payments:tx-1")
    )  # type: ignore[arg-type]
    return services


def assemble(services: Services, budget: int, **extra: object) -> AssembledContext:
    return services.context.assemble(
        me(),
        "u-1",
        ContextRequest.model_validate(
            {
                "goal": "Answer the customer's refund question",
                "token_budget": budget,
                "session_id": "s-1",
                "run_id": "run-1",
                **extra,
            }
        ),
    )


def ids(result: AssembledContext, section: str) -> list[str]:
    return [i.id for i in result.sections[section]]


def test_a_generous_budget_keeps_every_section_in_order(world: Services) -> None:
    result = assemble(world, 4000)
    assert list(result.sections) == [
        "policy",
        "goal",
        "run_state",
        "evidence",
        "session",
        "memories",
    ]
    assert result.sections["policy"][0].content == POLICY
    assert "committed side effects: refund-77 -> payments:tx-1" in (
        result.sections["run_state"][0].content
    )
    assert [i.version for i in result.sections["session"]] == [1, 2, 3, 4, 5, 6]
    assert len(result.sections["memories"]) == 3
    assert result.manifest.dropped == []


def test_token_counts_come_from_the_cl100k_tokenizer(world: Services) -> None:
    counter = Cl100kCounter()
    assert counter.count("tiktoken is great!") == 6  # tiktoken's own documented example
    result = assemble(world, 4000)
    for section in result.sections.values():
        for item in section:
            assert item.tokens == counter.count(item.content)


def test_the_budget_is_respected_and_trimming_starts_from_the_lowest_priority(
    world: Services,
) -> None:
    full = assemble(world, 4000)
    needed = full.manifest.used_tokens
    budget = int((needed - 40) * 1.25) + 1  # 20% reserve, about 40 tokens short
    tight = assemble(world, budget)

    assert tight.manifest.used_tokens <= budget - tight.manifest.output_reserve
    assert ids(tight, "policy") == ["policy"]
    assert ids(tight, "goal") == ["goal"]
    assert ids(tight, "run_state") == ["run:run-1"]
    dropped = {d.id: d for d in tight.manifest.dropped}
    assert dropped
    assert all(d.reason == "budget" for d in dropped.values())
    # Memories go before the session, and old messages before new ones.
    assert len(tight.sections["memories"]) < 3
    assert ids(tight, "session") == ids(full, "session")


def test_policy_and_goal_are_never_trimmed(world: Services) -> None:
    small = assemble(world, 256, output_reserve=150)
    assert ids(small, "policy") == ["policy"]
    assert ids(small, "goal") == ["goal"]
    with pytest.raises(ValidationFailed, match="policy and goal alone"):
        assemble(world, 256, output_reserve=230)


def test_duplicates_are_dropped_first(world: Services) -> None:
    evidence = [{"source": "crm", "content": "Prefers Chinese for internal technical documents"}]
    result = assemble(world, 4000, evidence=evidence)
    duplicates = [d for d in result.manifest.dropped if d.reason == "duplicate"]
    assert len(duplicates) == 1
    assert duplicates[0].section == "memories"


def test_the_manifest_reproduces_the_assembly(world: Services, clock: FakeClock) -> None:
    original = assemble(
        world,
        700,
        query="refund",
        evidence=[{"source": "ticket-9", "content": "Customer asks when the refund arrives"}],
    )
    # The world moves on: new messages, a new run version, a corrected memory.
    clock.advance(minutes=1)
    world.sessions.append(
        me(), "u-1", "s-1", AppendMessage(request_id="later", role="user", content="any news?")
    )
    world.runs.advance(
        me(),
        "run-1",
        Advance(
            expected_version=2,
            status=RunStatus.WAITING_APPROVAL,
            step="approval",
            pending_approvals=["a-1"],
        ),
    )

    again = world.context.reproduce(me(), "u-1", original.manifest)

    assert again.sections == original.sections
    assert again.manifest.digest == original.manifest.digest
    assert again.manifest.order == original.manifest.order


def test_a_deleted_memory_is_not_brought_back_by_reproduction(world: Services) -> None:
    original = assemble(world, 4000)
    memory_id = original.sections["memories"][0].id
    world.memory.delete(me(), "u-1", memory_id)
    with pytest.raises(NotFound):
        world.context.reproduce(me(), "u-1", original.manifest)


def test_expired_memories_are_never_assembled(world: Services, clock: FakeClock) -> None:
    world.memory.write(
        me(),
        "u-1",
        a_write(
            request_id="short",
            canonical_key="short",
            content="Temporary: on leave this week",
            ttl_seconds=60,
        ),
    )
    clock.advance(seconds=61)
    result = assemble(world, 4000)
    assert all("on leave" not in i.content for i in result.sections["memories"])
