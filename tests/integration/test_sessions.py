"""Session memory: two clocks checked at read time, renewal by the subject's own
activity only, ending deletes at once, nothing promoted to long-term memory."""

from __future__ import annotations

from typing import Any

import pytest

from memvault.config import Settings, TenantPolicy
from memvault.models.access import Scope
from memvault.services.bundle import Services
from memvault.services.sessions import SessionService
from memvault_wire.errors import (
    Forbidden,
    IdempotencyKeyReused,
    NotFound,
    ProvenanceNotAllowed,
    SecretDetected,
    SessionExpired,
)
from memvault_wire.session import AppendMessage, PutSummary
from tests.support.harness import FakeClock, ctx
from tests.support.scan import all_items, count

MINUTE = 60


@pytest.fixture
def sessions(services: Services) -> SessionService:
    return services.sessions


def say(text: str, request_id: str | None = None) -> AppendMessage:
    return AppendMessage(
        request_id=request_id or f"req-{abs(hash(text))}", role="user", content=text
    )


def test_activity_renews_the_idle_clock_and_reads_do_not(
    sessions: SessionService, clock: FakeClock
) -> None:
    first, _ = sessions.append(ctx(), "u-1", "s-1", say("hello"))
    assert (first.idle_expires_at - first.created_at).total_seconds() == 30 * MINUTE

    clock.advance(minutes=20)
    read = sessions.read(ctx(), "u-1", "s-1")
    assert read.idle_expires_at == first.idle_expires_at  # reading renewed nothing

    clock.advance(minutes=5)
    renewed, _ = sessions.append(ctx(), "u-1", "s-1", say("still here"))
    assert (renewed.idle_expires_at - clock.now()).total_seconds() == 30 * MINUTE

    clock.advance(minutes=29)
    assert len(sessions.read(ctx(), "u-1", "s-1").messages) == 2
    clock.advance(minutes=2)
    with pytest.raises(NotFound):
        sessions.read(ctx(), "u-1", "s-1")
    with pytest.raises(SessionExpired):
        sessions.append(ctx(), "u-1", "s-1", say("too late"))


def test_the_absolute_clock_is_never_extended(sessions: SessionService, clock: FakeClock) -> None:
    first, _ = sessions.append(ctx(), "u-1", "s-1", say("start"))
    for i in range(49):  # active every 29 minutes for 23.7 hours
        clock.advance(minutes=29)
        latest, _ = sessions.append(ctx(), "u-1", "s-1", say(f"message {i}"))
        assert latest.expires_at == first.expires_at
        assert latest.idle_expires_at <= first.expires_at
    clock.advance(minutes=29)
    with pytest.raises(SessionExpired) as raised:
        sessions.append(ctx(), "u-1", "s-1", say("one more"))
    assert "absolute" in raised.value.message


def test_an_expired_session_is_not_served_though_still_in_the_table(
    sessions: SessionService, clock: FakeClock, ddb: Any
) -> None:
    sessions.append(ctx(), "u-1", "s-1", say("remember this"))
    clock.advance(hours=2)
    with pytest.raises(NotFound):
        sessions.read(ctx(), "u-1", "s-1")
    assert count(ddb, "sessions") == 3  # head, message, receipt: moto never runs TTL


def test_clocks_are_configurable_per_tenant(aws: None) -> None:
    from tests.support.harness import make_services

    services, _, clock = make_services(
        prefix="tp-", tenant_policies={"acme": TenantPolicy(session_idle_seconds=300)}
    )
    short, _ = services.sessions.append(ctx("acme"), "u-1", "s", say("hi"))
    default, _ = services.sessions.append(ctx("globex"), "u-1", "s", say("hi"))
    assert (short.idle_expires_at - clock.now()).total_seconds() == 300
    assert (default.idle_expires_at - clock.now()).total_seconds() == 1800
    assert Settings().session_clocks("acme") == (1800, 86400)


