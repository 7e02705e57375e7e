"""A forget racing writes of the subject's sessions, runs and artifacts: the order is exact.

A probe saw a write survive a forget although it was stamped 4 ms before it: the write had
read "not forgotten", the forget and its purge ran, and then the write committed, with a
time the forget covered, after the purge had looked. Memories never had this gap: each is
written under the subject's epoch, which a forget retires in one conditional write, and
the write's own transaction checks the epoch. Sessions, runs and artifacts are now written
the same way: whatever committed before the forget is the forget's and its purge removes
it; a write that was decided before the forget and reaches the store after it fails its
epoch condition and stores nothing (``version_conflict``, reason ``subject_forgotten``, as
a memory write does); whatever is written after the forget is under the new epoch and
stays.

Each race puts the forget (and its purge, run inline) exactly in the window between the
service's reads and its store write, on both stores, so the outcome is the same on every
run; the threaded race below releases writes and forgets together, many rounds, as the
other race tests do.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from memvault.services.bundle import Services
from memvault_wire.artifact import StartUpload
from memvault_wire.errors import MemvaultError, NotFound, VersionConflict
from memvault_wire.run import Advance, CreateRun, RecordOperation, RunStatus
from memvault_wire.session import AppendMessage, Role
from tests.support import reliability
from tests.support.harness import FakeClock, ctx
from tests.support.race import together

ME = ctx()


def say(text: str) -> AppendMessage:
    return AppendMessage(request_id=uuid.uuid4().hex, role=Role.USER, content=text)


def upload(request_id: str) -> StartUpload:
    return StartUpload(
        request_id=request_id, media_type="text/plain", size_bytes=4, sha256="ab" * 32
    )


def forget_before(services: Services, store: Any, method: str) -> list[str]:
    """Make the next call of ``store.method`` wait for a forget of u-1 (and its purge):
    the service has decided, the store has not yet written. Returns the forget's ids."""
    real = getattr(store, method)
    jobs: list[str] = []

    def late(*args: Any, **kwargs: Any) -> Any:
        if not jobs:
            jobs.append(services.memory.forget(ME, "u-1").deletion_id)
        return real(*args, **kwargs)

    setattr(store, method, late)
    return jobs


def outcome(write: Callable[[], Any]) -> MemvaultError | None:
    """None when the write succeeded, else its refusal: that the subject was forgotten
    (or that the record is now absent), never anything else."""
    try:
        write()
    except (VersionConflict, NotFound) as refused:
        return refused
    return None


def test_a_new_session_racing_a_forget_is_either_refused_or_kept_whole(
    services: Services,
) -> None:
    jobs = forget_before(services, services.sessions.store, "append")

    refused = outcome(lambda: services.sessions.append(ME, "u-1", "s-1", say("book a trip")))

    assert jobs, "the forget ran in the window"
    head = services.sessions.store.head("acme", "u-1", "s-1")
    if refused is not None:
        assert head is None, "a refused append left its session behind the forget's purge"
        assert isinstance(refused, VersionConflict)
        assert refused.details == {"reason": "subject_forgotten"}
    else:
        assert services.sessions.read(ME, "u-1", "s-1").message_count == 1


def test_a_message_racing_a_forget_never_outlives_the_session_it_was_sent_to(
    services: Services,
) -> None:
    services.sessions.append(ME, "u-1", "s-1", say("book a trip"))
    jobs = forget_before(services, services.sessions.store, "append")

    refused = outcome(lambda: services.sessions.append(ME, "u-1", "s-1", say("and a hotel")))

    assert jobs and refused is not None
    assert services.sessions.store.head("acme", "u-1", "s-1") is None
    assert services.sessions.store.receipt("acme", "u-1", "s-1", "x") is None


def test_a_new_run_racing_a_forget_is_either_refused_or_kept_whole(
    services: Services, clock: FakeClock
) -> None:
    jobs = forget_before(services, services.runs.store, "create")
    body = CreateRun(subject_id="u-1", plan_version="p1")

    refused = outcome(lambda: services.runs.create(ME, "r-1", body))

    assert jobs, "the forget ran in the window"
    if refused is not None:
        assert refused.details == {"reason": "subject_forgotten"}
        assert services.runs.store.head("acme", "u-1/r-1", now=clock.now()) is None
        # Nothing holds the id: the subject creates the run afresh.
        assert services.runs.create(ME, "r-1", body)[1]
    else:
        assert services.runs.get(ME, "r-1").version == 1


