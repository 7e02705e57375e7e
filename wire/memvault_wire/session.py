"""Session memory: recent messages and summaries of one session, with two clocks."""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memvault_wire.memory import Sensitivity
from memvault_wire.types import RequestId

MAX_MESSAGE_CHARS = 16_000


class Role(StrEnum):
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"
    SYSTEM = "system"


class AppendMessage(BaseModel):
    """The body of ``POST .../sessions/{session_id}/messages``."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    request_id: RequestId
    role: Role
    content: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    #: The subject's consent to keep personal data in this message (as for long-term
    #: memory: a message with personal data is refused without it, classified ``pii``
    #: with it).
    consent: bool = Field(default=False, strict=True)

    @field_validator("content")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("must contain more than whitespace")
        return value


class PutSummary(BaseModel):
    """A summary of messages ``from_seq``..``through_seq``; it dies with the session."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    content: str = Field(min_length=1, max_length=MAX_MESSAGE_CHARS)
    from_seq: int = Field(ge=1, strict=True)
    through_seq: int = Field(ge=1, strict=True)
    ttl_seconds: int | None = Field(default=None, ge=60, le=30 * 86_400, strict=True)
    consent: bool = Field(default=False, strict=True)


class Message(BaseModel):
    model_config = ConfigDict(defer_build=True)

    seq: int
    role: Role
    content: str
    request_id: str
    created_at: datetime
    sensitivity: Sensitivity = Sensitivity.INTERNAL


class Summary(BaseModel):
    model_config = ConfigDict(defer_build=True)

    content: str
    from_seq: int
    through_seq: int
    created_at: datetime
    expires_at: datetime
    sensitivity: Sensitivity = Sensitivity.INTERNAL


class Session(BaseModel):
    model_config = ConfigDict(defer_build=True)

    session_id: str
    subject_id: str
    created_at: datetime
    last_activity_at: datetime
    idle_expires_at: datetime
    expires_at: datetime
    message_count: int
    messages: list[Message]
    summary: Summary | None
    #: Recent messages above the caller's sensitivity ceiling, left out of ``messages``.
    withheld_messages: int = 0
    #: True when a summary exists but is above the caller's ceiling.
    summary_withheld: bool = False
