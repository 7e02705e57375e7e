"""A replayed ``request_id`` tells nothing about what it wrote once that is gone or out
of the caller's reach.

Before, the idempotency record (kept 7 days) compared the payload first: after a delete
or a forget, a retry with a guessed content answered 404 when the guess was right and
409 when it was wrong, so anyone could confirm a guess of forgotten content; and a
caller below the memory's sensitivity got the memory back by replaying its request.
Now a deleted, forgotten or unreadable memory answers 404 whatever the payload.
Runs on both stores.
"""

from __future__ import annotations

import pytest

from memvault.services.memory import MemoryService
from memvault_wire.errors import NotFound
from memvault_wire.memory import Sensitivity
from tests.support.harness import a_write, ctx

SECRETLY = "Lin is interviewing with a competitor next week"


@pytest.mark.parametrize("how", ["delete", "forget"])
def test_after_a_delete_every_payload_gets_the_same_answer(
    service: MemoryService, how: str
) -> None:
    m = service.write(ctx(), "u-1", a_write(content=SECRETLY)).memory
    if how == "delete":
        service.delete(ctx(), "u-1", m.memory_id)
    else:
        service.forget(ctx(), "u-1")

    answers = []
    for guess in (SECRETLY, "Lin is happy in the current job"):
        with pytest.raises(NotFound) as raised:
            service.write(ctx(), "u-1", a_write(content=guess))
        answers.append((raised.value.code, raised.value.message, raised.value.details))
    assert answers[0] == answers[1]


def test_a_replay_never_hands_a_memory_to_a_caller_below_its_sensitivity(
    service: MemoryService,
) -> None:
    private = a_write(content="Lin's home number is +1 202 555 0143", canonical_key="phone")
    written = service.write(ctx(max_sensitivity=Sensitivity.PII), "u-1", private).memory
    assert written.sensitivity is Sensitivity.PII

    for payload in (private, a_write(content="something else", canonical_key="phone")):
        with pytest.raises(NotFound):
            service.write(ctx(max_sensitivity=Sensitivity.INTERNAL), "u-1", payload)
    again = service.write(ctx(max_sensitivity=Sensitivity.PII), "u-1", private)
    assert not again.created and again.memory.memory_id == written.memory_id
