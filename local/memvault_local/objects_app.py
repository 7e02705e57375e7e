"""The local object server: what S3 answers to presigned URLs, for the local store.

A WSGI application, mounted by the local HTTP server at ``/_objects/``; the last path
segment is the URL's signed token (``LocalObjectStore.verify``).

- ``PUT``: signature, method and expiry; then whether the URL's artifact still takes
  bytes (``UploadGate``: it is STAGED; a URL dies with its artifact's commit and with its
  deletion, which a presigned S3 URL cannot); a ``Content-Length`` over the signed limit
  is refused before any byte is read, and the body is counted as it streams in; its
  sha256 must be the signed one. Only then is a new version stored, encrypted, and kept
  if its artifact still takes it once it has landed (a commit or a delete may have come
  while it streamed in). ``200`` with the version in ``x-amz-version-id``.
- ``GET``: signature, method and expiry; the pinned version's bytes, decrypted as they
  stream out.

Errors carry the API's error shape with its codes: ``403 forbidden`` (a URL that is
malformed, altered, expired or used with another method, or whose artifact was committed
or deleted), ``413 payload_too_large``,
``422 checksum_mismatch``, ``404 not_found``, ``405``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Protocol

from werkzeug.wrappers import Request, Response

from memvault.storage.local.objects import (
    Grant,
    LocalObjectStore,
    SignedUrlRefused,
    UploadRefused,
)
from memvault.storage.ports.objects import ObjectMissing, ObjectRef, ObjectUnreadable

_URL_DEAD = "this upload URL is no longer valid: its artifact was committed or deleted"


class UploadGate(Protocol):
    """Whether an upload URL's artifact still takes bytes (``ArtifactService``)."""

    def upload_open(self, ref: ObjectRef) -> bool: ...

    def settle_upload(self, ref: ObjectRef, version: str) -> bool: ...


def _error(status: int, code: str, message: str) -> Response:
    body = {"error": {"code": code, "message": message, "details": {}}}
    return Response(json.dumps(body), status=status, mimetype="application/json")


class ObjectsApp:
    def __init__(self, store: LocalObjectStore, uploads: UploadGate | None = None) -> None:
        self.store = store
        #: Without one, a valid URL stores bytes whatever became of its artifact, as a
        #: presigned S3 URL does (tests use that to play S3).
        self.uploads = uploads

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        request = Request(environ)
        response = self.dispatch(request)
        return response(environ, start_response)

    def dispatch(self, request: Request) -> Response:
        if request.method not in ("PUT", "GET"):
            return _error(405, "method_not_allowed", "objects take PUT or GET")
        token = request.path.rstrip("/").rsplit("/", 1)[-1]
        try:
            grant = self.store.verify(token, request.method)
        except SignedUrlRefused as refused:
            return _error(403, "forbidden", refused.reason)
        if request.method == "PUT":
            return self._put(request, grant)
        return self._get(grant)

    def _put(self, request: Request, grant: Grant) -> Response:
        if self.uploads is not None and not self.uploads.upload_open(grant.ref):
            return _error(403, "forbidden", _URL_DEAD)
        limit = int(grant.max_bytes or 0)
        if request.content_length is not None and request.content_length > limit:
            return _error(413, "payload_too_large", f"this URL accepts at most {limit} bytes")
        try:
            head = self.store.put(
                grant.ref,
                request.stream,
                max_bytes=limit,
                sha256=str(grant.sha256),
                media_type=grant.media_type,
            )
        except UploadRefused as refused:
            status = 413 if refused.code == UploadRefused.TOO_LARGE else 422
            return _error(status, refused.code, str(refused))
        except ObjectUnreadable as err:  # the tenant's key is destroyed
            return _error(403, "forbidden", str(err))
        if self.uploads is not None and not self.uploads.settle_upload(grant.ref, head.version):
            return _error(403, "forbidden", _URL_DEAD)
        return Response(
            status=200, headers={"x-amz-version-id": head.version, "ETag": head.sha256 or ""}
        )

    def _get(self, grant: Grant) -> Response:
        try:
            head, media_type, chunks = self.store.open_read(grant.ref, str(grant.version))
        except ObjectMissing:
            return _error(404, "not_found", "no such object version")
        except ObjectUnreadable as err:
            return _error(403, "forbidden", str(err))
        return Response(
            chunks,
            status=200,
            mimetype=media_type or "application/octet-stream",
            headers={"Content-Length": str(head.size), "x-amz-version-id": head.version},
            direct_passthrough=True,
        )
