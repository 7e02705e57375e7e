"""Session memory with two clocks, over the session store's port.

Personal data is governed as in long-term memory: a message or summary that contains any
is refused without the subject's consent (``consent_required``) and classified ``pii``
with it; a reader sees only what its sensitivity ceiling admits (the rest is counted in
``withheld_messages`` / ``summary_withheld``, and a single message above it is 404).

The idle clock is renewed only by the subject's own activity (an append with role
``user``); the agent's, tools' and system's messages and all reads never renew it. So a
``user`` message, read later as the subject's own words, is appended only by a token
without an agent role (the subject's own, or the tenant's service relaying the user):
an agent's token appends ``assistant`` and ``tool`` messages (``provenance_not_allowed``
otherwise), as it may not claim the user's confirmation for a memory either. The
absolute clock is set at creation and nothing extends it: every row of the session
expires with it, so the store removes the whole session together. The idle clock
is enforced at read and append time, and an idle-expired session stays refused (410)
until then. Reads check both clocks at read time, since the store's expiry is lazy.

A session begun by the time its subject was last forgotten is that forget's from the
forget on: absent (404) on every read, an append to it 410, until the purge removes it
and its id is free again.
"""

from __future__ import annotations

import random
import time
from dataclasses import replace
from datetime import datetime, timedelta

from memvault.clock import Clock, iso, made_after_forget
from memvault.config import Settings
from memvault.models.access import AccessContext, Scope
from memvault.observability import logger
from memvault.policy import provenance
from memvault.policy.pii import find_pii, refuse_personal_ids
from memvault.policy.secrets import refuse_secrets
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.ports.memory import SubjectForgets
from memvault.storage.ports.sessions import (
    AppendReceipt,
    NewMessage,
    SessionHead,
    SessionStore,
    StoredMessage,
    StoredSummary,
)
from memvault_wire.errors import (
    ConsentRequired,
    Forbidden,
    IdempotencyKeyReused,
    NotFound,
    ProvenanceNotAllowed,
    SessionExpired,
    ValidationFailed,
    VersionConflict,
)
from memvault_wire.memory import Sensitivity
from memvault_wire.session import (
    AppendMessage,
    Message,
    PutSummary,
    Role,
    Session,
    Summary,
)

#: Compare-and-set rounds an append tries before answering 409: enough for dozens of
#: writers appending to one session at once.
_APPEND_ATTEMPTS = 64
_NOT_FOUND = "no live session with this id for this subject"


def _message(m: StoredMessage) -> Message:
    return Message(
        seq=m.seq,
        role=m.role,
        content=m.content,
        request_id=m.request_id,
        created_at=m.created_at,
        sensitivity=m.sensitivity,
    )


def _classify(content: str, consent: bool, what: str) -> Sensitivity:
    """``pii`` when ``content`` holds personal data (refused without consent), else
    ``internal``: the write policy's rule for long-term memory, applied to sessions."""
    pii = find_pii([("content", content)])
    if not pii:
        return Sensitivity.INTERNAL
    if not consent:
        raise ConsentRequired(
            f"the {what} contains personal data; it can be kept only with the subject's "
            "consent (set consent: true once it is given)",
            {"reason": "pii", "pii_types": sorted({p.pii_type for p in pii})},
        )
    return Sensitivity.PII


def _check_user_message(ctx: AccessContext) -> None:
    """A ``user`` message is the subject's own words and renews the idle clock: an agent's
    token (one with an ``agent_role``) may not append one."""
    if provenance.caller_kind(ctx) is provenance.Caller.AGENT:
        raise ProvenanceNotAllowed(
            "an agent token (one with agent_role) appends assistant or tool messages; a "
            "user message is the subject's own words: the subject's token or the tenant's "
            "service (no agent_role) appends it",
            {"caller": provenance.Caller.AGENT.value, "role": Role.USER.value},
        )


def _check_message_fields(subject_id: str, session_id: str, msg: AppendMessage) -> None:
    """Refuse a message whose content or ids hold a secret, or whose ids hold a
    personal id."""
    refuse_secrets(
        [
            ("content", msg.content),
            ("request_id", msg.request_id),
            ("session_id", session_id),
            ("subject_id", subject_id),
        ],
        "the message",
    )
    refuse_personal_ids(
        [
            ("session_id", session_id),
            ("request_id", msg.request_id),
            ("subject_id", subject_id),
        ],
        "the message",
    )


