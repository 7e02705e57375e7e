"""The run store on DynamoDB.

Partition ``<tenant>#<run_id>`` in the ``runs`` table:
    ``CHECKPOINT``      the current checkpoint (the compare-and-set point)
    ``V#<version>``     every version, immutable (history, reproduction)
    ``OP#<operation>``  a side effect's recorded status and result reference
    ``EVT#<event>``     the receipt of an external event, written with its effect

The checkpoint and its versions carry ``subject_id``, which is how forgetting a subject
finds their runs; a finished run's items carry its retention as ``ttl`` (native TTL).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from memvault.clock import iso, parse_iso
from memvault.storage.dynamodb.artifacts import add_reference
from memvault.storage.dynamodb.dynamo import Dynamo, TransactionConflict, Tx, key, to_attr, to_item
from memvault.storage.dynamodb.subjects import EPOCH, epoch_check
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.ports.memory import purged_by
from memvault.storage.ports.runs import (
    Advancement,
    ArtifactsNotCommitted,
    EventReceipt,
    RunsForgotten,
    StoredRun,
    SubjectEpoch,
    epoch_of,
    live,
    run_reference,
)
from memvault_wire.memory import Sensitivity
from memvault_wire.run import Checkpoint, Operation, OperationStatus

TABLE = "runs"
CHECKPOINT = "CHECKPOINT"
_ARTIFACT = "artifact:"
#: Which condition a transaction item's label stands for.
_CAUSES = {
    "checkpoint": Conflict.VERSION,
    "history": Conflict.VERSION,
    "receipt": Conflict.IDEMPOTENCY,
    "run": Conflict.ABSENT,
    EPOCH: Conflict.EPOCH,
}


def run_pk(tenant_id: str, run_id: str) -> str:
    return f"{tenant_id}#{run_id}"


def version_sk(version: int) -> str:
    return f"V#{version:010d}"


def operation_sk(operation_id: str) -> str:
    return f"OP#{operation_id}"


_EVENT = "EVT#"


def event_sk(event_id: str) -> str:
    return f"{_EVENT}{event_id}"


class DynamoRunStore:
    def __init__(self, db: Dynamo) -> None:
        self.db = db

    @property
    def _table(self) -> str:
        return self.db.names[TABLE]

    # ------------------------------------------------------------------ reads

    def head(self, tenant_id: str, run_id: str, *, now: datetime) -> StoredRun | None:
        item = self.db.get(TABLE, run_pk(tenant_id, run_id), CHECKPOINT)
        if item is None or not live(item.get("ttl"), now):
            return None
        return StoredRun(
            checkpoint=_checkpoint(item), fingerprint=item.get("fingerprint"), ttl=item.get("ttl")
        )

    def version(
        self, tenant_id: str, run_id: str, version: int, *, now: datetime
    ) -> Checkpoint | None:
        item = self.db.get(TABLE, run_pk(tenant_id, run_id), version_sk(version))
        if item is None or not live(item.get("ttl"), now):
            return None
        return _checkpoint(item)

    def operations(self, tenant_id: str, run_id: str, *, now: datetime) -> list[Operation]:
        items = self.db.query_all(TABLE, run_pk(tenant_id, run_id), "OP#")
        return [_operation(i) for i in items if live(i.get("ttl"), now)]

    def operation(
        self, tenant_id: str, run_id: str, operation_id: str, *, now: datetime
    ) -> Operation | None:
        item = self.db.get(TABLE, run_pk(tenant_id, run_id), operation_sk(operation_id))
        if item is None or not live(item.get("ttl"), now):
            return None
        return _operation(item)

    def receipt(
        self, tenant_id: str, run_id: str, event_id: str, *, now: datetime
    ) -> EventReceipt | None:
        item = self.db.get(TABLE, run_pk(tenant_id, run_id), event_sk(event_id))
        if item is None or not live(item.get("ttl"), now):
            return None
        return _event_receipt(item)

    def receipts(
        self,
        tenant_id: str,
        run_id: str,
        *,
        now: datetime,
        cursor: str | None = None,
        limit: int = 100,
    ) -> tuple[list[EventReceipt], str | None]:
        # One receipt more than the page, to know whether another page follows; expired
        # items (not yet deleted by TTL) are skipped, so the query may need more pages.
        pk = run_pk(tenant_id, run_id)
        found: list[EventReceipt] = []
        start = event_sk(cursor) if cursor is not None else None
        while len(found) <= limit:
            items, start = self.db.query(
                TABLE, pk, _EVENT, start_sk=start, limit=limit + 1 - len(found)
            )
            found += [_event_receipt(i) for i in items if live(i.get("ttl"), now)]
            if start is None:
                break
        if len(found) > limit:
            return found[:limit], found[limit - 1].event_id
        return found, None

    # ------------------------------------------------------------------ writes

    def create(self, tenant_id: str, checkpoint: Checkpoint, fingerprint: str) -> None:
        pk = run_pk(tenant_id, checkpoint.run_id)
        body = _body(tenant_id, checkpoint)
        tx = Tx()
        tx.add("checkpoint", self._put_new({**body, "fingerprint": fingerprint}, pk, CHECKPOINT))
        tx.add("history", self._put_new(body, pk, version_sk(checkpoint.version)))
        self._epoch(tx, tenant_id, epoch_of(checkpoint))
        try:
            self.db.transact(tx)
        except TransactionConflict as conflict:
            raise ConditionFailed(
                *(
                    Conflict.EPOCH if label == EPOCH else Conflict.EXISTS
                    for label in conflict.failed
                )
            ) from None

    def advance(self, tenant_id: str, step: Advancement) -> None:
        cp = step.checkpoint
        pk = run_pk(tenant_id, cp.run_id)
        body = {**_body(tenant_id, cp), "ttl": step.ttl}
        tx = Tx()
        tx.add("checkpoint", self._update_head(pk, body, step.expected_version))
        tx.add("history", self._put_new(body, pk, version_sk(cp.version)))
        for ref in step.new_references:
            # Counted with the checkpoint that first references it, in one transaction.
            tx.add(
                _ARTIFACT + ref.artifact_id,
                add_reference(
                    self.db.names["artifacts"],
                    tenant_id,
                    cp.subject_id,
                    ref.artifact_id,
                    run_reference(cp.run_id),
                    sha256=ref.sha256,
                    made_after=step.artifacts_after,
                    made_under=cp.subject_epoch,
                ),
            )
        if step.receipt is not None:
            tx.add(
                "receipt",
                self._put_new(_receipt(step.receipt), pk, event_sk(step.receipt.event_id)),
            )
        self._epoch(tx, tenant_id, epoch_of(cp))
        self._transact(tx)

    def record_event(
        self,
        tenant_id: str,
        run_id: str,
        receipt: EventReceipt,
        *,
        at_version: int,
        epoch: SubjectEpoch | None = None,
    ) -> None:
        pk = run_pk(tenant_id, run_id)
        tx = Tx()
        tx.add(
            "checkpoint",
            {
                "ConditionCheck": {
                    "TableName": self._table,
                    "Key": key(pk, CHECKPOINT),
                    "ConditionExpression": "version = :v",
                    "ExpressionAttributeValues": {":v": to_attr(at_version)},
                }
            },
        )
        tx.add("receipt", self._put_new(_receipt(receipt), pk, event_sk(receipt.event_id)))
        self._epoch(tx, tenant_id, epoch)
        self._transact(tx)

    def put_operation(
        self,
        tenant_id: str,
        run_id: str,
        operation: Operation,
        *,
        expected: OperationStatus | None,
        ttl: int | None = None,
        epoch: SubjectEpoch | None = None,
    ) -> None:
        pk = run_pk(tenant_id, run_id)
        record = {
            "pk": pk,
            "sk": operation_sk(operation.operation_id),
            "operation_id": operation.operation_id,
            "status": operation.status.value,
            "result_ref": operation.result_ref,
            "result_sha256": operation.result_sha256,
            "updated_at": iso(operation.updated_at),
            "sensitivity": operation.sensitivity.value,
            "ttl": ttl,
        }
        put: dict[str, Any] = {"TableName": self._table, "Item": to_item(record)}
        if expected is None:
            put["ConditionExpression"] = "attribute_not_exists(pk)"
            refused = Conflict.EXISTS
        else:
            put["ConditionExpression"] = "#s = :seen"
            put["ExpressionAttributeNames"] = {"#s": "status"}
            put["ExpressionAttributeValues"] = {":seen": to_attr(expected.value)}
            refused = Conflict.STATE
        tx = Tx()
        # The run must still be there: an operation never outlives a forgotten run.
        tx.add(
            "run",
            {
                "ConditionCheck": {
                    "TableName": self._table,
                    "Key": key(pk, CHECKPOINT),
                    "ConditionExpression": "attribute_exists(pk)",
                }
            },
        )
        tx.add("operation", {"Put": put})
        self._epoch(tx, tenant_id, epoch)
        try:
            self.db.transact(tx)
        except TransactionConflict as conflict:
            causes = {_CAUSES[f] for f in conflict.failed if f in _CAUSES}
            if "operation" in conflict.failed:
                causes.add(refused)
            raise ConditionFailed(*causes) from None

    def retain(self, tenant_id: str, run_id: str, ttl: int) -> int:
        pk = run_pk(tenant_id, run_id)
        changed = 0
        for item in list(self.db.query_all(TABLE, pk, "")):
            if item.get("ttl") is None:
                self.db.update(
                    TABLE,
                    pk,
                    item["sk"],
                    "SET #ttl = :ttl",
                    names={"#ttl": "ttl"},
                    values={":ttl": ttl},
                )
                changed += 1
        return changed

    def forget_subject(
        self,
        tenant_id: str,
        subject_id: str,
        before: datetime,
        *,
        retired_epoch: int | None = None,
    ) -> RunsForgotten:
        # A full scan of the tenant's partitions, paged: rare bulk work, never on a request
        # path. Every checkpoint and version carries its subject, epoch and creation time.
        items = list(self.db.scan_prefix(TABLE, f"{tenant_id}#"))
        mine = [i for i in items if i.get("subject_id") == subject_id]
        kept = {
            i["pk"]
            for i in mine
            if i["sk"] == CHECKPOINT
            and not purged_by(
                (cp := _checkpoint(i)).subject_epoch,
                cp.created_at,
                retired_epoch=retired_epoch,
                before=before,
            )
        }
        runs = {i["pk"] for i in mine} - kept
        doomed = [(i["pk"], i["sk"]) for i in items if i["pk"] in runs]
        self.db.delete_many(TABLE, doomed)
        return RunsForgotten(runs=len(runs), records=len(doomed))

    # ------------------------------------------------------------------ helpers

    def _epoch(self, tx: Tx, tenant_id: str, epoch: SubjectEpoch | None) -> None:
        if epoch is not None:
            tx.add(EPOCH, epoch_check(self.db, tenant_id, epoch.subject_id, epoch.epoch))

    def _put_new(self, body: Mapping[str, Any], pk: str, sk: str) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self._table,
                "Item": to_item({**body, "pk": pk, "sk": sk}),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _update_head(self, pk: str, body: Mapping[str, Any], expected: int) -> dict[str, Any]:
        """Every checkpoint field set, the create's fingerprint kept, at the expected
        version only."""
        fields = [k for k, v in body.items() if v is not None]
        names = {f"#f{i}": k for i, k in enumerate(fields)}
        values = {f":f{i}": to_attr(body[k]) for i, k in enumerate(fields)}
        values[":expected"] = to_attr(expected)
        return {
            "Update": {
                "TableName": self._table,
                "Key": key(pk, CHECKPOINT),
                "UpdateExpression": "SET "
                + ", ".join(f"#f{i} = :f{i}" for i in range(len(fields))),
                "ConditionExpression": "version = :expected",
                "ExpressionAttributeNames": names,
                "ExpressionAttributeValues": values,
            }
        }

    def _transact(self, tx: Tx) -> None:
        try:
            self.db.transact(tx)
        except TransactionConflict as conflict:
            causes = {_CAUSES[f] for f in conflict.failed if f in _CAUSES}
            missing = [
                f.removeprefix(_ARTIFACT) for f in conflict.failed if f.startswith(_ARTIFACT)
            ]
            if missing:
                raise ArtifactsNotCommitted(missing, *causes) from None
            raise ConditionFailed(*causes) from None


def _body(tenant_id: str, cp: Checkpoint) -> dict[str, Any]:
    return {
        **cp.model_dump(mode="json", exclude={"operations", "withheld"}),
        "tenant_id": tenant_id,
        "subject_epoch": cp.subject_epoch,
    }


def _receipt(receipt: EventReceipt) -> dict[str, Any]:
    return {
        "type": receipt.type,
        "fingerprint": receipt.fingerprint,
        "applied": receipt.applied,
        "received_at": iso(receipt.received_at),
        "version": receipt.version,
        "ttl": receipt.ttl,
    }


def _checkpoint(item: Mapping[str, Any]) -> Checkpoint:
    fields = set(Checkpoint.model_fields) - {"operations"}
    return Checkpoint.model_validate({k: v for k, v in item.items() if k in fields})


def _event_receipt(item: Mapping[str, Any]) -> EventReceipt:
    return EventReceipt(
        event_id=item["sk"].removeprefix(_EVENT),
        type=item["type"],
        fingerprint=item["fingerprint"],
        applied=bool(item["applied"]),
        received_at=parse_iso(item["received_at"]),
        version=int(item["version"]),
        ttl=item.get("ttl"),
    )


def _operation(item: Mapping[str, Any]) -> Operation:
    return Operation(
        operation_id=item["operation_id"],
        status=OperationStatus(item["status"]),
        result_ref=item.get("result_ref"),
        result_sha256=item.get("result_sha256"),
        updated_at=parse_iso(item["updated_at"]),
        # Recorded before operations were classified: served as internal, as then.
        sensitivity=Sensitivity(item.get("sensitivity", Sensitivity.INTERNAL.value)),
    )
