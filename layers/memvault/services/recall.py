"""Recall: hard filters, candidates, fusion, re-validation against the table, ranking.

The index only proposes (docs/architecture.md, invariant 4). Every candidate is read back from the
memory table in one batch (version, chain head, subject epoch) and kept only if it is
now the chain's current, active, unexpired version in the caller's reach. A stale or
deliberately poisoned index can therefore make recall miss, never return too much.
"""

from __future__ import annotations

import hashlib
import hmac
import math
import re
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from memvault.clock import Clock, IdSource, RandomIds, iso
from memvault.config import Settings
from memvault.embeddings import Embedder, model_names
from memvault.models.access import AccessContext, Scope
from memvault.models.trace_records import DroppedCandidate, RecallTrace, ServedItem
from memvault.observability import logger
from memvault.policy.pii import refuse_personal_ids
from memvault.policy.secrets import refuse_secrets
from memvault.search.backend import Hit, SearchFilter, SearchIndex, SearchResult
from memvault.search.fusion import CHINESE_KEEP_FLOOR, normalised, tuning_for, vector_share
from memvault.search.language import resolve
from memvault.search.rerank import Reranker
from memvault.search.text import content_tokens
from memvault.storage.ports.memory import MemoryStore, StoredVersion, fact_id
from memvault.storage.ports.traces import TraceStore
from memvault_wire.errors import SearchUnavailable
from memvault_wire.memory import Memory, MemoryKind, MemoryStatus, SourceType
from memvault_wire.recall import (
    Conflict,
    MatchReason,
    Provenance,
    RecalledItem,
    RecallRequest,
    RecallResult,
)

#: Keyword searches sent to a remote index while the query is embedded (one per recall in
#: flight; a Lambda environment serves one request at a time).
_SEARCHES = ThreadPoolExecutor(max_workers=8, thread_name_prefix="recall-keyword")
#: A Chinese query's second embedding, made while the English model embeds it (both
#: models run outside the interpreter lock: 13 ms one after the other, 7 side by side).
_EMBEDDINGS = ThreadPoolExecutor(max_workers=4, thread_name_prefix="recall-embed-zh")
TRUST = {
    SourceType.USER_CONFIRMED: 1.0,
    SourceType.HUMAN_REVIEW: 0.9,
    SourceType.USER_STATEMENT: 0.75,
    SourceType.TOOL_RESULT: 0.55,
    SourceType.MODEL_INFERRED: 0.25,
}
_SLUG = re.compile(r"[a-z0-9]+(?:[-_][a-z0-9]+)+")


@dataclass
class _Candidate:
    chain_id: str
    memory_id: str
    keyword_rank: int | None = None
    vector_rank: int | None = None
    similarity: float | None = None
    #: The Chinese model's cosine, for a Chinese query (``search.language``).
    similarity_zh: float | None = None
    exact_key: bool = False
    fused: float = 0.0
    context: float = 0.0
    #: The (thread, turn) of the neighbour the context came from.
    context_from: tuple[str, int] | None = None
    sources: list[str] = field(default_factory=list)


def cosine_from_score(score: float) -> float:
    """OpenSearch's cosinesimil score is (1 + cosine) / 2."""
    return 2.0 * score - 1.0


def scopes_overlap(a: dict[str, str], b: dict[str, str]) -> bool:
    """Two scopes can apply at once unless they name the same key with different values."""
    return all(b[k] == v for k, v in a.items() if k in b)


