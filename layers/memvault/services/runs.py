"""Run state: a declared state machine advanced by compare-and-set, with history,
side-effect operations and idempotent external events.

The rules live here (legal transitions, scopes, the subject check, the checkpoint bound);
the ``RunStore`` port keeps the conditions that make them exact: the head moves only at
the expected version, each version is kept, an event's receipt commits with its effect.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from memvault.clock import Clock, iso, made_after_forget, parse_iso
from memvault.config import Settings
from memvault.models.access import AccessContext, Scope
from memvault.observability import logger
from memvault.policy.pii import PiiFinding, find_pii, find_structured_pii, refuse_personal_ids
from memvault.policy.secrets import refuse_secrets, structured_fields
from memvault.services import paging
from memvault.services.artifacts import readable_artifacts
from memvault.storage.ports.artifacts import ArtifactStore
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.ports.memory import SubjectForgets
from memvault.storage.ports.runs import (
    Advancement,
    ArtifactsNotCommitted,
    EventReceipt,
    RunStore,
    StoredRun,
    epoch_of,
    run_key,
)
from memvault_wire.errors import (
    ArtifactNotCommitted,
    ConsentRequired,
    Forbidden,
    IdempotencyKeyReused,
    IllegalTransition,
    NotFound,
    OperationConflict,
    PayloadTooLarge,
    ValidationFailed,
    VersionConflict,
)
from memvault_wire.memory import Sensitivity
from memvault_wire.run import (
    CONTENT_FIELDS,
    KNOWN_EVENTS,
    OPERATION_TRANSITIONS,
    TERMINAL,
    TRANSITIONS,
    Advance,
    ArtifactRef,
    Checkpoint,
    CreateRun,
    Operation,
    OperationStatus,
    RecordOperation,
    RunEvent,
    RunStatus,
)

_NOT_FOUND = "no run with this id"
#: The answer for a run id the subject held before and may not take again (its run
#: expired, or was forgotten and awaits its purge). Another subject's run ids are no
#: concern: run ids are scoped by subject.
_ID_TAKEN = "this run id is taken; choose a new run id"
_ARTIFACTS_REFUSED = (
    "artifact_refs must name committed artifacts of the run's subject, with the given sha256, "
    "that this token may read"
)


#: The most event receipts one page lists.
_EVENTS_MAX_PAGE = 100
#: An event id's bound (``RunEvent.event_id``).
_EVENT_ID_MAX = 128


@dataclass(frozen=True)
class EventPage:
    """One page of a run's event receipts; ``next_token`` asks for the next page."""

    items: list[EventReceipt]
    next_token: str | None


def _encode_event_token(event_id: str | None) -> str | None:
    return paging.encode_after(event_id, version=1)


def _decode_event_token(token: str | None) -> str | None:
    """The token names only the event id a page stopped after; the run and its owner
    always come from the path and the caller."""
    return paging.decode_after(token, lambda after: 1 <= len(after) <= _EVENT_ID_MAX)


def _digest(payload: Any) -> str:
    return hashlib.sha256(
        json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()
    ).hexdigest()


