"""Uploading and committing an artifact the way a client does: to S3's presigned URL (moto
serves it), or to the embedded object store's signed URL through the local object server
(in process, as the local stack mounts it)."""

from __future__ import annotations

import hashlib
from typing import Any

import requests

from memvault.services.artifacts import ArtifactService
from memvault_wire.artifact import StartUpload


def committed_artifact(
    artifacts: ArtifactService,
    who: Any,
    subject: str,
    data: bytes,
    request_id: str = "up-1",
    **extra: Any,
) -> tuple[str, str]:
    """(artifact_id, sha256) of a freshly committed artifact (``extra``: more fields of the
    start request, its sensitivity say)."""
    sha = hashlib.sha256(data).hexdigest()
    out, _ = artifacts.start(
        who,
        subject,
        StartUpload.model_validate(
            {
                "request_id": request_id,
                "media_type": "text/plain",
                "size_bytes": len(data),
                "sha256": sha,
                **extra,
            }
        ),
    )
    assert out.upload is not None
    put(artifacts, out.upload.url, data, out.upload.headers)
    artifacts.commit(who, subject, out.artifact_id)
    return out.artifact_id, sha


def put(artifacts: ArtifactService, url: str, data: bytes, headers: dict[str, str]) -> int:
    """PUT the bytes to an upload URL, as the client holding it would."""
    from memvault.storage.local.objects import LocalObjectStore

    if isinstance(artifacts.objects, LocalObjectStore):
        from werkzeug.test import Client

        from memvault_local.objects_app import ObjectsApp

        path = url.removeprefix(artifacts.objects.base_url)
        served = ObjectsApp(artifacts.objects, artifacts)  # as the local stack mounts it
        answer = Client(served).put(path, data=data, headers=headers)
        return int(answer.status_code)
    return int(requests.put(url, data=data, headers=headers, timeout=10).status_code)
