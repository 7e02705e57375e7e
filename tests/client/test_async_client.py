"""``AsyncMemvaultClient`` against the real local stack over HTTP, each test one
``asyncio.run`` (no pytest plugin): routes, the async paging iterator, retries with
the same request_id, no retry on other 4xx, async token providers, error classes."""

from __future__ import annotations

import asyncio
import hashlib

import pytest

from memvault_client import (
    AsyncMemvaultClient,
    ConnectionFailed,
    IdempotencyKeyReused,
    NotFound,
    RetryPolicy,
    Unauthorized,
    ValidationFailed,
    VersionConflict,
)
from memvault_local.process import RunningStack
from memvault_wire.artifact import ArtifactState
from memvault_wire.run import RunStatus
from memvault_wire.schemas import MemoryOut
from tests.client.conftest import DROP, LOST, Fault, FaultProxy, memory, mint, new_subject

FAST = RetryPolicy(base_delay=0.01, max_delay=0.05)


@pytest.fixture
def subject() -> str:
    return new_subject("async")


def test_the_async_client_covers_the_routes(stack: RunningStack, subject: str) -> None:
    async def scenario() -> None:
        async with AsyncMemvaultClient(stack.url, token=mint(stack, subject)) as mv:
            first = await mv.write_memory(subject, memory("Reads on the train", canonical_key="r"))
            assert isinstance(first, MemoryOut) and first.version == 1
            second = await mv.correct_memory(
                subject, first.memory_id, {"expected_version": 1, "content": "Reads at home"}
            )
            assert (await mv.get_memory(subject, second.memory_id)).content == "Reads at home"
            history = await mv.memory_history(subject, second.memory_id)
            assert [v.version for v in history.versions] == [1, 2]
            assert len((await mv.export_subject(subject)).memories) == 2
            job = await mv.wait_for_deletion(
                (await mv.delete_memory(subject, second.memory_id)).deletion_id
            )
            assert job.status == "COMPLETED"
            assert (await mv.deletion_status(job.deletion_id)).status == "COMPLETED"

            session = await mv.append_message(subject, "s", {"role": "user", "content": "hi"})
            assert len(session.messages[0].request_id) == 32
            await mv.put_summary(subject, "s", {"content": "hi", "from_seq": 1, "through_seq": 1})
            assert (await mv.read_session(subject, "s")).summary is not None
            assert (await mv.end_session(subject, "s")).deleted_items >= 1

            run = f"run-{subject}"
            await mv.create_run(run, {"subject_id": subject, "plan_version": "p"})
            advanced = await mv.advance_run(
                run, {"expected_version": 1, "status": "RUNNING", "step": "s1"}
            )
            assert advanced.status is RunStatus.RUNNING
            await mv.record_operation(run, "op", {"status": "COMMITTED", "result_ref": "r:1"})
            event = await mv.deliver_event(run, {"event_id": "e", "type": "cancel.requested"})
            assert event.checkpoint.status is RunStatus.CANCELLED
            assert (await mv.get_run(run)).operations[0].operation_id == "op"
            await mv.deliver_event(run, {"event_id": "d", "type": "ci.passed"})
            listed = [e.event_id async for e in mv.iter_run_events(run, page_size=1)]
            assert listed == ["d", "e"]
            page = await mv.list_run_events(run, limit=2)
            assert ([e.type for e in page.items], page.next_token) == (
                ["ci.passed", "cancel.requested"],
                None,
            )

            context = await mv.assemble_context(subject, {"goal": "plan", "token_budget": 500})
            again = await mv.reproduce_context(subject, context.manifest)
            assert again.manifest.digest == context.manifest.digest
            assert (await mv.recall(subject, "train")).notice

            data = b"async artifact bytes\n" * 50
            art = await mv.upload_artifact(subject, data, media_type="text/plain")
            assert art.state is ArtifactState.COMMITTED
            assert art.sha256 == hashlib.sha256(data).hexdigest()
            assert await mv.download_artifact(subject, art.artifact_id) == data
            assert (await mv.get_artifact(subject, art.artifact_id)).size_bytes == len(data)
            staged = await mv.start_upload(
                subject, {"media_type": "text/plain", "size_bytes": 1, "sha256": "0" * 64}
            )
            assert staged.upload is not None
            assert (await mv.delete_artifact(subject, art.artifact_id)).scope == "artifact"
            assert (await mv.forget_subject(subject)).scope == "subject"
            assert (await mv.health()).status == "ok"

    asyncio.run(scenario())


