"""``/v1/deletions/{deletion_id}``: is my data gone, copy by copy."""

from __future__ import annotations

from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from memvault.api.access import caller
from memvault.api.deps import deps
from memvault.api.errors import documented
from memvault.api.routes.params import DeletionPath
from memvault_wire.schemas import DeletionOut

router = APIGatewayRouter()


@router.get(
    "/v1/deletions/<deletion_id>",
    summary="A deletion job's status, with a status per copy (scope memory:read or memory:delete)",
    responses=documented(200, DeletionOut, 403, 404),
    tags=["deletions"],
)
def deletion_status(deletion_id: DeletionPath) -> DeletionOut:
    job = deps.services_for(router.current_event).memory.deletion_status(
        caller(router.current_event), deletion_id
    )
    return DeletionOut.of(job)