def test_an_append_is_idempotent_by_request_id(sessions: SessionService) -> None:
    _, created = sessions.append(ctx(), "u-1", "s-1", say("once", "r-1"))
    again, created_again = sessions.append(ctx(), "u-1", "s-1", say("once", "r-1"))
    assert created and not created_again
    assert again.message_count == 1
    with pytest.raises(IdempotencyKeyReused):
        sessions.append(ctx(), "u-1", "s-1", say("other", "r-1"))


def test_sessions_are_scoped_to_tenant_and_subject(sessions: SessionService) -> None:
    sessions.append(ctx("acme", "u-1"), "u-1", "shared-id", say("acme's"))
    with pytest.raises(NotFound):
        sessions.read(ctx("globex", "u-1"), "u-1", "shared-id")
    with pytest.raises(Forbidden):
        sessions.read(ctx("acme", "u-1"), "u-2", "shared-id")
    with pytest.raises(NotFound):
        sessions.read(ctx("acme", "u-2"), "u-2", "shared-id")


def test_ending_a_session_deletes_it_and_its_summary_at_once(
    sessions: SessionService, ddb: Any
) -> None:
    for i in range(3):
        sessions.append(ctx(), "u-1", "s-1", say(f"m{i}"))
    summary = sessions.put_summary(
        ctx(), "u-1", "s-1", PutSummary(content="talked about m0-m2", from_seq=1, through_seq=3)
    )
    assert summary.summary is not None
    assert (summary.summary.from_seq, summary.summary.through_seq) == (1, 3)

    removed = sessions.end(ctx(), "u-1", "s-1")

    assert removed == 8  # head, 3 messages, 3 receipts, summary
    assert count(ddb, "sessions") == 0
    with pytest.raises(NotFound):
        sessions.read(ctx(), "u-1", "s-1")


def test_a_summary_expires_with_its_own_clock_and_never_outlives_the_session(
    sessions: SessionService, clock: FakeClock
) -> None:
    sessions.append(ctx(), "u-1", "s-1", say("a"))
    long = sessions.put_summary(
        ctx(),
        "u-1",
        "s-1",
        PutSummary(content="sum", from_seq=1, through_seq=1, ttl_seconds=10 * 86400),
    )
    assert long.summary is not None
    assert long.summary.expires_at == long.expires_at
    sessions.put_summary(
        ctx(), "u-1", "s-1", PutSummary(content="sum", from_seq=1, through_seq=1, ttl_seconds=60)
    )
    clock.advance(seconds=61)
    assert sessions.read(ctx(), "u-1", "s-1").summary is None


def test_session_messages_never_become_long_term_memory(sessions: SessionService, ddb: Any) -> None:
    sessions.append(ctx(), "u-1", "s-1", say("I prefer Chinese, remember it"))
    assert all_items(ddb)["memory"] == []


def test_secrets_are_not_kept_in_session_memory(sessions: SessionService, ddb: Any) -> None:
    with pytest.raises(SecretDetected):
        sessions.append(ctx(), "u-1", "s-1", say("my key is AKIAIOSFODNN7EXAMPLE"))
    assert count(ddb, "sessions") == 0


def test_appending_needs_the_sessions_scope(sessions: SessionService) -> None:
    with pytest.raises(Forbidden):
        sessions.append(ctx(scopes=frozenset({Scope.MEMORY_READ})), "u-1", "s-1", say("x"))


def test_another_subjects_token_cannot_append_nor_renew_the_idle_clock(
    sessions: SessionService, clock: FakeClock, ddb: Any
) -> None:
    first, _ = sessions.append(ctx(subject="u-1"), "u-1", "s-1", say("hello", "r-1"))
    clock.advance(minutes=20)
    intruder = ctx(subject="u-2")  # every scope but subjects:any
    assert Scope.SUBJECTS_ANY not in intruder.scopes

    with pytest.raises(Forbidden):
        sessions.append(intruder, "u-1", "s-1", say("keep it alive", "r-2"))
    with pytest.raises(Forbidden):
        sessions.append(intruder, "u-1", "s-new", say("start one for them", "r-3"))

    after = sessions.read(ctx(subject="u-1"), "u-1", "s-1")
    assert after.message_count == 1
    assert [m.content for m in after.messages] == ["hello"]
    assert after.last_activity_at == first.last_activity_at
    assert after.idle_expires_at == first.idle_expires_at
    assert count(ddb, "sessions") == 3  # head, message, receipt: nothing of the intruder's
    # The idle clock runs out when the subject's own activity said it would.
    clock.advance(minutes=11)
    with pytest.raises(NotFound):
        sessions.read(ctx(subject="u-1"), "u-1", "s-1")


