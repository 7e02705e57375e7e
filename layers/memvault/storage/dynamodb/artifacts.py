"""Artifact metadata in the ``artifacts`` table: the DynamoDB adapter of ``ArtifactStore``.

Partition ``<tenant>#<subject>``; ``ART#<id>`` holds the artifact (state, declared size
and sha256, the pinned S3 version ``s3_version``, the object key ``s3_key`` and the string
set ``referenced_by``), ``REQ#<request_id>`` an upload receipt with the table's TTL
attribute. ``staged_until`` and ``retain_until`` are deliberately not the TTL attribute:
DynamoDB would drop the row and leave the object behind.

A reference (``memory:<chain_id>``, ``run:<subject_id>/<run_id>``) is added inside the
transaction of the record that makes it, with ``add_reference``; adding one requires the
artifact to be committed (and, for checkpoints, to have the expected sha256).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from botocore.exceptions import ClientError

from memvault.clock import iso, parse_iso
from memvault.storage.dynamodb.dynamo import (
    Dynamo,
    TransactionConflict,
    Tx,
    from_item,
    key,
    map_client_error,
    to_attr,
    to_item,
)
from memvault.storage.dynamodb.subjects import EPOCH, epoch_check
from memvault.storage.ports.artifacts import ArtifactRecord, UploadReceipt
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.ports.memory import purged_by
from memvault_wire.artifact import ArtifactState
from memvault_wire.memory import Sensitivity

TABLE = "artifacts"
ARTIFACT_PREFIX = "ART#"
RECEIPT_PREFIX = "REQ#"

_STATE = {"#state": "state"}


def partition(tenant_id: str, subject_id: str) -> str:
    return f"{tenant_id}#{subject_id}"


def add_reference(
    table: str,
    tenant_id: str,
    subject_id: str,
    artifact_id: str,
    ref: str,
    sha256: str | None = None,
    made_after: datetime | None = None,
    made_under: int | None = None,
) -> dict[str, Any]:
    """The transaction item that counts ``ref`` on a committed artifact (with ``sha256``,
    when given; of the subject's epoch ``made_under``, the referencing record's, when
    given; one without an epoch made after ``made_after``, the subject's last forget,
    when given); its condition failing means the artifact is not (or not that one)."""
    condition = "#state = :committed"
    values: dict[str, Any] = {
        ":ref": {"SS": [ref]},
        ":committed": to_attr(ArtifactState.COMMITTED.value),
    }
    if sha256 is not None:
        condition += " AND sha256 = :sha"
        values[":sha"] = to_attr(sha256)
    legacy = "attribute_not_exists(subject_epoch)"
    if made_after is not None:
        legacy += " AND created_at > :after"  # ISO times sort as text
        values[":after"] = to_attr(iso(made_after))
    if made_under is not None:
        condition += f" AND (subject_epoch = :under OR ({legacy}))"
        values[":under"] = to_attr(made_under)
    elif made_after is not None:
        condition += " AND created_at > :after"
    return {
        "Update": {
            "TableName": table,
            "Key": key(partition(tenant_id, subject_id), f"{ARTIFACT_PREFIX}{artifact_id}"),
            "UpdateExpression": "ADD referenced_by :ref",
            "ConditionExpression": condition,
            "ExpressionAttributeNames": dict(_STATE),
            "ExpressionAttributeValues": values,
        }
    }


# ----------------------------------------------------------------------------- codec


def _artifact_item(r: ArtifactRecord) -> dict[str, Any]:
    return {
        "pk": partition(r.tenant_id, r.subject_id),
        "sk": f"{ARTIFACT_PREFIX}{r.artifact_id}",
        "artifact_id": r.artifact_id,
        "tenant_id": r.tenant_id,
        "subject_id": r.subject_id,
        "media_type": r.media_type,
        "size_bytes": r.size_bytes,
        "sha256": r.sha256,
        "state": r.state.value,
        "s3_key": f"{r.tenant_id}/{r.subject_id}/{r.artifact_id}",
        "s3_version": r.version,
        "name": r.name,
        "sensitivity": r.sensitivity.value,
        "retention_days": r.retention_days,
        "created_at": iso(r.created_at),
        "created_by": r.created_by,
        "committed_at": iso(r.committed_at) if r.committed_at else None,
        "staged_until": r.staged_until,
        "retain_until": r.retain_until,
        # An empty string set cannot be stored: no references is no attribute.
        "referenced_by": set(r.referenced_by) or None,
        "subject_epoch": r.subject_epoch,
    }


def _record(item: dict[str, Any]) -> ArtifactRecord:
    committed = item.get("committed_at")
    staged, retain = item.get("staged_until"), item.get("retain_until")
    return ArtifactRecord(
        tenant_id=item["tenant_id"],
        subject_id=item["subject_id"],
        artifact_id=item["artifact_id"],
        media_type=item["media_type"],
        size_bytes=int(item["size_bytes"]),
        sha256=item["sha256"],
        state=ArtifactState(item["state"]),
        sensitivity=Sensitivity(item["sensitivity"]),
        created_at=parse_iso(item["created_at"]),
        created_by=item["created_by"],
        name=item.get("name"),
        retention_days=item.get("retention_days"),
        staged_until=int(staged) if staged is not None else None,
        version=item.get("s3_version"),
        committed_at=parse_iso(committed) if committed else None,
        retain_until=int(retain) if retain is not None else None,
        referenced_by=frozenset(item.get("referenced_by") or ()),
        subject_epoch=None if item.get("subject_epoch") is None else int(item["subject_epoch"]),
    )


def _epoch(ts: datetime) -> int:
    return int(ts.astimezone(UTC).timestamp())


class DynamoArtifactStore:
    def __init__(self, db: Dynamo) -> None:
        self.db = db

    @property
    def _table(self) -> str:
        return self.db.names[TABLE]

    def _update(self, **params: Any) -> dict[str, Any] | None:
        """One conditional update_item; ``None`` when its condition failed."""
        try:
            out: dict[str, Any] = self.db.client.update_item(TableName=self._table, **params)
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return None
            raise map_client_error(err) from err
        return out

    # ------------------------------------------------------------------ reads

    def artifact(self, tenant_id: str, subject_id: str, artifact_id: str) -> ArtifactRecord | None:
        item = self.db.get(
            TABLE, partition(tenant_id, subject_id), f"{ARTIFACT_PREFIX}{artifact_id}"
        )
        return _record(item) if item else None

    def receipt(
        self, tenant_id: str, subject_id: str, request_id: str, now: datetime
    ) -> UploadReceipt | None:
        item = self.db.get(TABLE, partition(tenant_id, subject_id), f"{RECEIPT_PREFIX}{request_id}")
        # DynamoDB's TTL deletes lazily: an expired receipt is absent whatever it has done.
        if item is None or int(item.get("ttl", 0)) < _epoch(now):
            return None
        return UploadReceipt(
            request_id=request_id,
            artifact_id=item["artifact_id"],
            fingerprint=item["fingerprint"],
            expires_at=int(item["ttl"]),
        )

    def sweepable(self, now: datetime) -> Iterator[ArtifactRecord]:
        params: dict[str, Any] = {
            "TableName": self._table,
            # Expired staged uploads, and deleted artifacts whose objects may remain.
            "FilterExpression": "(#state = :staged AND staged_until < :now) OR #state = :deleted",
            "ExpressionAttributeNames": dict(_STATE),
            "ExpressionAttributeValues": {
                ":staged": to_attr(ArtifactState.STAGED.value),
                ":deleted": to_attr(ArtifactState.DELETED.value),
                ":now": to_attr(_epoch(now)),
            },
        }
        while True:
            try:
                page = self.db.client.scan(**params)
            except ClientError as err:
                raise map_client_error(err) from err
            for raw in page.get("Items", []):
                yield _record(from_item(raw))
            if "LastEvaluatedKey" not in page:
                return
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    # ------------------------------------------------------------------ writes

    def stage(self, record: ArtifactRecord, receipt: UploadReceipt, now: datetime) -> None:
        pk = partition(record.tenant_id, record.subject_id)
        tx = Tx()
        tx.add(
            "receipt",
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item(
                        {
                            "pk": pk,
                            "sk": f"{RECEIPT_PREFIX}{receipt.request_id}",
                            "artifact_id": receipt.artifact_id,
                            "fingerprint": receipt.fingerprint,
                            "ttl": receipt.expires_at,
                        }
                    ),
                    # A receipt past its TTL that DynamoDB has not removed yet is replaced.
                    "ConditionExpression": "attribute_not_exists(pk) OR #ttl < :now",
                    "ExpressionAttributeNames": {"#ttl": "ttl"},
                    "ExpressionAttributeValues": {":now": to_attr(_epoch(now))},
                }
            },
        )
        tx.add(
            "artifact",
            {
                "Put": {
                    "TableName": self._table,
                    "Item": to_item(_artifact_item(record)),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        )
        if record.subject_epoch is not None:
            tx.add(
                EPOCH,
                epoch_check(self.db, record.tenant_id, record.subject_id, record.subject_epoch),
            )
        try:
            self.db.transact(tx)
        except TransactionConflict as conflict:
            causes = {
                "receipt": Conflict.IDEMPOTENCY,
                "artifact": Conflict.EXISTS,
                EPOCH: Conflict.EPOCH,
            }
            raise ConditionFailed(*(causes[label] for label in conflict.failed)) from None

    def commit(
        self,
        tenant_id: str,
        subject_id: str,
        artifact_id: str,
        *,
        version: str,
        at: datetime,
        retain_until: int | None,
    ) -> None:
        expression = "SET #state = :committed, s3_version = :v, committed_at = :at"
        values = {
            ":committed": to_attr(ArtifactState.COMMITTED.value),
            ":staged": to_attr(ArtifactState.STAGED.value),
            ":v": to_attr(version),
            ":at": to_attr(iso(at)),
        }
        if retain_until is not None:
            expression += ", retain_until = :retain"
            values[":retain"] = to_attr(retain_until)
        done = self._update(
            Key=key(partition(tenant_id, subject_id), f"{ARTIFACT_PREFIX}{artifact_id}"),
            UpdateExpression=expression + " REMOVE staged_until",
            ConditionExpression="#state = :staged",
            ExpressionAttributeNames=dict(_STATE),
            ExpressionAttributeValues=values,
        )
        if done is None:
            found = self.artifact(tenant_id, subject_id, artifact_id)
            raise ConditionFailed(Conflict.ABSENT if found is None else Conflict.STATE)

    def add_reference(
        self,
        tenant_id: str,
        subject_id: str,
        artifact_id: str,
        ref: str,
        sha256: str | None = None,
    ) -> None:
        update = add_reference(self._table, tenant_id, subject_id, artifact_id, ref, sha256)
        tx = Tx()
        tx.add("artifact", update)
        try:
            self.db.transact(tx)
        except TransactionConflict:
            raise ConditionFailed(Conflict.ARTIFACT) from None

    def mark_deleted(
        self, tenant_id: str, subject_id: str, artifact_id: str, *, at: datetime | None = None
    ) -> None:
        expression = "SET #state = :deleted"
        values = {":deleted": to_attr(ArtifactState.DELETED.value)}
        if at is not None:
            expression += ", staged_until = :closed"
            values[":closed"] = to_attr(_epoch(at))
        done = self._update(
            Key=key(partition(tenant_id, subject_id), f"{ARTIFACT_PREFIX}{artifact_id}"),
            UpdateExpression=expression,
            ConditionExpression=(
                "attribute_exists(pk) AND #state <> :deleted "
                "AND attribute_not_exists(referenced_by)"
            ),
            ExpressionAttributeNames=dict(_STATE),
            ExpressionAttributeValues=values,
        )
        if done is None:
            found = self.artifact(tenant_id, subject_id, artifact_id)
            if found is None or found.state is ArtifactState.DELETED:
                raise ConditionFailed(Conflict.ABSENT)
            raise ConditionFailed(Conflict.REFERENCED)

    def release(self, tenant_id: str, subject_id: str, artifact_id: str, ref: str) -> bool:
        item_key = key(partition(tenant_id, subject_id), f"{ARTIFACT_PREFIX}{artifact_id}")
        out = self._update(
            Key=item_key,
            UpdateExpression="DELETE referenced_by :ref",
            ConditionExpression="attribute_exists(pk)",
            ExpressionAttributeValues={":ref": {"SS": [ref]}},
            ReturnValues="ALL_NEW",
        )
        if out is None:
            return False  # gone already
        row = out["Attributes"]
        if row.get("referenced_by") or row["state"]["S"] != ArtifactState.COMMITTED.value:
            return False
        # Referenced again meanwhile (or deleted by another): it is not ours to delete.
        done = self._update(
            Key=item_key,
            UpdateExpression="SET #state = :deleted",
            ConditionExpression="attribute_not_exists(referenced_by) AND #state = :committed",
            ExpressionAttributeNames=dict(_STATE),
            ExpressionAttributeValues={
                ":deleted": to_attr(ArtifactState.DELETED.value),
                ":committed": to_attr(ArtifactState.COMMITTED.value),
            },
        )
        return done is not None

    def claim_expired(
        self, tenant_id: str, subject_id: str, artifact_id: str, now: datetime
    ) -> bool:
        done = self._update(
            Key=key(partition(tenant_id, subject_id), f"{ARTIFACT_PREFIX}{artifact_id}"),
            UpdateExpression="SET #state = :deleted",
            ConditionExpression="#state = :staged AND staged_until < :now",
            ExpressionAttributeNames=dict(_STATE),
            ExpressionAttributeValues={
                ":deleted": to_attr(ArtifactState.DELETED.value),
                ":staged": to_attr(ArtifactState.STAGED.value),
                ":now": to_attr(_epoch(now)),
            },
        )
        return done is not None

    def remove(self, tenant_id: str, subject_id: str, artifact_id: str) -> bool:
        try:
            self.db.client.delete_item(
                TableName=self._table,
                Key=key(partition(tenant_id, subject_id), f"{ARTIFACT_PREFIX}{artifact_id}"),
                ConditionExpression="#state = :deleted",
                ExpressionAttributeNames=dict(_STATE),
                ExpressionAttributeValues={":deleted": to_attr(ArtifactState.DELETED.value)},
            )
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return False
            raise map_client_error(err) from err
        return True

    def forget_subject(
        self,
        tenant_id: str,
        subject_id: str,
        before: datetime,
        *,
        retired_epoch: int | None = None,
    ) -> list[str]:
        pk = partition(tenant_id, subject_id)
        forgotten: list[str] = []
        receipts: list[tuple[str, str, str]] = []
        kept: set[str] = set()
        for item in list(self.db.query_all(TABLE, pk, "")):
            if item["sk"].startswith(RECEIPT_PREFIX):
                receipts.append((pk, item["sk"], item["artifact_id"]))
                continue
            if not item["sk"].startswith(ARTIFACT_PREFIX):
                continue
            made = _record(item)
            if not purged_by(
                made.subject_epoch, made.created_at, retired_epoch=retired_epoch, before=before
            ):  # made after the forget
                if item["state"] != ArtifactState.DELETED.value:
                    kept.add(item["artifact_id"])
                continue
            if item["state"] != ArtifactState.DELETED.value:
                # attribute_exists: a row the sweeper removed meanwhile is not re-created.
                self._update(
                    Key=key(pk, item["sk"]),
                    UpdateExpression=(
                        "SET #state = :deleted, staged_until = :closed REMOVE referenced_by"
                    ),
                    ConditionExpression="attribute_exists(pk)",
                    ExpressionAttributeNames=dict(_STATE),
                    ExpressionAttributeValues={
                        ":deleted": to_attr(ArtifactState.DELETED.value),
                        ":closed": to_attr(_epoch(before)),
                    },
                )
            forgotten.append(item["artifact_id"])
        # Receipts of the forget's artifacts, and of any upload whose row is gone.
        self.db.delete_many(TABLE, [(p, sk) for p, sk, aid in receipts if aid not in kept])
        return sorted(forgotten)
