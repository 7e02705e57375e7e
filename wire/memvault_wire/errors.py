"""Domain errors: one small hierarchy, each with the stable code of the API contract.

Handlers map these to HTTP answers in exactly one place; the data-access layer maps
``ClientError`` codes to them. Messages say what to fix; ``details`` carry ids and
field names, never memory content.
"""

from __future__ import annotations

from typing import Any, ClassVar


class MemvaultError(Exception):
    """Base of every error a caller may see."""

    code: ClassVar[str] = "internal"
    status: ClassVar[int] = 500

    def __init__(self, message: str, details: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.details: dict[str, Any] = details or {}

    def to_body(self) -> dict[str, Any]:
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


class Unauthorized(MemvaultError):
    code = "unauthorized"
    status = 401


class Forbidden(MemvaultError):
    code = "forbidden"
    status = 403


class ProvenanceNotAllowed(MemvaultError):
    """The caller claims a source its identity does not allow (an agent claiming the
    user's confirmation, say), or confirms a candidate without being a person."""

    code = "provenance_not_allowed"
    status = 403


class NotFound(MemvaultError):
    code = "not_found"
    status = 404


class ValidationFailed(MemvaultError):
    code = "validation_failed"
    status = 422


class ConsentRequired(MemvaultError):
    code = "consent_required"
    status = 422


class SecretDetected(MemvaultError):
    code = "secret_detected"
    status = 422


class VersionConflict(MemvaultError):
    code = "version_conflict"
    status = 409


class FactNotWritable(MemvaultError):
    """A fact the caller may not read holds this canonical key (above its sensitivity
    ceiling, or outside its visibility list): the caller may not supersede it. The
    details name the key only, never the fact's id, version or content."""

    code = "fact_not_writable"
    status = 409


class IdempotencyKeyReused(MemvaultError):
    code = "idempotency_key_reused"
    status = 409


class PayloadTooLarge(MemvaultError):
    code = "payload_too_large"
    status = 413


class SessionExpired(MemvaultError):
    code = "session_expired"
    status = 410


class IllegalTransition(MemvaultError):
    code = "illegal_transition"
    status = 422


class OperationConflict(MemvaultError):
    code = "operation_conflict"
    status = 409


class MediaTypeNotAllowed(MemvaultError):
    code = "media_type_not_allowed"
    status = 415


class ChecksumMismatch(MemvaultError):
    code = "checksum_mismatch"
    status = 422


class UploadIncomplete(MemvaultError):
    code = "upload_incomplete"
    status = 409


class ArtifactNotCommitted(MemvaultError):
    code = "artifact_not_committed"
    status = 422


class ArtifactReferenced(MemvaultError):
    code = "artifact_referenced"
    status = 409


class Throttled(MemvaultError):
    code = "throttled"
    status = 429


class SearchUnavailable(MemvaultError):
    """Recall's search index is not configured or does not answer; retry later."""

    code = "search_unavailable"
    status = 503


class InternalError(MemvaultError):
    """An unexpected fault. Carries a correlation id only, never the cause's text."""

    code = "internal"
    status = 500


ALL_ERRORS: tuple[type[MemvaultError], ...] = (
    Unauthorized,
    Forbidden,
    ProvenanceNotAllowed,
    NotFound,
    ValidationFailed,
    ConsentRequired,
    SecretDetected,
    VersionConflict,
    FactNotWritable,
    IdempotencyKeyReused,
    PayloadTooLarge,
    SessionExpired,
    IllegalTransition,
    OperationConflict,
    MediaTypeNotAllowed,
    ChecksumMismatch,
    UploadIncomplete,
    ArtifactReferenced,
    ArtifactNotCommitted,
    Throttled,
    SearchUnavailable,
    InternalError,
)
