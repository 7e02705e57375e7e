"""Traces and feedback: ``GET /v1/recalls/{recall_id}``,
``GET /v1/subjects/{subject_id}/memories/{memory_id}/trace`` and
``/v1/subjects/{subject_id}/feedback``. Ids, versions, counts and reasons only."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from memvault.api.access import caller
from memvault.api.deps import deps
from memvault.api.errors import documented
from memvault.api.routes.params import MemoryPath, RunSubjectQuery, SubjectPath
from memvault_wire.trace import (
    FeedbackListOut,
    FeedbackOut,
    FeedbackRequest,
    MemoryTraceOut,
    RecallTraceOut,
)

router = APIGatewayRouter()
TAGS = ["traces"]
RecallPath = Annotated[str, Path(pattern=r"^rcl_[0-9a-f]{32}$", description="a recall id")]


@router.get(
    "/v1/recalls/<recall_id>",
    summary="A recall's trace: filters, candidates per source, what re-validation dropped "
    "and why, what was returned at which version and rank (scope memory:read)",
    description="A token without a subject names the recall's subject with subject_id.",
    responses=documented(200, RecallTraceOut, 403, 404),
    tags=TAGS,
)
def get_recall(recall_id: RecallPath, subject_id: RunSubjectQuery = None) -> RecallTraceOut:
    return deps.services_for(router.current_event).traces.recall_trace(
        caller(router.current_event), recall_id, subject_id
    )


@router.get(
    "/v1/subjects/<subject_id>/memories/<memory_id>/trace",
    summary="Why a memory exists: its writes and policy decisions, versions, index status, "
    "last use, the recalls that served each version, feedback, and its deletion's copies "
    "(scope memory:read)",
    responses=documented(200, MemoryTraceOut, 403, 404),
    tags=TAGS,
)
def get_memory_trace(subject_id: SubjectPath, memory_id: MemoryPath) -> MemoryTraceOut:
    return deps.services_for(router.current_event).traces.memory_trace(
        caller(router.current_event), subject_id, memory_id
    )


@router.post(
    "/v1/subjects/<subject_id>/feedback",
    status_code=201,
    summary="Feedback on a memory a recall served, optionally with its correction "
    "(scope memory:write)",
    description="Names the recall_id (or the run_id) and the memory; verdict wrong, "
    "outdated, irrelevant or helpful. A correction is applied by compare-and-set at its "
    "expected_version, as PATCH does, and records this feedback as what prompted it. An "
    "optional note (up to 500 characters) says why; it is shown to every reader of the "
    "subject's feedback, so one holding personal data or a credential is refused (422).",
    responses=documented(201, FeedbackOut, 403, 404, 409),
    tags=TAGS,
)
def give_feedback(subject_id: SubjectPath, body: FeedbackRequest) -> Response[FeedbackOut]:
    out = deps.services_for(router.current_event).traces.give_feedback(
        caller(router.current_event), subject_id, body
    )
    return Response(status_code=201, content_type="application/json", body=out)


@router.get(
    "/v1/subjects/<subject_id>/feedback",
    summary="The subject's feedback, newest first (scope memory:read)",
    responses=documented(200, FeedbackListOut, 403),
    tags=TAGS,
)
def list_feedback(
    subject_id: SubjectPath,
    limit: Annotated[int, Query(ge=1, le=100, description="at most this many")] = 50,
) -> FeedbackListOut:
    items = deps.services_for(router.current_event).traces.list_feedback(
        caller(router.current_event), subject_id, limit
    )
    return FeedbackListOut(items=items)
