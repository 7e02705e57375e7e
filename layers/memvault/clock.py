"""Time and identifier sources: ports, so that tests can control expiry and ids."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    def now(self) -> datetime:
        return datetime.now(UTC)


class IdSource(Protocol):
    def new_id(self, prefix: str) -> str: ...


class RandomIds:
    """128 random bits, hex, behind a type prefix (``mem_``, ``del_``, ``chn_``)."""

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{secrets.token_hex(16)}"


def iso(ts: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and a ``Z``: sorts as text in time order."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def parse_iso(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)
