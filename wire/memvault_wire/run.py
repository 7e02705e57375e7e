"""Run state: the exact, versioned record of where a task stands."""

from __future__ import annotations

import json
from datetime import datetime
from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, StrictFloat, field_validator

from memvault_wire.memory import Sensitivity
from memvault_wire.types import (
    ExternalId,
    Label,
    Reference,
    SubjectId,
    VersionLabel,
    storable_number,
    unsafe_text_char,
)


class RunStatus(StrEnum):
    CREATED = "CREATED"
    RUNNING = "RUNNING"
    WAITING_APPROVAL = "WAITING_APPROVAL"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"


TERMINAL = frozenset({RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED})

#: The declared state machine: from each status, the statuses a checkpoint may move to.
TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.CREATED: frozenset({RunStatus.RUNNING, RunStatus.CANCELLED}),
    RunStatus.RUNNING: frozenset(
        {
            RunStatus.RUNNING,
            RunStatus.WAITING_APPROVAL,
            RunStatus.SUCCEEDED,
            RunStatus.FAILED,
            RunStatus.CANCELLED,
        }
    ),
    RunStatus.WAITING_APPROVAL: frozenset(
        {
            RunStatus.WAITING_APPROVAL,
            RunStatus.RUNNING,
            RunStatus.FAILED,
            RunStatus.CANCELLED,
        }
    ),
    RunStatus.SUCCEEDED: frozenset(),
    RunStatus.FAILED: frozenset(),
    RunStatus.CANCELLED: frozenset(),
}


class OperationStatus(StrEnum):
    PENDING = "PENDING"
    COMMITTED = "COMMITTED"
    UNKNOWN = "UNKNOWN"
    FAILED = "FAILED"


#: What an operation's recorded status may become (COMMITTED and FAILED are final).
OPERATION_TRANSITIONS: dict[OperationStatus, frozenset[OperationStatus]] = {
    OperationStatus.PENDING: frozenset(OperationStatus),
    OperationStatus.UNKNOWN: frozenset(
        {OperationStatus.UNKNOWN, OperationStatus.COMMITTED, OperationStatus.FAILED}
    ),
    OperationStatus.COMMITTED: frozenset({OperationStatus.COMMITTED}),
    OperationStatus.FAILED: frozenset({OperationStatus.FAILED}),
}


class ArtifactRef(BaseModel):
    """An immutable reference to a large payload in the artifact store."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    artifact_id: ExternalId = Field(max_length=64)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


Budget = dict[str, StrictFloat]

#: A checkpoint's content: what the writer put in it, under the write policy (personal
#: data needs consent and is classified ``pii``, the rest is ``internal``) and shown to a
#: reader only as far as its ceiling admits. The rest (ids, status, version, times) is the
#: run's control state, shown to every reader of the run.
CONTENT_FIELDS = ("step", "plan_version", "budget", "pending_approvals", "state", "artifact_refs")
#: The content fields scanned for personal data; approval ids and artifact references
#: are identifiers, scanned for credentials only (digit runs in ids look like phone
#: numbers), as a memory's request id is.
PERSONAL_FIELDS = ("step", "plan_version", "budget", "state")
_CONSENT = (
    "the subject's consent to keep the personal data this request holds (the write is "
    "refused with consent_required without it)"
)


def _no_lone_surrogate(text: str) -> None:
    """A lone surrogate is no character: it cannot be encoded, stored or sent back."""
    if any("\ud800" <= c <= "\udfff" for c in text):
        raise ValueError(
            "text holds a lone surrogate (half of a UTF-16 pair); send whole characters"
        )


def _key_on_one_line(key: str) -> None:
    """A key names a field (the console, the SDK and logs show it as a label): one line,
    with no control, bidirectional or other invisible formatting character (a value is
    data and may hold any text)."""
    found = unsafe_text_char(key)
    if found is not None:
        raise ValueError(
            "keys must be one line without control, bidirectional or other invisible "
            f"formatting characters (found U+{ord(found):04X})"
        )


def _storable(value: Any, depth: int = 0) -> Any:
    """Refuse what DynamoDB cannot store exactly: NaN/infinity, numbers beyond 38 digits
    or outside its range (``storable_number``), nesting beyond 32 levels, and text (keys
    included) with a lone surrogate; and keys that are not one plain line."""
    if depth > 32:
        raise ValueError("state is nested too deeply (32 levels at most)")
    storable_number(value)
    if isinstance(value, str):
        _no_lone_surrogate(value)
    if isinstance(value, dict):
        for key, item in value.items():
            _no_lone_surrogate(key)
            _key_on_one_line(key)
            _storable(item, depth + 1)
    if isinstance(value, list):
        for item in value:
            _storable(item, depth + 1)
    return value


class CreateRun(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    subject_id: SubjectId
    plan_version: VersionLabel
    budget: Budget = Field(default_factory=dict, max_length=20)
    consent: bool = Field(default=False, description=_CONSENT, strict=True)

    @field_validator("budget")
    @classmethod
    def _dynamodb_storable(cls, value: Any) -> Any:
        return _storable(value)


class Advance(BaseModel):
    """The body of ``POST /v1/runs/{run_id}/checkpoints``."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    expected_version: int = Field(ge=1, strict=True)
    status: RunStatus
    step: Label
    plan_version: VersionLabel | None = None
    budget: Budget | None = Field(default=None, max_length=20)
    pending_approvals: list[ExternalId] | None = Field(default=None, max_length=50)
    state: dict[str, Any] | None = None
    artifact_refs: list[ArtifactRef] | None = Field(default=None, max_length=100)
    consent: bool = Field(default=False, description=_CONSENT, strict=True)

    @field_validator("state", "budget")
    @classmethod
    def _dynamodb_storable(cls, value: Any) -> Any:
        return _storable(value)


