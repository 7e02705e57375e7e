"""Racing retries of one request: exactly one memory, and every retry is told which.

The threads are released together by a barrier, so they all look for the request's
idempotency record before any of them has committed; what then keeps a second memory
out is the write's own atomic condition, not the read before it. (``SerializedClient``
serialises each DynamoDB call, as real DynamoDB evaluates one transaction atomically;
threads still interleave between the read and the conditional transaction.)

Two shapes of race: a memory without a canonical key, where nothing but the request's
idempotency record can refuse the second write, and a memory for a new canonical key,
where the key's pointer also refuses it and the loser must still be answered with the
winner's memory, not a conflict.
"""

from __future__ import annotations

from typing import Any

from memvault.services.memory import MemoryService, WriteResult
from memvault_wire.memory import Memory
from tests.support import reliability
from tests.support.harness import a_write, ctx
from tests.support.race import together

THREADS = 12
ROUNDS = 3


def every_memory(service: MemoryService, subject: str = "u-1") -> list[Memory]:
    page = service.list_memories(ctx(), subject, limit=100)
    assert page.next_token is None
    return page.items


def check_one_winner(results: list[WriteResult]) -> Memory:
    memory_ids = {r.memory.memory_id for r in results}
    assert len(memory_ids) == 1, f"{len(memory_ids)} memories for one request"
    assert [r.created for r in results].count(True) == 1
    return results[0].memory


def _record(name: str, service: MemoryService, winners: list[Memory]) -> None:
    """One row: THREADS racing retries per round; a violation is any memory beyond one per
    request id, or a retry told of another memory than the one stored."""
    held = every_memory(service)
    extra = len(held) - len(winners)
    strays = len({m.memory_id for m in held} ^ {w.memory_id for w in winners})
    reliability.record(
        name,
        category="uniqueness",
        fault=f"{THREADS} retries of one request id released together by a barrier",
        oracle="one memory per request id; every retry answered with that memory",
        seeds=ROUNDS,
        operations=ROUNDS * THREADS,
        violations=max(extra, 0) + strays,
        store=service.settings.store,
    )


def test_racing_retries_without_a_canonical_key_store_one_memory(service: MemoryService) -> None:
    winners = []
    for round_ in range(ROUNDS):
        request = a_write(
            request_id=f"retry-{round_}",
            canonical_key=None,
            content=f"Lin's standup moved to 9:30 (note {round_})",
        )

        def retry(_: int, request: Any = request) -> WriteResult:
            return service.write(ctx(), "u-1", request)

        winners.append(check_one_winner(together(THREADS, retry)))

    _record("racing-retries-one-request-id", service, winners)
    held = every_memory(service)
    assert sorted(m.memory_id for m in held) == sorted(w.memory_id for w in winners)
    exported = service.export(ctx(), "u-1")["memories"]
    assert len(exported) == ROUNDS
    # A later retry is a replay of the same memory.
    again = service.write(
        ctx(),
        "u-1",
        a_write(
            request_id="retry-0", canonical_key=None, content="Lin's standup moved to 9:30 (note 0)"
        ),
    )
    assert (again.created, again.memory.memory_id) == (False, winners[0].memory_id)


def test_racing_retries_for_a_new_canonical_key_store_one_memory(service: MemoryService) -> None:
    winners = []
    for round_ in range(ROUNDS):
        request = a_write(request_id=f"key-retry-{round_}", canonical_key=f"standup-time-{round_}")

        def retry(_: int, request: Any = request) -> WriteResult:
            return service.write(ctx(), "u-1", request)

        winner = check_one_winner(together(THREADS, retry))
        assert winner.version == 1
        winners.append(winner)

    _record("racing-retries-new-canonical-key", service, winners)
    held = every_memory(service)
    assert sorted(m.memory_id for m in held) == sorted(w.memory_id for w in winners)


def test_racing_distinct_requests_each_store_their_own_memory(service: MemoryService) -> None:
    """The other side of the rule: different request ids are different memories."""

    def write(i: int) -> WriteResult:
        return service.write(
            ctx(), "u-1", a_write(request_id=f"distinct-{i}", canonical_key=None, content=f"n {i}")
        )

    results = together(THREADS, write)

    assert all(r.created for r in results)
    assert len({r.memory.memory_id for r in results}) == THREADS
    assert len(every_memory(service)) == THREADS
