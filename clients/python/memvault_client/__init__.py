"""The memvault Python SDK: the HTTP API (docs/api.md) with the API's own models.

.. code-block:: python

    from memvault_client import MemvaultClient

    with MemvaultClient("http://127.0.0.1:8787", token=get_token) as mv:
        mv.write_memory("user-1", {"kind": "semantic", "content": "Prefers tea",
                                   "source": {"type": "user_statement"}, "consent": True})
        for memory in mv.iter_memories("user-1"):
            print(memory.content)

``AsyncMemvaultClient`` has the same methods, awaited. ``LambdaTransport`` (and
``AsyncLambdaTransport``) invoke the ``direct`` function with boto3 instead of HTTP.
Every error is a :class:`MemvaultError` subclass named after its code (``NotFound``,
``VersionConflict``, ...); 429 and 503 answers are retried with backoff and jitter
(:class:`RetryPolicy`), and a write's ``request_id`` is the same on every retry.
"""

from memvault_client._http import AsyncHttpTransport, HttpTransport
from memvault_client._lambda import AsyncLambdaTransport, LambdaTransport
from memvault_client._retry import RetryPolicy
from memvault_client._transport import (
    OPERATIONS,
    Answer,
    AsyncTransport,
    NoAnswer,
    Request,
    Transport,
)
from memvault_client._version import __version__
from memvault_client.aio import AsyncMemvaultClient, AsyncTokenSource
from memvault_client.errors import (
    ERRORS_BY_CODE,
    ArtifactNotCommitted,
    ArtifactReferenced,
    ChecksumMismatch,
    ConnectionFailed,
    ConsentRequired,
    FactNotWritable,
    Forbidden,
    IdempotencyKeyReused,
    IllegalTransition,
    InternalError,
    MediaTypeNotAllowed,
    MemvaultError,
    NotFound,
    OperationConflict,
    PayloadTooLarge,
    ProvenanceNotAllowed,
    SearchUnavailable,
    SecretDetected,
    SessionExpired,
    Throttled,
    Unauthorized,
    UploadIncomplete,
    ValidationFailed,
    VersionConflict,
)
from memvault_client.sync import MemvaultClient, TokenSource

__all__ = [
    "ERRORS_BY_CODE",
    "OPERATIONS",
    "Answer",
    "ArtifactNotCommitted",
    "ArtifactReferenced",
    "AsyncHttpTransport",
    "AsyncLambdaTransport",
    "AsyncMemvaultClient",
    "AsyncTokenSource",
    "AsyncTransport",
    "ChecksumMismatch",
    "ConnectionFailed",
    "ConsentRequired",
    "FactNotWritable",
    "Forbidden",
    "HttpTransport",
    "IdempotencyKeyReused",
    "IllegalTransition",
    "InternalError",
    "LambdaTransport",
    "MediaTypeNotAllowed",
    "MemvaultClient",
    "MemvaultError",
    "NoAnswer",
    "NotFound",
    "OperationConflict",
    "PayloadTooLarge",
    "ProvenanceNotAllowed",
    "Request",
    "RetryPolicy",
    "SearchUnavailable",
    "SecretDetected",
    "SessionExpired",
    "Throttled",
    "TokenSource",
    "Transport",
    "Unauthorized",
    "UploadIncomplete",
    "ValidationFailed",
    "VersionConflict",
    "__version__",
]