def test_the_async_iterator_fetches_pages_lazily(
    stack: RunningStack, faults: FaultProxy, subject: str
) -> None:
    async def scenario() -> tuple[set[str], list[str], int, int]:
        async with AsyncMemvaultClient(faults.url, token=mint(stack, subject)) as mv:
            written = {
                (await mv.write_memory(subject, memory(f"async fact {n}"))).memory_id
                for n in range(5)
            }
            faults.reset()
            items = mv.iter_memories(subject, page_size=2)
            before = len(faults.requests("GET"))
            seen = [m.memory_id async for m in items]
            return written, seen, before, len(faults.requests("GET"))

    written, seen, before, pages = asyncio.run(scenario())
    assert before == 0
    assert set(seen) == written and len(seen) == 5
    assert pages == 3  # 2 + 2 + 1


def test_async_retries_keep_the_request_id_and_store_once(
    stack: RunningStack, faults: FaultProxy, subject: str
) -> None:
    faults.fail(Fault(status=429), LOST)

    async def scenario() -> tuple[str, list[str]]:
        async with AsyncMemvaultClient(faults.url, token=mint(stack, subject), retry=FAST) as mv:
            written = await mv.write_memory(subject, memory("Waters the plants on Fridays"))
            return written.memory_id, [m.memory_id for m in (await mv.list_memories(subject)).items]

    memory_id, listed = asyncio.run(scenario())
    posts = faults.requests("POST")
    assert [p.upstream_status for p in posts] == [None, 201, 201]
    assert len({p.body["request_id"] for p in posts}) == 1
    assert listed == [memory_id]


def test_async_no_retry_on_404_409_or_422(
    stack: RunningStack, faults: FaultProxy, subject: str
) -> None:
    async def scenario() -> None:
        async with AsyncMemvaultClient(faults.url, token=mint(stack, subject), retry=FAST) as mv:
            base = memory("Likes jazz", request_id="same")
            await mv.write_memory(subject, base)
            with pytest.raises(NotFound):
                await mv.get_memory(subject, "mem_" + "2" * 32)
            with pytest.raises(IdempotencyKeyReused) as reused:
                await mv.write_memory(subject, {**base, "content": "Likes rock"})
            assert reused.value.status == 409
            with pytest.raises(ValidationFailed):  # the server's 422
                await mv.list_memories(subject, limit=1000)

    asyncio.run(scenario())
    assert [s.upstream_status for s in faults.requests()] == [201, 404, 409, 422]


def test_an_async_dropped_connection_is_retried_only_when_idempotent(
    stack: RunningStack, faults: FaultProxy, subject: str
) -> None:
    async def scenario() -> None:
        async with AsyncMemvaultClient(faults.url, token=mint(stack, subject), retry=FAST) as mv:
            first = await mv.write_memory(subject, memory("Runs at dawn", canonical_key="run"))
            faults.fail(DROP)
            assert (await mv.get_memory(subject, first.memory_id)).version == 1
            faults.fail(DROP)
            with pytest.raises(ConnectionFailed):
                await mv.correct_memory(
                    subject, first.memory_id, {"expected_version": 1, "content": "Runs at dusk"}
                )
            with pytest.raises(VersionConflict):
                await mv.correct_memory(
                    subject, first.memory_id, {"expected_version": 5, "content": "x"}
                )

    asyncio.run(scenario())
    assert len(faults.requests("GET")) == 2
    assert len(faults.requests("PATCH")) == 2


def test_an_async_token_provider_is_awaited_for_every_attempt(
    stack: RunningStack, faults: FaultProxy, subject: str
) -> None:
    calls: list[int] = []

    async def provider() -> str:
        calls.append(1)
        await asyncio.sleep(0)
        return mint(stack, subject) if len(calls) > 1 else "stale"

    async def scenario() -> None:
        async with AsyncMemvaultClient(faults.url, token=provider, retry=FAST) as mv:
            with pytest.raises(Unauthorized):
                await mv.list_memories(subject)
            faults.fail(Fault(status=503))
            await mv.list_memories(subject)

    asyncio.run(scenario())
    assert len(calls) == 3  # one refused, then one for each of two attempts
