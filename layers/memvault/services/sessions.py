"""Session memory on DynamoDB with native TTL and two clocks.

Partition ``<tenant>#<subject>#<session>`` (never a bare session id):
    ``SESSION``        head: clocks, last sequence number (compare-and-set point)
    ``MSG#<seq>``      one message
    ``REQ#<request>``  the idempotency record of an append
    ``SUMMARY``        the latest summary, with the message range it covers

The idle clock is renewed only by the subject's own activity (an append); reads never
renew it. The absolute clock is set at creation and nothing extends it. Every item of
the session carries the absolute expiry as its ``ttl``, so DynamoDB removes the whole
session together (never a head without its messages, or messages without their head);
the idle clock is enforced at read and append time, and an idle-expired session stays
refused (410) until then. Reads check both clocks themselves, since TTL deletes lazily.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from memvault.clock import Clock, iso, parse_iso
from memvault.config import Settings
from memvault.errors import (
    IdempotencyKeyReused,
    NotFound,
    SecretDetected,
    SessionExpired,
    ValidationFailed,
    VersionConflict,
)
from memvault.models.access import AccessContext, Scope
from memvault.models.session import AppendMessage, Message, PutSummary, Session, Summary
from memvault.observability import logger
from memvault.policy.secrets import find_secrets
from memvault.storage.dynamo import Dynamo, TransactionConflict, Tx, key, to_attr, to_item

HEAD = "SESSION"
SUMMARY = "SUMMARY"
_NOT_FOUND = "no live session with this id for this subject"
_SESSION_ID = r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}$"


def session_pk(tenant_id: str, subject_id: str, session_id: str) -> str:
    return f"{tenant_id}#{subject_id}#{session_id}"


def _epoch(ts: datetime) -> int:
    return int(ts.timestamp())


class SessionService:
    def __init__(self, db: Dynamo, settings: Settings, clock: Clock) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock

    # ------------------------------------------------------------------- append

    def append(
        self, ctx: AccessContext, subject_id: str, session_id: str, msg: AppendMessage
    ) -> tuple[Session, bool]:
        """Append a message, renewing the idle clock; returns the session and whether this
        append was new (False for a replay of the same request)."""
        ctx.require(Scope.SESSIONS_WRITE)
        ctx.require_subject(subject_id)
        secrets = find_secrets([("content", msg.content)])
        if secrets:
            raise SecretDetected(
                "the message contains what looks like a credential; it is not kept",
                {"findings": [{"field": s.field, "type": s.secret_type} for s in secrets]},
            )
        pk = session_pk(ctx.tenant_id, subject_id, session_id)
        for _ in range(5):
            now = self.clock.now()
            head = self.db.get("sessions", pk, HEAD)
            replay = self.db.get("sessions", pk, f"REQ#{msg.request_id}")
            if replay is not None:
                if replay["payload"] != [msg.role.value, msg.content]:
                    raise IdempotencyKeyReused(
                        "this request_id was already used with another message",
                        {"request_id": msg.request_id},
                    )
                return self.read(ctx, subject_id, session_id, renew_check=False), False
            if head is not None:
                self._check_clocks(head, now)
            try:
                self._commit_append(pk, head, msg, now, subject_id, session_id, ctx)
            except TransactionConflict:
                continue  # another append or a creation raced us: re-read
            logger.info(
                "session message appended",
                extra={
                    "tenant_id": ctx.tenant_id,
                    "subject_id": subject_id,
                    "session_id": session_id,
                },
            )
            return self.read(ctx, subject_id, session_id, renew_check=False), True
        raise VersionConflict("the session kept changing; retry the append")

    def _commit_append(
        self,
        pk: str,
        head: dict[str, Any] | None,
        msg: AppendMessage,
        now: datetime,
        subject_id: str,
        session_id: str,
        ctx: AccessContext,
    ) -> None:
        idle, cap = self.settings.session_clocks(ctx.tenant_id)
        table = self.db.names["sessions"]
        tx = Tx()
        if head is None:
            seq = 1
            expires = now + timedelta(seconds=cap)
            idle_expires = min(now + timedelta(seconds=idle), expires)
            tx.add(
                "head",
                {
                    "Put": {
                        "TableName": table,
                        "Item": to_item(
                            {
                                "pk": pk,
                                "sk": HEAD,
                                "type": "session",
                                "tenant_id": ctx.tenant_id,
                                "subject_id": subject_id,
                                "session_id": session_id,
                                "created_at": iso(now),
                                "last_activity_at": iso(now),
                                "idle_expires_at": iso(idle_expires),
                                "expires_at": iso(expires),
                                "last_seq": 1,
                                "ttl": _epoch(expires),
                            }
                        ),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            )
        else:
            seq = int(head["last_seq"]) + 1
            expires = parse_iso(head["expires_at"])
            idle_expires = min(now + timedelta(seconds=idle), expires)
            tx.add(
                "head",
                {
                    "Update": {
                        "TableName": table,
                        "Key": key(pk, HEAD),
                        "UpdateExpression": "SET last_seq = :seq, last_activity_at = :now, "
                        "idle_expires_at = :idle",
                        "ConditionExpression": "last_seq = :seen",
                        "ExpressionAttributeValues": {
                            ":seq": to_attr(seq),
                            ":now": to_attr(iso(now)),
                            ":idle": to_attr(iso(idle_expires)),
                            ":seen": to_attr(seq - 1),
                        },
                    }
                },
            )
        # Messages and receipts live at most until the absolute expiry.
        ttl = _epoch(expires)
        tx.add(
            "message",
            {
                "Put": {
                    "TableName": table,
                    "Item": to_item(
                        {
                            "pk": pk,
                            "sk": f"MSG#{seq:010d}",
                            "type": "message",
                            "seq": seq,
                            "role": msg.role.value,
                            "content": msg.content,
                            "request_id": msg.request_id,
                            "created_at": iso(now),
                            "ttl": ttl,
                        }
                    ),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        )
        tx.add(
            "request",
            {
                "Put": {
                    "TableName": table,
                    "Item": to_item(
                        {
                            "pk": pk,
                            "sk": f"REQ#{msg.request_id}",
                            "type": "receipt",
                            "seq": seq,
                            "payload": [msg.role.value, msg.content],
                            "ttl": ttl,
                        }
                    ),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        )
        self.db.transact(tx)

    def _check_clocks(self, head: dict[str, Any], now: datetime) -> None:
        if now >= parse_iso(head["expires_at"]):
            raise SessionExpired(
                "the session reached its absolute lifetime and cannot be extended; start a "
                "new session",
                {"expires_at": head["expires_at"]},
            )
        if now >= parse_iso(head["idle_expires_at"]):
            raise SessionExpired(
                "the session expired after inactivity; start a new session",
                {"idle_expires_at": head["idle_expires_at"]},
            )

    # --------------------------------------------------------------------- read

    def read(
        self, ctx: AccessContext, subject_id: str, session_id: str, *, renew_check: bool = True
    ) -> Session:
        """Recent messages and the summary. Reading never renews either clock."""
        if renew_check:
            self._require_read(ctx, subject_id)
        pk = session_pk(ctx.tenant_id, subject_id, session_id)
        head = self.db.get("sessions", pk, HEAD)
        now = self.clock.now()
        if (
            head is None
            or now >= parse_iso(head["expires_at"])
            or now >= parse_iso(head["idle_expires_at"])
        ):
            raise NotFound(_NOT_FOUND, {"session_id": session_id})
        newest, _ = self.db.query(
            "sessions", pk, "MSG#", limit=self.settings.session_recent_messages, newest_first=True
        )
        recent = list(reversed(newest))
        summary_item = self.db.get("sessions", pk, SUMMARY)
        summary = None
        if summary_item and now < parse_iso(summary_item["expires_at"]):
            summary = Summary(
                content=summary_item["content"],
                from_seq=summary_item["from_seq"],
                through_seq=summary_item["through_seq"],
                created_at=parse_iso(summary_item["created_at"]),
                expires_at=parse_iso(summary_item["expires_at"]),
            )
        return Session(
            session_id=session_id,
            subject_id=subject_id,
            created_at=parse_iso(head["created_at"]),
            last_activity_at=parse_iso(head["last_activity_at"]),
            idle_expires_at=parse_iso(head["idle_expires_at"]),
            expires_at=parse_iso(head["expires_at"]),
            message_count=int(head["last_seq"]),
            messages=[
                Message(
                    seq=i["seq"],
                    role=i["role"],
                    content=i["content"],
                    request_id=i["request_id"],
                    created_at=parse_iso(i["created_at"]),
                )
                for i in recent
            ],
            summary=summary,
        )

    def message(self, ctx: AccessContext, subject_id: str, session_id: str, seq: int) -> Message:
        """One message of a live session, by sequence number."""
        self.read(ctx, subject_id, session_id)  # the session must still be live
        item = self.db.get(
            "sessions", session_pk(ctx.tenant_id, subject_id, session_id), f"MSG#{seq:010d}"
        )
        if item is None:
            raise NotFound("no such message in this session", {"seq": seq})
        return Message(
            seq=item["seq"],
            role=item["role"],
            content=item["content"],
            request_id=item["request_id"],
            created_at=parse_iso(item["created_at"]),
        )

    def _require_read(self, ctx: AccessContext, subject_id: str) -> None:
        if not ({Scope.SESSIONS_WRITE, Scope.MEMORY_READ} & ctx.scopes):
            ctx.require(Scope.SESSIONS_WRITE)
        ctx.require_subject(subject_id)

    # ------------------------------------------------------------------ summary

    def put_summary(
        self, ctx: AccessContext, subject_id: str, session_id: str, body: PutSummary
    ) -> Session:
        ctx.require(Scope.SESSIONS_WRITE)
        ctx.require_subject(subject_id)
        session = self.read(ctx, subject_id, session_id, renew_check=False)
        if body.from_seq > body.through_seq or body.through_seq > session.message_count:
            raise ValidationFailed(
                f"the summary must cover messages within 1..{session.message_count}",
                {"field": "through_seq"},
            )
        if find_secrets([("content", body.content)]):
            raise SecretDetected("the summary contains what looks like a credential")
        now = self.clock.now()
        expires = session.expires_at
        if body.ttl_seconds is not None:
            expires = min(expires, now + timedelta(seconds=body.ttl_seconds))
        self.db.put(
            "sessions",
            {
                "pk": session_pk(ctx.tenant_id, subject_id, session_id),
                "sk": SUMMARY,
                "type": "summary",
                "content": body.content,
                "from_seq": body.from_seq,
                "through_seq": body.through_seq,
                "created_at": iso(now),
                "expires_at": iso(expires),
                "ttl": _epoch(expires),
            },
        )
        return self.read(ctx, subject_id, session_id, renew_check=False)

    # ------------------------------------------------------------------- end

    def end(self, ctx: AccessContext, subject_id: str, session_id: str) -> int:
        """End the session: the head goes first (reads stop at once), then everything else."""
        ctx.require(Scope.SESSIONS_WRITE)
        ctx.require_subject(subject_id)
        pk = session_pk(ctx.tenant_id, subject_id, session_id)
        head = self.db.get("sessions", pk, HEAD)
        if head is None:
            raise NotFound(_NOT_FOUND, {"session_id": session_id})
        self.db.client.delete_item(TableName=self.db.names["sessions"], Key=key(pk, HEAD))
        removed = 1
        for item in list(self.db.query_all("sessions", pk, "")):
            self.db.client.delete_item(TableName=self.db.names["sessions"], Key=key(pk, item["sk"]))
            removed += 1
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