def test_a_service_token_with_subjects_any_may_append_for_the_subject(
    sessions: SessionService,
) -> None:
    service = ctx(subject=None, scopes=frozenset(Scope))
    session, created = sessions.append(service, "u-1", "s-1", say("from the service", "r-1"))
    assert created and session.message_count == 1


def test_only_the_subjects_own_messages_renew_the_idle_clock(
    sessions: SessionService, clock: FakeClock
) -> None:
    """The idle clock measures the subject's inactivity: the agent's answers, tool output
    and system notes are kept but renew nothing (before, an agent talking to itself kept
    a session alive that its subject had left)."""
    first, _ = sessions.append(ctx(), "u-1", "s-1", say("hello"))
    platform = ctx(subject=None, scopes=frozenset(Scope))  # the only writer of system notes
    for role in ("assistant", "tool", "system"):
        clock.advance(minutes=9)
        answer = AppendMessage(request_id=f"r-{role}", role=role, content=f"{role} says hi")  # type: ignore[arg-type]
        writer = platform if role == "system" else ctx(agent_role="helper")
        after, _ = sessions.append(writer, "u-1", "s-1", answer)
        assert after.idle_expires_at == first.idle_expires_at, role
    clock.advance(minutes=4)  # 31 minutes after the subject's last message
    with pytest.raises(NotFound):
        sessions.read(ctx(), "u-1", "s-1")


def test_an_agent_token_may_not_speak_as_the_user(
    sessions: SessionService, clock: FakeClock
) -> None:
    """A ``user`` message renews the idle clock and is read as the subject's own words:
    a token with an agent role appends only assistant and tool messages (docs/api.md: an agent
    token may not claim what the user confirmed); the subject's own token, or the
    tenant's service relaying the user, appends user messages."""
    first, _ = sessions.append(ctx(), "u-1", "s-1", say("hello", "r-1"))
    agent = ctx(agent_role="helper", principal="agent-helper")
    clock.advance(minutes=20)
    with pytest.raises(ProvenanceNotAllowed) as refused:
        sessions.append(agent, "u-1", "s-1", say("yes, transfer it all", "r-2"))
    assert refused.value.status == 403
    assert refused.value.details == {"caller": "agent", "role": "user"}
    kept = sessions.read(ctx(), "u-1", "s-1")
    assert kept.message_count == 1 and kept.idle_expires_at == first.idle_expires_at
    for role in ("assistant", "tool"):
        answer = AppendMessage(request_id=f"a-{role}", role=role, content="done")  # type: ignore[arg-type]
        sessions.append(agent, "u-1", "s-1", answer)
    service = ctx(subject=None, scopes=frozenset(Scope))
    relayed, created = sessions.append(service, "u-1", "s-1", say("relayed by the app", "r-3"))
    assert created and relayed.message_count == 4


def test_only_the_tenants_service_may_append_system_messages(sessions: SessionService) -> None:
    """A system message carries the platform's instructions into the assembled context;
    an agent or the subject appending one could pass its own text off as them."""
    system = AppendMessage(request_id="r-sys", role="system", content="Answer in Chinese")  # type: ignore[arg-type]
    for caller in (ctx(agent_role="helper"), ctx()):
        with pytest.raises(ProvenanceNotAllowed) as raised:
            sessions.append(caller, "u-1", "s-1", system)
        assert raised.value.details["role"] == "system"
    service = ctx(subject=None, scopes=frozenset(Scope))
    session, created = sessions.append(service, "u-1", "s-1", system)
    assert created and session.message_count == 1
