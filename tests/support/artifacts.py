"""Uploading and committing an artifact the way a client does (moto serves the URLs)."""

from __future__ import annotations

import hashlib
from typing import Any

import requests

from memvault.models.artifact import StartUpload
from memvault.services.artifacts import ArtifactService


def committed_artifact(
    artifacts: ArtifactService, who: Any, subject: str, data: bytes, request_id: str = "up-1"
) -> tuple[str, str]:
    """(artifact_id, sha256) of a freshly committed artifact."""
    sha = hashlib.sha256(data).hexdigest()
    out, _ = artifacts.start(
        who,
        subject,
        StartUpload(
            request_id=request_id, media_type="text/plain", size_bytes=len(data), sha256=sha
        ),
    )
    assert out.upload is not None
    requests.put(out.upload.url, data=data, headers=out.upload.headers, timeout=10)
    artifacts.commit(who, subject, out.artifact_id)
    return out.artifact_id, sha
