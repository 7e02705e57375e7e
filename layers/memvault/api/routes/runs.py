"""``/v1/runs/{run_id}``: exact run state."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from memvault.api.access import caller
from memvault.api.deps import deps
from memvault.api.errors import documented
from memvault.api.routes.params import OperationPath, RunPath, RunSubjectQuery
from memvault_wire.run import (
    Advance,
    Checkpoint,
    CreateRun,
    Operation,
    RecordOperation,
    RunEvent,
)
from memvault_wire.schemas import EventOut, RunEventListOut, RunEventOut

router = APIGatewayRouter()
TAGS = ["runs"]


@router.put(
    "/v1/runs/<run_id>",
    status_code=201,
    summary="Create a run (scope runs:write); the same payload again answers 200",
    responses={
        **documented(201, Checkpoint, 403, 409),
        200: {
            "description": "the run existed with this payload",
            "content": {"application/json": {"model": Checkpoint}},
        },
    },
    tags=TAGS,
)
def create_run(run_id: RunPath, body: CreateRun) -> Response[Checkpoint]:
    checkpoint, created = deps.services_for(router.current_event).runs.create(
        caller(router.current_event), run_id, body
    )
    return Response(
        status_code=201 if created else 200, content_type="application/json", body=checkpoint
    )


@router.get(
    "/v1/runs/<run_id>",
    summary="The current checkpoint with its operations (scope runs:write)",
    responses=documented(200, Checkpoint, 403, 404),
    tags=TAGS,
)
def get_run(run_id: RunPath, subject_id: RunSubjectQuery = None) -> Checkpoint:
    return deps.services_for(router.current_event).runs.get(
        caller(router.current_event), run_id, subject_id
    )


@router.get(
    "/v1/runs/<run_id>/versions/<version>",
    summary="One past checkpoint, exactly as it was written (scope runs:write)",
    responses=documented(200, Checkpoint, 403, 404),
    tags=TAGS,
)
def get_run_version(
    run_id: RunPath,
    version: Annotated[int, Path(ge=1, le=2**53, description="a checkpoint version")],
    subject_id: RunSubjectQuery = None,
) -> Checkpoint:
    return deps.services_for(router.current_event).runs.version(
        caller(router.current_event), run_id, version, subject_id
    )


@router.post(
    "/v1/runs/<run_id>/checkpoints",
    summary="Advance by compare-and-set from a legal state (scope runs:write)",
    responses=documented(200, Checkpoint, 403, 404, 409),
    tags=TAGS,
)
def advance_run(run_id: RunPath, body: Advance, subject_id: RunSubjectQuery = None) -> Checkpoint:
    return deps.services_for(router.current_event).runs.advance(
        caller(router.current_event), run_id, body, subject_id
    )


@router.put(
    "/v1/runs/<run_id>/operations/<operation_id>",
    summary="Record a side effect's status and result reference (scope runs:write)",
    responses=documented(200, Operation, 403, 404, 409),
    tags=TAGS,
)
def record_operation(
    run_id: RunPath,
    operation_id: OperationPath,
    body: RecordOperation,
    subject_id: RunSubjectQuery = None,
) -> Operation:
    operation, _ = deps.services_for(router.current_event).runs.record_operation(
        caller(router.current_event), run_id, operation_id, body, subject_id
    )
    return operation


@router.post(
    "/v1/runs/<run_id>/events",
    summary="Deliver an external event once; a duplicate changes nothing (scope runs:write)",
    responses=documented(200, EventOut, 403, 404, 409),
    tags=TAGS,
)
def deliver_event(run_id: RunPath, body: RunEvent, subject_id: RunSubjectQuery = None) -> EventOut:
    out = deps.services_for(router.current_event).runs.deliver_event(
        caller(router.current_event), run_id, body, subject_id
    )
    return EventOut.model_validate(out)


@router.get(
    "/v1/runs/<run_id>/events",
    summary="The run's event receipts by event id, paged: id, type, arrival, effect; never "
    "a payload (scope runs:write)",
    responses=documented(200, RunEventListOut, 403, 404),
    tags=TAGS,
)
def list_run_events(
    run_id: RunPath,
    subject_id: RunSubjectQuery = None,
    limit: Annotated[int, Query(ge=1, le=100)] = 50,
    next_token: Annotated[str | None, Query(min_length=1, max_length=2048)] = None,
) -> RunEventListOut:
    page = deps.services_for(router.current_event).runs.events(
        caller(router.current_event), run_id, subject_id, limit=limit, next_token=next_token
    )
    return RunEventListOut(
        items=[RunEventOut.model_validate(r) for r in page.items], next_token=page.next_token
    )
