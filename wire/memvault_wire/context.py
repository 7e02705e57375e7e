"""Working memory: the assembled context for one decision, and its manifest."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

Section = Literal["policy", "goal", "run_state", "evidence", "session", "memories"]
SECTION_ORDER: tuple[Section, ...] = (
    "policy",
    "goal",
    "run_state",
    "evidence",
    "session",
    "memories",
)


class Evidence(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    source: str = Field(min_length=1, max_length=512)
    content: str = Field(min_length=1, max_length=16_000)
    timestamp: datetime | None = None


class ContextRequest(BaseModel):
    """The body of ``POST /v1/subjects/{subject_id}/context``."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False, defer_build=True)

    goal: str = Field(min_length=1, max_length=4000)
    token_budget: int = Field(ge=64, le=1_000_000, strict=True)
    #: Tokens kept free for the model's answer; default: a fifth of the budget.
    output_reserve: int | None = Field(default=None, ge=0, strict=True)
    session_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.@+-]{0,127}$")
    run_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}$")
    query: str | None = Field(default=None, min_length=1, max_length=2000)
    evidence: list[Evidence] = Field(default_factory=list, max_length=50)
    memory_limit: int = Field(default=20, ge=0, le=100, strict=True)


class ContextItem(BaseModel):
    model_config = ConfigDict(defer_build=True)

    id: str
    section: Section
    source: str
    timestamp: datetime | None
    version: int | None
    tokens: int
    trimmable: bool
    #: True only for the policy and the caller's own goal. Anything else is stored text
    #: from callers: shown as data (one line, markers defanged), never as instructions.
    trusted: bool = False
    content: str


class DroppedItem(BaseModel):
    model_config = ConfigDict(defer_build=True)

    id: str
    section: Section
    reason: Literal["duplicate", "expired", "budget"]
    tokens: int


#: The item ids an assembly gives, by section (``ContextAssembler``): what ``reproduce``
#: parses an id into (a run, a session and a message number, an evidence index) is
#: checked here, so an edited manifest is a 422 naming the field, never a 500.
MANIFEST_ITEM_IDS: dict[str, str] = {
    "policy": r"policy",
    "goal": r"goal",
    "run_state": r"run:[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}",
    "evidence": r"evidence:[0-9]{1,2}",
    "session": r"session:[A-Za-z0-9][A-Za-z0-9_.@+-]{0,127}:(summary|msg:[0-9]{1,15})",
    "memories": r"mem_[0-9a-f]{32}",
}
#: The largest version (or message number) a manifest item names: 2^53 - 1, which every
#: JSON reader holds exactly and both stores look up (SQLite's integers end at 2^63 - 1).
MAX_ITEM_VERSION = 2**53 - 1


class ManifestItem(BaseModel):
    """One item of an assembly, as its manifest names it."""

    model_config = ConfigDict(frozen=True, defer_build=True)

    section: Section
    id: str = Field(
        min_length=1,
        max_length=256,
        description="the item's id, of the form its section gives: policy, goal, "
        "run:<run id>, evidence:<n>, session:<id>:summary, session:<id>:msg:<seq>, mem_<hex>",
    )
    version: int | None = Field(default=None, ge=0, le=MAX_ITEM_VERSION, strict=True)
    tokens: int = Field(ge=0, le=10_000_000, strict=True)
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")

    @field_validator("id")
    @classmethod
    def _of_its_section(cls, value: str, info: ValidationInfo) -> str:
        section = info.data.get("section")
        pattern = MANIFEST_ITEM_IDS.get(str(section))
        if pattern is not None and not re.fullmatch(pattern, value):
            raise ValueError(
                f"not an id of the {section} section; send the manifest as the assembly returned it"
            )
        return value


class Manifest(BaseModel):
    """Enough to rebuild the same assembly: inputs, item ids and versions, budget, order."""

    model_config = ConfigDict(defer_build=True)

    tokenizer: str
    policy_version: str
    token_budget: int
    output_reserve: int
    used_tokens: int
    order: list[str]
    items: list[ManifestItem]
    dropped: list[DroppedItem]
    inputs: dict[str, Any]
    assembled_at: datetime
    digest: str
    #: The recalls (``GET /v1/recalls/{id}``) that chose the memories; not in the digest.
    recall_ids: list[str] = Field(default_factory=list)


class AssembledContext(BaseModel):
    model_config = ConfigDict(defer_build=True)

    sections: dict[str, list[ContextItem]]
    manifest: Manifest
    #: The sections as one prompt-ready text (``### section`` headers, one labelled line
    #: per stored item); stored text cannot forge a header, section or turn in it.
    rendered: str = ""
