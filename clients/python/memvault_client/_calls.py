"""Each API operation as a :class:`Call`: the request to send and the model of its answer.

The sync and async clients share these builders, so both send exactly the same thing.
Request bodies are the API's own pydantic models (``memvault_wire``); a mapping is
accepted too and validated with the same model before anything is sent. A write that
takes a ``request_id`` gets a fresh one (uuid4 hex) unless the caller gave one; it is
part of the built request, so every retry of the call carries the same id.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from pydantic import BaseModel, ValidationError

from memvault_client._transport import Answer, Request
from memvault_client.errors import MemvaultError, ValidationFailed
from memvault_wire.artifact import ArtifactOut, StartUpload
from memvault_wire.context import AssembledContext, ContextRequest, Manifest
from memvault_wire.memory import MemoryBatchWrite, MemoryKind, MemoryPatch, MemoryWrite
from memvault_wire.recall import RecallRequest
from memvault_wire.run import (
    Advance,
    Checkpoint,
    CreateRun,
    Operation,
    RecordOperation,
    RunEvent,
)
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
B = TypeVar("B", bound=BaseModel)


def new_request_id() -> str:
    return uuid.uuid4().hex


@dataclass(frozen=True)
class Call(Generic[M]):
    request: Request
    model: type[M]

    def parse(self, answer: Answer) -> M:
        try:
            return self.model.model_validate(answer.body)
        except ValidationError:
            raise MemvaultError(
                f"the answer to {self.request.operation} does not match the API's "
                f"{self.model.__name__}",
                code="bad_response",
                status=answer.status,
            ) from None


def body_of(model: type[B], body: B | Mapping[str, Any], *, request_id: bool = False) -> B:
    """``body`` as ``model``: as given when it is one, else validated from the mapping
    (with a new ``request_id`` when the model takes one and none is given)."""
    if isinstance(body, model):
        return body
    if isinstance(body, BaseModel):
        raise TypeError(f"expected a {model.__name__} or a mapping, not a {type(body).__name__}")
    fields = dict(body)
    if request_id and fields.get("request_id") is None:
        fields["request_id"] = new_request_id()
    try:
        return model.model_validate(fields)
    except ValidationError as err:
        raise invalid(err) from None


def invalid(err: ValidationError) -> ValidationFailed:
    """The server's 422 for this body, raised before sending: the same message and
    details (locations and problems, never the input's values)."""
    problems = [
        {
            "location": ".".join(["body", *(str(p) for p in e["loc"])]),
            "problem": e["msg"],
            "type": e["type"],
        }
        for e in err.errors(include_url=False, include_input=False, include_context=False)
    ]
    where = ", ".join(p["location"] for p in problems[:5]) or "the request"
    return ValidationFailed(
        f"the request does not match the API contract at: {where}",
        details={"errors": problems},
    )


def _json(model: BaseModel) -> dict[str, Any]:
    # Only the fields the caller set: the server applies its own defaults to the rest.
    return model.model_dump(mode="json", exclude_unset=True)


def _query(**values: Any) -> dict[str, str]:
    return {k: str(v) for k, v in values.items() if v is not None}


def _call(
    operation: str,
    model: type[M],
    *,
    params: Mapping[str, str] | None = None,
    query: Mapping[str, str] | None = None,
    body: BaseModel | None = None,
    idempotent: bool = True,
) -> Call[M]:
    request = Request(
        operation,
        params=dict(params or {}),
        query=dict(query or {}),
        body=_json(body) if body is not None else None,
        idempotent=idempotent,
    )
    return Call(request, model)


# ------------------------------------------------------------------ long-term memory


def write_memory(subject_id: str, body: MemoryWrite | Mapping[str, Any]) -> Call[MemoryOut]:
    write = body_of(MemoryWrite, body, request_id=True)
    return _call("memory.write", MemoryOut, params={"subject_id": subject_id}, body=write)


def write_memories(
    subject_id: str, bodies: Sequence[MemoryWrite | Mapping[str, Any]]
) -> Call[MemoryBatchOut]:
    writes = [body_of(MemoryWrite, b, request_id=True) for b in bodies]
    batch = body_of(MemoryBatchWrite, {"memories": writes})
    return _call(
        "memory.write_batch", MemoryBatchOut, params={"subject_id": subject_id}, body=batch
    )


def get_memory(subject_id: str, memory_id: str) -> Call[MemoryOut]:
    return _call("memory.get", MemoryOut, params={"subject_id": subject_id, "memory_id": memory_id})


def list_memories(
    subject_id: str,
    *,
    kind: MemoryKind | str | None = None,
    canonical_key: str | None = None,
    tag: str | None = None,
    status: str | None = None,
    limit: int | None = None,
    next_token: str | None = None,
) -> Call[MemoryListOut]:
    return _call(
        "memory.list",
        MemoryListOut,
        params={"subject_id": subject_id},
        query=_query(
            kind=kind.value if isinstance(kind, MemoryKind) else kind,
            canonical_key=canonical_key,
            tag=tag,
            status=status,
            limit=limit,
            next_token=next_token,
        ),
    )


def memory_history(subject_id: str, memory_id: str) -> Call[HistoryOut]:
    params = {"subject_id": subject_id, "memory_id": memory_id}
    return _call("memory.history", HistoryOut, params=params)


def correct_memory(
    subject_id: str, memory_id: str, body: MemoryPatch | Mapping[str, Any]
) -> Call[MemoryOut]:
    # Compare-and-set: a repeat after a lost answer would read as a version conflict.
    return _call(
        "memory.correct",
        MemoryOut,
        params={"subject_id": subject_id, "memory_id": memory_id},
        body=body_of(MemoryPatch, body),
        idempotent=False,
    )


def delete_memory(
    subject_id: str, memory_id: str, *, prompted_by: str | None = None
) -> Call[DeletionOut]:
    params = {"subject_id": subject_id, "memory_id": memory_id}
    query = _query(prompted_by=prompted_by)
    return _call("memory.delete", DeletionOut, params=params, query=query, idempotent=False)


def memory_trace(subject_id: str, memory_id: str) -> Call[MemoryTraceOut]:
    params = {"subject_id": subject_id, "memory_id": memory_id}
    return _call("memory.trace", MemoryTraceOut, params=params)


def recall_trace(recall_id: str, *, subject_id: str | None = None) -> Call[RecallTraceOut]:
    query = _query(subject_id=subject_id)
    return _call("recall.get", RecallTraceOut, params={"recall_id": recall_id}, query=query)


def give_feedback(subject_id: str, body: FeedbackRequest | Mapping[str, Any]) -> Call[FeedbackOut]:
    request = body_of(FeedbackRequest, body)
    params = {"subject_id": subject_id}
    return _call("feedback.give", FeedbackOut, params=params, body=request, idempotent=False)


def list_feedback(subject_id: str, *, limit: int | None = None) -> Call[FeedbackListOut]:
    query = _query(limit=limit)
    return _call("feedback.list", FeedbackListOut, params={"subject_id": subject_id}, query=query)


def forget_subject(subject_id: str) -> Call[DeletionOut]:
    params = {"subject_id": subject_id}
    return _call("subject.forget", DeletionOut, params=params, idempotent=False)


def export_subject(subject_id: str) -> Call[ExportOut]:
    return _call("subject.export", ExportOut, params={"subject_id": subject_id})


def recall(subject_id: str, body: RecallRequest | Mapping[str, Any] | str) -> Call[RecallOut]:
    request = body_of(RecallRequest, {"query": body} if isinstance(body, str) else body)
    return _call("memory.recall", RecallOut, params={"subject_id": subject_id}, body=request)


def deletion_status(deletion_id: str) -> Call[DeletionOut]:
    return _call("deletion.get", DeletionOut, params={"deletion_id": deletion_id})


# ------------------------------------------------------------------- session memory


def append_message(
    subject_id: str, session_id: str, body: AppendMessage | Mapping[str, Any]
) -> Call[Session]:
    return _call(
        "session.append",
        Session,
        params={"subject_id": subject_id, "session_id": session_id},
        body=body_of(AppendMessage, body, request_id=True),
    )


def read_session(subject_id: str, session_id: str) -> Call[Session]:
    params = {"subject_id": subject_id, "session_id": session_id}
    return _call("session.get", Session, params=params)


def put_summary(
    subject_id: str, session_id: str, body: PutSummary | Mapping[str, Any]
) -> Call[Session]:
    return _call(
        "session.summarize",
        Session,
        params={"subject_id": subject_id, "session_id": session_id},
        body=body_of(PutSummary, body),
    )


def end_session(subject_id: str, session_id: str) -> Call[SessionEnded]:
    params = {"subject_id": subject_id, "session_id": session_id}
    return _call("session.end", SessionEnded, params=params, idempotent=False)


# ------------------------------------------------------------------------ run state


def create_run(run_id: str, body: CreateRun | Mapping[str, Any]) -> Call[Checkpoint]:
    # The same payload again answers the run: safe to repeat.
    create = body_of(CreateRun, body)
    return _call("run.create", Checkpoint, params={"run_id": run_id}, body=create)


def get_run(run_id: str, *, subject_id: str | None = None) -> Call[Checkpoint]:
    query = _query(subject_id=subject_id)
    return _call("run.get", Checkpoint, params={"run_id": run_id}, query=query)


def get_run_version(
    run_id: str, version: int, *, subject_id: str | None = None
) -> Call[Checkpoint]:
    params = {"run_id": run_id, "version": str(version)}
    return _call("run.version", Checkpoint, params=params, query=_query(subject_id=subject_id))


def advance_run(
    run_id: str, body: Advance | Mapping[str, Any], *, subject_id: str | None = None
) -> Call[Checkpoint]:
    return _call(
        "run.advance",
        Checkpoint,
        params={"run_id": run_id},
        query=_query(subject_id=subject_id),
        body=body_of(Advance, body),
        idempotent=False,
    )


def record_operation(
    run_id: str,
    operation_id: str,
    body: RecordOperation | Mapping[str, Any],
    *,
    subject_id: str | None = None,
) -> Call[Operation]:
    return _call(
        "run.operation",
        Operation,
        params={"run_id": run_id, "operation_id": operation_id},
        query=_query(subject_id=subject_id),
        body=body_of(RecordOperation, body),
    )


def deliver_event(
    run_id: str, body: RunEvent | Mapping[str, Any], *, subject_id: str | None = None
) -> Call[EventOut]:
    # The event id makes delivery idempotent: a duplicate is acknowledged, changes nothing.
    return _call(
        "run.event",
        EventOut,
        params={"run_id": run_id},
        query=_query(subject_id=subject_id),
        body=body_of(RunEvent, body),
    )


def list_run_events(
    run_id: str,
    *,
    subject_id: str | None = None,
    limit: int | None = None,
    next_token: str | None = None,
) -> Call[RunEventListOut]:
    return _call(
        "run.events",
        RunEventListOut,
        params={"run_id": run_id},
        query=_query(subject_id=subject_id, limit=limit, next_token=next_token),
    )


# ------------------------------------------------------------------- working memory


def assemble_context(
    subject_id: str, body: ContextRequest | Mapping[str, Any]
) -> Call[AssembledContext]:
    request = body_of(ContextRequest, body)
    params = {"subject_id": subject_id}
    return _call("context.assemble", AssembledContext, params=params, body=request)


def reproduce_context(
    subject_id: str, manifest: Manifest | Mapping[str, Any]
) -> Call[AssembledContext]:
    params = {"subject_id": subject_id}
    body = body_of(Manifest, manifest)
    return _call("context.reproduce", AssembledContext, params=params, body=body)


# ------------------------------------------------------------------------ artifacts


def start_upload(subject_id: str, body: StartUpload | Mapping[str, Any]) -> Call[ArtifactOut]:
    start = body_of(StartUpload, body, request_id=True)
    return _call("artifact.start", ArtifactOut, params={"subject_id": subject_id}, body=start)


def commit_upload(subject_id: str, artifact_id: str) -> Call[ArtifactOut]:
    params = {"subject_id": subject_id, "artifact_id": artifact_id}
    return _call("artifact.commit", ArtifactOut, params=params)


def get_artifact(subject_id: str, artifact_id: str) -> Call[ArtifactOut]:
    params = {"subject_id": subject_id, "artifact_id": artifact_id}
    return _call("artifact.get", ArtifactOut, params=params)


def delete_artifact(subject_id: str, artifact_id: str) -> Call[DeletionOut]:
    params = {"subject_id": subject_id, "artifact_id": artifact_id}
    return _call("artifact.delete", DeletionOut, params=params, idempotent=False)


def health() -> Call[HealthOut]:
    return _call("health", HealthOut)


def upload_fields(
    data: bytes,
    media_type: str,
    *,
    name: str | None,
    retention_days: int | None,
    sensitivity: str | None,
    request_id: str | None,
) -> dict[str, Any]:
    """The start of an upload of ``data``: its size and sha256, and what the caller named."""
    fields: dict[str, Any] = {
        "media_type": media_type,
        "size_bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
    }
    optional = {
        "name": name,
        "retention_days": retention_days,
        "sensitivity": sensitivity,
        "request_id": request_id,
    }
    fields.update({k: v for k, v in optional.items() if v is not None})
    return fields


#: The states a deletion job ends in.
FINAL_DELETION_STATES = frozenset({"COMPLETED", "FAILED"})
