"""``/v1/subjects/{subject_id}/context``: working memory for one decision."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from memvault.api.access import caller
from memvault.api.deps import deps
from memvault.api.errors import documented
from memvault.api.routes.params import SubjectPath
from memvault_wire.context import AssembledContext, ContextRequest, Manifest

router = APIGatewayRouter()
TAGS = ["context"]


@router.post(
    "/v1/subjects/<subject_id>/context",
    summary="Assemble working memory within a token budget (scope memory:read)",
    description="Sections in order: policy, goal, run_state, evidence, session, memories. "
    "Token counts use OpenAI's cl100k_base tokenizer. The manifest reproduces the assembly.",
    responses=documented(200, AssembledContext, 403, 404),
    tags=TAGS,
)
def assemble_context(subject_id: SubjectPath, body: ContextRequest) -> AssembledContext:
    return deps.services_for(router.current_event).context.assemble(
        caller(router.current_event), subject_id, body
    )


@router.post(
    "/v1/subjects/<subject_id>/context/reproduce",
    summary="Rebuild an earlier assembly from its manifest (scope memory:read)",
    responses=documented(200, AssembledContext, 403, 404),
    tags=TAGS,
)
def reproduce_context(subject_id: SubjectPath, body: Manifest) -> AssembledContext:
    return deps.services_for(router.current_event).context.reproduce(
        caller(router.current_event), subject_id, body
    )
