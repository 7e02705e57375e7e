"""``POST /v1/subjects/{subject_id}/recall``: hybrid recall, re-validated against the table."""

from __future__ import annotations

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from memvault.api.access import caller
from memvault.api.deps import deps
from memvault.api.errors import documented
from memvault.api.routes.params import SubjectPath
from memvault.observability import metrics
from memvault_wire.recall import RecallRequest
from memvault_wire.schemas import RecallOut

router = APIGatewayRouter()


@router.post(
    "/v1/subjects/<subject_id>/recall",
    summary="Recall the subject's memories relevant to a query (scope memory:read)",
    description="Hard filters (tenant, subject, status, expiry, sensitivity, visibility, "
    "kinds, tags, scope) apply inside the search; keyword and vector candidates are fused, "
    "then every one is re-read from the memory table before it is ranked and returned. "
    "Conflicting active memories for one canonical key come back under conflicts.",
    responses=documented(200, RecallOut, 403, 503),
    tags=["recall"],
)
def recall(subject_id: SubjectPath, body: RecallRequest) -> Response[RecallOut]:
    result = deps.services_for(router.current_event).recall.recall(
        caller(router.current_event), subject_id, body
    )
    metrics.add_metric(name="RecallServed", unit="Count", value=1)
    metrics.add_metric(name="RecallItems", unit="Count", value=len(result.items))
    return Response(
        status_code=200,
        content_type="application/json",
        body=RecallOut.of(result),
        headers={"Server-Timing": ", ".join(f"{k};dur={v}" for k, v in result.timings.items())},
    )