def test_a_checkpoint_or_operation_racing_a_forget_leaves_nothing_of_the_run(
    services: Services, clock: FakeClock
) -> None:
    runs = services.runs
    for method, write in (
        (
            "advance",
            lambda: runs.advance(
                ME, "r-1", Advance(expected_version=1, status=RunStatus.RUNNING, step="go")
            ),
        ),
        (
            "put_operation",
            lambda: runs.record_operation(
                ME,
                "r-1",
                "op-1",
                RecordOperation(status="PENDING"),  # type: ignore[arg-type]
            ),
        ),
    ):
        runs.create(ME, "r-1", CreateRun(subject_id="u-1", plan_version="p1"))
        store = runs.store
        real = getattr(store, method)
        jobs = forget_before(services, store, method)

        refused = outcome(write)

        setattr(store, method, real)
        assert jobs and refused is not None, method
        now = clock.now()
        assert store.head("acme", "u-1/r-1", now=now) is None, method
        assert store.version("acme", "u-1/r-1", 2, now=now) is None, method
        assert store.operations("acme", "u-1/r-1", now=now) == [], method


def test_a_new_artifact_racing_a_forget_is_either_refused_or_kept_whole(
    services: Services, clock: FakeClock
) -> None:
    jobs = forget_before(services, services.artifacts.store, "stage")

    made: list[str] = []
    refused = outcome(
        lambda: made.append(str(services.artifacts.start(ME, "u-1", upload("up-1"))[0].artifact_id))
    )

    assert jobs, "the forget ran in the window"
    if refused is not None:
        assert refused.details == {"reason": "subject_forgotten"}
        assert services.artifacts.store.receipt("acme", "u-1", "up-1", clock.now()) is None
    else:
        (artifact_id,) = made
        assert services.artifacts.get(ME, "u-1", artifact_id).artifact_id == artifact_id


ROUNDS = 12


def _write(services: Services, kind: str, name: str) -> Any:
    if kind == "session":
        return services.sessions.append(ME, "u-1", name, say("hello"))
    if kind == "run":
        return services.runs.create(ME, name, CreateRun(subject_id="u-1", plan_version="p1"))
    return services.artifacts.start(ME, "u-1", upload(name))


def _invisible(services: Services, kind: str, name: str, now: datetime) -> bool:
    """Whether the store holds the round's record although its subject may not read it."""
    if kind == "session":
        held = services.sessions.store.head("acme", "u-1", name) is not None
        return held and not _quietly(lambda: services.sessions.read(ME, "u-1", name))
    if kind == "run":
        held = services.runs.store.head("acme", f"u-1/{name}", now=now) is not None
        return held and not _quietly(lambda: services.runs.get(ME, name))
    receipt = services.artifacts.store.receipt("acme", "u-1", name, now)
    return receipt is not None and not _quietly(
        lambda: services.artifacts.get(ME, "u-1", receipt.artifact_id)
    )


@pytest.mark.parametrize("kind", ["session", "run", "artifact"])
def test_writes_and_forgets_released_together_leave_only_what_came_after(
    services: Services, clock: FakeClock, kind: str
) -> None:
    """Each round a write and a forget of the same subject start at one instant. Whatever
    the order, nothing the store holds afterwards is invisible: a record kept is one its
    subject may read (written after the forget), and a write that lost is absent."""
    violations = 0
    for round_ in range(ROUNDS):
        name = f"{kind}-{round_}"

        def task(i: int, name: str = name) -> Any:
            if i == 0:
                return services.memory.forget(ME, "u-1")
            return outcome(lambda: _write(services, kind, name))

        together(2, task)
        violations += _invisible(services, kind, name, clock.now())
        clock.advance(milliseconds=3)
    reliability.record(
        f"forget-racing-a-new-{kind}",
        category="deletion",
        fault="a write of a new record and a forget of its subject released together",
        oracle="nothing kept that its subject may not read: the forget's purge took it, "
        "or it was written after the forget",
        seeds=ROUNDS,
        operations=2 * ROUNDS,
        violations=violations,
        store=services.memory.settings.store,
    )
    assert violations == 0


def _quietly(read: Callable[[], Any]) -> bool:
    try:
        read()
    except NotFound:
        return False
    return True
