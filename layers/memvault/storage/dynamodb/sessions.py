"""The session store on DynamoDB, with native TTL.

Partition ``<tenant>#<subject>#<session>`` (never a bare session id):
    ``SESSION``        head: clocks, last sequence number (compare-and-set point)
    ``MSG#<seq>``      one message
    ``REQ#<request>``  the idempotency record of an append
    ``SUMMARY``        the latest summary, with the message range it covers

Every item of the session carries the absolute expiry as its ``ttl``, so DynamoDB removes
the whole session together (never a head without its messages, or messages without their
head); the summary's ``ttl`` is never later. TTL deletes lazily, so every read checks the
clocks itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from botocore.exceptions import ClientError

from memvault.clock import iso, parse_iso
from memvault.storage.dynamodb.dynamo import (
    Dynamo,
    TransactionConflict,
    Tx,
    key,
    map_client_error,
    to_attr,
    to_item,
)
from memvault.storage.dynamodb.subjects import EPOCH, epoch_check
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.ports.memory import purged_by
from memvault.storage.ports.sessions import (
    AppendReceipt,
    NewMessage,
    SessionHead,
    SessionSnapshot,
    StoredMessage,
    StoredSummary,
)
from memvault_wire.memory import Sensitivity
from memvault_wire.session import Role

TABLE = "sessions"
HEAD = "SESSION"
SUMMARY = "SUMMARY"
MESSAGE = "MSG#"
RECEIPT = "REQ#"


def session_pk(tenant_id: str, subject_id: str, session_id: str) -> str:
    return f"{tenant_id}#{subject_id}#{session_id}"


def message_sk(seq: int) -> str:
    return f"{MESSAGE}{seq:010d}"


def _epoch(ts: datetime) -> int:
    return int(ts.timestamp())


def _head(item: Mapping[str, Any]) -> SessionHead:
    return SessionHead(
        tenant_id=item["tenant_id"],
        subject_id=item["subject_id"],
        session_id=item["session_id"],
        created_at=parse_iso(item["created_at"]),
        last_activity_at=parse_iso(item["last_activity_at"]),
        idle_expires_at=parse_iso(item["idle_expires_at"]),
        expires_at=parse_iso(item["expires_at"]),
        last_seq=int(item["last_seq"]),
        subject_epoch=None if item.get("subject_epoch") is None else int(item["subject_epoch"]),
    )


def _message(item: Mapping[str, Any]) -> StoredMessage:
    return StoredMessage(
        seq=int(item["seq"]),
        role=Role(item["role"]),
        content=item["content"],
        request_id=item["request_id"],
        created_at=parse_iso(item["created_at"]),
        sensitivity=Sensitivity(item.get("sensitivity", Sensitivity.INTERNAL.value)),
    )


def _summary(item: Mapping[str, Any]) -> StoredSummary:
    return StoredSummary(
        content=item["content"],
        from_seq=int(item["from_seq"]),
        through_seq=int(item["through_seq"]),
        created_at=parse_iso(item["created_at"]),
        expires_at=parse_iso(item["expires_at"]),
        sensitivity=Sensitivity(item.get("sensitivity", Sensitivity.INTERNAL.value)),
    )


class DynamoSessionStore:
    def __init__(self, db: Dynamo) -> None:
        self.db = db

    @property
    def _table(self) -> str:
        return self.db.names[TABLE]

    # ------------------------------------------------------------------ reads

    def head(self, tenant_id: str, subject_id: str, session_id: str) -> SessionHead | None:
        item = self.db.get(TABLE, session_pk(tenant_id, subject_id, session_id), HEAD)
        return _head(item) if item else None

    def receipt(
        self, tenant_id: str, subject_id: str, session_id: str, request_id: str
    ) -> AppendReceipt | None:
        item = self.db.get(
            TABLE, session_pk(tenant_id, subject_id, session_id), f"{RECEIPT}{request_id}"
        )
        if item is None:
            return None
        role, content = item["payload"]
        return AppendReceipt(
            request_id=request_id, seq=int(item["seq"]), role=Role(role), content=content
        )

    def snapshot(
        self, tenant_id: str, subject_id: str, session_id: str, *, now: datetime, recent: int
    ) -> SessionSnapshot | None:
        head = self.head(tenant_id, subject_id, session_id)
        if head is None or not head.live(now):
            return None
        pk = session_pk(tenant_id, subject_id, session_id)
        newest, _ = self.db.query(TABLE, pk, MESSAGE, limit=recent, newest_first=True)
        item = self.db.get(TABLE, pk, SUMMARY)
        summary = _summary(item) if item else None
        return SessionSnapshot(
            head=head,
            messages=[_message(i) for i in reversed(newest)],
            summary=summary if summary and now < summary.expires_at else None,
        )

    def message(
        self, tenant_id: str, subject_id: str, session_id: str, seq: int, *, now: datetime
    ) -> StoredMessage | None:
        head = self.head(tenant_id, subject_id, session_id)
        if head is None or not head.live(now):
            return None
        item = self.db.get(TABLE, session_pk(tenant_id, subject_id, session_id), message_sk(seq))
        return _message(item) if item else None

    # ------------------------------------------------------------------ writes

    def append(self, new: NewMessage) -> None:
        pk = session_pk(new.tenant_id, new.subject_id, new.session_id)
        # Messages and receipts live at most until the absolute expiry.
        ttl = _epoch(new.expires_at)
        tx = Tx()
        if new.seq == 1:
            tx.add("head", self._new_head(pk, new, ttl))
        else:
            tx.add("head", self._advanced_head(pk, new))
        tx.add("message", self._message_put(pk, new, ttl))
        tx.add("request", self._receipt_put(pk, new, ttl))
        if new.subject_epoch is not None:
            tx.add(EPOCH, epoch_check(self.db, new.tenant_id, new.subject_id, new.subject_epoch))
        try:
            self.db.transact(tx)
        except TransactionConflict as err:
            causes = {
                "head": Conflict.EXISTS if new.seq == 1 else Conflict.VERSION,
                "message": Conflict.EXISTS,
                "request": Conflict.IDEMPOTENCY,
                EPOCH: Conflict.EPOCH,
            }
            raise ConditionFailed(*(causes[label] for label in err.failed)) from err

    def _new_head(self, pk: str, new: NewMessage, ttl: int) -> dict[str, Any]:
        """The head of a session begun by its first message, put only if none exists."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": to_item(
                    {
                        "pk": pk,
                        "sk": HEAD,
                        "type": "session",
                        "tenant_id": new.tenant_id,
                        "subject_id": new.subject_id,
                        "session_id": new.session_id,
                        "created_at": iso(new.at),
                        "last_activity_at": iso(new.at),
                        "idle_expires_at": iso(new.idle_expires_at),
                        "expires_at": iso(new.expires_at),
                        "last_seq": 1,
                        "subject_epoch": new.subject_epoch,
                        "ttl": ttl,
                    }
                ),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _advanced_head(self, pk: str, new: NewMessage) -> dict[str, Any]:
        """The compare-and-set of the head's last sequence number from the one before
        ``new`` to ``new``'s, with its activity time and idle clock."""
        return {
            "Update": {
                "TableName": self._table,
                "Key": key(pk, HEAD),
                "UpdateExpression": "SET last_seq = :seq, last_activity_at = :now, "
                "idle_expires_at = :idle",
                "ConditionExpression": "last_seq = :seen",
                "ExpressionAttributeValues": {
                    ":seq": to_attr(new.seq),
                    ":now": to_attr(iso(new.at)),
                    ":idle": to_attr(iso(new.idle_expires_at)),
                    ":seen": to_attr(new.seq - 1),
                },
            }
        }

    def _message_put(self, pk: str, new: NewMessage, ttl: int) -> dict[str, Any]:
        """The message itself, put only into a free sequence number."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": to_item(
                    {
                        "pk": pk,
                        "sk": message_sk(new.seq),
                        "type": "message",
                        "seq": new.seq,
                        "role": new.role.value,
                        "content": new.content,
                        "sensitivity": new.sensitivity.value,
                        "request_id": new.request_id,
                        "created_at": iso(new.at),
                        "ttl": ttl,
                    }
                ),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _receipt_put(self, pk: str, new: NewMessage, ttl: int) -> dict[str, Any]:
        """The append's idempotency record, put only if its request id is unused."""
        return {
            "Put": {
                "TableName": self._table,
                "Item": to_item(
                    {
                        "pk": pk,
                        "sk": f"{RECEIPT}{new.request_id}",
                        "type": "receipt",
                        "seq": new.seq,
                        "payload": [new.role.value, new.content],
                        "ttl": ttl,
                    }
                ),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def put_summary(
        self,
        tenant_id: str,
        subject_id: str,
        session_id: str,
        summary: StoredSummary,
        *,
        subject_epoch: int | None = None,
    ) -> None:
        pk = session_pk(tenant_id, subject_id, session_id)
        tx = Tx()
        tx.add(
            "head",
            {
                "ConditionCheck": {
                    "TableName": self._table,
                    "Key": key(pk, HEAD),
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
        )
        tx.add(
            "summary",
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item(
                        {
                            "pk": pk,
                            "sk": SUMMARY,
                            "type": "summary",
                            "content": summary.content,
                            "sensitivity": summary.sensitivity.value,
                            "from_seq": summary.from_seq,
                            "through_seq": summary.through_seq,
                            "created_at": iso(summary.created_at),
                            "expires_at": iso(summary.expires_at),
                            "ttl": _epoch(summary.expires_at),
                        }
                    ),
                }
            },
        )
        if subject_epoch is not None:
            tx.add(EPOCH, epoch_check(self.db, tenant_id, subject_id, subject_epoch))
        try:
            self.db.transact(tx)
        except TransactionConflict as err:
            raise ConditionFailed(
                *(Conflict.EPOCH if label == EPOCH else Conflict.ABSENT for label in err.failed)
            ) from err

    def end(self, tenant_id: str, subject_id: str, session_id: str) -> int:
        pk = session_pk(tenant_id, subject_id, session_id)
        # The head goes first: every read stops at once, then the rest is cleared.
        try:
            self.db.client.delete_item(
                TableName=self._table,
                Key=key(pk, HEAD),
                ConditionExpression="attribute_exists(pk)",
            )
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                raise ConditionFailed(Conflict.ABSENT) from err
            raise map_client_error(err) from err
        rest = [(pk, item["sk"]) for item in self.db.query_all(TABLE, pk, "")]
        return 1 + self.db.delete_many(TABLE, rest)

    def forget_subject(
        self,
        tenant_id: str,
        subject_id: str,
        before: datetime,
        *,
        retired_epoch: int | None = None,
    ) -> int:
        # A paged scan of the table: rare bulk work, never on a request path. A session
        # begun after the forget stays; any other goes whole, a remnant left without its
        # head included.
        prefix = f"{tenant_id}#{subject_id}#"
        items = list(self.db.scan_prefix(TABLE, prefix))
        kept = {
            i["pk"]
            for i in items
            if i["sk"] == HEAD
            and not purged_by(
                _head(i).subject_epoch,
                _head(i).created_at,
                retired_epoch=retired_epoch,
                before=before,
            )
        }
        doomed = [(i["pk"], i["sk"]) for i in items if i["pk"] not in kept]
        return self.db.delete_many(TABLE, doomed)
