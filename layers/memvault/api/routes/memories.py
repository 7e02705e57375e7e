"""``/v1/subjects/{subject_id}/memories`` and the subject-wide export and forget."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from memvault.api.access import caller
from memvault.api.deps import deps
from memvault.api.errors import documented
from memvault.api.routes.params import MemoryPath, SubjectPath
from memvault.observability import logger, metrics
from memvault_wire.errors import MemvaultError
from memvault_wire.memory import (
    MAX_BATCH_WRITES,
    MemoryBatchWrite,
    MemoryKind,
    MemoryPatch,
    MemoryWrite,
)
from memvault_wire.schemas import (
    BatchItemOut,
    DeletionOut,
    ErrorDetail,
    ExportOut,
    HistoryOut,
    MemoryBatchOut,
    MemoryListOut,
    MemoryOut,
)
from memvault_wire.types import CanonicalKey, Tag

if TYPE_CHECKING:  # the services load with the first request, not with this module
    from memvault.services.memory import WriteResult

router = APIGatewayRouter()
BASE = "/v1/subjects/<subject_id>/memories"
TAGS = ["memories"]


@router.post(
    BASE,
    status_code=201,
    summary="Write a memory (scope memory:write)",
    description="A replay of the same request_id and payload returns the first result with "
    "the header Idempotent-Replay: true. A canonical_key whose current fact this token may "
    "not read (above its max_sensitivity, or outside the fact's visibility) is refused with "
    "409 fact_not_writable, before any version is compared; the details name the key only. "
    "The source is checked against the token: an agent token (agent_role) may claim "
    "user_statement (with source.ref), tool_result or model_inferred; the subject's own "
    "token also user_confirmed; only a reviewer (subjects:any, no agent_role) human_review. "
    "Any other claim is 403 provenance_not_allowed, as is a model_inferred write under the "
    "canonical_key of an active fact (an unconfirmed inference may not replace it).",
    responses=documented(201, MemoryOut, 403, 404, 409),
    tags=TAGS,
)
def write_memory(subject_id: SubjectPath, body: MemoryWrite) -> Response[MemoryOut]:
    result = deps.services_for(router.current_event).memory.write(
        caller(router.current_event), subject_id, body
    )
    if result.created:
        metrics.add_metric(name="MemoryWritten", unit="Count", value=1)
    return Response(
        status_code=201,
        content_type="application/json",
        body=MemoryOut.of(result.memory),
        headers={"Idempotent-Replay": "false" if result.created else "true"},
    )


@router.post(
    f"{BASE}/batch",
    status_code=200,
    summary=f"Write up to {MAX_BATCH_WRITES} memories (scope memory:write)",
    description="Each write is made exactly as POST .../memories makes it: its own "
    "request_id, policy, provenance check, commit and replay. A refused write takes its "
    "place in items with the status and error POST .../memories would have answered; the "
    "others are written. Items come in the order sent; written, replayed and refused count "
    "them. Every write needs its own request_id. A 5xx answer means the batch stopped "
    "part way: send it again, and the writes already made are replayed.",
    responses=documented(200, MemoryBatchOut, 403),
    tags=TAGS,
)
def write_memories(subject_id: SubjectPath, body: MemoryBatchWrite) -> MemoryBatchOut:
    results = deps.services_for(router.current_event).memory.write_batch(
        caller(router.current_event), subject_id, body.memories
    )
    items = [_batch_item(r) for r in results]
    written = sum(1 for r in results if not isinstance(r, MemvaultError) and r.created)
    refused = [r.code for r in results if isinstance(r, MemvaultError)]
    if written:
        metrics.add_metric(name="MemoryWritten", unit="Count", value=written)
    if refused:
        logger.info(
            "batch writes refused",
            extra={"refused": len(refused), "codes": sorted(set(refused))},
        )
    return MemoryBatchOut(
        items=items,
        written=written,
        replayed=len(results) - written - len(refused),
        refused=len(refused),
    )


def _batch_item(result: WriteResult | MemvaultError) -> BatchItemOut:
    if isinstance(result, MemvaultError):
        body = result.to_body()["error"]
        return BatchItemOut(status=result.status, error=ErrorDetail(**body))
    return BatchItemOut(
        status=201,
        replayed=not result.created,
        memory=MemoryOut.of(result.memory),
    )


@router.get(
    BASE,
    summary="List current memories (scope memory:read)",
    responses=documented(200, MemoryListOut, 403),
    tags=TAGS,
)
def list_memories(
    subject_id: SubjectPath,
    kind: Annotated[MemoryKind | None, Query()] = None,
    canonical_key: Annotated[CanonicalKey | None, Query(min_length=1, max_length=100)] = None,
    tag: Annotated[Tag | None, Query(min_length=1, max_length=64)] = None,
    status: Annotated[Literal["active", "candidate"] | None, Query()] = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 20,
    next_token: Annotated[str | None, Query(min_length=1, max_length=2048)] = None,
) -> MemoryListOut:
    page = deps.services_for(router.current_event).memory.list_memories(
        caller(router.current_event),
        subject_id,
        kind=kind.value if kind else None,
        canonical_key=canonical_key,
        tag=tag,
        status=status,
        limit=limit,
        next_token=next_token,
    )
    return MemoryListOut(items=[MemoryOut.of(m) for m in page.items], next_token=page.next_token)


@router.get(
    f"{BASE}/<memory_id>",
    summary="The current version of a memory (scope memory:read)",
    responses=documented(200, MemoryOut, 403, 404),
    tags=TAGS,
)
def get_memory(subject_id: SubjectPath, memory_id: MemoryPath) -> MemoryOut:
    return MemoryOut.of(
        deps.services_for(router.current_event).memory.get(
            caller(router.current_event), subject_id, memory_id
        )
    )


@router.patch(
    f"{BASE}/<memory_id>",
    summary="Correct a memory: a new version at expected_version + 1 (scope memory:write)",
    description="Setting status active confirms a candidate: only a person's token (no "
    "agent_role) may, otherwise 403 provenance_not_allowed. A source sent is checked as on "
    "a write; a correction that changes the content without one takes the corrector's own "
    "provenance (model_inferred for an agent, so the new version is a candidate; "
    "user_statement for the subject; human_review for a reviewer); one that leaves the "
    "content alone keeps the source. A candidate may not replace an active memory (403 "
    "provenance_not_allowed): an agent's unconfirmed edit of an active fact is written as a "
    "memory of its own, or with the source it came from.",
    responses=documented(200, MemoryOut, 403, 404, 409),
    tags=TAGS,
)
def correct_memory(subject_id: SubjectPath, memory_id: MemoryPath, body: MemoryPatch) -> MemoryOut:
    memory = deps.services_for(router.current_event).memory.correct(
        caller(router.current_event), subject_id, memory_id, body
    )
    return MemoryOut.of(memory)


@router.get(
    f"{BASE}/<memory_id>/history",
    summary="Every held version of a memory, oldest first (scope memory:read)",
    responses=documented(200, HistoryOut, 403, 404),
    tags=TAGS,
)
def memory_history(subject_id: SubjectPath, memory_id: MemoryPath) -> HistoryOut:
    versions = deps.services_for(router.current_event).memory.history(
        caller(router.current_event), subject_id, memory_id
    )
    return HistoryOut(memory_id=memory_id, versions=[MemoryOut.of(m) for m in versions])


@router.delete(
    f"{BASE}/<memory_id>",
    status_code=202,
    summary="Delete a memory: unreadable at once, then purged copy by copy (scope memory:delete)",
    responses=documented(202, DeletionOut, 403, 404, 409),
    tags=TAGS,
)
def delete_memory(
    subject_id: SubjectPath,
    memory_id: MemoryPath,
    prompted_by: Annotated[
        str | None,
        Query(
            pattern=r"^(fbk|rcl)_[0-9a-f]{32}$",
            description="the feedback or recall of this subject that prompted the deletion",
        ),
    ] = None,
) -> DeletionOut:
    job = deps.services_for(router.current_event).memory.delete(
        caller(router.current_event), subject_id, memory_id, prompted_by=prompted_by
    )
    metrics.add_metric(name="DeletionRequested", unit="Count", value=1)
    return DeletionOut.of(job)


@router.delete(
    BASE,
    status_code=202,
    summary="Forget the subject: every memory of theirs (scope memory:delete)",
    responses=documented(202, DeletionOut, 403, 409),
    tags=TAGS,
)
def forget_subject(subject_id: SubjectPath) -> DeletionOut:
    job = deps.services_for(router.current_event).memory.forget(
        caller(router.current_event), subject_id
    )
    metrics.add_metric(name="DeletionRequested", unit="Count", value=1)
    return DeletionOut.of(job)


@router.get(
    "/v1/subjects/<subject_id>/export",
    summary="The subject's long-term memories the caller may read, every version its "
    "history shows (scope memory:read)",
    description="not_included names what else is held about the subject (sessions, runs, "
    "artifacts, recall traces, feedback) and the route that reads each.",
    responses=documented(200, ExportOut, 403),
    tags=["subjects"],
)
def export_subject(subject_id: SubjectPath) -> ExportOut:
    exported = deps.services_for(router.current_event).memory.export(
        caller(router.current_event), subject_id
    )
    return ExportOut.model_validate(exported)
