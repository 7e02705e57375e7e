"""``/v1/subjects/{subject_id}/artifacts``: large content in S3 under the tenant's key."""

from __future__ import annotations

from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path
from aws_lambda_powertools.event_handler.router import APIGatewayRouter

from memvault.api.access import caller
from memvault.api.deps import deps
from memvault.api.errors import documented
from memvault.api.routes.params import SubjectPath
from memvault_wire.artifact import ArtifactOut, StartUpload
from memvault_wire.schemas import DeletionOut

router = APIGatewayRouter()
BASE = "/v1/subjects/<subject_id>/artifacts"
TAGS = ["artifacts"]
ArtifactPath = Annotated[str, Path(pattern=r"^art_[0-9a-f]{32}$", description="an artifact id")]


@router.post(
    BASE,
    status_code=201,
    summary="Start an upload: a presigned PUT with the headers to send (scope artifacts:write)",
    responses=documented(201, ArtifactOut, 403, 409, 415),
    tags=TAGS,
)
def start_upload(subject_id: SubjectPath, body: StartUpload) -> Response[ArtifactOut]:
    out, created = deps.services_for(router.current_event).artifacts.start(
        caller(router.current_event), subject_id, body
    )
    return Response(
        status_code=201,
        content_type="application/json",
        body=out,
        headers={"Idempotent-Replay": "false" if created else "true"},
    )


@router.post(
    f"{BASE}/<artifact_id>/commit",
    summary="Commit when the stored bytes match the declared size and sha256 "
    "(scope artifacts:write)",
    responses=documented(200, ArtifactOut, 403, 404, 409),
    tags=TAGS,
)
def commit_upload(subject_id: SubjectPath, artifact_id: ArtifactPath) -> ArtifactOut:
    return deps.services_for(router.current_event).artifacts.commit(
        caller(router.current_event), subject_id, artifact_id
    )


@router.get(
    f"{BASE}/<artifact_id>",
    summary="Metadata and, once committed, a download URL of at most 5 minutes (scope memory:read)",
    responses=documented(200, ArtifactOut, 403, 404),
    tags=TAGS,
)
def get_artifact(subject_id: SubjectPath, artifact_id: ArtifactPath) -> ArtifactOut:
    return deps.services_for(router.current_event).artifacts.get(
        caller(router.current_event), subject_id, artifact_id
    )


@router.delete(
    f"{BASE}/<artifact_id>",
    status_code=202,
    summary="Delete an artifact no live record references (scope artifacts:write)",
    responses=documented(202, DeletionOut, 403, 404, 409),
    tags=TAGS,
)
def delete_artifact(subject_id: SubjectPath, artifact_id: ArtifactPath) -> DeletionOut:
    job = deps.services_for(router.current_event).artifacts.delete(
        caller(router.current_event), subject_id, artifact_id
    )
    return DeletionOut.of(job)
