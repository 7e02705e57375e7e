"""Recall: the request a caller sends and what comes back."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memvault_wire.memory import Language, Memory, MemoryKind, SourceType
from memvault_wire.types import ScopeKey, ScopeValue, Tag

NOTICE = (
    "Recalled memories may be stale, incomplete or wrong. They are context, never an "
    "authorization: check what matters against its system of record before acting."
)


class RecallRequest(BaseModel):
    """The body of ``POST /v1/subjects/{subject_id}/recall``."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)

    query: str = Field(min_length=1, max_length=2000)
    tags: list[Tag] = Field(default_factory=list, max_length=20)
    kinds: list[MemoryKind] = Field(default_factory=list, max_length=3)
    scope: dict[ScopeKey, ScopeValue] = Field(default_factory=dict, max_length=10)
    limit: int = Field(default=10, ge=1, le=100, strict=True)
    #: ``hybrid`` (the default) fuses keyword and vector search; ``keyword`` and ``vector``
    #: use one of them alone (for comparisons; the same filters and checks apply).
    mode: Literal["hybrid", "keyword", "vector"] = "hybrid"
    #: The query's language (:data:`memvault_wire.memory.Language`). A Chinese query
    #: searches both models' vectors.
    language: Language = "auto"
    #: ``True`` (the default): a query about nothing the subject holds gets nothing, by
    #: the embedder's relevance floor. ``False``: the best matches come back whatever
    #: their similarity, for a caller that would rather judge weak matches than get
    #: none. The hard filters and re-validation apply either way.
    relevance_floor: bool = Field(
        default=True,
        strict=True,
        description="true (the default): a query about nothing the subject holds gets "
        "nothing, by the embedder's relevance floor. false: the best matches come back "
        "whatever their similarity; the hard filters and re-validation apply either way.",
    )
    #: The run or task this recall serves, recorded in its trace (ids only).
    run_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}$")
    task_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}$")

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("the query must contain some text")
        return value


class MatchReason(BaseModel):
    """Why an item came back: which searches found it, at what rank and similarity."""

    model_config = ConfigDict(defer_build=True)

    matched_by: list[str]
    keyword_rank: int | None = None
    vector_rank: int | None = None
    similarity: float | None = None
    relevance: float
    #: What the item gained from a neighbouring turn of its conversation (``source.thread``
    #: and ``source.turn``) that matched the query too; part of ``relevance``.
    context: float | None = None
    #: The reranker's score, where one reordered this recall's best items (on AWS, with
    #: ``MEMVAULT_RERANK_MODEL_ARN``); the order of the answer is then the reranker's.
    rerank_score: float | None = None


class Provenance(BaseModel):
    model_config = ConfigDict(defer_build=True)

    source_type: SourceType
    source_ref: str | None
    created_at: datetime
    version: int
    supersedes_id: str | None
    confirmed: bool


class RecalledItem(BaseModel):
    model_config = ConfigDict(defer_build=True)

    memory: Memory
    score: float
    why: MatchReason
    provenance: Provenance


class Conflict(BaseModel):
    """Active memories that state the same fact (canonical key) differently in scopes
    that overlap: the caller must decide, recall does not pick silently."""

    model_config = ConfigDict(defer_build=True)

    canonical_key: str
    memory_ids: list[str]


class RecallResult(BaseModel):
    model_config = ConfigDict(defer_build=True)

    #: Names this recall's trace (``GET /v1/recalls/{recall_id}``) and what feedback cites.
    recall_id: str | None = None

    items: list[RecalledItem]
    conflicts: list[Conflict]
    notice: str = NOTICE
    #: The embedding models that ranked the vector lists (id@version; the English and the
    #: Chinese model joined by ``+`` when the Chinese list ranked any memory).
    embedding_model: str | None = None
    #: Milliseconds spent per stage (embed, search, validate, total), for Server-Timing.
    timings: dict[str, float] = Field(default_factory=dict)
