"""``MemvaultClient``: the API (docs/api.md) from synchronous Python."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, TypeVar

from pydantic import BaseModel

from memvault_client import _calls as calls
from memvault_client._http import HttpTransport, get_object, put_object
from memvault_client._retry import RetryPolicy, next_delay
from memvault_client._transport import Answer, NoAnswer, Request, Transport
from memvault_client.errors import ArtifactNotCommitted
from memvault_wire.artifact import ArtifactOut, StartUpload
from memvault_wire.context import AssembledContext, ContextRequest, Manifest
from memvault_wire.memory import MemoryKind, MemoryPatch, MemoryWrite
from memvault_wire.recall import RecallRequest
from memvault_wire.run import Advance, Checkpoint, CreateRun, Operation, RecordOperation, RunEvent
from memvault_wire.schemas import (
    DeletionOut,
    EventOut,
    ExportOut,
    HealthOut,
    HistoryOut,
    MemoryBatchOut,
    MemoryListOut,
    MemoryOut,
    RecallOut,
    RunEventListOut,
    RunEventOut,
    SessionEnded,
)
from memvault_wire.session import AppendMessage, PutSummary, Session
from memvault_wire.trace import (
    FeedbackListOut,
    FeedbackOut,
    FeedbackRequest,
    MemoryTraceOut,
    RecallTraceOut,
)

M = TypeVar("M", bound=BaseModel)
#: A bearer token, or a callable that returns one: called for every attempt of every
#: request, so it can refresh a token before it expires.
TokenSource = str | Callable[[], str] | None


class MemvaultClient:
    """A client for one memvault deployment.

    Give ``endpoint`` (the API's base URL; HTTP through httpx) or ``transport`` (such as
    ``LambdaTransport("memvault-direct")``). Bodies are the API's models or mappings of
    their fields; answers are the API's models. Errors raise a subclass of
    :class:`~memvault_client.errors.MemvaultError`.
    """

    def __init__(
        self,
        endpoint: str | None = None,
        *,
        token: TokenSource = None,
        transport: Transport | None = None,
        retry: RetryPolicy | None = None,
        timeout: float = 30.0,
    ) -> None:
        if (endpoint is None) == (transport is None):
            raise ValueError("give either an endpoint or a transport")
        self.transport: Transport = transport or HttpTransport(str(endpoint), timeout=timeout)
        self.retry = retry or RetryPolicy()
        self.timeout = timeout
        self._token = token

    def __repr__(self) -> str:  # never the token
        return f"MemvaultClient(transport={type(self.transport).__name__})"

    def __enter__(self) -> MemvaultClient:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        self.transport.close()

    # ------------------------------------------------------------------ the exchange

    def _bearer(self) -> str | None:
        return self._token() if callable(self._token) else self._token

    def _exchange(self, request: Request) -> Answer:
        attempt = 0
        while True:
            attempt += 1
            try:
                answer = self.transport.send(request, self._bearer())
            except NoAnswer as failure:
                time.sleep(next_delay(self.retry, request, attempt, failure=failure))
                continue
            if answer.ok:
                return answer
            time.sleep(next_delay(self.retry, request, attempt, answer=answer))

    def _call(self, call: calls.Call[M]) -> M:
        return call.parse(self._exchange(call.request))

    # -------------------------------------------------------------- long-term memory

    def write_memory(self, subject_id: str, body: MemoryWrite | Mapping[str, Any]) -> MemoryOut:
        """Write a memory; a mapping without ``request_id`` gets a new one (kept on retries)."""
        return self._call(calls.write_memory(subject_id, body))

    def write_memories(
        self, subject_id: str, bodies: Sequence[MemoryWrite | Mapping[str, Any]]
    ) -> MemoryBatchOut:
        """Write up to 25 memories in one request, each as :meth:`write_memory` would; a
        mapping without ``request_id`` gets a new one (kept on retries). A refused write is
        an item with its status and error, not an exception: the others are written."""
        return self._call(calls.write_memories(subject_id, bodies))

    def get_memory(self, subject_id: str, memory_id: str) -> MemoryOut:
        return self._call(calls.get_memory(subject_id, memory_id))

    def list_memories(
        self,
        subject_id: str,
        *,
        kind: MemoryKind | str | None = None,
        canonical_key: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        next_token: str | None = None,
    ) -> MemoryListOut:
        """One page of the subject's current memories; see :meth:`iter_memories`."""
        return self._call(
            calls.list_memories(
                subject_id,
                kind=kind,
                canonical_key=canonical_key,
                tag=tag,
                status=status,
                limit=limit,
                next_token=next_token,
            )
        )

    def iter_memories(
        self,
        subject_id: str,
        *,
        kind: MemoryKind | str | None = None,
        canonical_key: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        page_size: int = 50,
    ) -> Iterator[MemoryOut]:
        """Every current memory that matches, page after page: a page is fetched only
        when the one before is used up."""
        next_token: str | None = None
        while True:
            page = self.list_memories(
                subject_id,
                kind=kind,
                canonical_key=canonical_key,
                tag=tag,
                status=status,
                limit=page_size,
                next_token=next_token,
            )
            yield from page.items
            next_token = page.next_token
            if not next_token:
                return

    def memory_history(self, subject_id: str, memory_id: str) -> HistoryOut:
        return self._call(calls.memory_history(subject_id, memory_id))

    def correct_memory(
        self, subject_id: str, memory_id: str, body: MemoryPatch | Mapping[str, Any]
    ) -> MemoryOut:
        """A new version at ``expected_version + 1``; :class:`VersionConflict` when stale."""
        return self._call(calls.correct_memory(subject_id, memory_id, body))

    def delete_memory(
        self, subject_id: str, memory_id: str, *, prompted_by: str | None = None
    ) -> DeletionOut:
        """``prompted_by``: the feedback or recall id of this subject that prompted it."""
        return self._call(calls.delete_memory(subject_id, memory_id, prompted_by=prompted_by))

    def memory_trace(self, subject_id: str, memory_id: str) -> MemoryTraceOut:
        """Why the memory exists, its versions, last use, recalls, feedback, deletion."""
        return self._call(calls.memory_trace(subject_id, memory_id))

    def recall_trace(self, recall_id: str, *, subject_id: str | None = None) -> RecallTraceOut:
        return self._call(calls.recall_trace(recall_id, subject_id=subject_id))

    def give_feedback(
        self, subject_id: str, body: FeedbackRequest | Mapping[str, Any]
    ) -> FeedbackOut:
        """Feedback on a recalled memory, optionally with a correction (compare-and-set)."""
        return self._call(calls.give_feedback(subject_id, body))

    def list_feedback(self, subject_id: str, *, limit: int | None = None) -> FeedbackListOut:
        return self._call(calls.list_feedback(subject_id, limit=limit))

    def forget_subject(self, subject_id: str) -> DeletionOut:
        return self._call(calls.forget_subject(subject_id))

    def export_subject(self, subject_id: str) -> ExportOut:
        return self._call(calls.export_subject(subject_id))

    def recall(self, subject_id: str, body: RecallRequest | Mapping[str, Any] | str) -> RecallOut:
        """Recall by a query (a string, or the full request)."""
        return self._call(calls.recall(subject_id, body))

    def deletion_status(self, deletion_id: str) -> DeletionOut:
        return self._call(calls.deletion_status(deletion_id))

    def wait_for_deletion(
        self, deletion_id: str, *, timeout: float = 60.0, interval: float = 0.25
    ) -> DeletionOut:
        """The deletion job once it is COMPLETED or FAILED, or as it stands at ``timeout``."""
        deadline = time.monotonic() + timeout
        while True:
            job = self.deletion_status(deletion_id)
            if job.status in calls.FINAL_DELETION_STATES or time.monotonic() >= deadline:
                return job
            time.sleep(interval)

    # ---------------------------------------------------------------- session memory

    def append_message(
        self, subject_id: str, session_id: str, body: AppendMessage | Mapping[str, Any]
    ) -> Session:
        """Append a message; a mapping without ``request_id`` gets a new one."""
        return self._call(calls.append_message(subject_id, session_id, body))

    def read_session(self, subject_id: str, session_id: str) -> Session:
        return self._call(calls.read_session(subject_id, session_id))

    def put_summary(
        self, subject_id: str, session_id: str, body: PutSummary | Mapping[str, Any]
    ) -> Session:
        return self._call(calls.put_summary(subject_id, session_id, body))

    def end_session(self, subject_id: str, session_id: str) -> SessionEnded:
        return self._call(calls.end_session(subject_id, session_id))

    # --------------------------------------------------------------------- run state

    def create_run(self, run_id: str, body: CreateRun | Mapping[str, Any]) -> Checkpoint:
        return self._call(calls.create_run(run_id, body))

    def get_run(self, run_id: str, *, subject_id: str | None = None) -> Checkpoint:
        return self._call(calls.get_run(run_id, subject_id=subject_id))

    def get_run_version(
        self, run_id: str, version: int, *, subject_id: str | None = None
    ) -> Checkpoint:
        """One past checkpoint (version ``version``), exactly as it was written."""
        return self._call(calls.get_run_version(run_id, version, subject_id=subject_id))

    def advance_run(
        self, run_id: str, body: Advance | Mapping[str, Any], *, subject_id: str | None = None
    ) -> Checkpoint:
        """A checkpoint by compare-and-set on ``expected_version``."""
        return self._call(calls.advance_run(run_id, body, subject_id=subject_id))

    def record_operation(
        self,
        run_id: str,
        operation_id: str,
        body: RecordOperation | Mapping[str, Any],
        *,
        subject_id: str | None = None,
    ) -> Operation:
        return self._call(calls.record_operation(run_id, operation_id, body, subject_id=subject_id))

    def deliver_event(
        self, run_id: str, body: RunEvent | Mapping[str, Any], *, subject_id: str | None = None
    ) -> EventOut:
        return self._call(calls.deliver_event(run_id, body, subject_id=subject_id))

    def list_run_events(
        self,
        run_id: str,
        *,
        subject_id: str | None = None,
        limit: int | None = None,
        next_token: str | None = None,
    ) -> RunEventListOut:
        """One page of the run's event receipts, by event id (id, type, arrival, whether
        it applied and the run's version then; never a payload); see
        :meth:`iter_run_events`."""
        return self._call(
            calls.list_run_events(run_id, subject_id=subject_id, limit=limit, next_token=next_token)
        )

    def iter_run_events(
        self, run_id: str, *, subject_id: str | None = None, page_size: int = 50
    ) -> Iterator[RunEventOut]:
        """Every event receipt of the run, page after page: a page is fetched only when
        the one before is used up."""
        next_token: str | None = None
        while True:
            page = self.list_run_events(
                run_id, subject_id=subject_id, limit=page_size, next_token=next_token
            )
            yield from page.items
            next_token = page.next_token
            if not next_token:
                return

    # ---------------------------------------------------------------- working memory

    def assemble_context(
        self, subject_id: str, body: ContextRequest | Mapping[str, Any]
    ) -> AssembledContext:
        return self._call(calls.assemble_context(subject_id, body))

    def reproduce_context(
        self, subject_id: str, manifest: Manifest | Mapping[str, Any]
    ) -> AssembledContext:
        return self._call(calls.reproduce_context(subject_id, manifest))

    # --------------------------------------------------------------------- artifacts

    def start_upload(self, subject_id: str, body: StartUpload | Mapping[str, Any]) -> ArtifactOut:
        """Stage an upload; a mapping without ``request_id`` gets a new one."""
        return self._call(calls.start_upload(subject_id, body))

    def commit_upload(self, subject_id: str, artifact_id: str) -> ArtifactOut:
        return self._call(calls.commit_upload(subject_id, artifact_id))

    def get_artifact(self, subject_id: str, artifact_id: str) -> ArtifactOut:
        return self._call(calls.get_artifact(subject_id, artifact_id))

    def delete_artifact(self, subject_id: str, artifact_id: str) -> DeletionOut:
        return self._call(calls.delete_artifact(subject_id, artifact_id))

    def upload_artifact(
        self,
        subject_id: str,
        data: bytes,
        *,
        media_type: str,
        name: str | None = None,
        retention_days: int | None = None,
        sensitivity: str | None = None,
        request_id: str | None = None,
    ) -> ArtifactOut:
        """Start, PUT the bytes to the presigned URL with its headers, and commit."""
        fields = calls.upload_fields(
            data,
            media_type,
            name=name,
            retention_days=retention_days,
            sensitivity=sensitivity,
            request_id=request_id,
        )
        started = self.start_upload(subject_id, fields)
        if started.upload is None:  # a replay of a committed upload
            return started
        put_object(started.upload.url, data, started.upload.headers, self.timeout)
        return self.commit_upload(subject_id, started.artifact_id)

    def download_artifact(self, subject_id: str, artifact_id: str) -> bytes:
        """The committed bytes, through the short-lived download URL."""
        artifact = self.get_artifact(subject_id, artifact_id)
        if artifact.download is None:
            raise ArtifactNotCommitted(f"the artifact is {artifact.state.value}, not committed")
        return get_object(artifact.download.url, self.timeout)

    # ------------------------------------------------------------------------ health

    def health(self) -> HealthOut:
        return self._call(calls.health())