class RecallService:
    def __init__(
        self,
        repo: MemoryStore,
        index: SearchIndex | None,
        embedder: Embedder,
        settings: Settings,
        clock: Clock,
        *,
        traces: TraceStore | None = None,
        ids: IdSource | None = None,
        reranker: Reranker | None = None,
        chinese: Embedder | None = None,
    ) -> None:
        self.repo = repo
        self.index = index
        self.embedder = embedder
        #: The Chinese model (``embedding_model_zh``): a query in Chinese is embedded by
        #: it too, and searches the vectors it gave memories that hold Chinese.
        self.chinese = chinese
        self.tuning_zh = tuning_for(chinese.model_id) if chinese is not None else None
        self.settings = settings
        self.clock = clock
        self.traces = traces
        self.ids = ids or RandomIds()
        self.tuning = tuning_for(embedder.model_id)
        self.reranker = reranker

    # ------------------------------------------------------------------- public

    @property
    def available(self) -> bool:
        return self.index is not None

    def recall(
        self,
        ctx: AccessContext,
        subject_id: str,
        req: RecallRequest,
        *,
        origin: str = "recall",
    ) -> RecallResult:
        ctx.require(Scope.MEMORY_READ)
        ctx.require_subject(subject_id)
        # The run and task ids are kept in the recall's trace and shown to its readers.
        named = [("run_id", req.run_id), ("task_id", req.task_id)]
        refuse_secrets(named, "the recall")
        refuse_personal_ids(named, "the recall")
        now = self.clock.now()
        flt = self._filter(ctx, subject_id, req, now)
        index = self._required_index()
        started = time.perf_counter()
        found, embedded = self._search(ctx, index, flt, req, started)
        candidates = self._candidates(ctx, subject_id, req, found)
        searched = time.perf_counter()
        ordered = sorted(candidates.values(), key=lambda c: (-c.exact_key, -c.fused, c.chain_id))
        drops: list[DroppedCandidate] = []
        epochs: list[int] = []
        valid, read_back = self._validated(ctx, subject_id, ordered, req, now, drops, epochs)
        self._add_context(valid)
        validated = time.perf_counter()
        allowed = len(valid)
        valid = self._relevant(valid, req)
        # A fact whose canonical key the query names comes first, as the reranker keeps it:
        # one corrected since the index last saw it has no index score to rank by.
        scored = sorted(
            ((round(self._score(c, m, now), 6), c, m) for c, m in valid),
            key=lambda s: ("canonical_key" not in s[1].sources, -s[0], s[2].memory_id),
        )
        # Answer models only for what can be answered: the reranker reorders its head.
        shown = max(req.limit, self.settings.rerank_candidates if self.reranker else 0)
        ranked = [self._item(c, m, score) for score, c, m in scored[:shown]]
        items = self._reranked(req, ranked)[: req.limit]
        self._log_recall(ctx, found, candidates, relevant=len(valid), returned=len(items))
        tracing = self.traces is not None and self.settings.tracing
        result = RecallResult(
            recall_id=self.ids.new_id("rcl") if tracing else None,
            items=items,
            conflicts=self._conflicts([m for _, m in valid]),
            embedding_model=self._ranked_by(found),
            timings=self._timings(started, embedded, searched, validated),
        )
        if tracing:
            hidden = self._untraced(candidates, drops)
            self._record(
                ctx,
                subject_id,
                req,
                result,
                now,
                origin=origin,
                candidates=self._candidate_counts(found, candidates, hidden, read_back),
                drops=[d for d in drops if d.chain_id not in hidden],
                below_floor=allowed - len(valid),
                subject_epoch=min(epochs, default=None),
            )
        return result

    @staticmethod
    def _filter(
        ctx: AccessContext, subject_id: str, req: RecallRequest, now: datetime
    ) -> SearchFilter:
        """The hard filters the index applies: tenant, subject, expiry, ceiling, role, and
        the request's kinds, tags and scope."""
        return SearchFilter(
            tenant_id=ctx.tenant_id,
            subject_id=subject_id,
            now=iso(now),
            max_sensitivity_rank=ctx.max_sensitivity.rank,
            agent_role=ctx.agent_role,
            kinds=tuple(k.value for k in req.kinds),
            tags=tuple(req.tags),
            scope=dict(req.scope),
        )

    def _required_index(self) -> SearchIndex:
        """The search index; without one, recall is unavailable."""
        if self.index is None:
            raise SearchUnavailable(
                "recall needs a search index and none is configured "
                "(MEMVAULT_SEARCH_ENDPOINT, or MEMVAULT_SEARCH_BACKEND=embedded)",
                {"retryable": False},
            )
        return self.index

    def _search(
        self,
        ctx: AccessContext,
        index: SearchIndex,
        flt: SearchFilter,
        req: RecallRequest,
        started: float,
    ) -> tuple[SearchResult, float]:
        """The index's keyword and vector hits for the query, and the ``time.perf_counter()``
        reading once the query was embedded (``started`` is the reading the search began at)."""
        depth = max(self.settings.recall_candidates, req.limit * 2)
        text = req.query if req.mode != "vector" else ""
        early: Future[SearchResult] | None = None
        counted: Future[Any] | None = None
        if text and req.mode == "hybrid" and getattr(index, "remote", False):
            # Across the network, the keyword search needs no vector: it runs while the
            # query is embedded, and only the k-NN search waits for the embedding.
            early = _SEARCHES.submit(index.search, flt, text, None, depth)
        elif text and req.mode == "hybrid" and hasattr(index, "statistics"):
            # An index that counts its keyword statistics under the filter (OpenSearch)
            # counts them while the query is embedded; both searches go after it.
            counted = _SEARCHES.submit(index.statistics, flt, text)
        second: Future[list[float]] | None = None
        if req.mode != "keyword" and self.chinese is not None and self._routed_to_chinese(req):
            second = _EMBEDDINGS.submit(self.chinese.embed_query, req.query)
        try:
            vector = self.embedder.embed_query(req.query) if req.mode != "keyword" else None
        except BaseException:
            for pending in (early, second, counted):
                if pending is not None:
                    pending.cancel()
            raise
        vector_zh = self._chinese_vector(second)
        embedded = time.perf_counter()
        # Only a routed query names the Chinese vector: an index without that field keeps
        # the port's older signature.
        extra: dict[str, Any] = {} if vector_zh is None else {"vector_zh": vector_zh}
        try:
            if counted is not None:
                extra["statistics"] = counted.result()
            if early is None:
                found = index.search(flt, text, vector, depth, **extra)
            else:
                near = index.search(flt, "", vector, depth, **extra)
                keyword = early.result()
                found = SearchResult(
                    keyword=keyword.keyword,
                    vector=near.vector,
                    took_ms=(time.perf_counter() - started) * 1000,
                    vector_zh=near.vector_zh,
                )
        except Exception as err:
            # Type and status only: an index error can quote the query, which is content.
            logger.error(
                "search failed",
                extra={
                    "tenant_id": ctx.tenant_id,
                    "error": type(err).__name__,
                    "status": getattr(err, "status_code", None),
                },
            )
            raise SearchUnavailable(
                "the search index did not answer; retry shortly", {"retryable": True}
            ) from err
        return found, embedded

    def _ranked_by(self, found: SearchResult) -> str:
        """The models whose vectors ranked the recall's lists (id@version): the English
        model's, and the Chinese model's where its list was searched and found any."""
        if found.vector_zh and self.chinese is not None:
            return model_names(self.embedder, self.chinese)
        return model_names(self.embedder)

    @staticmethod
    def _chinese_vector(second: Future[list[float]] | None) -> list[float] | None:
        """The Chinese model's query vector, or ``None`` when it could not answer: the
        recall goes on with the English model's, as it would without the Chinese one."""
        if second is None:
            return None
        try:
            return second.result()
        except Exception as err:
            logger.warning("chinese query embedding failed", extra={"error": type(err).__name__})
            return None

    @staticmethod
    def _routed_to_chinese(req: RecallRequest) -> bool:
        """Whether the query is in Chinese: detected, or named by the caller."""
        return resolve(req.query, req.language) == "zh"

    @staticmethod
    def _log_recall(
        ctx: AccessContext,
        found: SearchResult,
        candidates: dict[str, _Candidate],
        *,
        relevant: int,
        returned: int,
    ) -> None:
        """The recall's log line: counts and the search's duration only."""
        logger.info(
            "recall",
            extra={
                "tenant_id": ctx.tenant_id,
                "keyword_hits": len(found.keyword),
                "vector_hits": len(found.vector),
                "vector_zh_hits": len(found.vector_zh),
                "candidates": len(candidates),
                "relevant": relevant,
                "returned": returned,
                "search_ms": round(found.took_ms, 1),
            },
        )

    @staticmethod
    def _timings(
        started: float, embedded: float, searched: float, validated: float
    ) -> dict[str, float]:
        """Milliseconds spent embedding, searching and validating, and in all so far
        (from ``time.perf_counter`` readings)."""
        return {
            "embed": round((embedded - started) * 1000, 2),
            "search": round((searched - embedded) * 1000, 2),
            "validate": round((validated - searched) * 1000, 2),
            "total": round((time.perf_counter() - started) * 1000, 2),
        }

    @staticmethod
    def _untraced(candidates: dict[str, _Candidate], drops: list[DroppedCandidate]) -> set[str]:
        """The chains a recall's trace leaves out of its counts and drops."""
        # A fact found only by the key the query named, which this caller may not
        # read, was never its candidate: the index would not have proposed it, and
        # counting it would tell the caller that a hidden fact holds that key.
        hidden = {
            d.chain_id
            for d in drops
            if d.reason in ("ceiling", "visibility")
            and d.chain_id in candidates
            and candidates[d.chain_id].sources == ["canonical_key"]
        }
        # A memory of an epoch a forget retired (the index and the table keep it until
        # the forget's purge reaches them): a trace written under the new epoch outlives
        # that purge, so it keeps neither the ids nor the count of those read back. (A
        # hit deeper than re-validation read is counted: nothing says it is stale.)
        return hidden | {d.chain_id for d in drops if d.reason == "other_epoch"}

    @staticmethod
    def _candidate_counts(
        found: SearchResult, candidates: dict[str, _Candidate], hidden: set[str], read_back: int
    ) -> dict[str, int]:
        """The trace's candidate counts at each step (``read_back``: how many were
        validated against the table), the ``hidden`` chains left out."""

        def counted(hits: list[Hit]) -> int:
            return sum(h.chain_id not in hidden for h in hits)

        return {
            "exact_key": sum(c.exact_key for k, c in candidates.items() if k not in hidden),
            "keyword": counted(found.keyword),
            "vector": counted(found.vector),
            **({"vector_zh": counted(found.vector_zh)} if found.vector_zh else {}),
            "fused": sum(k not in hidden for k in candidates),
            # Every chain left out was read back: re-validation is what found it out.
            "validated": read_back - len(hidden),
        }

    def _record(
        self,
        ctx: AccessContext,
        subject_id: str,
        req: RecallRequest,
        result: RecallResult,
        now: datetime,
        *,
        origin: str,
        candidates: dict[str, int],
        drops: list[DroppedCandidate],
        below_floor: int,
        subject_epoch: int | None,
    ) -> None:
        """The recall's trace, written once the answer is built: ids, counts, versions and
        timings only (never the query or any content). A trace that cannot be written
        is logged and the answer still served: tracing must never fail a recall."""
        assert self.traces is not None and result.recall_id is not None
        trace = RecallTrace(
            recall_id=result.recall_id,
            tenant_id=ctx.tenant_id,
            subject_id=subject_id,
            at=now,
            expires_at=now + timedelta(days=self.settings.trace_retention_days),
            caller=ctx.principal,
            run_id=req.run_id,
            task_id=req.task_id,
            query_hash=self._query_hash(ctx, req),
            mode=req.mode,
            limit=req.limit,
            filters=self._trace_filters(ctx, req),
            candidates=candidates,
            dropped=tuple(drops),
            below_floor=below_floor,
            returned=tuple(
                ServedItem(i.memory.memory_id, i.memory.chain_id, i.memory.version, rank)
                for rank, i in enumerate(result.items, start=1)
            ),
            embedding_model=result.embedding_model,
            index_version=getattr(self.index, "name", None),
            timings=dict(result.timings),
            origin=origin,
            subject_epoch=subject_epoch,
        )
        try:
            self.traces.record_recall(trace)
        except Exception as err:
            logger.warning(
                "recall trace not written",
                extra={
                    "tenant_id": ctx.tenant_id,
                    "recall_id": trace.recall_id,
                    "error": type(err).__name__,
                },
            )

    def _query_hash(self, ctx: AccessContext, req: RecallRequest) -> str | None:
        """The query's HMAC under the trace salt and the tenant (None without a salt): the
        trace keeps no query text."""
        salt = self.settings.trace_query_salt
        if not salt:
            return None
        key = f"{salt}:{ctx.tenant_id}".encode()
        return hmac.new(key, req.query.encode(), hashlib.sha256).hexdigest()[:32]

    @staticmethod
    def _trace_filters(ctx: AccessContext, req: RecallRequest) -> dict[str, Any]:
        """The hard filters, for the trace: kinds, tag and scope counts, ceiling, agent role
        (no values); and whether the relevance floor applied."""
        return {
            "kinds": [k.value for k in req.kinds],
            "tags": len(req.tags),
            "scope_keys": len(req.scope),
            "max_sensitivity": ctx.max_sensitivity.value,
            "agent_role": ctx.agent_role,
            "status": "active",
            "relevance_floor": req.relevance_floor,
        }

    def recall_memories(
        self,
        ctx: AccessContext,
        subject_id: str,
        query: str | None,
        limit: int,
        *,
        run_id: str | None = None,
    ) -> tuple[list[Memory], str | None]:
        """The working-memory port: recalled memories for a query, best first, and the
        recall's id (its trace's)."""
        if limit == 0 or not query or not query.strip():
            return [], None
        req = RecallRequest(query=query[:2000], limit=min(limit, 100), run_id=run_id)
        result = self.recall(ctx, subject_id, req, origin="context")
        return [i.memory for i in result.items], result.recall_id

    # --------------------------------------------------------------- candidates

    def _candidates(
        self, ctx: AccessContext, subject_id: str, req: RecallRequest, found: SearchResult
    ) -> dict[str, _Candidate]:
        """The index's hits fused, and the chains whose canonical key the query names."""
        candidates = self._fuse(found.keyword, found.vector, found.vector_zh)
        for chain_id in self._exact_key_chains(ctx, subject_id, req):
            cand = candidates.setdefault(chain_id, _Candidate(chain_id, ""))
            cand.exact_key = True
            cand.sources.append("canonical_key")
        return candidates

    def _fuse(
        self, keyword: list[Hit], vector: list[Hit], vector_zh: Sequence[Hit] = ()
    ) -> dict[str, _Candidate]:
        """Score fusion (``memvault.search.fusion``): each list's scores in [0, 1], the
        vector list weighted by the embedder's ``vector_weight``. A Chinese query's two
        vector lists give a memory the better of its two shares (``vector_share``)."""
        weight = self.settings.recall_vector_weight
        if weight is None:
            weight = self.tuning.vector_weight
        # Equal scores rank by chain id, not in the index's order: that order follows
        # where documents sit (reused slots, merged segments), which writes and deletes
        # the caller may not see move.
        keyword, vector, vector_zh = (
            sorted(hits, key=lambda h: (-h.score, h.chain_id))
            for hits in (keyword, vector, vector_zh)
        )
        candidates: dict[str, _Candidate] = {}
        for rank, (hit, share) in enumerate(zip(keyword, normalised(keyword), strict=True), 1):
            c = candidates.setdefault(hit.chain_id, _Candidate(hit.chain_id, hit.memory_id))
            c.keyword_rank = rank
            c.fused += (1.0 - weight) * share
            c.sources.append("keyword")
        shares: dict[str, list[float]] = {}
        for rank, (hit, share) in enumerate(zip(vector, normalised(vector), strict=True), 1):
            c = candidates.setdefault(hit.chain_id, _Candidate(hit.chain_id, hit.memory_id))
            c.vector_rank = rank
            c.similarity = cosine_from_score(hit.score)
            shares.setdefault(hit.chain_id, []).append(share)
            c.sources.append("vector")
        for rank, (hit, share) in enumerate(zip(vector_zh, normalised(vector_zh), strict=True), 1):
            c = candidates.setdefault(hit.chain_id, _Candidate(hit.chain_id, hit.memory_id))
            c.vector_rank = rank if c.vector_rank is None else min(rank, c.vector_rank)
            c.similarity_zh = cosine_from_score(hit.score)
            shares.setdefault(hit.chain_id, []).append(share)
            c.sources.append("vector")
        for chain_id, held in shares.items():
            candidates[chain_id].fused += weight * vector_share(held)
        return candidates

    def _relevant(
        self, valid: list[tuple[_Candidate, Memory]], req: RecallRequest
    ) -> list[tuple[_Candidate, Memory]]:
        """The relevance floor: unrelated memories stay out even when nothing else matches.

        A query passes when its best vector match reaches ``recall_relevance_floor``, or
        some memory holds at least ``recall_keyword_coverage`` of its words, or (for an
        embedder with a corroborated floor) both signals are weaker but agree
        (``RecallTuning.passes``); then a memory
        is kept when its similarity is within ``recall_similarity_margin`` of the best, or
        it holds that share of the query's words, or its canonical key was named, or it is
        the neighbouring turn of a memory kept so (``_add_context``). A request with
        ``relevance_floor`` false keeps every memory the table admitted. The
        thresholds are the embedder's (``memvault.search.fusion.TUNINGS``): each model
        has its own similarity range. Settings override them.
        """
        if req.mode == "keyword":
            return [(c, m) for c, m in valid if c.keyword_rank is not None or c.exact_key]
        if not req.relevance_floor:
            return valid
        if not any(ch.isalnum() for ch in req.query):
            # Emoji and punctuation alone: the models read nothing in them, yet a cosine
            # of such a query with any memory can pass the floor.
            return [(c, m) for c, m in valid if c.exact_key]
        query_words = set(content_tokens(req.query)) if req.mode == "hybrid" else set()
        shares: dict[str, float] = {}

        def coverage(c: _Candidate, m: Memory) -> float:
            """The share of the query's words the memory holds (hybrid mode only),
            tokenized on first need: most memories are kept, or the query passes, on
            similarity alone."""
            if not query_words:
                return 0.0
            share = shares.get(c.chain_id)
            if share is None:
                text = f"{m.content} {m.canonical_key or ''} {' '.join(m.tags)}"
                share = len(query_words & set(content_tokens(text))) / len(query_words)
                shares[c.chain_id] = share
            return share

        floor = self.settings.recall_relevance_floor
        if floor is None:
            floor = self.tuning.floor_for(req.query)
        needed = self.settings.recall_keyword_coverage
        best = max((c.similarity for c, _ in valid if c.similarity is not None), default=-1.0)
        if best < floor and not self.tuning.passes(
            best, max((coverage(c, m) for c, m in valid), default=0.0), floor, needed
        ):
            return [(c, m) for c, m in valid if c.exact_key]
        margin = self.settings.recall_similarity_margin
        if margin is None:
            margin = self.tuning.similarity_margin
        best_zh = max(
            (c.similarity_zh for c, _ in valid if c.similarity_zh is not None), default=-1.0
        )
        margin_zh = self.tuning_zh.similarity_margin if self.tuning_zh is not None else 0.0
        kept = {
            c.chain_id
            for c, m in valid
            if c.exact_key
            or (c.similarity is not None and c.similarity >= best - margin)
            or (
                c.similarity_zh is not None
                and c.similarity_zh >= max(best_zh - margin_zh, CHINESE_KEEP_FLOOR)
            )
            or coverage(c, m) >= needed
        }
        # A turn next to a relevant turn is its context (the answer after the question),
        # however unlike the query its own words are.
        relevant_turns = {(m.source.thread, m.source.turn) for c, m in valid if c.chain_id in kept}
        return [(c, m) for c, m in valid if c.chain_id in kept or c.context_from in relevant_turns]

    def _conversational(self, valid: list[tuple[_Candidate, Memory]]) -> bool:
        return self.settings.recall_context_weight > 0 and any(
            m.source.neighbours() for _, m in valid
        )

    def _add_context(self, valid: list[tuple[_Candidate, Memory]]) -> None:
        """A turn gains ``recall_context_weight`` of its best neighbour's fused score.

        Only memories the table admitted for this reader count as neighbours: what the
        index proposes but the reader may not see moves nothing.
        """
        weight = self.settings.recall_context_weight
        if not weight:
            return
        fused = {
            (m.source.thread, m.source.turn): c.fused
            for c, m in valid
            if m.source.thread is not None and m.source.turn is not None
        }
        if not fused:
            return
        for c, m in valid:
            around = m.source.neighbours()
            if around is None:
                continue
            best = max(around, key=lambda key: fused.get(key, 0.0))
            if fused.get(best, 0.0) > 0.0:
                c.context = weight * fused[best]
                c.context_from = best

    def _exact_key_chains(
        self, ctx: AccessContext, subject_id: str, req: RecallRequest
    ) -> list[str]:
        """Chains whose canonical key the query names outright (one DynamoDB batch read)."""
        slugs = list(dict.fromkeys(_SLUG.findall(req.query.lower())))[:10]
        if not slugs:
            return []
        kinds = [k.value for k in req.kinds] or [k.value for k in MemoryKind]
        facts = [fact_id(k, slug, dict(req.scope)) for slug in slugs for k in kinds]
        return self.repo.pointers(ctx.tenant_id, subject_id, facts)

    # ------------------------------------------------------------- re-validation

    def _validated(
        self,
        ctx: AccessContext,
        subject_id: str,
        ordered: list[_Candidate],
        req: RecallRequest,
        now: datetime,
        drops: list[DroppedCandidate],
        epochs: list[int],
    ) -> tuple[list[tuple[_Candidate, Memory]], int]:
        """The candidates the table allows, read back in batches from the best, and how
        many of ``ordered`` were read back; the subject's epoch each batch was judged
        under is added to ``epochs``."""
        # Facts found only by the key the query named are read back on their own: one the
        # caller may not read must take no place among the others, or naming a key would
        # change the answer (and tell the caller that a hidden fact holds it).
        named = [c for c in ordered if c.sources == ["canonical_key"]]
        ordered = [c for c in ordered if c.sources != ["canonical_key"]]
        valid = self._revalidate(ctx, subject_id, named, req, now, drops, epochs)
        # Validate the best first; go deeper only when the table refused some of them.
        start, step = 0, req.limit + 2
        while start < len(ordered) and len(valid) < req.limit:
            valid += self._revalidate(
                ctx, subject_id, ordered[start : start + step], req, now, drops, epochs
            )
            start += step
            step = max(step, 2 * (req.limit - len(valid)))
        window = self.settings.recall_context_candidates
        if start < min(window, len(ordered)) and self._conversational(valid):
            # Turns of a conversation: read back the rest of the context window, where the
            # neighbours of the best matches are.
            valid += self._revalidate(
                ctx, subject_id, ordered[start:window], req, now, drops, epochs
            )
            start = window
        return valid, len(named) + min(start, len(ordered))

    def _revalidate(
        self,
        ctx: AccessContext,
        subject_id: str,
        candidates: list[_Candidate],
        req: RecallRequest,
        now: datetime,
        drops: list[DroppedCandidate],
        epochs: list[int],
    ) -> list[tuple[_Candidate, Memory]]:
        """Read every candidate's version from the table, in one batch with the subject's
        epoch, and keep it only if the table allows it now.

        A version's own status is enough to know it is its chain's current one: the
        transaction that supersedes or deletes a version also marks it. A version the
        index still holds although a newer one replaced it is followed (by
        ``superseded_by``) to the current version, which is then judged instead.
        """
        if not candidates:
            return []
        epoch, raw, heads = self._read_back(ctx.tenant_id, subject_id, candidates)
        epochs.append(epoch)
        kept: list[tuple[_Candidate, Memory]] = []
        seen: set[str] = set()
        for c in candidates:
            found = self._followed(c, raw, drops, heads)
            if found is None or found.memory is None or found.chain_id in seen:
                reason = (
                    ("deleted" if c.memory_id == "" else "missing")
                    if found is None
                    else ("deleted" if found.memory is None else "duplicate")
                )
                drops.append(
                    DroppedCandidate(
                        c.chain_id, found.memory_id if found else c.memory_id or None, reason
                    )
                )
                continue
            current = found.memory
            if self._admissible(ctx, current, epoch, req, now):
                seen.add(current.chain_id)
                kept.append((c, current))
            else:
                drops.append(
                    DroppedCandidate(
                        current.chain_id,
                        current.memory_id,
                        self._refusal(ctx, current, epoch, req, now),
                    )
                )
        return kept

    def _read_back(
        self, t: str, subject_id: str, candidates: list[_Candidate]
    ) -> tuple[int, dict[str, StoredVersion], dict[str, str]]:
        """The subject's epoch, the candidates' versions by id, and the current version id
        of the chains whose heads were read, in one batch. A candidate named by canonical
        key is given its chain's current version (the head is read for every such chain,
        whatever version the index held); the versions that replaced those read are read
        after (three more batches at most), and a chain whose replacements run further
        than that has its head read (one more)."""
        exact = [c.chain_id for c in candidates if c.exact_key]
        epoch, raw, chains = self.repo.revalidation(
            t,
            subject_id,
            [c.memory_id for c in candidates if c.memory_id],
            # Named by canonical key: the chain head says which version is current.
            list(dict.fromkeys([c.chain_id for c in candidates if not c.memory_id] + exact)),
        )
        heads = {chain.chain_id: chain.current_memory_id for chain in chains if chain.live}
        for c in candidates:
            if not c.memory_id and c.chain_id in heads:
                c.memory_id = heads[c.chain_id]
        pending = [m for m in heads.values() if m not in raw]
        for _ in range(3):
            ahead = [
                v.superseded_by
                for v in raw.values()
                if v.memory is not None
                and v.memory.status is MemoryStatus.SUPERSEDED
                and v.superseded_by
                and v.superseded_by not in raw
            ]
            ahead += pending
            pending = []
            if not ahead:
                break
            _, more, _ = self.repo.revalidation(t, subject_id, list(dict.fromkeys(ahead)), [])
            raw.update(more)
        unresolved = [
            c.chain_id
            for c in candidates
            if c.chain_id not in heads
            and (last := _walk(raw.get(c.memory_id), raw)) is not None
            and last.superseded_by
        ]
        if unresolved:
            _, _, chains = self.repo.revalidation(t, subject_id, [], unresolved)
            found = {chain.chain_id: chain.current_memory_id for chain in chains if chain.live}
            heads.update(found)
            missing = [m for m in found.values() if m not in raw]
            if missing:
                _, more, _ = self.repo.revalidation(t, subject_id, missing, [])
                raw.update(more)
        return epoch, raw, heads

    @staticmethod
    def _followed(
        c: _Candidate,
        raw: dict[str, StoredVersion],
        drops: list[DroppedCandidate],
        heads: dict[str, str],
    ) -> StoredVersion | None:
        """The version read back for the candidate, followed by ``superseded_by`` to the
        chain's current one, or to its head where the replacements read stop short; None
        when neither was read back."""
        found: StoredVersion | None = raw.get(c.memory_id)
        if found is not None and found.superseded_by:
            # The index held a version a newer one replaced: that document is dropped,
            # and the chain's current version is judged in its place.
            drops.append(DroppedCandidate(c.chain_id, c.memory_id, "superseded"))
        found = _walk(found, raw)
        if found is not None and found.superseded_by:
            found = raw.get(heads.get(c.chain_id, ""))
        return found

    @staticmethod
    def _refusal(
        ctx: AccessContext, m: Memory, epoch: int, req: RecallRequest, now: datetime
    ) -> str:
        """Why ``_admissible`` refused a version, for the recall's trace."""
        if m.tenant_id != ctx.tenant_id:
            return "other"
        if m.subject_epoch != epoch:
            return "other_epoch"
        if m.status is MemoryStatus.DELETED:
            return "deleted"
        if m.status is MemoryStatus.SUPERSEDED:
            return "superseded"
        # What the caller may not read is named so before its expiry or status: a trace
        # leaves such a fact out when the query named its key (``_untraced``), and one
        # that had expired or was still a candidate was counted.
        if m.sensitivity.rank > ctx.max_sensitivity.rank:
            return "ceiling"
        if not ctx.may_read(m.sensitivity, m.visibility):
            return "visibility"
        if m.status is MemoryStatus.EXPIRED or now >= m.expires_at:
            return "expired"
        if m.status is MemoryStatus.CANDIDATE:
            return "candidate_status"
        return "filtered"

    @staticmethod
    def _admissible(
        ctx: AccessContext, m: Memory, epoch: int, req: RecallRequest, now: datetime
    ) -> bool:
        """The table's truth, checked again whatever the index said."""
        return (
            m.tenant_id == ctx.tenant_id
            and m.subject_epoch == epoch
            and m.status is MemoryStatus.ACTIVE
            and now < m.expires_at
            and ctx.may_read(m.sensitivity, m.visibility)
            and (not req.kinds or m.kind in req.kinds)
            and all(t in m.tags for t in req.tags)
            and all(m.scope.get(k) == v for k, v in req.scope.items())
        )

    # ------------------------------------------------------------------ ranking

    def _reranked(self, req: RecallRequest, ranked: list[RecalledItem]) -> list[RecalledItem]:
        """The best ``rerank_candidates`` items in the reranker's order (an item whose
        canonical key the query named stays ahead); the rest after them as they were.
        Without a reranker, or when it fails, the fused order stands."""
        if self.reranker is None or req.mode != "hybrid" or len(ranked) < 2:
            return ranked
        head = ranked[: self.settings.rerank_candidates]
        scores = self.reranker.rerank(req.query, [item.memory.content for item in head])
        if scores is None:
            return ranked
        scored = [
            item.model_copy(
                update={"why": item.why.model_copy(update={"rerank_score": round(s, 6)})}
            )
            for item, s in zip(head, scores, strict=True)
        ]
        scored.sort(key=lambda i: (not _named_by_key(i), -(i.why.rerank_score or 0.0)))
        return scored + ranked[len(head) :]

    @staticmethod
    def _relevance(c: _Candidate) -> float:
        return c.fused + c.context + (0.5 if c.exact_key else 0.0)

    def _score(self, c: _Candidate, m: Memory, now: datetime) -> float:
        """The relevance, raised a little for a trusted, recent or confirmed source."""
        trust = TRUST.get(m.source.type, 0.5)
        age_days = max((now - m.valid_from).total_seconds(), 0.0) / 86_400
        recency = math.exp(-age_days / 180)
        confirmed = _confirmed(m)
        return self._relevance(c) * (1 + 0.15 * trust + 0.05 * recency + 0.05 * confirmed)

    def _item(self, c: _Candidate, m: Memory, score: float) -> RecalledItem:
        relevance = self._relevance(c)
        confirmed = _confirmed(m)
        return RecalledItem(
            memory=m,
            score=score,
            why=MatchReason(
                matched_by=list(dict.fromkeys(c.sources)),
                keyword_rank=c.keyword_rank,
                vector_rank=c.vector_rank,
                similarity=None if c.similarity is None else round(c.similarity, 4),
                relevance=round(relevance, 6),
                context=round(c.context, 6) if c.context else None,
            ),
            provenance=Provenance(
                source_type=m.source.type,
                source_ref=m.source.ref,
                created_at=m.created_at,
                version=m.version,
                supersedes_id=m.supersedes_id,
                confirmed=confirmed,
            ),
        )

    @staticmethod
    def _conflicts(memories: list[Memory]) -> list[Conflict]:
        by_key: dict[str, list[Memory]] = {}
        for m in memories:
            if m.canonical_key:
                by_key.setdefault(m.canonical_key, []).append(m)
        conflicts: list[Conflict] = []
        for key, group in sorted(by_key.items()):
            clashing: set[str] = set()
            for i, first in enumerate(group):
                for second in group[i + 1 :]:
                    if first.content_hash != second.content_hash and scopes_overlap(
                        first.scope, second.scope
                    ):
                        clashing |= {first.memory_id, second.memory_id}
            if clashing:
                conflicts.append(Conflict(canonical_key=key, memory_ids=sorted(clashing)))
        return conflicts


def _walk(found: StoredVersion | None, raw: dict[str, StoredVersion]) -> StoredVersion | None:
    """``found`` followed by ``superseded_by`` through the versions read (four hops at
    most): the last one reached, still superseded where the walk stops short."""
    hops = 0
    while found is not None and found.superseded_by and hops < 4:
        following = raw.get(found.superseded_by)
        if following is None:
            break
        found = following
        hops += 1
    return found


def _confirmed(m: Memory) -> bool:
    return m.source.type in (SourceType.USER_CONFIRMED, SourceType.HUMAN_REVIEW)


def _named_by_key(item: RecalledItem) -> bool:
    """Whether the recall found ``item`` by the canonical key its query names."""
    return "canonical_key" in item.why.matched_by
