"""What a transport is: it sends one request and returns the answer, or raises
:class:`NoAnswer`. Retries, tokens and errors live in the clients, above it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol
from urllib.parse import quote

from memvault_wire.operations import OPERATIONS as API_OPERATIONS

#: Every operation the SDK sends: the API's one table (the direct function's names).
OPERATIONS: Mapping[str, tuple[str, str]] = API_OPERATIONS


@dataclass(frozen=True)
class Request:
    """One API request, built once per call and sent unchanged on every attempt (so a
    write's ``request_id`` is the same on each)."""

    operation: str
    params: Mapping[str, str] = field(default_factory=dict)
    query: Mapping[str, str] = field(default_factory=dict)
    #: Left out of the repr: it may hold memory content.
    body: dict[str, Any] | None = field(default=None, repr=False)
    #: Whether sending it twice has the effect of sending it once: only then is it
    #: repeated after a connection error (a 429 or 503 answer is always safe to retry).
    idempotent: bool = True

    @property
    def method(self) -> str:
        return OPERATIONS[self.operation][0]

    @property
    def path(self) -> str:
        template = OPERATIONS[self.operation][1]
        return template.format(**{k: quote(v, safe="") for k, v in self.params.items()})


@dataclass(frozen=True)
class Answer:
    """An answer: status, headers (names in lower case) and the JSON body (or ``None``)."""

    status: int
    headers: Mapping[str, str]
    body: Any

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


class NoAnswer(Exception):
    """The request got no answer (refused, reset, timed out). ``kind`` names the failure
    without its text, which may quote an address."""

    def __init__(self, kind: str) -> None:
        super().__init__(kind)
        self.kind = kind


class Transport(Protocol):
    def send(self, request: Request, token: str | None) -> Answer: ...

    def close(self) -> None: ...


class AsyncTransport(Protocol):
    async def send(self, request: Request, token: str | None) -> Answer: ...

    async def aclose(self) -> None: ...
