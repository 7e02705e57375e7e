"""Failure types every storage adapter raises: the services decide on these, never on an
adapter's own error strings."""

from __future__ import annotations

from enum import StrEnum


class Conflict(StrEnum):
    """Why a conditional operation was refused: which of its conditions did not hold."""

    #: The request id was taken by another write first.
    IDEMPOTENCY = "idempotency"
    #: The version chain (or run, session) no longer holds the expected version.
    VERSION = "version"
    #: The canonical pointer names another chain than expected (or one when none was).
    POINTER = "pointer"
    #: The version to supersede is no longer active or candidate at that version.
    PREVIOUS = "previous"
    #: The subject's epoch moved on (the subject was forgotten meanwhile).
    EPOCH = "epoch"
    #: A referenced artifact is not committed (or has another digest).
    ARTIFACT = "artifact"
    #: The record to create exists already.
    EXISTS = "exists"
    #: The record to change is absent.
    ABSENT = "absent"
    #: The record is not in the state the operation requires.
    STATE = "state"
    #: The record is still referenced by others (an artifact a memory or checkpoint names).
    REFERENCED = "referenced"


class ConditionFailed(Exception):
    """A port operation's condition did not hold; nothing of the operation was written."""

    def __init__(self, *causes: Conflict) -> None:
        super().__init__(f"condition failed: {', '.join(sorted(causes)) or 'unknown'}")
        self.causes = frozenset(causes)

    def __contains__(self, cause: object) -> bool:
        return cause in self.causes
