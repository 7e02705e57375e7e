"""Artifacts: large content in S3 under the tenant's key; metadata in DynamoDB."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from memvault_wire.memory import Sensitivity
from memvault_wire.types import Label, RequestId


class ArtifactState(StrEnum):
    STAGED = "STAGED"
    COMMITTED = "COMMITTED"
    DELETED = "DELETED"


class StartUpload(BaseModel):
    """The body of ``POST /v1/subjects/{subject_id}/artifacts``."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    request_id: RequestId
    media_type: str = Field(min_length=3, max_length=100, pattern=r"^[\w.+-]+/[\w.+-]+$")
    size_bytes: int = Field(ge=1, strict=True)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    #: Shown to every reader of the artifact: one line, no control or bidirectional
    #: characters; personal data in it needs ``consent`` and makes the artifact ``pii``.
    name: Label | None = None
    retention_days: int | None = Field(default=None, ge=1, le=3650, strict=True)
    sensitivity: Sensitivity = Sensitivity.INTERNAL
    consent: bool = Field(
        default=False,
        description="the subject's consent to keep the personal data the artifact's name "
        "holds (the upload is refused with consent_required without it; with it the "
        "artifact is classified pii)",
        strict=True,
    )


class Artifact(BaseModel):
    model_config = ConfigDict(defer_build=True)

    artifact_id: str
    subject_id: str
    media_type: str
    size_bytes: int
    sha256: str
    version: str | None
    state: ArtifactState
    name: str | None
    sensitivity: Sensitivity
    created_at: datetime
    #: The memories (``memory:<chain id>``) and runs (``run:<run id>``) that reference
    #: it, named only to a reader that may read every record that could (a person's
    #: token at the top ceiling); to others this list is empty and only ``references``
    #: counts them (a delete answers 409 while any is left).
    referenced_by: list[str]
    references: int = 0


class Upload(BaseModel):
    model_config = ConfigDict(defer_build=True)

    method: str = "PUT"
    url: str
    headers: dict[str, str]
    expires_at: datetime


class Download(BaseModel):
    model_config = ConfigDict(defer_build=True)

    url: str
    expires_at: datetime


class ArtifactOut(Artifact):
    upload: Upload | None = None
    download: Download | None = None
