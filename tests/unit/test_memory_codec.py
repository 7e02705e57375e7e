"""The memory codec: a stored record read back is the version that was written, from
SQLite's JSON and from DynamoDB's types (numbers as ``Decimal``) alike."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from typing import Any

import pytest
from pydantic import ValidationError

from memvault.clock import iso
from memvault.storage.codecs.memory import memory_from_item, memory_to_item
from memvault_wire.memory import Memory, MemoryKind, MemoryStatus, Sensitivity, SourceType
from tests.unit.test_index_documents import item

AT = "2026-01-01T00:00:00.250000Z"


def stored(**over: Any) -> dict[str, Any]:
    full = {
        "memory_id": "mem_" + "1" * 32,
        "consent": True,
        "index_status": "indexed",
        "created_by": "agent-1",
        "valid_from": AT,
        "created_at": AT,
        "updated_at": "2026-01-02T03:04:05.678000Z",
        "expires_at": "2026-06-01T00:00:00.000000Z",
        "source_thread": "conv-1",
        "source_turn": 7,
        "confidence": 0.75,
        "subject_epoch": 2,
    }
    return item(**(full | over))


def as_dynamodb(record: dict[str, Any]) -> dict[str, Any]:
    """The record as boto3's deserializer gives it back: every number a ``Decimal``."""
    return {
        k: Decimal(str(v)) if isinstance(v, int | float) and not isinstance(v, bool) else v
        for k, v in record.items()
    }


def test_a_record_reads_back_as_typed_fields() -> None:
    m = memory_from_item(stored())
    assert m.kind is MemoryKind.SEMANTIC
    assert m.status is MemoryStatus.ACTIVE
    assert m.sensitivity is Sensitivity.INTERNAL
    assert m.source.type is SourceType.USER_STATEMENT
    assert (m.source.thread, m.source.turn) == ("conv-1", 7)
    assert m.valid_from.utcoffset() == timedelta(0)
    assert iso(m.valid_from) == "2026-01-01T00:00:00.250Z"
    assert iso(m.updated_at) == "2026-01-02T03:04:05.678Z"
    assert (m.confidence, m.subject_epoch, m.version) == (0.75, 2, 3)


@pytest.mark.parametrize("reader", [lambda r: r, as_dynamodb], ids=["sqlite", "dynamodb"])
def test_what_is_written_is_what_is_read(reader: Any) -> None:
    m = memory_from_item(stored())
    again = memory_from_item(reader(memory_to_item(m)))
    assert again == m
    assert isinstance(again.version, int) and isinstance(again.source.turn, int)
    assert isinstance(again.confidence, float)
    assert again.public_view() == m.public_view()


def test_a_record_that_breaks_the_model_is_refused_not_served() -> None:
    with pytest.raises(ValidationError):
        memory_from_item(stored(status="maybe"))
    with pytest.raises(ValidationError):
        memory_from_item(stored(source_turn=3, source_thread=None))


def test_a_memory_model_round_trips_its_times() -> None:
    m = memory_from_item(stored())
    assert Memory.model_validate_json(m.model_dump_json()) == m


@pytest.mark.parametrize(
    "when",
    ["2027-01-01T00:00:00", "2027-01-01", "1798761600", "2027-01-01T00:00:00+02:00"],
    ids=["no zone", "date only", "epoch seconds", "offset"],
)
def test_a_time_not_in_the_stored_format_is_refused(when: str) -> None:
    """Every stored time is ``iso``'s: UTC, milliseconds, a ``Z``. Anything else in a
    record (a hand-edited table) is refused, not read as a time without a zone that
    recall's expiry check cannot compare."""
    for field in ("valid_from", "expires_at", "created_at", "updated_at"):
        with pytest.raises(ValueError, match="does not match format"):
            memory_from_item(stored(**{field: when}))
