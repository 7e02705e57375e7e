"""The SDK calls a LangGraph adapter needs, written once for both clients.

An adapter's logic is a generator that yields the calls it needs (:class:`Op`) and
receives their answers (or has their :class:`~memvault_client.errors.MemvaultError`
thrown into it); :func:`drive` runs it on a :class:`~memvault_client.MemvaultClient`,
:func:`adrive` awaits an :class:`~memvault_client.AsyncMemvaultClient`.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Generator
from dataclasses import dataclass, field
from typing import Any, TypeVar

from memvault_client import AsyncMemvaultClient, MemvaultClient
from memvault_client.errors import MemvaultError

T = TypeVar("T")

#: Not an SDK call: the driver sleeps.
SLEEP = "__sleep__"


@dataclass(frozen=True)
class Op:
    """One SDK call: the client method's name and its arguments (the same on both)."""

    method: str
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = field(default_factory=dict)


Flow = Generator[Op, Any, T]


def drive(client: MemvaultClient, flow: Flow[T]) -> T:
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = flow.throw(error) if error is not None else flow.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        error = None
        if op.method == SLEEP:
            time.sleep(op.args[0])
            reply = None
            continue
        try:
            reply = getattr(client, op.method)(*op.args, **op.kwargs)
        except MemvaultError as failed:
            error = failed


async def adrive(client: AsyncMemvaultClient, flow: Flow[T]) -> T:
    reply: Any = None
    error: BaseException | None = None
    while True:
        try:
            op = flow.throw(error) if error is not None else flow.send(reply)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        error = None
        if op.method == SLEEP:
            await asyncio.sleep(op.args[0])
            reply = None
            continue
        try:
            reply = await getattr(client, op.method)(*op.args, **op.kwargs)
        except MemvaultError as failed:
            error = failed
