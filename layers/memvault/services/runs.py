"""Run state: a declared state machine advanced by compare-and-set, with history,
side-effect operations and idempotent external events.

Partition ``<tenant>#<run_id>`` in the ``runs`` table:
    ``CHECKPOINT``      the current checkpoint (the CAS point)
    ``V#<version>``     every version, immutable (history, reproduction)
    ``OP#<operation>``  a side effect's recorded status and result reference
    ``EVT#<event>``     the receipt of an external event, written with its effect
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from typing import Any

from memvault.clock import Clock, iso, parse_iso
from memvault.config import Settings
from memvault.errors import (
    ArtifactNotCommitted,
    Forbidden,
    IdempotencyKeyReused,
    IllegalTransition,
    NotFound,
    OperationConflict,
    PayloadTooLarge,
    ValidationFailed,
    VersionConflict,
)
from memvault.models.access import AccessContext, Scope
from memvault.models.run import (
    OPERATION_TRANSITIONS,
    TERMINAL,
    TRANSITIONS,
    Advance,
    Checkpoint,
    CreateRun,
    Operation,
    OperationStatus,
    RecordOperation,
    RunEvent,
    RunStatus,
)
from memvault.observability import logger
from memvault.storage.dynamo import Dynamo, TransactionConflict, Tx, to_item
from memvault.storage.dynamodb.artifacts import add_reference

CHECKPOINT = "CHECKPOINT"
_NOT_FOUND = "no run with this id"


def run_pk(tenant_id: str, run_id: str) -> str:
    return f"{tenant_id}#{run_id}"


def _digest(payload: Any) -> str:
    return hashlib.sha256(
        json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


class RunService:
    def __init__(self, db: Dynamo, settings: Settings, clock: Clock) -> None:
        self.db = db
        self.settings = settings
        self.clock = clock

    # ------------------------------------------------------------------- create

    def create(self, ctx: AccessContext, run_id: str, body: CreateRun) -> tuple[Checkpoint, bool]:
        ctx.require(Scope.RUNS_WRITE)
        ctx.require_subject(body.subject_id)
        now = self.clock.now()
        fingerprint = _digest(body.model_dump(mode="json"))
        checkpoint = Checkpoint(
            run_id=run_id,
            subject_id=body.subject_id,
            version=1,
            status=RunStatus.CREATED,
            step="created",
            plan_version=body.plan_version,
            budget=dict(body.budget),
            pending_approvals=[],
            state={},
            artifact_refs=[],
            created_at=now,
            updated_at=now,
        )
        try:
            self._commit(
                ctx.tenant_id, checkpoint, expected=None, extra={"fingerprint": fingerprint}
            )
        except TransactionConflict:
            existing = self.db.get("runs", run_pk(ctx.tenant_id, run_id), CHECKPOINT)
            if existing is None:
                raise IdempotencyKeyReused(
                    "this run id was used by a run whose records are still kept; choose a new "
                    "run id",
                    {"run_id": run_id},
                ) from None
            if existing.get("fingerprint") != fingerprint:
                raise IdempotencyKeyReused(
                    "a run with this id exists with another payload; choose a new run id",
                    {"run_id": run_id},
                ) from None
            return self.get(ctx, run_id), False
        logger.info("run created", extra={"tenant_id": ctx.tenant_id, "run_id": run_id})
        return checkpoint, True

    # --------------------------------------------------------------------- read

    def get(self, ctx: AccessContext, run_id: str) -> Checkpoint:
        ctx.require(Scope.RUNS_WRITE)
        checkpoint = self._load(ctx, run_id)
        ops = self.db.query_all("runs", run_pk(ctx.tenant_id, run_id), "OP#")
        return checkpoint.model_copy(update={"operations": [_operation(i) for i in ops]})

    def version(self, ctx: AccessContext, run_id: str, version: int) -> Checkpoint:
        """One past version, exactly as it was (reproducing an assembled context)."""
        ctx.require(Scope.RUNS_WRITE)
        self._load(ctx, run_id)
        item = self.db.get("runs", run_pk(ctx.tenant_id, run_id), f"V#{version:010d}")
        if item is None:
            raise NotFound("no such version of this run", {"run_id": run_id, "version": version})
        return _checkpoint(item)

    def _load(self, ctx: AccessContext, run_id: str) -> Checkpoint:
        item = self.db.get("runs", run_pk(ctx.tenant_id, run_id), CHECKPOINT)
        if item is None:
            raise NotFound(_NOT_FOUND, {"run_id": run_id})
        checkpoint = _checkpoint(item)
        try:
            ctx.require_subject(checkpoint.subject_id)
        except Forbidden:
            # Another subject's run is answered as absent, so that its existence stays private.
            raise NotFound(_NOT_FOUND, {"run_id": run_id}) from None
        return checkpoint

    # ------------------------------------------------------------------ advance

    def advance(self, ctx: AccessContext, run_id: str, body: Advance) -> Checkpoint:
        ctx.require(Scope.RUNS_WRITE)
        current = self._load(ctx, run_id)
        self._check_version(current, body.expected_version)
        self._check_transition(current.status, body.status)
        changes: dict[str, Any] = {"status": body.status, "step": body.step}
        for field in ("plan_version", "budget", "pending_approvals", "state", "artifact_refs"):
            value = getattr(body, field)
            if value is not None:
                changes[field] = value
        updated = self._next(current, changes)
        tx = Tx()
        counted = {r.artifact_id for r in current.artifact_refs}
        for ref in updated.artifact_refs:
            if ref.artifact_id not in counted:
                # Counted with the checkpoint that first references it, in one transaction.
                tx.add(
                    f"artifact:{ref.artifact_id}",
                    add_reference(
                        self.db.names["artifacts"],
                        ctx.tenant_id,
                        current.subject_id,
                        ref.artifact_id,
                        f"run:{run_id}",
                        sha256=ref.sha256,
                    ),
                )
        try:
            self._commit(ctx.tenant_id, updated, expected=current.version, tx=tx)
        except TransactionConflict as conflict:
            missing = sorted(
                f.split(":", 1)[1] for f in conflict.failed if f.startswith("artifact:")
            )
            if missing:
                raise ArtifactNotCommitted(
                    "artifact_refs must name committed artifacts of the run's subject with "
                    "the given sha256",
                    {"artifact_ids": missing},
                ) from None
            self._check_version(self._load(ctx, run_id), body.expected_version)
            raise VersionConflict("the run changed while advancing; re-read it") from None
        self._retain_if_finished(ctx.tenant_id, updated)
        logger.info(
            "run advanced",
            extra={
                "tenant_id": ctx.tenant_id,
                "run_id": run_id,
                "version": updated.version,
                "status": updated.status.value,
            },
        )
        return updated

    def _retain_if_finished(self, tenant_id: str, cp: Checkpoint) -> None:
        """A finished run's records (history, operations, event receipts) expire with its
        retention. Idempotent: running it again only sets the same expiry."""
        if cp.status not in TERMINAL:
            return
        expiry = int(
            (self.clock.now() + timedelta(days=self.settings.run_retention_days)).timestamp()
        )
        pk = run_pk(tenant_id, cp.run_id)
        for item in list(self.db.query_all("runs", pk, "")):
            if item.get("ttl") is None:
                self.db.update(
                    "runs",
                    pk,
                    item["sk"],
                    "SET #ttl = :ttl",
                    names={"#ttl": "ttl"},
                    values={":ttl": expiry},
                )

    def _check_version(self, current: Checkpoint, expected: int) -> None:
        if current.version != expected:
            raise VersionConflict(
                "the run moved on since you read it; re-read the checkpoint and decide "
                "(do not retry blindly)",
                {"expected_version": expected, "current": current.model_dump(mode="json")},
            )

    def _check_transition(self, source: RunStatus, target: RunStatus) -> None:
        if source in TERMINAL:
            raise IllegalTransition(
                f"the run has ended ({source.value}); a finished run never advances",
                {"from": source.value, "to": target.value, "allowed": []},
            )
        allowed = TRANSITIONS[source]
        if target not in allowed:
            raise IllegalTransition(
                f"a run cannot go from {source.value} to {target.value}",
                {
                    "from": source.value,
                    "to": target.value,
                    "allowed": sorted(s.value for s in allowed),
                },
            )

    def _next(self, current: Checkpoint, changes: dict[str, Any]) -> Checkpoint:
        updated = Checkpoint.model_validate(
            {
                **current.model_dump(),
                **changes,
                "version": current.version + 1,
                "updated_at": self.clock.now(),
                "operations": [],
            }
        )
        size = len(updated.model_dump_json().encode())
        if size > self.settings.checkpoint_max_bytes:
            bound = self.settings.checkpoint_max_bytes
            raise PayloadTooLarge(
                f"the checkpoint would be {size} bytes, over the {bound}-byte bound; keep "
                "large payloads in the artifact store and put their "
                "references in artifact_refs",
                {"size_bytes": size, "max_bytes": self.settings.checkpoint_max_bytes},
            )
        return updated

    def _commit(
        self,
        tenant_id: str,
        cp: Checkpoint,
        *,
        expected: int | None,
        extra: dict[str, Any] | None = None,
        tx: Tx | None = None,
    ) -> None:
        tx = tx or Tx()
        pk = run_pk(tenant_id, cp.run_id)
        body = {**cp.model_dump(mode="json", exclude={"operations"}), "tenant_id": tenant_id}
        retention = None
        if cp.status in TERMINAL:
            retention = int(
                (self.clock.now() + timedelta(days=self.settings.run_retention_days)).timestamp()
            )
        head = {**body, **(extra or {}), "pk": pk, "sk": CHECKPOINT, "ttl": retention}
        table = self.db.names["runs"]
        if expected is None:
            cond: dict[str, Any] = {"ConditionExpression": "attribute_not_exists(pk)"}
        else:
            cond = {
                "ConditionExpression": "version = :v",
                "ExpressionAttributeValues": {":v": {"N": str(expected)}},
            }
            prior = self.db.get("runs", pk, CHECKPOINT) or {}
            if "fingerprint" in prior:
                head["fingerprint"] = prior["fingerprint"]
        tx.add("checkpoint", {"Put": {"TableName": table, "Item": to_item(head), **cond}})
        tx.add(
            "history",
            {
                "Put": {
                    "TableName": table,
                    "Item": to_item(
                        {**body, "pk": pk, "sk": f"V#{cp.version:010d}", "ttl": retention}
                    ),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        )
        self.db.transact(tx)

    # --------------------------------------------------------------- operations

    def record_operation(
        self, ctx: AccessContext, run_id: str, operation_id: str, body: RecordOperation
    ) -> tuple[Operation, bool]:
        """Record a side effect's status; returns it and whether anything changed."""
        ctx.require(Scope.RUNS_WRITE)
        self._load(ctx, run_id)
        if body.status is OperationStatus.COMMITTED and body.result_ref is None:
            raise ValidationFailed(
                "a COMMITTED operation needs its result_ref", {"field": "result_ref"}
            )
        pk = run_pk(ctx.tenant_id, run_id)
        for _ in range(5):
            existing = self.db.get("runs", pk, f"OP#{operation_id}")
            if existing is not None:
                current = _operation(existing)
                if current.status is body.status and (
                    current.result_ref,
                    current.result_sha256,
                ) == (body.result_ref, body.result_sha256):
                    return current, False  # the same record again: a no-op
                if body.status not in OPERATION_TRANSITIONS[current.status] or (
                    current.status is body.status
                ):
                    raise OperationConflict(
                        f"operation {operation_id} is {current.status.value}; it cannot be "
                        f"recorded as {body.status.value}"
                        + (" with another result" if current.status is body.status else ""),
                        {"current": current.model_dump(mode="json")},
                    )
            record = {
                "pk": pk,
                "sk": f"OP#{operation_id}",
                "operation_id": operation_id,
                "status": body.status.value,
                "result_ref": body.result_ref,
                "result_sha256": body.result_sha256,
                "updated_at": iso(self.clock.now()),
            }
            try:
                if existing is None:
                    self.db.put("runs", record, condition="attribute_not_exists(pk)")
                else:
                    self.db.put(
                        "runs",
                        record,
                        condition="#s = :seen",
                        values={":seen": existing["status"]},
                        names={"#s": "status"},
                    )
            except TransactionConflict:
                continue
            logger.info(
                "operation recorded",
                extra={
                    "tenant_id": ctx.tenant_id,
                    "run_id": run_id,
                    "operation_id": operation_id,
                    "status": body.status.value,
                },
            )
            return _operation(record), True
        raise VersionConflict("the operation kept changing; re-read the run and decide")

    # ------------------------------------------------------------------- events

    def deliver_event(self, ctx: AccessContext, run_id: str, event: RunEvent) -> dict[str, Any]:
        """Apply an external event once: its receipt and its effect commit together."""
        ctx.require(Scope.RUNS_WRITE)
        pk = run_pk(ctx.tenant_id, run_id)
        for _ in range(5):
            current = self._load(ctx, run_id)
            receipt = self.db.get("runs", pk, f"EVT#{event.event_id}")
            if receipt is not None:
                if receipt["fingerprint"] != _digest(event.model_dump(mode="json")):
                    raise IdempotencyKeyReused(
                        "this event_id was delivered with other content",
                        {"event_id": event.event_id},
                    )
                return {
                    "event_id": event.event_id,
                    "duplicate": True,
                    "applied": receipt["applied"],
                    "checkpoint": current,
                }
            changes = self._effect(current, event)
            tx = Tx()
            tx.add(
                "receipt",
                {
                    "Put": {
                        "TableName": self.db.names["runs"],
                        "Item": to_item(
                            {
                                "pk": pk,
                                "sk": f"EVT#{event.event_id}",
                                "type": event.type,
                                "fingerprint": _digest(event.model_dump(mode="json")),
                                "applied": changes is not None,
                                "received_at": iso(self.clock.now()),
                                "version": current.version + (1 if changes is not None else 0),
                            }
                        ),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            )
            updated = current
            try:
                if changes is None:
                    self.db.transact(tx)
                else:
                    updated = self._next(current, changes)
                    self._commit(ctx.tenant_id, updated, expected=current.version, tx=tx)
            except TransactionConflict:
                continue  # a duplicate or a concurrent advance: re-read and re-decide
            self._retain_if_finished(ctx.tenant_id, updated)
            return {
                "event_id": event.event_id,
                "duplicate": False,
                "applied": changes is not None,
                "checkpoint": updated,
            }
        raise VersionConflict("the run kept changing while the event was applied; deliver again")

    def _effect(self, cp: Checkpoint, event: RunEvent) -> dict[str, Any] | None:
        """The checkpoint change an event causes, or None when it changes nothing."""
        if cp.status in TERMINAL:
            return None
        if event.type == "cancel.requested":
            return {"status": RunStatus.CANCELLED, "step": "cancelled"}
        if event.approval_id is None or event.approval_id not in cp.pending_approvals:
            return None
        pending = [a for a in cp.pending_approvals if a != event.approval_id]
        if event.type == "approval.rejected":
            return {
                "status": RunStatus.FAILED,
                "step": "approval rejected",
                "pending_approvals": pending,
            }
        status = cp.status
        if cp.status is RunStatus.WAITING_APPROVAL and not pending:
            status = RunStatus.RUNNING
        return {"status": status, "step": cp.step, "pending_approvals": pending}


def _checkpoint(item: dict[str, Any]) -> Checkpoint:
    fields = set(Checkpoint.model_fields) - {"operations"}
    return Checkpoint.model_validate({k: v for k, v in item.items() if k in fields})


def _operation(item: dict[str, Any]) -> Operation:
    return Operation(
        operation_id=item["operation_id"],
        status=OperationStatus(item["status"]),
        result_ref=item.get("result_ref"),
        result_sha256=item.get("result_sha256"),
        updated_at=parse_iso(item["updated_at"]),
    )
