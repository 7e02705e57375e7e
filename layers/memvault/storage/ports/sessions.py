"""The session store's port: a session's head (two clocks, the last sequence number),
its messages, the receipts that make appends idempotent, and its summary.

Every session is addressed by (tenant, subject, session id), never by a bare session id.
An append is one atomic operation in the adapter (one DynamoDB transaction, one SQLite
transaction): its receipt, its message and the head move together or not at all, the
head by compare-and-set on its last sequence number. A refused condition raises
``ConditionFailed`` naming its ``Conflict`` causes.

The clocks' rules (how long, renewed by what, capped by what) are the service's; the
store keeps the instants it is given and checks them on every read, whatever its own
expiry (DynamoDB TTL, the local sweeper) has removed so far.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from memvault_wire.memory import Sensitivity
from memvault_wire.session import Role


@dataclass(frozen=True)
class SessionHead:
    """A session's clocks and its compare-and-set point."""

    tenant_id: str
    subject_id: str
    session_id: str
    created_at: datetime
    last_activity_at: datetime
    idle_expires_at: datetime
    #: The absolute expiry: set at creation, never extended; every row of the session
    #: expires with it.
    expires_at: datetime
    last_seq: int
    #: The subject's epoch the session was begun under (``None`` for one begun before
    #: sessions carried it): a forget retires it, and the session with it.
    subject_epoch: int | None = None

    def live(self, now: datetime) -> bool:
        """Before both clocks ran out."""
        return now < self.idle_expires_at and now < self.expires_at


@dataclass(frozen=True)
class StoredMessage:
    seq: int
    role: Role
    content: str
    request_id: str
    created_at: datetime
    sensitivity: Sensitivity = Sensitivity.INTERNAL


@dataclass(frozen=True)
class StoredSummary:
    """The latest summary of a session, covering messages ``from_seq``..``through_seq``;
    its expiry is never later than the session's."""

    content: str
    from_seq: int
    through_seq: int
    created_at: datetime
    expires_at: datetime
    sensitivity: Sensitivity = Sensitivity.INTERNAL


@dataclass(frozen=True)
class AppendReceipt:
    """What an append with this request id stored: a retry with the same message is a
    replay, one with another message is refused."""

    request_id: str
    seq: int
    role: Role
    content: str


@dataclass(frozen=True)
class NewMessage:
    """Everything one append commits, atomically: the message, its receipt and the head.

    ``seq`` 1 creates the head (it must not exist yet) with ``created_at = at`` and the
    absolute ``expires_at``; a later ``seq`` requires the head at ``seq - 1`` and moves it
    to ``seq`` with ``at`` as its last activity and the new ``idle_expires_at`` (its
    ``expires_at`` stays). ``expires_at`` is also the expiry of the message and receipt.
    """

    tenant_id: str
    subject_id: str
    session_id: str
    seq: int
    role: Role
    content: str
    request_id: str
    at: datetime
    idle_expires_at: datetime
    expires_at: datetime
    sensitivity: Sensitivity = Sensitivity.INTERNAL
    #: The subject's epoch the append was decided under: it commits only while the
    #: subject's epoch is still this one (``EPOCH`` otherwise), and a new session's head
    #: keeps it. ``None``: no such condition.
    subject_epoch: int | None = None


@dataclass(frozen=True)
class SessionSnapshot:
    """A live session as one read sees it."""

    head: SessionHead
    #: The newest messages, oldest first.
    messages: list[StoredMessage]
    #: ``None`` when there is none or it has expired.
    summary: StoredSummary | None


class SessionStore(Protocol):
    """Session memory's source of truth."""

    def head(self, tenant_id: str, subject_id: str, session_id: str) -> SessionHead | None:
        """The head as stored, whatever its clocks say: an append tells a session that
        ran out (refused) from one never started. Reads go through ``snapshot``."""
        ...

    def receipt(
        self, tenant_id: str, subject_id: str, session_id: str, request_id: str
    ) -> AppendReceipt | None: ...

    def append(self, new: NewMessage) -> None:
        """Receipt, message and head, all or nothing. Refused with ``IDEMPOTENCY`` when
        the request id has a receipt already, ``EXISTS`` when ``seq`` is 1 and the head
        exists (or the message does), ``VERSION`` when the head is not at ``seq - 1``
        (it moved on, or it is gone), ``EPOCH`` when the subject's epoch is no longer
        ``subject_epoch`` (forgotten meanwhile)."""
        ...

    def snapshot(
        self, tenant_id: str, subject_id: str, session_id: str, *, now: datetime, recent: int
    ) -> SessionSnapshot | None:
        """The head, the ``recent`` newest messages and the summary; ``None`` unless the
        session is live at ``now``. The summary is left out once past its own expiry."""
        ...

    def message(
        self, tenant_id: str, subject_id: str, session_id: str, seq: int, *, now: datetime
    ) -> StoredMessage | None:
        """One message; ``None`` when absent or when the session is not live at ``now``."""
        ...

    def put_summary(
        self,
        tenant_id: str,
        subject_id: str,
        session_id: str,
        summary: StoredSummary,
        *,
        subject_epoch: int | None = None,
    ) -> None:
        """Replace the summary while the head exists (``ABSENT`` once the session was
        ended or forgotten, so that no summary outlives its session's end) and, given
        ``subject_epoch``, while the subject's epoch is still that one (``EPOCH``)."""
        ...

    def end(self, tenant_id: str, subject_id: str, session_id: str) -> int:
        """Delete the session: the head first (reads stop at once), then its messages,
        receipts and summary; returns how many rows went. ``ABSENT`` when there is no
        head."""
        ...

    def forget_subject(
        self,
        tenant_id: str,
        subject_id: str,
        before: datetime,
        *,
        retired_epoch: int | None = None,
    ) -> int:
        """Delete every row of every session a forget covers (the purge step): begun under
        an epoch at or below ``retired_epoch`` (the one the forget retired), or, for a
        session without an epoch (or without ``retired_epoch``), begun at or before
        ``before`` (the forget's time); and of any session left without its head. Sessions
        begun after the forget stay. Returns how many rows went. Idempotent."""
        ...
