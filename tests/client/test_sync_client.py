"""``MemvaultClient`` against the real local stack over HTTP: every route family, the
API's own models in and out, paging iterators, token providers and error classes."""

from __future__ import annotations

import hashlib
import ssl
import time
from collections.abc import Callable, Iterator

import httpx
import pytest

from memvault.api.direct import OPERATIONS as DIRECT_OPERATIONS
from memvault_client import (
    OPERATIONS,
    ConsentRequired,
    Forbidden,
    IdempotencyKeyReused,
    IllegalTransition,
    MemvaultClient,
    MemvaultError,
    NotFound,
    PayloadTooLarge,
    SecretDetected,
    Unauthorized,
    UploadIncomplete,
    ValidationFailed,
    VersionConflict,
    _http,
)
from memvault_local.process import RunningStack
from memvault_wire.artifact import ArtifactState
from memvault_wire.memory import MemoryKind, MemoryWrite, Source, SourceType
from memvault_wire.run import Checkpoint, RunStatus
from memvault_wire.schemas import DeletionOut, MemoryBatchOut, MemoryOut, RecallOut
from memvault_wire.session import Session
from tests.client.conftest import FaultProxy, memory, mint, new_subject


@pytest.fixture
def subject() -> str:
    return new_subject()


@pytest.fixture
def client(stack: RunningStack, subject: str) -> Iterator[MemvaultClient]:
    with MemvaultClient(stack.url, token=mint(stack, subject)) as mv:
        yield mv


def test_the_memory_lifecycle_through_the_api_models(client: MemvaultClient, subject: str) -> None:
    typed = MemoryWrite(
        request_id="typed-1",
        kind=MemoryKind.SEMANTIC,
        canonical_key="tz",
        content="Works in the Asia/Shanghai time zone",
        source=Source(type=SourceType.USER_STATEMENT),
        consent=True,
    )
    first = client.write_memory(subject, typed)
    assert isinstance(first, MemoryOut)
    assert (first.subject_id, first.version, first.canonical_key) == (subject, 1, "tz")
    assert client.write_memory(subject, typed).memory_id == first.memory_id  # a replay

    read = client.get_memory(subject, first.memory_id)
    assert read.content == typed.content
    # The stores keep milliseconds; the write's answer gives the times a read gives back
    # (it used to carry microseconds: a fresh probe of stop 47).
    times = ("created_at", "updated_at", "valid_from", "expires_at")
    assert [getattr(first, t) for t in times] == [getattr(read, t) for t in times]
    corrected = client.correct_memory(
        subject, first.memory_id, {"expected_version": 1, "content": "Works in Europe/Berlin"}
    )
    assert (corrected.version, corrected.supersedes_id) == (2, first.memory_id)
    history = client.memory_history(subject, corrected.memory_id)
    assert [v.version for v in history.versions] == [1, 2]
    assert [m.memory_id for m in client.list_memories(subject).items] == [corrected.memory_id]

    deleted = client.delete_memory(subject, corrected.memory_id)
    assert isinstance(deleted, DeletionOut)
    with pytest.raises(NotFound):
        client.get_memory(subject, corrected.memory_id)
    job = client.wait_for_deletion(deleted.deletion_id)
    assert job.status == "COMPLETED"
    assert {c.copy_: c.status for c in job.copies}["primary"] == "DONE"

    client.write_memory(subject, memory("Drinks green tea", canonical_key="tea"))
    assert [m.canonical_key for m in client.export_subject(subject).memories] == ["tea"]
    forgotten = client.forget_subject(subject)
    assert forgotten.scope == "subject"
    assert client.deletion_status(forgotten.deletion_id).deletion_id == forgotten.deletion_id
    assert client.list_memories(subject).items == []


def test_a_batch_writes_each_memory_and_answers_a_refusal_in_its_place(
    client: MemvaultClient, subject: str
) -> None:
    bodies = [
        memory("Flies to Lisbon on the 14th"),
        memory("Its key is AKIAIOSFODNN7EXAMPLE"),
        MemoryWrite(
            request_id="typed-batch-1",
            kind=MemoryKind.EPISODIC,
            content="Booked the aisle seat",
            source=Source(type=SourceType.USER_STATEMENT, ref="t-3"),
            consent=True,
        ),
    ]
    answer = client.write_memories(subject, bodies)
    assert isinstance(answer, MemoryBatchOut)
    assert [(i.status, i.error.code if i.error else None) for i in answer.items] == [
        (201, None),
        (422, "secret_detected"),
        (201, None),
    ]
    assert (answer.written, answer.replayed, answer.refused) == (2, 0, 1)
    written = [i.memory.memory_id for i in answer.items if i.memory]
    assert sorted(m.memory_id for m in client.list_memories(subject).items) == sorted(written)
    again = client.write_memories(subject, [bodies[2]])
    replayed = again.items[0].memory
    assert replayed is not None and answer.items[2].memory is not None
    assert (again.replayed, replayed.memory_id) == (1, answer.items[2].memory.memory_id)
    with pytest.raises(ValidationFailed):  # refused before sending, as the server would
        client.write_memories(subject, [memory(f"turn {i}") for i in range(26)])


