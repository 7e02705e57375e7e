"""The SDK's exceptions: one class per error code of the API contract (docs/api.md, Errors).

Every class is a :class:`MemvaultError` carrying ``code``, ``message``, ``details`` and
``status``. The codes and statuses are the server's own (``memvault_wire.errors``), and the
code-to-class map is built by walking the server's error classes, so the two cannot
drift: a code the server gains before this module names it still gets a class of its
own (made at import), and a code no server class knows maps to :class:`MemvaultError`.
"""

from __future__ import annotations

import email.utils
import time
from collections.abc import Mapping
from typing import Any, ClassVar

from memvault_wire import errors as _server


class MemvaultError(Exception):
    """Base of every error the SDK raises. ``status`` is the HTTP status (or the direct
    function's), ``None`` when no answer came; ``retry_after`` the seconds a ``Retry-After``
    header asked for."""

    CODE: ClassVar[str | None] = None
    STATUS: ClassVar[int | None] = None

    def __init__(
        self,
        message: str,
        *,
        code: str | None = None,
        status: int | None = None,
        details: Mapping[str, Any] | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.code: str = code or self.CODE or "unknown"
        self.status: int | None = status if status is not None else self.STATUS
        self.details: dict[str, Any] = dict(details or {})
        self.retry_after = retry_after

    def __str__(self) -> str:
        status = f" ({self.status})" if self.status is not None else ""
        return f"{self.code}{status}: {self.message}"

    def to_body(self) -> dict[str, Any]:
        """The error as the API writes it: ``{"error": {"code", "message", "details"}}``."""
        return {"error": {"code": self.code, "message": self.message, "details": self.details}}


def _mirror(server: type[_server.MemvaultError]) -> dict[str, Any]:
    return {"CODE": server.code, "STATUS": server.status}


class Unauthorized(MemvaultError):
    CODE, STATUS = _server.Unauthorized.code, _server.Unauthorized.status


class Forbidden(MemvaultError):
    CODE, STATUS = _server.Forbidden.code, _server.Forbidden.status


class ProvenanceNotAllowed(MemvaultError):
    CODE, STATUS = _server.ProvenanceNotAllowed.code, _server.ProvenanceNotAllowed.status


class NotFound(MemvaultError):
    CODE, STATUS = _server.NotFound.code, _server.NotFound.status


class ValidationFailed(MemvaultError):
    """422 from the server, or a request body that failed the API's own model before it
    was sent: then with the message and details the server would have answered. The
    details name locations and problems, never values."""

    CODE, STATUS = _server.ValidationFailed.code, _server.ValidationFailed.status


class ConsentRequired(MemvaultError):
    CODE, STATUS = _server.ConsentRequired.code, _server.ConsentRequired.status


class SecretDetected(MemvaultError):
    CODE, STATUS = _server.SecretDetected.code, _server.SecretDetected.status


class VersionConflict(MemvaultError):
    CODE, STATUS = _server.VersionConflict.code, _server.VersionConflict.status


class FactNotWritable(MemvaultError):
    CODE, STATUS = _server.FactNotWritable.code, _server.FactNotWritable.status


class IdempotencyKeyReused(MemvaultError):
    CODE, STATUS = _server.IdempotencyKeyReused.code, _server.IdempotencyKeyReused.status


class PayloadTooLarge(MemvaultError):
    CODE, STATUS = _server.PayloadTooLarge.code, _server.PayloadTooLarge.status


class SessionExpired(MemvaultError):
    CODE, STATUS = _server.SessionExpired.code, _server.SessionExpired.status


class IllegalTransition(MemvaultError):
    CODE, STATUS = _server.IllegalTransition.code, _server.IllegalTransition.status


class OperationConflict(MemvaultError):
    CODE, STATUS = _server.OperationConflict.code, _server.OperationConflict.status


class MediaTypeNotAllowed(MemvaultError):
    CODE, STATUS = _server.MediaTypeNotAllowed.code, _server.MediaTypeNotAllowed.status


class ChecksumMismatch(MemvaultError):
    CODE, STATUS = _server.ChecksumMismatch.code, _server.ChecksumMismatch.status


class UploadIncomplete(MemvaultError):
    CODE, STATUS = _server.UploadIncomplete.code, _server.UploadIncomplete.status


class ArtifactNotCommitted(MemvaultError):
    CODE, STATUS = _server.ArtifactNotCommitted.code, _server.ArtifactNotCommitted.status


class ArtifactReferenced(MemvaultError):
    CODE, STATUS = _server.ArtifactReferenced.code, _server.ArtifactReferenced.status


class Throttled(MemvaultError):
    CODE, STATUS = _server.Throttled.code, _server.Throttled.status


class SearchUnavailable(MemvaultError):
    CODE, STATUS = _server.SearchUnavailable.code, _server.SearchUnavailable.status


class InternalError(MemvaultError):
    CODE, STATUS = _server.InternalError.code, _server.InternalError.status


class ConnectionFailed(MemvaultError, ConnectionError):
    """No answer came (refused, reset, timed out), after any retries. Also a
    ``ConnectionError``, so code that catches ``OSError`` keeps working."""

    CODE = "connection_failed"


def _by_code() -> dict[str, type[MemvaultError]]:
    found: dict[str, type[MemvaultError]] = {}
    for server in _server.ALL_ERRORS:
        named = globals().get(server.__name__)
        if (
            isinstance(named, type)
            and issubclass(named, MemvaultError)
            and server.code == named.CODE
        ):
            found[server.code] = named
        else:  # a code newer than this module: a class of its own all the same
            found[server.code] = type(server.__name__, (MemvaultError,), _mirror(server))
    return found


#: Every error code the server has, with the class the SDK raises for it.
ERRORS_BY_CODE: Mapping[str, type[MemvaultError]] = _by_code()


def parse_retry_after(value: str | None) -> float | None:
    """Seconds from a ``Retry-After`` header: delay-seconds or an HTTP date."""
    if not value:
        return None
    value = value.strip()
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def error_from_answer(
    status: int, body: Any, headers: Mapping[str, str] | None = None
) -> MemvaultError:
    """The exception for an error answer: its code's class, the base for an unknown code
    or an answer that is not the API's error envelope."""
    retry_after = parse_retry_after((headers or {}).get("retry-after"))
    error = body.get("error") if isinstance(body, dict) else None
    if not isinstance(error, dict) or not isinstance(error.get("code"), str):
        return MemvaultError(
            f"the server answered {status} without memvault's error body",
            code="bad_response",
            status=status,
            retry_after=retry_after,
        )
    code: str = error["code"]
    details = error.get("details")
    return ERRORS_BY_CODE.get(code, MemvaultError)(
        str(error.get("message", "")),
        code=code,
        status=status,
        details=details if isinstance(details, dict) else None,
        retry_after=retry_after,
    )


__all__ = [
    "ERRORS_BY_CODE",
    "ArtifactNotCommitted",
    "ArtifactReferenced",
    "ChecksumMismatch",
    "ConnectionFailed",
    "ConsentRequired",
    "FactNotWritable",
    "Forbidden",
    "IdempotencyKeyReused",
    "IllegalTransition",
    "InternalError",
    "MediaTypeNotAllowed",
    "MemvaultError",
    "NotFound",
    "OperationConflict",
    "PayloadTooLarge",
    "ProvenanceNotAllowed",
    "SearchUnavailable",
    "SecretDetected",
    "SessionExpired",
    "Throttled",
    "Unauthorized",
    "UploadIncomplete",
    "ValidationFailed",
    "VersionConflict",
    "error_from_answer",
    "parse_retry_after",
]