def _check_replay(ctx: AccessContext, replay: AppendReceipt, msg: AppendMessage) -> None:
    """A request id already appended answers only a replay of the same message, and only
    to a caller that may read it: anything else is refused."""
    # A message above the caller's ceiling is never compared with a guess of it:
    # match or not, the answer is the refusal (a replay would confirm the guess).
    pii = find_pii([("content", replay.content)])
    stored = Sensitivity.PII if pii else Sensitivity.INTERNAL
    hidden = not ctx.may_read(stored, [])
    if hidden or (replay.role, replay.content) != (msg.role, msg.content):
        raise IdempotencyKeyReused(
            "this request_id was already used with another message",
            {"request_id": msg.request_id},
        )


def _readable(ctx: AccessContext, sensitivity: Sensitivity) -> bool:
    return ctx.may_read(sensitivity, [])


class SessionService:
    def __init__(
        self, store: SessionStore, settings: Settings, clock: Clock, forgets: SubjectForgets
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.forgets = forgets

    def _forgotten(self, head: SessionHead) -> bool:
        """Whether the session began under a subject epoch a forget retired since (or, one
        begun before sessions carried their epoch, by the time its subject was last
        forgotten): then it is that forget's, served to no one (its purge removes it)."""
        state = self.forgets.forget_state(head.tenant_id, head.subject_id)
        return state.covers(head.subject_epoch, head.created_at)

    # ------------------------------------------------------------------- append

    def append(
        self, ctx: AccessContext, subject_id: str, session_id: str, msg: AppendMessage
    ) -> tuple[Session, bool]:
        """Append a message, renewing the idle clock; returns the session and whether this
        append was new (False for a replay of the same request)."""
        ctx.require(Scope.SESSIONS_WRITE)
        ctx.require_subject(subject_id)
        if msg.role is Role.SYSTEM:
            provenance.check_system_message(ctx)
        elif msg.role is Role.USER:
            _check_user_message(ctx)
        _check_message_fields(subject_id, session_id, msg)
        sensitivity = _classify(msg.content, msg.consent, "message")
        for attempt in range(_APPEND_ATTEMPTS):
            if attempt:
                # Appends to one session race on its head; every round lets one through,
                # and a little jitter keeps the losers from colliding again in lockstep.
                time.sleep(random.uniform(0, 0.002 * min(attempt, 10)))  # noqa: S311
            now = self.clock.now()
            # Read first: the append commits only while the subject's epoch is still this
            # one, so a forget that lands before it is written refuses it.
            forgets = self.forgets.forget_state(ctx.tenant_id, subject_id)
            head = self.store.head(ctx.tenant_id, subject_id, session_id)
            if head is None:
                # A new session: begun after any forget its caller could have seen.
                now = made_after_forget(now, forgets.forgotten_at)
            elif forgets.covers(head.subject_epoch, head.created_at):
                raise SessionExpired(
                    "the session ended when its subject was forgotten; start a new session "
                    "with another session_id",
                    {"session_id": session_id},
                )
            replay = self.store.receipt(ctx.tenant_id, subject_id, session_id, msg.request_id)
            if replay is not None:
                _check_replay(ctx, replay, msg)
                return self.read(ctx, subject_id, session_id, check_scope=False), False
            if head is not None:
                self._check_clocks(head, now)
            new = self._new_message(ctx, subject_id, session_id, head, msg, now, sensitivity)
            if not self._try_append(replace(new, subject_epoch=forgets.epoch)):
                continue  # another append or a creation raced us: re-read
            logger.info(
                "session message appended",
                extra={
                    "tenant_id": ctx.tenant_id,
                    "subject_id": subject_id,
                    "session_id": session_id,
                },
            )
            return self.read(ctx, subject_id, session_id, check_scope=False), True
        raise VersionConflict("the session kept changing; retry the append")

    def _try_append(self, new: NewMessage) -> bool:
        """Write the message in one conditional append: False when another append or a
        creation raced it (nothing was written; re-read and decide again)."""
        try:
            self.store.append(new)
        except ConditionFailed as refused:
            if Conflict.EPOCH in refused:
                # The subject was forgotten meanwhile: what was sent before the forget
                # must not outlive it (as for a memory). Nothing was stored.
                raise VersionConflict(
                    "the subject was forgotten while this message was being appended; "
                    "nothing was stored",
                    {"reason": "subject_forgotten"},
                ) from None
            return False
        return True

    def _new_message(
        self,
        ctx: AccessContext,
        subject_id: str,
        session_id: str,
        head: SessionHead | None,
        msg: AppendMessage,
        now: datetime,
        sensitivity: Sensitivity,
    ) -> NewMessage:
        """The next message: the first one starts both clocks; a later one from the
        subject (role ``user``) renews the idle clock up to the absolute expiry, which
        nothing extends. The agent's, tools' and system's messages renew nothing."""
        idle, cap = self.settings.session_clocks(ctx.tenant_id)
        expires = head.expires_at if head else now + timedelta(seconds=cap)
        idle_expires = min(now + timedelta(seconds=idle), expires)
        if head is not None and msg.role is not Role.USER:
            idle_expires = head.idle_expires_at
        return NewMessage(
            tenant_id=ctx.tenant_id,
            subject_id=subject_id,
            session_id=session_id,
            seq=head.last_seq + 1 if head else 1,
            role=msg.role,
            content=msg.content,
            request_id=msg.request_id,
            at=now,
            idle_expires_at=idle_expires,
            expires_at=expires,
            sensitivity=sensitivity,
        )

    def _check_clocks(self, head: SessionHead, now: datetime) -> None:
        if now >= head.expires_at:
            raise SessionExpired(
                "the session reached its absolute lifetime and cannot be extended; start a "
                "new session",
                {"expires_at": iso(head.expires_at)},
            )
        if now >= head.idle_expires_at:
            raise SessionExpired(
                "the session expired after inactivity; start a new session",
                {"idle_expires_at": iso(head.idle_expires_at)},
            )

    # --------------------------------------------------------------------- read

    def read(
        self, ctx: AccessContext, subject_id: str, session_id: str, *, check_scope: bool = True
    ) -> Session:
        """Recent messages and the summary. Reading never renews either clock."""
        if check_scope:
            self._require_read(ctx, subject_id)
        found = self.store.snapshot(
            ctx.tenant_id,
            subject_id,
            session_id,
            now=self.clock.now(),
            recent=self.settings.session_recent_messages,
        )
        if found is None or self._forgotten(found.head):
            raise NotFound(_NOT_FOUND, {"session_id": session_id})
        head, s = found.head, found.summary
        shown = [m for m in found.messages if _readable(ctx, m.sensitivity)]
        summary_withheld = s is not None and not _readable(ctx, s.sensitivity)
        if summary_withheld:
            s = None
        return Session(
            session_id=session_id,
            subject_id=subject_id,
            created_at=head.created_at,
            last_activity_at=head.last_activity_at,
            idle_expires_at=head.idle_expires_at,
            expires_at=head.expires_at,
            message_count=head.last_seq,
            messages=[_message(m) for m in shown],
            withheld_messages=len(found.messages) - len(shown),
            summary_withheld=summary_withheld,
            summary=Summary(
                content=s.content,
                from_seq=s.from_seq,
                through_seq=s.through_seq,
                created_at=s.created_at,
                expires_at=s.expires_at,
                sensitivity=s.sensitivity,
            )
            if s
            else None,
        )

    def message(self, ctx: AccessContext, subject_id: str, session_id: str, seq: int) -> Message:
        """One message of a live session, by sequence number."""
        self.read(ctx, subject_id, session_id)  # the session must still be live
        found = self.store.message(ctx.tenant_id, subject_id, session_id, seq, now=self.clock.now())
        if found is None or not _readable(ctx, found.sensitivity):
            raise NotFound("no such message in this session", {"seq": seq})
        return _message(found)

    def _require_read(self, ctx: AccessContext, subject_id: str) -> None:
        if not ({Scope.SESSIONS_WRITE, Scope.MEMORY_READ} & ctx.scopes):
            ctx.require(Scope.SESSIONS_WRITE)
        ctx.require_subject(subject_id)

    def _withheld(self, ctx: AccessContext, subject_id: str, session_id: str) -> int:
        """How many of the session's messages (and its summary) the caller may not read:
        all of them, not only the recent ones a read returns."""
        now = self.clock.now()
        found = self.store.snapshot(ctx.tenant_id, subject_id, session_id, now=now, recent=1)
        if found is None or self._forgotten(found.head):
            return 0  # absent, over or forgotten: ending it answers not_found
        if found.head.last_seq > 1:
            every = self.store.snapshot(
                ctx.tenant_id, subject_id, session_id, now=now, recent=found.head.last_seq
            )
            found = every or found
        hidden = sum(not _readable(ctx, m.sensitivity) for m in found.messages)
        if found.summary is not None and not _readable(ctx, found.summary.sensitivity):
            hidden += 1
        return hidden

    def _covers_unreadable(
        self,
        ctx: AccessContext,
        subject_id: str,
        session_id: str,
        body: PutSummary,
        last_seq: int,
    ) -> bool:
        """Whether any message the summary covers is above the caller's ceiling (a summary
        over what its writer may not read would speak for those messages)."""
        now = self.clock.now()
        recent = max(1, last_seq - body.from_seq + 1)
        found = self.store.snapshot(ctx.tenant_id, subject_id, session_id, now=now, recent=recent)
        if found is None:
            return False
        return any(
            body.from_seq <= m.seq <= body.through_seq and not _readable(ctx, m.sensitivity)
            for m in found.messages
        )

    # ------------------------------------------------------------------ summary

    def put_summary(
        self, ctx: AccessContext, subject_id: str, session_id: str, body: PutSummary
    ) -> Session:
        ctx.require(Scope.SESSIONS_WRITE)
        ctx.require_subject(subject_id)
        # Read before the session: the summary is kept only while this epoch lasts.
        epoch = self.forgets.forget_state(ctx.tenant_id, subject_id).epoch
        session = self.read(ctx, subject_id, session_id, check_scope=False)
        if session.summary_withheld:
            raise Forbidden(
                "the session's summary is above this token's max_sensitivity; only a token "
                "that may read it may replace it",
                {"session_id": session_id},
            )
        if body.from_seq > body.through_seq or body.through_seq > session.message_count:
            raise ValidationFailed(
                f"the summary must cover messages within 1..{session.message_count}",
                {"field": "through_seq"},
            )
        if self._covers_unreadable(ctx, subject_id, session_id, body, session.message_count):
            raise Forbidden(
                "the summary covers messages above this token's max_sensitivity; only a "
                "token that may read every message it covers may summarize them",
                {"session_id": session_id},
            )
        refuse_secrets([("content", body.content)], "the summary")
        sensitivity = _classify(body.content, body.consent, "summary")
        now = self.clock.now()
        expires = session.expires_at
        if body.ttl_seconds is not None:
            expires = min(expires, now + timedelta(seconds=body.ttl_seconds))
        summary = StoredSummary(
            content=body.content,
            from_seq=body.from_seq,
            through_seq=body.through_seq,
            created_at=now,
            expires_at=expires,
            sensitivity=sensitivity,
        )
        try:
            self.store.put_summary(
                ctx.tenant_id, subject_id, session_id, summary, subject_epoch=epoch
            )
        except ConditionFailed as err:  # ended meanwhile: no summary outlives its session
            raise NotFound(_NOT_FOUND, {"session_id": session_id}) from err
        return self.read(ctx, subject_id, session_id, check_scope=False)

    # ------------------------------------------------------------------- end

    def end(self, ctx: AccessContext, subject_id: str, session_id: str) -> int:
        """End the session: the head goes first (reads stop at once), then everything else."""
        ctx.require(Scope.SESSIONS_WRITE)
        ctx.require_subject(subject_id)
        head = self.store.head(ctx.tenant_id, subject_id, session_id)
        if head is not None and self._forgotten(head):
            raise NotFound(_NOT_FOUND, {"session_id": session_id})
        withheld = self._withheld(ctx, subject_id, session_id)
        if withheld:
            raise Forbidden(
                "the session holds messages above this token's max_sensitivity; only a token "
                "that may read all of it may end it",
                {"session_id": session_id, "withheld": withheld},
            )
        try:
            removed = self.store.end(ctx.tenant_id, subject_id, session_id)
        except ConditionFailed as err:
            raise NotFound(_NOT_FOUND, {"session_id": session_id}) from err
        logger.info(
            "session ended",
            extra={
                "tenant_id": ctx.tenant_id,
                "subject_id": subject_id,
                "session_id": session_id,
                "count": removed,
            },
        )
        return removed
