"""The search port: what recall and the indexer need from an index, whichever it is.

Two adapters implement it: OpenSearch (AWS, and a real node in tests and benchmarks)
and the embedded index (local mode without Java). One contract suite runs on both.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from memvault.search.documents import IndexOp

#: How the outcome of one index write is reported.
APPLIED = "applied"
#: The index already holds this or a newer state of the chain (external version check).
STALE = "stale"
FAILED = "failed"


@dataclass(frozen=True)
class OpResult:
    op: IndexOp
    outcome: str
    reason: str | None = None


@dataclass(frozen=True)
class SearchFilter:
    """Hard filters, applied inside the index query (never after ranking)."""

    tenant_id: str
    subject_id: str
    #: ISO-8601 instant: only memories expiring after it.
    now: str
    max_sensitivity_rank: int
    agent_role: str | None
    kinds: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    scope: dict[str, str] = field(default_factory=dict)
    statuses: tuple[str, ...] = ("active",)

    def scope_pairs(self) -> list[str]:
        return [f"{k}={v}" for k, v in sorted(self.scope.items())]

    def admits(self, doc: dict[str, Any]) -> bool:
        """The same filter in Python (embedded index and checks); mirrors the query DSL."""
        if doc.get("doc_type") != "memory":
            return False
        if doc["tenant_id"] != self.tenant_id or doc["subject_id"] != self.subject_id:
            return False
        if doc["status"] not in self.statuses or doc["expires_at"] <= self.now:
            return False
        if doc["sensitivity_rank"] > self.max_sensitivity_rank:
            return False
        if (
            not doc["visible_to_all"]
            and self.agent_role is not None
            and self.agent_role not in doc["visibility"]
        ):
            return False
        if self.kinds and doc["kind"] not in self.kinds:
            return False
        if any(t not in doc["tags"] for t in self.tags):
            return False
        return all(p in doc["scope"] for p in self.scope_pairs())


@dataclass(frozen=True)
class Hit:
    chain_id: str
    memory_id: str
    memory_version: int
    score: float


@dataclass(frozen=True)
class SearchResult:
    """The ranked lists of one round trip: BM25 over the text, k-NN over the vector, and
    k-NN over the Chinese model's vectors when the query was routed to it too."""

    keyword: list[Hit]
    vector: list[Hit]
    took_ms: float = 0.0
    vector_zh: list[Hit] = field(default_factory=list)


class SearchIndex(Protocol):
    #: The physical index (or folder) in use, named after the embedding model.
    name: str
    #: True for an index across the network: recall then sends the keyword search while
    #: the query is being embedded, instead of both searches after it.
    remote: bool

    def ensure(self) -> None:
        """Create the index and its read alias if absent (idempotent)."""

    def apply(self, ops: Sequence[IndexOp]) -> list[OpResult]:
        """Write every op in one bulk request, each guarded by its external version."""

    def search(
        self,
        flt: SearchFilter,
        text: str,
        vector: Sequence[float] | None,
        k: int,
        *,
        vector_zh: Sequence[float] | None = None,
    ) -> SearchResult:
        """Keyword and vector candidates under the same hard filter, in one round trip;
        with ``vector_zh``, also the nearest of the memories the Chinese model embedded."""

    def get(self, tenant_id: str, chain_id: str) -> tuple[int, dict[str, Any]] | None:
        """(external version, stored body) of a chain's document, if any."""

    def documents(self, tenant_id: str) -> dict[str, tuple[int, dict[str, Any]]]:
        """Every document of a tenant by chain id (convergence checks, rebuilds)."""

    def refresh(self) -> None:
        """Make every applied write searchable now (tests; OpenSearch refreshes each second)."""
