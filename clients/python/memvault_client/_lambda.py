"""The direct transport: invoke memvault's ``direct`` Lambda function with boto3, no API
Gateway in between (``memvault.api.direct``). The function verifies the token itself and
runs the request through the same routes, so answers and errors are the HTTP API's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any, Protocol

from botocore.exceptions import (
    ClientError,
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    ReadTimeoutError,
)

from memvault_client._transport import Answer, NoAnswer, Request
from memvault_client.errors import InternalError, MemvaultError

#: Lambda's answers for "too many invocations now": retried like a 429.
THROTTLING_CODES = frozenset(
    {
        "TooManyRequestsException",
        "ThrottlingException",
        "Throttling",
        "RequestLimitExceeded",
        "EC2ThrottledException",
    }
)
_NO_ANSWER = (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ConnectionClosedError)


class LambdaInvoker(Protocol):
    """What the transport needs of a boto3 Lambda client."""

    def invoke(self, **kwargs: Any) -> Mapping[str, Any]: ...


class LambdaTransport:
    """Sends each request as one synchronous invocation of ``function_name``.

    ``client`` is a boto3 Lambda client (``boto3.client("lambda")`` when not given; give
    one with ``Config(retries={"mode": "standard", "max_attempts": 1})`` to leave retries
    to the SDK alone). In a silo deployment (``MEMVAULT_SILO_TENANT_ID``), ``caller``
    (``sub``, ``scope``, ...) may stand in for a token: IAM decided who may invoke.
    """

    def __init__(
        self,
        function_name: str,
        *,
        client: LambdaInvoker | None = None,
        qualifier: str | None = None,
        caller: Mapping[str, Any] | None = None,
    ) -> None:
        if client is None:
            import boto3

            client = boto3.client("lambda")
        self.function_name = function_name
        self.qualifier = qualifier
        self.caller = dict(caller) if caller is not None else None
        self._lambda = client

    def envelope(self, request: Request, token: str | None) -> dict[str, Any]:
        """The event the direct function takes (``memvault.api.direct.Envelope``)."""
        event: dict[str, Any] = {"operation": request.operation, "params": dict(request.params)}
        if token:
            event["token"] = token
        elif self.caller is not None:
            event["caller"] = self.caller
        if request.query:
            event["query"] = dict(request.query)
        if request.body is not None:
            event["body"] = request.body
        return event

    def send(self, request: Request, token: str | None) -> Answer:
        arguments: dict[str, Any] = {
            "FunctionName": self.function_name,
            "InvocationType": "RequestResponse",
            "Payload": json.dumps(self.envelope(request, token)).encode(),
        }
        if self.qualifier:
            arguments["Qualifier"] = self.qualifier
        try:
            out = self._lambda.invoke(**arguments)
        except ClientError as err:
            return _refused(err)
        except _NO_ANSWER as err:
            raise NoAnswer(type(err).__name__) from None
        return _answer(out)

    def close(self) -> None:
        return None


class AsyncLambdaTransport:
    """:class:`LambdaTransport` for the async client: boto3 has no asyncio API, so each
    invocation runs on a worker thread."""

    def __init__(
        self,
        function_name: str,
        *,
        client: LambdaInvoker | None = None,
        qualifier: str | None = None,
        caller: Mapping[str, Any] | None = None,
    ) -> None:
        self.sync = LambdaTransport(
            function_name, client=client, qualifier=qualifier, caller=caller
        )

    async def send(self, request: Request, token: str | None) -> Answer:
        return await asyncio.to_thread(self.sync.send, request, token)

    async def aclose(self) -> None:
        return None


def _refused(err: ClientError) -> Answer:
    error = err.response.get("Error", {})
    code = str(error.get("Code", ""))
    status = int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode") or 500)
    if code in THROTTLING_CODES:
        return Answer(
            429,
            {},
            {
                "error": {
                    "code": "throttled",
                    "message": "Lambda throttled the invocation; retry with backoff",
                    "details": {"aws_error": code},
                }
            },
        )
    raise MemvaultError(
        "Lambda refused the invocation",
        code="invoke_failed",
        status=status,
        details={"aws_error": code},
    )


def _answer(out: Mapping[str, Any]) -> Answer:
    raw = out["Payload"].read()
    payload = json.loads(raw) if raw else None
    if out.get("FunctionError"):
        # The function raised: its error message may quote the request, so only its type.
        kind = payload.get("errorType") if isinstance(payload, dict) else None
        raise InternalError(
            "the direct function failed",
            details={"function_error": out["FunctionError"], "error_type": kind},
        )
    if not isinstance(payload, dict) or not isinstance(payload.get("statusCode"), int):
        raise MemvaultError(
            "the direct function answered without a status", code="bad_response", status=502
        )
    headers = {str(k).lower(): str(v) for k, v in (payload.get("headers") or {}).items()}
    return Answer(payload["statusCode"], headers, payload.get("body"))