def test_recall_finds_a_written_memory(client: MemvaultClient, subject: str) -> None:
    written = client.write_memory(
        subject, memory("The nightly invoice export runs at 02:00 UTC from the billing cluster")
    )
    deadline = time.monotonic() + 60
    while True:  # the stack's change-feed pump indexes the write in the background
        found = client.recall(subject, "nightly invoice export billing cluster")
        if found.items or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert isinstance(found, RecallOut)
    assert [i.memory.memory_id for i in found.items] == [written.memory_id]
    assert found.items[0].why.matched_by
    limited = client.recall(subject, {"query": "invoice export", "kinds": ["procedural"]})
    assert limited.items == []


def test_sessions_append_read_summarise_and_end(client: MemvaultClient, subject: str) -> None:
    first = client.append_message(subject, "s-1", {"role": "user", "content": "hello there"})
    assert isinstance(first, Session)
    again = client.append_message(
        subject, "s-1", {"role": "assistant", "content": "hi", "request_id": "m-2"}
    )
    assert [m.content for m in again.messages] == ["hello there", "hi"]
    assert [m.request_id for m in again.messages][1] == "m-2"
    assert len(first.messages[0].request_id) == 32  # generated: uuid4 hex

    summarised = client.put_summary(
        subject, "s-1", {"content": "greetings", "from_seq": 1, "through_seq": 2}
    )
    assert summarised.summary is not None and summarised.summary.content == "greetings"
    assert client.read_session(subject, "s-1").message_count == 2
    assert client.end_session(subject, "s-1").deleted_items >= 2
    with pytest.raises(NotFound):
        client.read_session(subject, "s-1")


def test_runs_create_advance_operations_and_events(client: MemvaultClient, subject: str) -> None:
    run_id = f"run-{subject}"
    created = client.create_run(run_id, {"subject_id": subject, "plan_version": "p1"})
    assert isinstance(created, Checkpoint)
    assert (created.version, created.status) == (1, RunStatus.CREATED)
    assert client.create_run(run_id, {"subject_id": subject, "plan_version": "p1"}).version == 1

    running = client.advance_run(
        run_id, {"expected_version": 1, "status": "RUNNING", "step": "plan", "state": {"n": 1}}
    )
    assert (running.version, running.step, running.state) == (2, "plan", {"n": 1})
    with pytest.raises(VersionConflict):
        client.advance_run(run_id, {"expected_version": 1, "status": "RUNNING", "step": "x"})

    operation = client.record_operation(
        run_id, "op-1", {"status": "PENDING", "result_ref": "ticket:1"}
    )
    assert (operation.operation_id, operation.status) == ("op-1", "PENDING")
    waiting = client.advance_run(
        run_id,
        {
            "expected_version": 2,
            "status": "WAITING_APPROVAL",
            "step": "approve",
            "pending_approvals": ["a-1"],
        },
    )
    event = {"event_id": "e-1", "type": "approval.granted", "approval_id": "a-1"}
    delivered = client.deliver_event(run_id, event)
    assert (delivered.duplicate, delivered.applied) == (False, True)
    assert client.deliver_event(run_id, event).duplicate is True
    current = client.get_run(run_id)
    assert current.version > waiting.version
    assert current.pending_approvals == []
    assert [o.operation_id for o in current.operations] == ["op-1"]

    client.deliver_event(run_id, {"event_id": "e-0", "type": "ci.passed", "payload": {"k": 1}})
    page = client.list_run_events(run_id, limit=1)
    assert [e.event_id for e in page.items] == ["e-0"] and page.next_token
    assert (page.items[0].type, page.items[0].applied) == ("ci.passed", False)
    events = list(client.iter_run_events(run_id, page_size=1))
    assert [(e.event_id, e.applied, e.version) for e in events] == [
        ("e-0", False, current.version),
        ("e-1", True, current.version),
    ]


