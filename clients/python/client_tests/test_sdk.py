"""The SDK (``MemvaultClient``, ``AsyncMemvaultClient``) against a running memvault: the
wire models in and out, versions, deletes, runs, sessions, and errors as typed classes."""

from __future__ import annotations

import asyncio
import time

import pytest

from client_tests.conftest import Server
from memvault_client import (
    AsyncMemvaultClient,
    ConsentRequired,
    MemvaultClient,
    NotFound,
    Unauthorized,
    ValidationFailed,
    VersionConflict,
)
from memvault_wire.memory import MemoryKind, MemoryWrite, Source, SourceType
from memvault_wire.run import Checkpoint, RunStatus
from memvault_wire.schemas import MemoryOut


def _memory(content: str, **fields: object) -> dict[str, object]:
    return {
        "kind": "semantic",
        "content": content,
        "source": {"type": "user_statement", "ref": "client-tests"},
        "consent": True,
        **fields,
    }


def test_a_memory_is_written_read_corrected_and_deleted(server: Server, subject: str) -> None:
    with MemvaultClient(server.url, token=server.token(subject)) as mv:
        written = mv.write_memory(
            subject,
            MemoryWrite(
                request_id="w-1",
                kind=MemoryKind.SEMANTIC,
                canonical_key="drink",
                content="Prefers green tea",
                source=Source(type=SourceType.USER_STATEMENT),
                consent=True,
            ),
        )
        assert isinstance(written, MemoryOut) and written.version == 1
        assert mv.get_memory(subject, written.memory_id).content == "Prefers green tea"
        corrected = mv.correct_memory(
            subject,
            written.memory_id,
            {"expected_version": 1, "content": "Prefers oolong"},
        )
        assert corrected.version == 2 and corrected.content == "Prefers oolong"
        with pytest.raises(VersionConflict):
            mv.correct_memory(
                subject,
                written.memory_id,
                {"expected_version": 1, "content": "Prefers coffee"},
            )
        assert [m.content for m in mv.iter_memories(subject)] == ["Prefers oolong"]
        mv.delete_memory(subject, corrected.memory_id)
        with pytest.raises(NotFound):
            mv.get_memory(subject, corrected.memory_id)


def test_a_write_is_idempotent_on_its_request_id(server: Server, subject: str) -> None:
    with MemvaultClient(server.url, token=server.token(subject)) as mv:
        body = _memory("Lives in Lisbon", request_id="same-1")
        first = mv.write_memory(subject, body)
        again = mv.write_memory(subject, body)
        assert again.memory_id == first.memory_id
        assert len(list(mv.iter_memories(subject))) == 1


def test_recall_finds_what_was_written(server: Server, subject: str) -> None:
    with MemvaultClient(server.url, token=server.token(subject)) as mv:
        mv.write_memory(subject, _memory("Prefers window seats on long flights"))
        deadline = time.monotonic() + 60
        found: list[str] = []
        while not found and time.monotonic() < deadline:
            found = [
                r.memory.content for r in mv.recall(subject, "window seats on long flights").items
            ]
            if not found:
                time.sleep(0.5)
        assert found == ["Prefers window seats on long flights"]


def test_refusals_arrive_as_typed_errors(server: Server, subject: str) -> None:
    with MemvaultClient(server.url, token=server.token(subject)) as mv:
        with pytest.raises(ConsentRequired):
            mv.write_memory(subject, _memory("No consent given", consent=False))
        with pytest.raises(ValidationFailed):
            mv.write_memory(subject, {"kind": "semantic", "content": ""})
    with MemvaultClient(server.url, token="not-a-token") as mv, pytest.raises(Unauthorized):
        mv.get_memory(subject, "mem_" + "0" * 32)


def test_a_run_checkpoints_by_compare_and_set(server: Server, subject: str) -> None:
    run_id = f"run-{subject}"
    with MemvaultClient(server.url, token=server.token(subject)) as mv:
        created = mv.create_run(run_id, {"subject_id": subject, "plan_version": "p1"})
        assert isinstance(created, Checkpoint) and created.version == 1
        advanced = mv.advance_run(
            run_id, {"expected_version": 1, "status": RunStatus.RUNNING, "step": "search"}
        )
        assert advanced.version == 2 and advanced.step == "search"
        with pytest.raises(VersionConflict):
            mv.advance_run(
                run_id, {"expected_version": 1, "status": RunStatus.RUNNING, "step": "again"}
            )
        assert mv.get_run(run_id).version == 2


def test_a_session_keeps_its_messages(server: Server, subject: str) -> None:
    with MemvaultClient(server.url, token=server.token(subject)) as mv:
        mv.append_message(subject, "s-1", {"role": "user", "content": "hello"})
        mv.append_message(subject, "s-1", {"role": "assistant", "content": "hi there"})
        session = mv.read_session(subject, "s-1")
        assert [m.content for m in session.messages] == ["hello", "hi there"]


def test_the_async_client_speaks_the_same_api(server: Server, subject: str) -> None:
    async def scenario() -> list[str]:
        async with AsyncMemvaultClient(server.url, token=server.token(subject)) as mv:
            await mv.write_memory(subject, _memory("Cycles to work"))
            return [m.content async for m in mv.iter_memories(subject)]

    assert asyncio.run(scenario()) == ["Cycles to work"]
