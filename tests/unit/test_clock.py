"""Stored times: ``iso`` writes them, ``parse_iso`` reads exactly that form back."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from memvault.clock import iso, parse_iso


@pytest.mark.parametrize(
    "moment",
    [
        datetime(2024, 2, 29, 23, 59, 59, 999_000, tzinfo=UTC),
        datetime(1999, 12, 31, 0, 0, 0, 0, tzinfo=UTC),
        datetime(2030, 6, 1, 12, 30, 5, 7_000, tzinfo=timezone(timedelta(hours=8))),
    ],
)
def test_what_iso_writes_reads_back_as_the_same_instant_in_utc(moment: datetime) -> None:
    back = parse_iso(iso(moment))
    assert back == moment and back.tzinfo == UTC


@pytest.mark.parametrize(
    ("text", "microseconds"),
    [("2024-01-01T00:00:00.1Z", 100_000), ("2024-01-01T00:00:00.123456Z", 123_456)],
)
def test_any_fraction_of_one_to_six_digits_reads_as_strptime_read_it(
    text: str, microseconds: int
) -> None:
    assert parse_iso(text) == datetime(2024, 1, 1, 0, 0, 0, microseconds, tzinfo=UTC)
    assert parse_iso(text) == datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


@pytest.mark.parametrize(
    "text",
    [
        "2024-01-01T00:00:00Z",  # no fraction
        "2024-01-01T00:00:00.123+00:00",  # an offset, not Z
        "2024-01-01 00:00:00.123Z",  # a space
        "2024-01-01T00:00:00.1234567Z",  # seven digits
        "2024-01-01",
        "2024-01-01T00:00:00.123Z ",
        "",
    ],
)
def test_any_other_form_is_refused(text: str) -> None:
    with pytest.raises(ValueError, match="does not match"):
        parse_iso(text)
