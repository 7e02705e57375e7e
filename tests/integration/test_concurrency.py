"""Compare-and-set under contention: of many writers at one expected version, one wins.

Every race releases its threads together through a barrier: without one, a pool's first
thread can finish before the last one starts, and the "race" runs one writer at a time.
"""

from __future__ import annotations

from memvault.services.memory import MemoryService
from memvault_wire.errors import VersionConflict
from memvault_wire.memory import MemoryPatch
from tests.support.harness import a_write, ctx
from tests.support.race import together


def test_twenty_writers_at_the_same_expected_version_have_exactly_one_winner(
    service: MemoryService,
) -> None:
    """moto's in-process backend is not atomic under threads, so the harness serialises
    each DynamoDB call (``SerializedClient``); threads still interleave between our read
    of the chain head and our conditional transaction, which is the race under test."""
    v1 = service.write(ctx(), "u-1", a_write()).memory

    def correct(i: int) -> str:
        try:
            service.correct(
                ctx(),
                "u-1",
                v1.memory_id,
                MemoryPatch(expected_version=1, content=f"version from writer {i}"),
            )
        except VersionConflict:
            return "conflict"
        return "won"

    def write(i: int) -> str:
        try:
            service.write(
                ctx(),
                "u-1",
                a_write(request_id=f"w{i}", expected_version=2, content=f"write from writer {i}"),
            )
        except VersionConflict:
            return "conflict"
        return "won"

    corrections = together(20, correct)
    writes = together(20, write)

    assert corrections.count("won") == 1 and corrections.count("conflict") == 19
    assert writes.count("won") == 1 and writes.count("conflict") == 19
    history = service.history(ctx(), "u-1", v1.memory_id)
    assert [m.version for m in history] == [1, 2, 3]
    assert [m.status.value for m in history] == ["superseded", "superseded", "active"]


def test_racing_first_writes_of_a_new_key_create_one_chain(service: MemoryService) -> None:
    def write(i: int) -> str:
        try:
            service.write(ctx(), "u-1", a_write(request_id=f"w{i}", content=f"first {i}"))
        except VersionConflict:
            return "conflict"
        return "won"

    outcomes = together(10, write)

    current = service.list_memories(ctx(), "u-1").items
    assert len(current) == 1
    assert outcomes.count("won") == current[0].version
