"""DynamoDB Streams records as the change feed's neutral ``Change``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from memvault.storage.dynamodb.dynamo import from_item
from memvault.storage.ports.changes import Change, ChangeKind

#: DynamoDB marks its own TTL deletions with this identity.
SERVICE_PRINCIPAL = "dynamodb.amazonaws.com"


def change_from_record(record: Mapping[str, Any], table: str = "memory") -> Change:
    """One Lambda stream record (the event source's shape); raises ``KeyError`` or
    ``ValueError`` for a record that cannot be read (a poison record)."""
    ddb = record.get("dynamodb") or {}
    identity = record.get("userIdentity") or {}
    return Change(
        table=table,
        kind=ChangeKind(str(record.get("eventName"))),
        new=from_item(ddb["NewImage"]) if ddb.get("NewImage") else None,
        old=from_item(ddb["OldImage"]) if ddb.get("OldImage") else None,
        position=str(ddb.get("SequenceNumber", "")),
        service_delete=identity.get("type") == "Service"
        and identity.get("principalId") == SERVICE_PRINCIPAL,
    )
