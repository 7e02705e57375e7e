"""Time and identifier sources: ports, so that tests can control expiry and ids."""

from __future__ import annotations

import re
import secrets
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime: ...


class SystemClock:
    """UTC, to the millisecond that stored times keep (``iso``): what a write answers is
    what a later read gives back."""

    def now(self) -> datetime:
        now = datetime.now(UTC)
        return now.replace(microsecond=now.microsecond - now.microsecond % 1000)


class IdSource(Protocol):
    def new_id(self, prefix: str) -> str: ...


class RandomIds:
    """128 random bits, hex, behind a type prefix (``mem_``, ``del_``, ``chn_``)."""

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{secrets.token_hex(16)}"


def iso(ts: datetime) -> str:
    """ISO 8601 in UTC with milliseconds and a ``Z``: sorts as text in time order."""
    return ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{ts.microsecond // 1000:03d}Z"


def covered_by(ts: datetime, cutoff: datetime | None) -> bool:
    """Whether ``ts`` is at or before ``cutoff`` at the millisecond that stored times
    keep (as the stores compare them, in text): what a forget at ``cutoff`` covers."""
    return cutoff is not None and iso(ts) <= iso(cutoff)


def made_after_forget(now: datetime, forgotten: datetime | None) -> datetime:
    """The creation time to record for something made now, when its subject was last
    forgotten at ``forgotten``: ``now``, unless a forget in the same millisecond (or on a
    clock ahead of this one) would cover it; then the millisecond after the forget. What
    is made after the caller saw a forget is never that forget's."""
    if covered_by(now, forgotten):
        assert forgotten is not None
        return parse_iso(iso(forgotten)) + timedelta(milliseconds=1)
    return now


#: What ``iso`` writes (any 1 to 6 digits of a second's fraction, as ``%f`` reads them).
_ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{1,6}Z")


def parse_iso(text: str) -> datetime:
    """A time as ``iso`` writes it, and nothing else (a ``ValueError`` otherwise).

    ``fromisoformat`` after a format check: a recall reads several stored times per
    candidate, and ``strptime`` took a tenth of a recall's own time at 10,000 memories."""
    if not _ISO.fullmatch(text):
        raise ValueError(f"time data {text!r} does not match format '%Y-%m-%dT%H:%M:%S.%fZ'")
    return datetime.fromisoformat(text)
