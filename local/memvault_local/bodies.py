"""Request bodies on the local HTTP server: read within a limit, whatever their framing.

`memvault run` serves with werkzeug's development server. A body sent with
``Transfer-Encoding: chunked`` declares no length, so a check of ``Content-Length`` let
it through and ``get_data()`` then held all of it (a 200 MB body to the console's sign-in
grew the stack by 370 MB before its 403). Here:

- every endpoint reads its body with ``read_bounded``: in small pieces, counted as they
  come, refused (``BodyTooLarge``: the endpoint answers 413 ``payload_too_large``) as
  soon as they pass the endpoint's limit, never kept past it;
- ``GuardedServer`` wraps the whole server: whatever an endpoint left unread (a refused
  body, a body sent to a GET) is read and dropped in small pieces before the answer goes
  out, so the client still sending sees the answer rather than a reset (werkzeug's own
  drain reads 10 MB at a time); and an exception any endpoint lets through becomes the
  API's ``internal`` error envelope, never werkzeug's HTML page.
"""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import time
import traceback
from collections.abc import Callable, Iterable
from typing import IO, Any, Protocol

from werkzeug.exceptions import ClientDisconnected
from werkzeug.wsgi import get_input_stream

from memvault.observability import logger

#: How much of a body is read at a time.
READ_CHUNK = 64 * 1024
#: What is read and dropped of a body its endpoint left unread, at most (bytes, seconds);
#: past either, the connection is closed under the client.
DRAIN_BYTES = 1024 * 1024 * 1024
DRAIN_SECONDS = 60.0


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class BodyUnreadable(Exception):
    """The body broke off or is malformed (the client went away, a bad chunk)."""


class _Body:
    """A request's body as every endpoint reads it: it ends where the body ends, and a
    broken body raises ``BodyUnreadable`` (an error envelope, not a 500)."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1, /) -> bytes:
        try:
            return self._stream.read(size)
        except (OSError, ValueError, ClientDisconnected) as err:
            raise BodyUnreadable(type(err).__name__) from None


class BodyTooLarge(Exception):
    """The body passed its endpoint's limit while it was read."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"the request body is larger than {limit} bytes")
        self.limit = limit


def read_bounded(stream: Readable, limit: int) -> bytes:
    """The whole body, if it holds at most ``limit`` bytes; ``BodyTooLarge`` as soon as
    it holds more (at most ``limit`` + one piece was read by then)."""
    body = bytearray()
    while True:
        piece = stream.read(min(READ_CHUNK, limit + 1 - len(body)))
        if not piece:
            return bytes(body)
        body += piece
        if len(body) > limit:
            raise BodyTooLarge(limit)


def drain(
    stream: Readable, max_bytes: int = DRAIN_BYTES, max_seconds: float = DRAIN_SECONDS
) -> bool:
    """Read and drop what is left of a body, a piece at a time; False when it was cut off
    (more than ``max_bytes``, longer than ``max_seconds``)."""
    deadline = time.monotonic() + max_seconds
    dropped = 0
    while dropped <= max_bytes and time.monotonic() < deadline:
        piece = stream.read(READ_CHUNK)
        if not piece:
            return True
        dropped += len(piece)
    return False


def _envelope(start_response: Any, status: str, code: str, message: str) -> Iterable[bytes]:
    data = json.dumps({"error": {"code": code, "message": message, "details": {}}}).encode()
    headers = [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
    start_response(status, headers, sys.exc_info())
    return [data]


WsgiApp = Callable[[dict[str, Any], Any], Iterable[bytes]]


class GuardedServer:
    """The WSGI application the local server runs: ``app`` with its bodies bounded and
    drained, and its unexpected errors answered as the API answers them."""

    def __init__(self, app: WsgiApp) -> None:
        self.app = app

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        # One stream for every reader of this request, ending where the body ends:
        # Content-Length bytes, the last chunk of a chunked body, or nothing at all.
        body = _Body(get_input_stream(environ))
        environ["wsgi.input"] = body
        environ["wsgi.input_terminated"] = True
        try:
            answer = self.app(environ, start_response)
        except BodyUnreadable:
            answer = _envelope(
                start_response,
                "422 UNPROCESSABLE ENTITY",
                "validation_failed",
                "the request body broke off or its chunked framing is malformed",
            )
        except Exception as err:  # an endpoint's bug: the envelope, never an HTML page
            logger.error(
                "unexpected error in the local server",
                extra={
                    "error": type(err).__name__,
                    "where": traceback.format_tb(err.__traceback__)[-3:],
                },
            )
            answer = _envelope(
                start_response,
                "500 INTERNAL SERVER ERROR",
                "internal",
                "an unexpected error occurred in the local server",
            )
        try:
            finished = drain(body)
        except BodyUnreadable:
            finished = False
        if not finished:
            # Stop reading: werkzeug would go on reading the rest 10 MB at a time.
            connection = environ.get("werkzeug.socket")
            if isinstance(connection, socket.socket):
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RD)
        return answer
