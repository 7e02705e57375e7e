"""Session memory under the read limits long-term memory has.

A probe with a ``public``-ceiling token read an SSN and a phone number from a session,
directly and through ``/context``, and appends skipped the personal-data policy. Now a
message (or summary) with personal data is refused without consent and classified
``pii`` with it, and a reader sees only what its ceiling admits. Runs on both stores.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from memvault.services.bundle import Services
from memvault_wire.context import ContextRequest
from memvault_wire.errors import ConsentRequired, Forbidden, NotFound
from memvault_wire.memory import Sensitivity
from memvault_wire.session import AppendMessage, PutSummary
from tests.support.harness import ctx

SSN_LINE = "My social security number is 078-05-1120, please keep it on file"
PHONE_LINE = "Call me on +1 650-253-0000 after six"

PII_READER = ctx(max_sensitivity=Sensitivity.PII)
INTERNAL_READER = ctx(max_sensitivity=Sensitivity.INTERNAL)
PUBLIC_READER = ctx(max_sensitivity=Sensitivity.PUBLIC)


def _say(request_id: str, content: str, consent: bool = False) -> AppendMessage:
    return AppendMessage(request_id=request_id, role="user", content=content, consent=consent)  # type: ignore[arg-type]


def test_personal_data_in_a_message_needs_consent_and_nothing_is_kept_without_it(
    services: Services,
) -> None:
    with pytest.raises(ConsentRequired) as raised:
        services.sessions.append(PII_READER, "u-1", "s-1", _say("m-1", SSN_LINE))
    assert "national_id" in raised.value.details["pii_types"]
    assert SSN_LINE not in str(raised.value.to_body())
    with pytest.raises(NotFound):
        services.sessions.read(PII_READER, "u-1", "s-1")


@pytest.mark.parametrize(
    ("line", "kind"),
    [
        ("My date of birth is 1990-04-12", "date_of_birth"),
        ("My birthday is 1990-04-12", "date_of_birth"),
        ("Ship it to 1600 Amphitheatre Parkway, Mountain View, CA 94043", "address"),
        ("passport_no: X12345678", "passport"),
    ],
)
def test_iso_birth_dates_parkways_and_passport_fields_in_a_message_need_consent(
    services: Services, line: str, kind: str
) -> None:
    """Probe 8: each was stored without consent and read by internal-ceiling tokens."""
    with pytest.raises(ConsentRequired) as raised:
        services.sessions.append(PII_READER, "u-1", "s-1", _say("m-1", line))
    assert raised.value.details["pii_types"] == [kind]
    services.sessions.append(PII_READER, "u-1", "s-1", _say("m-1", line, consent=True))
    assert services.sessions.read(INTERNAL_READER, "u-1", "s-1").messages == []


def test_a_reader_sees_only_the_messages_its_ceiling_admits(services: Services) -> None:
    s = services.sessions
    s.append(PII_READER, "u-1", "s-1", _say("m-1", "hello, I need help with my taxes"))
    s.append(PII_READER, "u-1", "s-1", _say("m-2", SSN_LINE, consent=True))
    s.append(PII_READER, "u-1", "s-1", _say("m-3", PHONE_LINE, consent=True))

    full = s.read(PII_READER, "u-1", "s-1")
    assert [m.sensitivity for m in full.messages] == [
        Sensitivity.INTERNAL,
        Sensitivity.PII,
        Sensitivity.PII,
    ]
    for reader in (INTERNAL_READER, PUBLIC_READER):
        seen = s.read(reader, "u-1", "s-1")
        assert [m.seq for m in seen.messages] == ([1] if reader is INTERNAL_READER else [])
        assert seen.withheld_messages == (2 if reader is INTERNAL_READER else 3)
        assert seen.message_count == 3
        text = seen.model_dump_json()
        assert "078-05-1120" not in text and "253-0000" not in text
        with pytest.raises(NotFound):
            s.message(reader, "u-1", "s-1", 2)
    assert s.message(PII_READER, "u-1", "s-1", 2).content == SSN_LINE


def test_context_assembly_leaves_out_session_messages_above_the_ceiling(
    services: Services,
) -> None:
    services.sessions.append(PII_READER, "u-1", "s-1", _say("m-1", "the weather is fine"))
    services.sessions.append(PII_READER, "u-1", "s-1", _say("m-2", SSN_LINE, consent=True))
    request = ContextRequest(goal="help the user", token_budget=4000, session_id="s-1")

    low = services.context.assemble(INTERNAL_READER, "u-1", request)
    high = services.context.assemble(PII_READER, "u-1", request)

    assert "078-05-1120" not in low.model_dump_json()
    assert "078-05-1120" in high.model_dump_json()
    assert "the weather is fine" in low.model_dump_json()


def test_a_summary_with_personal_data_is_classified_and_withheld_below_the_ceiling(
    services: Services,
) -> None:
    s = services.sessions
    s.append(PII_READER, "u-1", "s-1", _say("m-1", "hello"))
    summary = PutSummary(content=f"User said: {PHONE_LINE}", from_seq=1, through_seq=1)
    with pytest.raises(ConsentRequired):
        s.put_summary(PII_READER, "u-1", "s-1", summary)
    s.put_summary(PII_READER, "u-1", "s-1", summary.model_copy(update={"consent": True}))

    high = s.read(PII_READER, "u-1", "s-1")
    assert high.summary is not None and high.summary.sensitivity is Sensitivity.PII
    low = s.read(INTERNAL_READER, "u-1", "s-1")
    assert low.summary is None and low.summary_withheld


def test_messages_stored_before_the_migration_read_as_internal(tmp_path: Path) -> None:
    """A data file of schema 1 (no sensitivity column) is migrated in place; its messages
    are ``internal``, the class every reader was served them as."""
    from datetime import UTC, datetime, timedelta

    from memvault.clock import iso
    from memvault.storage.sqlite.db import Database
    from memvault.storage.sqlite.schema import MIGRATIONS
    from memvault.storage.sqlite.sessions import SqliteSessionStore

    path = tmp_path / "memvault.db"
    Database(path, MIGRATIONS[:1]).close()
    now = datetime.now(UTC)
    later = now + timedelta(hours=1)
    with sqlite3.connect(path) as conn:
        conn.execute(
            "INSERT INTO session_heads VALUES ('acme', 'u-1', 's-1', ?, ?, ?, ?, 1, ?)",
            (iso(now), iso(now), iso(later), iso(later), int(later.timestamp())),
        )
        conn.execute(
            "INSERT INTO session_messages VALUES ('acme', 'u-1', 's-1', 1, 'user', 'hi', "
            "'m-1', ?, ?)",
            (iso(now), int(later.timestamp())),
        )
    db = Database(path, MIGRATIONS)
    assert db.schema_version() == MIGRATIONS[-1].version >= 2
    found = SqliteSessionStore(db).snapshot("acme", "u-1", "s-1", now=now, recent=10)
    assert found is not None
    assert [(m.content, m.sensitivity) for m in found.messages] == [("hi", Sensitivity.INTERNAL)]
    db.close()


def test_a_token_below_the_session_may_neither_end_it_nor_replace_its_summary(
    services: Services,
) -> None:
    """Security review (issue 18): a ``public`` token ended a session whose messages it
    could not read, and replaced a summary it could not read."""
    s = services.sessions
    s.append(PII_READER, "u-1", "s-1", _say("m-1", "hello"))
    s.append(PII_READER, "u-1", "s-1", _say("m-2", SSN_LINE, consent=True))
    s.put_summary(
        PII_READER, "u-1", "s-1",
        PutSummary(content=f"They gave {SSN_LINE}", from_seq=1, through_seq=2, consent=True),
    )  # fmt: skip
    for reader in (INTERNAL_READER, PUBLIC_READER):
        with pytest.raises(Forbidden):
            s.put_summary(
                reader, "u-1", "s-1", PutSummary(content="all fine", from_seq=1, through_seq=1)
            )
        with pytest.raises(Forbidden):
            s.end(reader, "u-1", "s-1")
    kept = s.read(PII_READER, "u-1", "s-1")
    assert kept.summary is not None and "078-05-1120" in kept.summary.content
    assert s.end(PII_READER, "u-1", "s-1") > 0
    with pytest.raises(NotFound):
        s.read(PII_READER, "u-1", "s-1")


def test_a_token_may_not_summarize_messages_above_its_ceiling(services: Services) -> None:
    """A probe: an internal token wrote the first summary of a session over a pii message
    it could not read (stored as internal, it spoke for that message to internal readers).
    A summary over only what it may read stays open to it."""
    s = services.sessions
    s.append(PII_READER, "u-1", "s-1", _say("m-1", "hello, I need a dentist"))
    s.append(PII_READER, "u-1", "s-1", _say("m-2", SSN_LINE, consent=True))
    s.append(PII_READER, "u-1", "s-1", _say("m-3", "somewhere near the station"))
    for covered in ((1, 2), (2, 3), (1, 3)):
        with pytest.raises(Forbidden):
            s.put_summary(
                INTERNAL_READER,
                "u-1",
                "s-1",
                PutSummary(
                    content="User needs a dentist", from_seq=covered[0], through_seq=covered[1]
                ),
            )
    assert s.read(PII_READER, "u-1", "s-1").summary is None
    done = s.put_summary(
        INTERNAL_READER,
        "u-1",
        "s-1",
        PutSummary(content="needs a dentist", from_seq=1, through_seq=1),
    )
    assert done.summary is not None and done.summary.through_seq == 1