def test_a_run_for_a_token_without_a_subject_names_it_in_the_query(
    stack: RunningStack, subject: str
) -> None:
    service = mint(stack, None, scope="runs:write subjects:any")
    with MemvaultClient(stack.url, token=service) as mv:
        mv.create_run("run-q", {"subject_id": subject, "plan_version": "p1"})
        assert mv.get_run("run-q", subject_id=subject).subject_id == subject
        assert mv.list_run_events("run-q", subject_id=subject).items == []


def test_context_assembles_and_reproduces(client: MemvaultClient, subject: str) -> None:
    client.append_message(subject, "ctx-s", {"role": "user", "content": "Ship the report"})
    assembled = client.assemble_context(
        subject, {"goal": "Write the weekly report", "token_budget": 2000, "session_id": "ctx-s"}
    )
    assert "goal" in assembled.sections and "session" in assembled.sections
    again = client.reproduce_context(subject, assembled.manifest)
    assert again.manifest.digest == assembled.manifest.digest


def test_artifacts_upload_read_and_delete(client: MemvaultClient, subject: str) -> None:
    data = b"a transcript too large for a memory\n" * 200
    committed = client.upload_artifact(subject, data, media_type="text/plain", name="t.txt")
    assert committed.state is ArtifactState.COMMITTED
    assert committed.sha256 == hashlib.sha256(data).hexdigest()
    assert client.download_artifact(subject, committed.artifact_id) == data
    assert client.get_artifact(subject, committed.artifact_id).size_bytes == len(data)

    staged = client.start_upload(
        subject,
        {"media_type": "text/plain", "size_bytes": 3, "sha256": hashlib.sha256(b"abc").hexdigest()},
    )
    assert staged.state is ArtifactState.STAGED and staged.upload is not None
    with pytest.raises(UploadIncomplete):
        client.commit_upload(subject, staged.artifact_id)

    deleted = client.delete_artifact(subject, committed.artifact_id)
    assert deleted.scope == "artifact"
    with pytest.raises(NotFound):
        client.get_artifact(subject, committed.artifact_id)


def test_health_needs_no_token(stack: RunningStack) -> None:
    with MemvaultClient(stack.url) as mv:
        assert mv.health().status == "ok"


def test_iter_memories_pages_lazily_across_several_pages(
    stack: RunningStack, faults: FaultProxy, subject: str
) -> None:
    with MemvaultClient(faults.url, token=mint(stack, subject)) as mv:
        written = {mv.write_memory(subject, memory(f"fact number {n}")).memory_id for n in range(7)}
        faults.reset()

        items = mv.iter_memories(subject, page_size=3)
        assert faults.requests("GET") == []  # nothing fetched before the first item is asked for
        first = next(items)
        assert len(faults.requests("GET")) == 1
        rest = list(items)
        pages = faults.requests("GET")

    assert {first.memory_id, *(m.memory_id for m in rest)} == written
    assert len(rest) == 6
    assert len(pages) == 3  # 3 + 3 + 1
    assert "next_token=" not in pages[0].path and all("next_token=" in p.path for p in pages[1:])
    assert all("limit=3" in p.path for p in pages)


def test_iter_memories_passes_its_filters(client: MemvaultClient, subject: str) -> None:
    client.write_memory(subject, memory("tagged one", tags=["keep"]))
    client.write_memory(subject, memory("untagged"))
    assert [m.content for m in client.iter_memories(subject, tag="keep")] == ["tagged one"]


def test_a_token_provider_is_called_for_every_request(stack: RunningStack, subject: str) -> None:
    handed: list[str] = []

    def provider() -> str:
        token = mint(stack, subject) if handed else "expired-or-not-yet-refreshed"
        handed.append(token)
        return token

    with MemvaultClient(stack.url, token=provider) as mv:
        with pytest.raises(Unauthorized) as refused:  # a 401 is not retried
            mv.list_memories(subject)
        assert refused.value.status == 401
        assert len(handed) == 1
        mv.write_memory(subject, memory("after the refresh"))
        assert [m.content for m in mv.list_memories(subject).items] == ["after the refresh"]
    assert len(handed) == 3


def test_the_bearer_token_is_sent_as_given(
    stack: RunningStack, faults: FaultProxy, subject: str
) -> None:
    token = mint(stack, subject)
    with MemvaultClient(faults.url, token=token) as mv:
        mv.list_memories(subject)
    assert [s.authorization for s in faults.requests()] == [f"Bearer {token}"]