class RunService:
    def __init__(
        self,
        store: RunStore,
        settings: Settings,
        clock: Clock,
        forgets: SubjectForgets,
        *,
        artifacts: ArtifactStore | None = None,
    ) -> None:
        self.store = store
        self.settings = settings
        self.clock = clock
        self.forgets = forgets
        self.artifacts = artifacts

    # ------------------------------------------------------------------- create

    # -------------------------------------------------------------- run keys

    def _key(
        self, tenant_id: str, subject_id: str, run_id: str, now: datetime
    ) -> tuple[str, StoredRun | None]:
        """The run's storage key and its current head, read once: under its subject
        (``run_key``), or its bare id for a run kept before ids were scoped by subject,
        when that run is this subject's. A run created under a subject epoch a forget
        retired since is that forget's: absent (None) from the forget on, before its
        purge. A run kept before runs carried their epoch is a forget's when it was created
        by its time, and otherwise takes the current epoch: every write to it from now on
        is conditioned on it and keeps it."""
        # Read first: a write decided on this head commits only while the epoch lasts.
        forgets = self.forgets.forget_state(tenant_id, subject_id)
        key = run_key(subject_id, run_id)
        head = self.store.head(tenant_id, key, now=now)
        if head is None:
            legacy = self.store.head(tenant_id, run_id, now=now)
            if legacy is not None and legacy.checkpoint.subject_id == subject_id:
                key, head = run_id, legacy
        if head is None:
            return key, None
        cp = head.checkpoint
        if forgets.covers(cp.subject_epoch, cp.created_at):
            return key, None
        if cp.subject_epoch is None:
            adopted = cp.model_copy(update={"subject_epoch": forgets.epoch})
            head = replace(head, checkpoint=adopted)
        return key, head

    @staticmethod
    def _subject(ctx: AccessContext, subject_id: str | None) -> str:
        """Whose run the caller means (:meth:`AccessContext.named_subject`)."""
        return ctx.named_subject(
            subject_id,
            "run ids are unique per subject: a token without a subject names the run's "
            "subject with the query parameter subject_id",
        )

    def create(self, ctx: AccessContext, run_id: str, body: CreateRun) -> tuple[Checkpoint, bool]:
        ctx.require(Scope.RUNS_WRITE)
        ctx.require_subject(body.subject_id)
        refuse_secrets(
            [
                ("run_id", run_id),
                ("subject_id", body.subject_id),
                ("plan_version", body.plan_version),
                *structured_fields(body.budget, "budget"),
            ],
            "the run",
        )
        refuse_personal_ids([("run_id", run_id), ("subject_id", body.subject_id)], "the run")
        personal = _personal_fields(
            _personal_data([("plan_version", body.plan_version)], {"budget": body.budget}),
            body.consent,
            "the run",
        )
        # Created under the subject's epoch (the write commits only while it lasts) and
        # after any forget of the subject its caller could have seen.
        forgets = self.forgets.forget_state(ctx.tenant_id, body.subject_id)
        now = made_after_forget(self.clock.now(), forgets.forgotten_at)
        # Consent is no part of the run: the same payload with or without it is one run.
        fingerprint = _digest(body.model_dump(mode="json", exclude={"consent"}))
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
            pii_fields=sorted(personal),
            subject_epoch=forgets.epoch,
        )
        key, _ = self._key(ctx.tenant_id, body.subject_id, run_id, now)
        try:
            self.store.create(ctx.tenant_id, _keyed(checkpoint, key), fingerprint)
        except ConditionFailed as refused:
            if Conflict.EPOCH in refused:
                raise _forgotten_meanwhile("run") from None
            _, existing = self._key(ctx.tenant_id, body.subject_id, run_id, now)
            if existing is None:  # the subject's own run with this id, expired or forgotten
                raise IdempotencyKeyReused(_ID_TAKEN, {"run_id": run_id}) from None
            # A run whose content is above the caller's ceiling is never compared with a
            # guess of it: match or not, the answer is the refusal.
            hidden = bool(_unreadable(ctx, existing.checkpoint))
            if hidden or existing.fingerprint != fingerprint:
                raise IdempotencyKeyReused(
                    "a run with this id exists with another payload; choose a new run id",
                    {"run_id": run_id},
                ) from None
            return self.get(ctx, run_id, body.subject_id), False
        logger.info("run created", extra={"tenant_id": ctx.tenant_id, "run_id": run_id})
        return _shown(ctx, checkpoint), True

    # --------------------------------------------------------------------- read

    def get(self, ctx: AccessContext, run_id: str, subject_id: str | None = None) -> Checkpoint:
        ctx.require(Scope.RUNS_WRITE)
        key, stored = self._load(ctx, run_id, subject_id)
        ops = self.store.operations(ctx.tenant_id, key, now=self.clock.now())
        return _shown(ctx, stored.checkpoint.model_copy(update={"operations": ops}))

    def version(
        self, ctx: AccessContext, run_id: str, version: int, subject_id: str | None = None
    ) -> Checkpoint:
        """One past version, exactly as it was (reproducing an assembled context)."""
        ctx.require(Scope.RUNS_WRITE)
        key, _ = self._load(ctx, run_id, subject_id)
        found = self.store.version(ctx.tenant_id, key, version, now=self.clock.now())
        if found is None:
            raise NotFound("no such version of this run", {"run_id": run_id, "version": version})
        return _shown(ctx, _keyed(found, run_id))

    def events(
        self,
        ctx: AccessContext,
        run_id: str,
        subject_id: str | None = None,
        *,
        limit: int = 50,
        next_token: str | None = None,
    ) -> EventPage:
        """The run's event receipts, by event id, a page at a time: what each event was
        (id, type, when it arrived) and its effect (whether it applied, the run's version
        once handled). Payloads are never stored, so never listed."""
        ctx.require(Scope.RUNS_WRITE)
        if not 1 <= limit <= _EVENTS_MAX_PAGE:
            raise ValidationFailed(
                f"limit must be between 1 and {_EVENTS_MAX_PAGE}", {"field": "limit"}
            )
        after = _decode_event_token(next_token)
        key, _ = self._load(ctx, run_id, subject_id)
        receipts, last = self.store.receipts(
            ctx.tenant_id, key, now=self.clock.now(), cursor=after, limit=limit
        )
        return EventPage(items=receipts, next_token=_encode_event_token(last))

    def _load(
        self, ctx: AccessContext, run_id: str, subject_id: str | None
    ) -> tuple[str, StoredRun]:
        """The run's storage key and current checkpoint (with its public id)."""
        subject = self._subject(ctx, subject_id)
        now = self.clock.now()
        key, stored = self._key(ctx.tenant_id, subject, run_id, now)
        # Another subject's run is answered as absent, so that its existence stays private.
        if stored is None or not _visible(ctx, stored.checkpoint):
            raise NotFound(_NOT_FOUND, {"run_id": run_id})
        return key, replace(stored, checkpoint=_keyed(stored.checkpoint, run_id))

    # ------------------------------------------------------------------ advance

    def advance(
        self, ctx: AccessContext, run_id: str, body: Advance, subject_id: str | None = None
    ) -> Checkpoint:
        ctx.require(Scope.RUNS_WRITE)
        key, stored = self._load(ctx, run_id, subject_id)
        current = stored.checkpoint
        personal = _checked_checkpoint_content(body)
        self._check_version(ctx, current, body.expected_version)
        self._check_transition(current.status, body.status)
        changes = _advance_changes(body)
        _check_replaceable(ctx, current, changes)
        updated = self._next(current, changes, personal)
        ttl = self._expiry(updated)
        new_references = _new_references(current, updated)
        named = [ref.artifact_id for ref in new_references]
        if named and not readable_artifacts(self.artifacts, ctx, current.subject_id, named):
            # Above the caller's ceiling is answered as absent: neither its existence nor
            # its digest is confirmed, and the caller cannot pin it against its owner's delete.
            raise ArtifactNotCommitted(_ARTIFACTS_REFUSED, {"artifact_ids": named})
        try:
            self.store.advance(
                ctx.tenant_id,
                Advancement(
                    checkpoint=_keyed(updated, key),
                    expected_version=current.version,
                    new_references=new_references,
                    ttl=ttl,
                    # An artifact made by the subject's last forget is that forget's.
                    artifacts_after=self.forgets.forgotten_at(ctx.tenant_id, current.subject_id)
                    if new_references
                    else None,
                ),
            )
        except ArtifactsNotCommitted as refused:
            raise ArtifactNotCommitted(
                _ARTIFACTS_REFUSED, {"artifact_ids": list(refused.artifact_ids)}
            ) from None
        except ConditionFailed:
            self._check_version(
                ctx, self._load(ctx, run_id, subject_id)[1].checkpoint, body.expected_version
            )
            raise VersionConflict("the run changed while advancing; re-read it") from None
        self._retain(ctx.tenant_id, key, ttl)
        logger.info(
            "run advanced",
            extra={
                "tenant_id": ctx.tenant_id,
                "run_id": run_id,
                "version": updated.version,
                "status": updated.status.value,
            },
        )
        return _shown(ctx, updated)

    def _expiry(self, cp: Checkpoint, kept: int | None = None) -> int | None:
        """A finished run's retention (the one it has, else one from now); None while it
        is active."""
        if cp.status not in TERMINAL:
            return None
        if kept is not None:
            return kept
        return int(
            (self.clock.now() + timedelta(days=self.settings.run_retention_days)).timestamp()
        )

    def _retain(self, tenant_id: str, run_id: str, ttl: int | None) -> None:
        """A finished run's records (history, operations, event receipts) expire with its
        retention. Idempotent: running it again only sets the same expiry."""
        if ttl is not None:
            self.store.retain(tenant_id, run_id, ttl)

    def _check_version(self, ctx: AccessContext, current: Checkpoint, expected: int) -> None:
        if current.version != expected:
            raise VersionConflict(
                "the run moved on since you read it; re-read the checkpoint and decide "
                "(do not retry blindly)",
                {
                    "expected_version": expected,
                    "current": _shown(ctx, current).model_dump(mode="json"),
                },
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

    def _next(
        self, current: Checkpoint, changes: dict[str, Any], personal: frozenset[str] = frozenset()
    ) -> Checkpoint:
        """The next version: ``changes`` applied; a field given another value loses its
        class, and ``personal`` names the new values that hold personal data (consented)."""
        kept = {
            f
            for f in current.pii_fields
            if changes.get(f, getattr(current, f)) == getattr(current, f)
        }
        updated = Checkpoint.model_validate(
            {
                **current.model_dump(),
                **changes,
                "version": current.version + 1,
                "updated_at": self.clock.now(),
                "operations": [],
                "pii_fields": sorted(kept | personal),
                "withheld": [],
                "subject_epoch": current.subject_epoch,
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

    # --------------------------------------------------------------- operations

    def record_operation(
        self,
        ctx: AccessContext,
        run_id: str,
        operation_id: str,
        body: RecordOperation,
        subject_id: str | None = None,
    ) -> tuple[Operation, bool]:
        """Record a side effect's status; returns it and whether anything changed."""
        ctx.require(Scope.RUNS_WRITE)
        key, stored = self._load(ctx, run_id, subject_id)
        sensitivity = _operation_class(operation_id, body)
        if body.status is OperationStatus.COMMITTED and body.result_ref is None:
            raise ValidationFailed(
                "a COMMITTED operation needs its result_ref", {"field": "result_ref"}
            )
        # An operation recorded after the run finished expires with the run.
        ttl = self._expiry(stored.checkpoint, stored.ttl)
        for _ in range(5):
            now = self.clock.now()
            current = self.store.operation(ctx.tenant_id, key, operation_id, now=now)
            if current is not None and _recorded_already(ctx, operation_id, current, body):
                return _shown_operation(ctx, current), False  # the same record: a no-op
            operation = Operation(
                operation_id=operation_id,
                status=body.status,
                result_ref=body.result_ref,
                result_sha256=body.result_sha256,
                updated_at=parse_iso(iso(now)),  # as stored: milliseconds
                sensitivity=sensitivity,
            )
            try:
                self.store.put_operation(
                    ctx.tenant_id,
                    key,
                    operation,
                    expected=None if current is None else current.status,
                    ttl=ttl,
                    epoch=epoch_of(stored.checkpoint),
                )
            except ConditionFailed as refused:
                if {Conflict.ABSENT, Conflict.EPOCH} & refused.causes:  # forgotten meanwhile
                    raise NotFound(_NOT_FOUND, {"run_id": run_id}) from None
                continue  # recorded concurrently: re-read and re-decide
            logger.info(
                "operation recorded",
                extra={
                    "tenant_id": ctx.tenant_id,
                    "run_id": run_id,
                    "operation_id": operation_id,
                    "status": body.status.value,
                },
            )
            return _shown_operation(ctx, operation), True
        raise VersionConflict("the operation kept changing; re-read the run and decide")

    # ------------------------------------------------------------------- events

    def deliver_event(
        self, ctx: AccessContext, run_id: str, event: RunEvent, subject_id: str | None = None
    ) -> dict[str, Any]:
        """Apply an external event once: its receipt and its effect commit together."""
        ctx.require(Scope.RUNS_WRITE)
        _check_event_fields(event)
        # An event is its id, type and approval: the payload is never stored, so a
        # redelivery with another payload is the same event, answered as the duplicate.
        # (Had it been refused, a caller could confirm a guess of a payload it never saw:
        # the right guess answered 200, a wrong one 409.) The digest of those three fields
        # is what receipts held before events carried a payload; receipts recorded while
        # the payload was part of the digest still recognise their exact replay.
        fingerprint = _digest(event.model_dump(mode="json", exclude={"payload"}))
        accepted = {fingerprint, _digest(event.model_dump(mode="json"))}
        for _ in range(5):
            key, stored = self._load(ctx, run_id, subject_id)
            current = stored.checkpoint
            now = self.clock.now()
            receipt = self.store.receipt(ctx.tenant_id, key, event.event_id, now=now)
            if receipt is not None:
                if receipt.fingerprint not in accepted:
                    raise IdempotencyKeyReused(
                        "this event_id was delivered with another type or approval_id",
                        {"event_id": event.event_id},
                    )
                return {
                    "event_id": event.event_id,
                    "duplicate": True,
                    "applied": receipt.applied,
                    "checkpoint": _shown(ctx, current),
                }
            changes = self._effect(current, event)
            updated = current if changes is None else self._next(current, changes)
            ttl = self._expiry(current, stored.ttl) if changes is None else self._expiry(updated)
            new_receipt = EventReceipt(
                event_id=event.event_id,
                type=event.type,
                fingerprint=fingerprint,
                applied=changes is not None,
                received_at=now,
                version=updated.version,
                ttl=ttl,
            )
            try:
                self._commit_event(ctx.tenant_id, key, current, updated, new_receipt, ttl)
            except ConditionFailed:
                continue  # a duplicate or a concurrent advance: re-read and re-decide
            self._retain(ctx.tenant_id, key, ttl)
            return {
                "event_id": event.event_id,
                "duplicate": False,
                "applied": changes is not None,
                "checkpoint": _shown(ctx, updated),
            }
        raise VersionConflict("the run kept changing while the event was applied; deliver again")

    def _commit_event(
        self,
        tenant_id: str,
        key: str,
        current: Checkpoint,
        updated: Checkpoint,
        receipt: EventReceipt,
        ttl: int | None,
    ) -> None:
        """Commit an event's receipt with its effect: an event that changes nothing is
        recorded at the run's current version; one that applies advances the run to
        ``updated`` in the same write. Raises ``ConditionFailed`` for a duplicate or a
        concurrent advance."""
        if not receipt.applied:
            self.store.record_event(
                tenant_id,
                key,
                receipt,
                at_version=current.version,
                epoch=epoch_of(current),
            )
        else:
            self.store.advance(
                tenant_id,
                Advancement(
                    checkpoint=_keyed(updated, key),
                    expected_version=current.version,
                    receipt=receipt,
                    ttl=ttl,
                ),
            )

    def _effect(self, cp: Checkpoint, event: RunEvent) -> dict[str, Any] | None:
        """The checkpoint change an event causes, or None when it changes nothing."""
        if cp.status in TERMINAL or event.type not in KNOWN_EVENTS:
            return None  # recorded, changing nothing
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


def _forgotten_meanwhile(what: str) -> VersionConflict:
    """A new record's write that a forget of its subject overtook: what was sent before the
    forget must not outlive it (as for a memory). Nothing was stored."""
    return VersionConflict(
        f"the subject was forgotten while this {what} was being created; nothing was stored",
        {"reason": "subject_forgotten"},
    )


def _checked_checkpoint_content(body: Advance) -> frozenset[str]:
    """Refuse an advance whose content holds a secret or a personal id; the top-level
    fields whose new values hold personal data (refused without consent)."""
    refuse_secrets(
        [
            ("step", body.step),
            ("plan_version", body.plan_version),
            *structured_fields(body.pending_approvals or [], "pending_approvals"),
            *structured_fields(body.state or {}, "state"),
            *structured_fields(body.budget or {}, "budget"),
        ],
        "the checkpoint",
    )
    refuse_personal_ids(
        [(f"pending_approvals[{i}]", a) for i, a in enumerate(body.pending_approvals or [])],
        "the checkpoint",
    )
    return _personal_fields(
        _personal_data(
            [("step", body.step), ("plan_version", body.plan_version)],
            {"state": body.state or {}, "budget": body.budget or {}},
        ),
        body.consent,
        "the checkpoint",
    )


def _advance_changes(body: Advance) -> dict[str, Any]:
    """The checkpoint fields an advance sets: status and step always, each other field
    only when given (one left out keeps its value)."""
    changes: dict[str, Any] = {"status": body.status, "step": body.step}
    for field in ("plan_version", "budget", "pending_approvals", "state", "artifact_refs"):
        value = getattr(body, field)
        if value is not None:
            changes[field] = value
    return changes


def _operation_class(operation_id: str, body: RecordOperation) -> Sensitivity:
    """Refuse an operation whose id or result holds a secret or a personal id; its class:
    ``pii`` when its result holds personal data (refused without consent), else
    ``internal``."""
    refuse_secrets(
        [("operation_id", operation_id), ("result_ref", body.result_ref)], "the operation"
    )
    refuse_personal_ids([("operation_id", operation_id)], "the operation")
    personal = _personal_fields(
        _personal_data([("result_ref", body.result_ref)]), body.consent, "the operation"
    )
    return Sensitivity.PII if personal else Sensitivity.INTERNAL


def _recorded_already(
    ctx: AccessContext, operation_id: str, current: Operation, body: RecordOperation
) -> bool:
    """Whether ``current`` is already the record ``body`` asks for (a no-op); raises
    OperationConflict when ``body`` may not follow it."""
    # A result above the caller's ceiling is never compared with a guess of it:
    # the same status answers the same refusal, whether the result matches.
    hidden = not ctx.may_read(current.sensitivity, [])
    if (
        not hidden
        and current.status is body.status
        and (current.result_ref, current.result_sha256) == (body.result_ref, body.result_sha256)
    ):
        return True
    if body.status not in OPERATION_TRANSITIONS[current.status] or (current.status is body.status):
        again = current.status is body.status
        raise OperationConflict(
            f"operation {operation_id} is {current.status.value}; it cannot be "
            f"recorded as {body.status.value}"
            + (
                " again by this token (its result is above the token's max_sensitivity)"
                if again and hidden
                else " with another result"
                if again
                else ""
            ),
            {"current": _shown_operation(ctx, current).model_dump(mode="json")},
        )
    return False


def _check_event_fields(event: RunEvent) -> None:
    """Refuse an event whose kept fields (id, type, approval) hold a secret or a personal
    id. The payload is never stored (only its hash, in the fingerprint): its text is
    not scanned; what is kept (id, type) is."""
    refuse_secrets(
        [
            ("event_id", event.event_id),
            ("type", event.type),
            ("approval_id", event.approval_id),
        ],
        "the event",
    )
    refuse_personal_ids(
        [
            ("event_id", event.event_id),
            ("approval_id", event.approval_id),
            ("type", event.type),
        ],
        "the event",
    )


def _keyed(cp: Checkpoint, run_id: str) -> Checkpoint:
    """The checkpoint under another run id: its storage key going in, its public id out."""
    return cp if cp.run_id == run_id else cp.model_copy(update={"run_id": run_id})


def _personal_data(
    texts: list[tuple[str, str | None]], values: dict[str, Any] | None = None
) -> list[PiiFinding]:
    """The personal data in a write's texts (``step``...) and in its structured values
    (``state``, ``budget``), each value read with the keys it is stored under
    (:func:`find_structured_pii`): ``{"customer": {"ssn": 123456789}}`` is an SSN."""
    found = find_pii((name, text) for name, text in texts if text)
    for name, value in (values or {}).items():
        found += find_structured_pii(value, name)
    return found


def _personal_fields(found: list[PiiFinding], consent: bool, what: str) -> frozenset[str]:
    """The top-level fields (``state``, ``budget``, ``step``...) whose content holds
    personal data (``found``), kept only with the subject's consent: the write policy of
    long-term memory and sessions, applied to run state."""
    if found and not consent:
        raise ConsentRequired(
            f"{what} contains personal data; it can be kept only with the subject's "
            "consent (set consent: true once it is given)",
            {
                "reason": "pii",
                "pii_types": sorted({p.pii_type for p in found}),
                "fields": sorted({p.field for p in found}),
            },
        )
    return frozenset(re.split(r"[.\[ ]", p.field, maxsplit=1)[0] for p in found)


def _field_class(cp: Checkpoint, field: str) -> Sensitivity:
    return Sensitivity.PII if field in cp.pii_fields else Sensitivity.INTERNAL


def _unreadable(ctx: AccessContext, cp: Checkpoint) -> list[str]:
    """The content fields above the caller's ceiling, in their declared order."""
    return [f for f in CONTENT_FIELDS if not ctx.may_read(_field_class(cp, f), [])]


#: What a withheld field is answered as: its empty value.
_EMPTY: dict[str, Any] = {
    "step": "",
    "plan_version": "",
    "budget": {},
    "pending_approvals": [],
    "state": {},
    "artifact_refs": [],
}


def _shown(ctx: AccessContext, cp: Checkpoint) -> Checkpoint:
    """The checkpoint as the caller may see it: each content field above its ceiling
    answered empty and named in ``withheld``, each operation likewise. The run's control
    state (status, version, times) is shown to every reader of the run."""
    hidden = _unreadable(ctx, cp)
    ops = [_shown_operation(ctx, o) for o in cp.operations]
    return cp.model_copy(
        update={**{f: _EMPTY[f] for f in hidden}, "withheld": hidden, "operations": ops}
    )


def _shown_operation(ctx: AccessContext, op: Operation) -> Operation:
    if ctx.may_read(op.sensitivity, []) or op.result_ref is None:
        return op
    return op.model_copy(update={"result_ref": None, "withheld": ["result_ref"]})


def _check_replaceable(ctx: AccessContext, current: Checkpoint, changes: dict[str, Any]) -> None:
    """A caller replaces only content it may read: a client that writes back what it
    read would otherwise overwrite a withheld field with the empty value it was shown.
    A field it leaves out is kept as it is."""
    replaced = [f for f in _unreadable(ctx, current) if f in changes]
    if replaced:
        raise Forbidden(
            "the run holds content above this token's max_sensitivity in the fields this "
            "advance replaces; only a token that may read them may replace them (leave "
            "them out to keep them)",
            {"withheld": replaced},
        )


def _visible(ctx: AccessContext, cp: Checkpoint) -> bool:
    try:
        ctx.require_subject(cp.subject_id)
    except Forbidden:
        return False
    return True


def _new_references(current: Checkpoint, updated: Checkpoint) -> tuple[ArtifactRef, ...]:
    """The artifacts a new version names that no earlier one did: each is counted once,
    with the checkpoint that first references it. Naming an artifact with another digest
    than before, or with two, is refused (an artifact has one digest)."""
    counted = {r.artifact_id: r for r in current.artifact_refs}
    new: dict[str, ArtifactRef] = {}
    for ref in updated.artifact_refs:
        seen = counted.get(ref.artifact_id) or new.setdefault(ref.artifact_id, ref)
        if seen.sha256 != ref.sha256:
            raise ArtifactNotCommitted(_ARTIFACTS_REFUSED, {"artifact_ids": [ref.artifact_id]})
    return tuple(new.values())
