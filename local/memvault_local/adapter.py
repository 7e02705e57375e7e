"""The local stand-in for API Gateway: a WSGI app that verifies the bearer token (as the
Lambda authorizer does), builds the same proxy event, and calls the same handler."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterable
from typing import Any

from werkzeug.wrappers import Request, Response

from memvault.api.app import body_too_large
from memvault.api.events import LocalLambdaContext, proxy_event
from memvault.api.routes.health import PUBLIC_PATHS
from memvault.config import get_settings
from memvault.identity.tokens import TokenVerifier, bearer_token
from memvault_local.bodies import BodyTooLarge, read_bounded
from memvault_wire.errors import MemvaultError, PayloadTooLarge, Unauthorized, ValidationFailed

#: API Gateway's own payload limit; the handler enforces memvault's smaller one.
GATEWAY_MAX_BODY = 10 * 1024 * 1024

Handler = Callable[[dict[str, Any], Any], dict[str, Any]]


def _error(err: MemvaultError, headers: dict[str, str] | None = None) -> Response:
    return Response(
        json.dumps(err.to_body()),
        status=err.status,
        content_type="application/json",
        headers=headers,
    )


class ApiGatewayAdapter:
    def __init__(self, verifier: TokenVerifier, handler: Handler) -> None:
        self.verifier = verifier
        self.handler = handler

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        response = self.respond(Request(environ))
        return response(environ, start_response)

    def respond(self, request: Request) -> Response:
        if (request.content_length or 0) > GATEWAY_MAX_BODY:
            return _error(PayloadTooLarge("the request body is over API Gateway's 10 MB limit"))
        claims = None
        if request.path not in PUBLIC_PATHS:
            try:
                claims = self.verifier.verify(bearer_token(request.headers.get("Authorization")))
            except Unauthorized as err:
                return _error(err, {"WWW-Authenticate": "Bearer"})
        # The handler refuses a body over max_body_bytes; reading more of one would only
        # hold it in memory. Counted as it is read: a chunked body declares no length.
        limit = min(GATEWAY_MAX_BODY, get_settings().max_body_bytes)
        if (request.content_length or 0) > limit:
            return _error(body_too_large(limit))
        try:
            raw = read_bounded(request.stream, limit)
        except BodyTooLarge:
            return _error(body_too_large(limit))
        try:
            body = raw.decode("utf-8") or None
        except UnicodeDecodeError as err:
            # Repaired, the body would be another request than the one sent (and than a
            # proxy or log that read the bytes saw); the offset names no content.
            return _error(
                ValidationFailed(
                    f"the request body is not valid UTF-8 (byte {err.start}); send JSON "
                    "encoded as UTF-8",
                    {"retryable": False},
                )
            )
        event = proxy_event(
            request.method,
            request.path,
            claims=claims,
            body=body,
            query=dict(request.args.items()) or None,
            headers=dict(request.headers.items()),
            source_ip=request.remote_addr or "127.0.0.1",
        )
        started = time.perf_counter()
        out = self.handler(event, LocalLambdaContext())
        handled_ms = (time.perf_counter() - started) * 1000
        headers: dict[str, str] = dict(out.get("headers") or {})
        # What the function spent on the request, as API Gateway's integration latency:
        # benchmarks read it to tell server time from the client's round trip.
        timing = f"handler;dur={handled_ms:.2f}"
        headers["Server-Timing"] = (
            f"{headers['Server-Timing']}, {timing}" if headers.get("Server-Timing") else timing
        )
        for name, values in (out.get("multiValueHeaders") or {}).items():
            headers[name] = ", ".join(values)
        return Response(out.get("body") or "", status=out["statusCode"], headers=headers)