def test_each_error_code_raises_its_class_with_code_message_details_and_status(
    stack: RunningStack, client: MemvaultClient, subject: str
) -> None:
    def raised(kind: type[MemvaultError], call: Callable[[], object]) -> MemvaultError:
        with pytest.raises(kind) as caught:
            call()
        err = caught.value
        assert type(err) is kind and isinstance(err, MemvaultError)
        assert err.code == kind.CODE and err.status == kind.STATUS and err.message
        return err

    base = memory("Has a standing desk", canonical_key="desk", request_id="same-id")
    first = client.write_memory(subject, base)
    raised(NotFound, lambda: client.get_memory(subject, "mem_" + "0" * 32))
    raised(
        ConsentRequired, lambda: client.write_memory(subject, memory("Has a desk", consent=False))
    )
    secret = raised(
        SecretDetected,
        lambda: client.write_memory(subject, memory("key AKIAIOSFODNN7EXAMPLE is ours")),
    )
    assert "AKIAIOSFODNN7EXAMPLE" not in str(secret.details)
    raised(IdempotencyKeyReused, lambda: client.write_memory(subject, {**base, "content": "x"}))
    client.correct_memory(subject, first.memory_id, {"expected_version": 1, "content": "a"})
    stale = raised(
        VersionConflict,
        lambda: client.correct_memory(
            subject, first.memory_id, {"expected_version": 1, "content": "b"}
        ),
    )
    assert stale.details
    server_side = raised(ValidationFailed, lambda: client.list_memories(subject, limit=0))
    assert server_side.details["errors"][0]["location"] == "query.limit"
    client.create_run(f"r-{subject}", {"subject_id": subject, "plan_version": "p"})
    raised(
        IllegalTransition,
        lambda: client.advance_run(
            f"r-{subject}", {"expected_version": 1, "status": "SUCCEEDED", "step": "done"}
        ),
    )
    too_big = {"source": "tool", "content": "y" * 16_000}
    raised(
        PayloadTooLarge,
        lambda: client.assemble_context(
            subject, {"goal": "g", "token_budget": 100, "evidence": [too_big] * 10}
        ),
    )
    with MemvaultClient(stack.url, token=mint(stack, "someone-else")) as other:
        raised(Forbidden, lambda: other.list_memories(subject))
    with MemvaultClient(stack.url, token="not-a-token") as bad:
        raised(Unauthorized, lambda: bad.list_memories(subject))


def test_a_body_the_api_model_refuses_is_not_sent_and_fails_as_the_server_would(
    stack: RunningStack, faults: FaultProxy, subject: str
) -> None:
    bad = memory("fine", sensitivity="bogus")
    with (
        MemvaultClient(faults.url, token=mint(stack, subject)) as mv,
        pytest.raises(ValidationFailed) as local,
    ):
        mv.write_memory(subject, bad)
    assert faults.requests() == []
    # The server's answer to the same body, sent raw: the same message and details.
    raw = httpx.post(
        f"{stack.url}/v1/subjects/{subject}/memories",
        json={**bad, "request_id": "raw-1"},
        headers={"Authorization": f"Bearer {mint(stack, subject)}"},
    )
    assert raw.status_code == 422
    assert local.value.to_body() == raw.json()


def test_the_sdk_operations_are_the_apis_routes(stack: RunningStack) -> None:
    """Method and path of every SDK operation exist in the served OpenAPI document, and
    are the direct function's names: one table for both."""
    document = httpx.get(f"{stack.url}/v1/openapi.json").json()
    routes = {(m.upper(), p) for p, ops in document["paths"].items() for m in ops}
    assert {(m, p) for m, p in OPERATIONS.values()} <= routes
    assert OPERATIONS is DIRECT_OPERATIONS  # one table for both


def test_odd_but_valid_ids_travel_in_the_path(stack: RunningStack) -> None:
    subject = f"team:a@b+c.{new_subject()}"
    with MemvaultClient(stack.url, token=mint(stack, subject)) as mv:
        written = mv.write_memory(subject, memory("odd id"))
        assert mv.get_memory(subject, written.memory_id).subject_id == subject


def test_clients_share_one_certificate_store_read_once(
    stack: RunningStack, subject: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client made per call (``with MemvaultClient(...)`` around each write) read the CA
    bundle each time: 30 to 90 ms of CPU per client, more than the request it carried.
    The store is now read once per process and every client verifies with it."""
    _http.tls_context.cache_clear()
    reads: list[int] = []
    real = ssl.create_default_context

    def counted(*args: object, **kwargs: object) -> ssl.SSLContext:
        reads.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(ssl, "create_default_context", counted)
    token = mint(stack, subject)
    for _ in range(3):
        with MemvaultClient(stack.url, token=token) as mv:
            assert mv.health().status == "ok"
    assert len(reads) == 1
    assert _http.tls_context().verify_mode == ssl.CERT_REQUIRED