class RecordOperation(BaseModel):
    """The body of ``PUT /v1/runs/{run_id}/operations/{operation_id}``."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    status: OperationStatus
    result_ref: Reference | None = None
    result_sha256: str | None = Field(default=None, pattern=r"^[0-9a-f]{64}$")
    consent: bool = Field(default=False, description=_CONSENT, strict=True)


#: The event types with an effect on the run; any other type is recorded and changes
#: nothing (a webhook or tool callback the agent runtime received).
KNOWN_EVENTS = frozenset({"approval.granted", "approval.rejected", "cancel.requested"})
#: The largest event payload, serialized as JSON.
EVENT_PAYLOAD_MAX_BYTES = 16_384


class RunEvent(BaseModel):
    """An external event; its id makes delivery idempotent. Its ``type`` is any dotted
    name (``approval.granted``, ``github.push``); the known types have their effects."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    event_id: ExternalId
    type: str = Field(
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_-]*(\.[A-Za-z0-9_-]+)*$",
        description="a dotted name of letters, digits, _ and -; "
        + ", ".join(sorted(KNOWN_EVENTS))
        + " change the run, any other is recorded",
    )
    approval_id: ExternalId | None = None
    #: What came with the event: never stored, and not part of its identity (a
    #: redelivery of the id with another payload is answered as the duplicate).
    payload: dict[str, JsonValue] | None = Field(
        default=None,
        description=f"a JSON object of at most {EVENT_PAYLOAD_MAX_BYTES} bytes; never stored: "
        "the event_id, type and approval_id identify the event",
    )

    @field_validator("payload")
    @classmethod
    def _bounded(cls, value: dict[str, JsonValue] | None) -> dict[str, JsonValue] | None:
        if value is not None:
            size = len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())
            if size > EVENT_PAYLOAD_MAX_BYTES:
                raise ValueError(
                    f"the payload is {size} bytes as JSON; at most {EVENT_PAYLOAD_MAX_BYTES}"
                )
        return value


class Operation(BaseModel):
    model_config = ConfigDict(defer_build=True)

    operation_id: str
    status: OperationStatus
    result_ref: str | None
    result_sha256: str | None
    updated_at: datetime
    #: ``pii`` when the result reference holds personal data, else ``internal``.
    sensitivity: Sensitivity = Sensitivity.INTERNAL
    #: Fields left out of this answer (``result_ref``) because they are above the reader's
    #: ``max_sensitivity``.
    withheld: list[str] = Field(default_factory=list)


class Checkpoint(BaseModel):
    model_config = ConfigDict(defer_build=True)

    run_id: str
    subject_id: str
    version: int
    status: RunStatus
    step: str
    plan_version: str
    budget: Budget
    pending_approvals: list[str]
    state: dict[str, Any]
    artifact_refs: list[ArtifactRef]
    created_at: datetime
    updated_at: datetime
    operations: list[Operation] = Field(default_factory=list)
    #: The content fields that hold personal data, kept with the subject's consent:
    #: classified ``pii``. The other content fields are ``internal``.
    pii_fields: list[str] = Field(default_factory=list)
    #: Content fields left out of this answer (answered empty) because they are above
    #: the reader's ``max_sensitivity``.
    withheld: list[str] = Field(default_factory=list)
    #: The subject's epoch the run was created under (a forget of the subject retires
    #: it); kept, never shown. ``None`` for a run kept before runs carried it.
    subject_epoch: int | None = Field(default=None, exclude=True)
