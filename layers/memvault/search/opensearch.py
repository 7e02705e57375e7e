"""OpenSearch adapter: one index per embedding model behind a read alias.

Pool deployments share one index and route every document and query by tenant; a silo
deployment's domain is the tenant's own. Every hard filter sits inside the query (the
k-NN filter is Lucene's efficient filtering), keyword and vector queries travel in one
``_msearch``, and writes go through ``_bulk`` with external versions (see documents.py).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memvault.observability import logger
from memvault.search.backend import (
    APPLIED,
    FAILED,
    STALE,
    Hit,
    OpResult,
    SearchFilter,
    SearchResult,
)
from memvault.search.documents import IndexOp
from memvault.search.text import query_words

#: Lucene's HNSW searches with a beam of k unless told otherwise; 100 keeps recall@10
#: at exact search's level on conversational sets at no measurable cost.
EF_SEARCH = 100
#: Up to this many documents under a recall's filter, the vector search scores each of
#: them exactly (``script_score``) instead of walking the HNSW graph. A filter that keeps
#: a tenth of a shard makes Lucene's filtered HNSW visit most of the graph in every
#: segment and then fall back to exact scoring anyway; scoring the filtered set directly
#: was 40% faster at 10,000 memories a subject (bench/profile_opensearch_recall.py), and
#: it is exact, so recall can only gain. Larger sets go back to the graph, whose cost
#: grows with the logarithm of the set rather than its size.
EXACT_UP_TO = 20_000
#: Lucene's tiered merge policy, tighter than its default of 10 segments a tier. A recall
#: scores its subject's documents in every segment, and per-segment work dominates: at
#: 100,000 memories (10 subjects), exact scoring of one subject took 23 ms at the median
#: on the default's 43 segments, 12.7 ms on this policy's 14, and 12.1 ms on one
#: force-merged segment; loading took 30% longer for the extra merging
#: (bench/profile_opensearch_recall.py's corpus shape, one node on two cores). Both are
#: dynamic index settings, set when an index is made.
MERGE_POLICY = {"segments_per_tier": 3, "max_merge_at_once": 3}
#: Each segment keeps its documents in (tenant, subject) order, so that one subject's
#: memories lie together: the filter's documents are one run of doc ids, and exact
#: scoring reads their vectors in storage order instead of across the whole segment.
#: Exact scoring of one subject at 100,000 memories (10,000 under the filter) took 7 ms
#: at the median where it took 10 unsorted (scratch measurement, one node on two cores,
#: bench/profile_opensearch_recall.py's corpus shape). Set when an index is made.
INDEX_SORT = {"field": ["tenant_id", "subject_id"], "order": ["asc", "asc"]}
#: A recall's segments are searched side by side on the node's search threads (OpenSearch
#: 2.12+ concurrent segment search; ``auto``, the default, does it only for
#: aggregations). A recall is one small query whose time is spent scoring segments, so it
#: finishes in about half the time on two cores; on a busy node the searches share the
#: same threads. Dynamic; set when an index is made.
CONCURRENT_SEARCH = "all"
_FIELDS = ["chain_id", "memory_id", "memory_version"]
#: Hits carry their ids from doc values: no ``_source`` (it holds the embedding, about
#: 8 kB of JSON a document) and no stored fields (``_id`` would decompress the same block).
_RETURN: dict[str, Any] = {"_source": False, "stored_fields": "_none_", "docvalue_fields": _FIELDS}


def _vector_field(dimensions: int) -> dict[str, Any]:
    return {
        "type": "knn_vector",
        "dimension": dimensions,
        "method": {
            "name": "hnsw",
            "engine": "lucene",
            "space_type": "cosinesimil",
            "parameters": {"m": 16, "ef_construction": 128},
        },
    }


def mapping(
    dimensions: int,
    model_id: str,
    model_version: str,
    refresh_interval: str = "1s",
    *,
    dimensions_zh: int | None = None,
) -> dict[str, Any]:
    """The index's settings and mappings; with ``dimensions_zh``, a second vector field
    (``embedding_zh``) for the Chinese model's vectors of memories that hold Chinese."""
    keyword = {"type": "keyword"}
    body: dict[str, Any] = {
        "settings": {
            "index": {
                "knn": True,
                "number_of_shards": 1,
                "number_of_replicas": 0,
                "refresh_interval": refresh_interval,
                "merge": {"policy": dict(MERGE_POLICY)},
                "sort": {k: list(v) for k, v in INDEX_SORT.items()},
                "search": {"concurrent_segment_search": {"mode": CONCURRENT_SEARCH}},
            },
        },
        "mappings": {
            "dynamic": "strict",
            "_meta": {"model_id": model_id, "model_version": model_version},
            "properties": {
                "doc_type": keyword,
                "chain_id": keyword,
                "memory_id": keyword,
                "tenant_id": keyword,
                "subject_id": keyword,
                "kind": keyword,
                "status": keyword,
                "canonical_key": keyword,
                "key_text": {"type": "text", "analyzer": "english"},
                "content": {
                    "type": "text",
                    "analyzer": "english",
                    "fields": {"cjk": {"type": "text", "analyzer": "cjk"}},
                },
                "tags": keyword,
                "scope": keyword,
                "sensitivity": keyword,
                "sensitivity_rank": {"type": "integer"},
                "visibility": keyword,
                "visible_to_all": {"type": "boolean"},
                "source_type": keyword,
                "confidence": {"type": "float"},
                "memory_version": {"type": "integer"},
                "subject_epoch": {"type": "integer"},
                "valid_from": {"type": "date"},
                "expires_at": {"type": "date"},
                "created_at": {"type": "date"},
                "content_hash": keyword,
                "model_id": keyword,
                "model_version": keyword,
                "embedding": _vector_field(dimensions),
            },
        },
    }
    if dimensions_zh is not None:
        body["mappings"]["properties"]["embedding_zh"] = _vector_field(dimensions_zh)
    return body


def filter_clauses(flt: SearchFilter) -> list[dict[str, Any]]:
    clauses: list[dict[str, Any]] = [
        {"term": {"doc_type": "memory"}},
        {"term": {"tenant_id": flt.tenant_id}},
        {"term": {"subject_id": flt.subject_id}},
        {"terms": {"status": list(flt.statuses)}},
        {"range": {"expires_at": {"gt": flt.now}}},
        {"range": {"sensitivity_rank": {"lte": flt.max_sensitivity_rank}}},
    ]
    # A visibility list restricts agents only (``AccessContext.may_read``).
    if flt.agent_role is not None:
        visible = [{"term": {"visible_to_all": True}}, {"term": {"visibility": flt.agent_role}}]
        clauses.append({"bool": {"should": visible, "minimum_should_match": 1}})
    if flt.kinds:
        clauses.append({"terms": {"kind": list(flt.kinds)}})
    clauses += [{"term": {"tags": t}} for t in flt.tags]
    clauses += [{"term": {"scope": p}} for p in flt.scope_pairs()]
    return clauses


@dataclass(frozen=True)
class KeywordStatistics:
    """How many documents a recall's filter admits, and how many of them hold each of its
    query's words (``text.query_words``): what the keyword search weighs words by.

    Counted under the recall's own filter, never over the shard: OpenSearch's BM25 takes
    its statistics from every document of the shard, and a pool deployment's tenants share
    one, so a memory the reader may not see, or another tenant's, would change a word's
    weight, and an agent comparing the scores of notes it planted could learn whether a
    hidden memory holds a word."""

    documents: int
    #: (word, is CJK, how many admitted documents hold it), in query order.
    words: tuple[tuple[str, bool, int], ...]

    def weights(self) -> list[tuple[str, bool, float]]:
        """Each word some admitted document holds, with its BM25 weight (idf)."""
        n = self.documents
        return [
            (word, cjk, math.log(1 + (n - df + 0.5) / (df + 0.5)))
            for word, cjk, df in self.words
            if df
        ]


def _word_clause(word: str, cjk: bool) -> dict[str, Any]:
    """A document that holds ``word``: English words by their stems (content, the
    canonical key's words), CJK pairs in the CJK field alone (the English analyzer would
    split them into single characters)."""
    fields = ["content.cjk"] if cjk else ["content", "key_text"]
    return {"multi_match": {"query": word, "fields": fields}}


def statistics_query(flt: SearchFilter, words: Sequence[tuple[str, bool]]) -> dict[str, Any]:
    """Counts under the filter: every document (exactly), and those holding each word."""
    return {
        "size": 0,
        "track_total_hits": True,
        "query": {"bool": {"filter": filter_clauses(flt)}},
        "aggs": {
            "words": {
                "filters": {
                    "filters": {str(i): _word_clause(w, cjk) for i, (w, cjk) in enumerate(words)}
                }
            }
        },
    }


def keyword_query(
    flt: SearchFilter, weights: Sequence[tuple[str, bool, float]], k: int
) -> dict[str, Any]:
    """The documents holding the most weight of the query's words: each word counts its
    weight once (``constant_score``), so that no statistic of the shard enters a score.
    Recall ranks equal scores by chain id; which of several equal scores at the cut of
    ``k`` come back is the shard's order (a sort by chain id here measured slower)."""
    return {
        "size": k,
        "track_total_hits": False,
        **_RETURN,
        "query": {
            "bool": {
                "filter": filter_clauses(flt),
                "should": [
                    {"constant_score": {"filter": _word_clause(w, cjk), "boost": weight}}
                    for w, cjk, weight in weights
                ],
                "minimum_should_match": 1,
            }
        },
    }


def vector_query(
    flt: SearchFilter,
    vector: Sequence[float],
    k: int,
    *,
    exact: bool = False,
    field: str = "embedding",
) -> dict[str, Any]:
    """The k nearest under the filter: by the HNSW graph (Lucene's efficient filtering),
    or, ``exact``, by scoring every filtered document. ``field`` is ``embedding_zh`` for
    the Chinese model's vectors; a document without that field is not scored.

    The graph scores (1 + cosine) / 2. Exact scoring takes the inner product, which for
    the unit vectors every embedder gives (``embeddings.base``) is the cosine, in a
    quarter less time than the script's cosine (which also computes both norms for
    every document); its scores are brought to the graph's scale by :func:`exact_score`.
    The query vector is made unit length here, so that a caller's rounding cannot
    change the ranking."""
    if exact:
        vector = _unit(vector)
        filters = filter_clauses(flt)
        if field != "embedding":  # only memories that hold Chinese have the second field
            filters.append({"exists": {"field": field}})
        query: dict[str, Any] = {
            "script_score": {
                "query": {"bool": {"filter": filters}},
                "script": {
                    "source": "knn_score",
                    "lang": "knn",
                    "params": {
                        "field": field,
                        "query_value": list(vector),
                        "space_type": "innerproduct",
                    },
                },
            }
        }
    else:
        query = {
            "knn": {
                field: {
                    "vector": list(vector),
                    "k": k,
                    "filter": {"bool": {"filter": filter_clauses(flt)}},
                    "method_parameters": {"ef_search": max(EF_SEARCH, k)},
                }
            }
        }
    return {"size": k, "track_total_hits": False, **_RETURN, "query": query}


def _unit(vector: Sequence[float]) -> list[float]:
    norm = math.sqrt(math.fsum(x * x for x in vector))
    return [x / norm for x in vector] if norm > 0 else list(vector)


def exact_score(score: float) -> float:
    """An exact search's score on the graph's scale, (1 + cosine) / 2.

    The k-NN script scores an inner product ``p`` as ``1 + p`` when ``p >= 0`` and
    ``1 / (1 - p)`` below; for unit vectors ``p`` is the cosine."""
    cosine = score - 1.0 if score >= 1.0 else 1.0 - 1.0 / score
    return (1.0 + max(-1.0, min(1.0, cosine))) / 2.0


def _size_key(flt: SearchFilter) -> tuple[Any, ...]:
    """A filter without its instant: what a count found holds for the next search."""
    return (
        flt.tenant_id,
        flt.subject_id,
        flt.max_sensitivity_rank,
        flt.agent_role,
        flt.kinds,
        flt.tags,
        tuple(flt.scope_pairs()),
        flt.statuses,
    )


def _hit(h: dict[str, Any], *, exact: bool = False) -> Hit:
    fields = h["fields"]
    score = float(h["_score"])
    return Hit(
        chain_id=fields["chain_id"][0],
        memory_id=fields["memory_id"][0],
        memory_version=int(fields["memory_version"][0]),
        score=exact_score(score) if exact else score,
    )


class OpenSearchIndex:
    def __init__(
        self,
        client: Any,
        alias: str,
        *,
        model_slug: str,
        model_id: str,
        model_version: str,
        dimensions: int,
        dimensions_zh: int | None = None,
        replicas: int = 0,
        reader_role_arns: Sequence[str] = (),
        writer_role_arns: Sequence[str] = (),
        refresh_interval: str = "1s",
        remote: bool = True,
    ) -> None:
        #: False for a node on this machine (the local stack's): the keyword search would
        #: compete with the query's embedding for the same cores, so recall sends both
        #: searches together after it (see SearchIndex.remote).
        self.remote = remote
        self.client = client
        self.alias = alias
        self.name = f"{alias}--{model_slug}"
        self.model_id = model_id
        self.model_version = model_version
        self.dimensions = dimensions
        self.dimensions_zh = dimensions_zh
        self.replicas = replicas
        self.reader_role_arns = list(reader_role_arns)
        self.writer_role_arns = list(writer_role_arns)
        self.refresh_interval = refresh_interval
        self._ensured = False
        #: Per filter, how many documents it kept when last counted (see EXACT_UP_TO).
        self._sizes: dict[tuple[Any, ...], int] = {}

    # ---------------------------------------------------------------------- admin

    def ensure(self) -> None:
        if self._ensured:
            return
        from opensearchpy.exceptions import RequestError

        if not self.client.indices.exists(index=self.name):
            body = mapping(
                self.dimensions,
                self.model_id,
                self.model_version,
                self.refresh_interval,
                dimensions_zh=self.dimensions_zh,
            )
            body["settings"]["index"]["number_of_replicas"] = self.replicas
            try:
                self.client.indices.create(index=self.name, body=body)
            except RequestError as err:  # created meanwhile by another writer
                if "resource_already_exists" not in str(err.error):
                    raise
        if self.dimensions_zh is not None:
            self._add_chinese_field()
        if not self.client.indices.exists_alias(name=self.alias):
            self.client.indices.put_alias(index=self.name, name=self.alias)
        if self.reader_role_arns:
            self._map_role("reader", ["read"], ["cluster_composite_ops_ro"], self.reader_role_arns)
        if self.writer_role_arns:
            self._map_role(
                "writer",
                [
                    "crud",
                    "indices:admin/get",
                    "indices:admin/refresh*",
                    "indices:admin/aliases/get",
                ],
                ["cluster_composite_ops"],
                self.writer_role_arns,
            )
        self._ensured = True

    def _map_role(self, kind: str, actions: list[str], cluster: list[str], arns: list[str]) -> None:
        """Fine-grained access control: a role limited to this alias's indexes, mapped
        to the given IAM roles (``PUT`` on the security plugin's API is idempotent)."""
        role = f"{self.alias}-{kind}"
        self.client.transport.perform_request(
            "PUT",
            f"/_plugins/_security/api/roles/{role}",
            body={
                "cluster_permissions": cluster,
                "index_permissions": [
                    {
                        "index_patterns": [self.alias, f"{self.alias}--*"],
                        "allowed_actions": actions,
                    }
                ],
            },
        )
        self.client.transport.perform_request(
            "PUT",
            f"/_plugins/_security/api/rolesmapping/{role}",
            body={"backend_roles": arns},
        )

    def _add_chinese_field(self) -> None:
        """Give an index made before the Chinese model its second vector field, in place
        (a new field may join a mapping; its documents get it as they are written or
        rebuilt)."""
        held = self.client.indices.get_mapping(index=self.name)[self.name]["mappings"]
        if "embedding_zh" not in held.get("properties", {}):
            self.client.indices.put_mapping(
                index=self.name,
                body={"properties": {"embedding_zh": _vector_field(self.dimensions_zh or 0)}},
            )

    def alias_target(self) -> list[str]:
        if not self.client.indices.exists_alias(name=self.alias):
            return []
        return sorted(self.client.indices.get_alias(name=self.alias))

    def point_alias(self, index: str) -> None:
        """Move the read alias to ``index`` in one atomic step."""
        actions: list[dict[str, Any]] = [
            {"remove": {"index": old, "alias": self.alias}} for old in self.alias_target()
        ]
        actions.append({"add": {"index": index, "alias": self.alias}})
        self.client.indices.update_aliases(body={"actions": actions})

    # --------------------------------------------------------------------- writes

    def apply(self, ops: Sequence[IndexOp]) -> list[OpResult]:
        if not ops:
            return []
        self.ensure()
        body: list[dict[str, Any]] = []
        for op in ops:
            body.append(
                {
                    "index": {
                        "_index": self.name,
                        "_id": op.doc_id,
                        "routing": op.tenant_id,
                        "version": op.version,
                        "version_type": "external",
                    }
                }
            )
            body.append(op.body())
        out = self.client.bulk(body=body)
        results: list[OpResult] = []
        for op, item in zip(ops, out["items"], strict=True):
            res = item["index"]
            status = int(res.get("status", 500))
            if status in (200, 201):
                results.append(OpResult(op, APPLIED))
            elif status == 409:
                results.append(OpResult(op, STALE))
            else:
                # The error type only: its reason may quote the document.
                error = res.get("error") or {}
                reason = error.get("type") if isinstance(error, dict) else "error"
                results.append(OpResult(op, FAILED, f"{status} {reason}"))
        return results

    # ---------------------------------------------------------------------- reads

    def statistics(self, flt: SearchFilter, text: str) -> KeywordStatistics | None:
        """The keyword statistics of ``text`` under ``flt`` (one request), or ``None`` for
        a text with no word to weigh. Recall asks for them while the query is embedded."""
        words = query_words(text)
        if not words:
            return None
        # Not into the shard's request cache: the filter holds the time of the recall, so
        # no entry would be read again, and each would evict one that might be (measured:
        # about 0.1 ms less a count at 100,000 memories) and keep the query's words there.
        out = self.client.search(
            index=self.alias,
            routing=flt.tenant_id,
            body=statistics_query(flt, words),
            request_cache="false",
        )
        buckets = out["aggregations"]["words"]["buckets"]
        found = KeywordStatistics(
            documents=int(out["hits"]["total"]["value"]),
            words=tuple(
                (w, cjk, int(buckets[str(i)]["doc_count"])) for i, (w, cjk) in enumerate(words)
            ),
        )
        self._remember_size(_size_key(flt), found.documents)
        return found

    def scores_exactly(self, flt: SearchFilter) -> bool:
        """Whether a vector search under ``flt`` scores every filtered document (the last
        count under it found at most ``EXACT_UP_TO``) rather than walking the graph."""
        return self._sizes.get(_size_key(flt), EXACT_UP_TO + 1) <= EXACT_UP_TO

    def _remember_size(self, key: tuple[Any, ...], documents: int) -> None:
        if len(self._sizes) >= 10_000:
            self._sizes.clear()
        self._sizes[key] = documents

    def search(
        self,
        flt: SearchFilter,
        text: str,
        vector: Sequence[float] | None,
        k: int,
        *,
        vector_zh: Sequence[float] | None = None,
        statistics: KeywordStatistics | None = None,
    ) -> SearchResult:
        """Keyword and vector candidates in one ``_msearch``.

        The keyword search weighs the query's words by ``statistics`` (``statistics()``,
        asked for here when not given): counted under the filter, they also tell the vector
        search whether to score the filtered documents exactly. A vector search alone
        goes by the last count under the same filter, or walks the graph.
        """
        started = time.perf_counter()
        header = {"index": self.alias, "routing": flt.tenant_id}
        body: list[dict[str, Any]] = []
        labels: list[str] = []
        if text.strip():
            if statistics is None:
                statistics = self.statistics(flt, text)
            weights = statistics.weights() if statistics is not None else []
            if weights:
                body += [header, keyword_query(flt, weights, k)]
                labels.append("keyword")
        exact = self.scores_exactly(flt)
        if vector is not None:
            body += [header, vector_query(flt, vector, k, exact=exact)]
            labels.append("vector")
        if vector_zh is not None and self.dimensions_zh == len(vector_zh):
            body += [header, vector_query(flt, vector_zh, k, exact=exact, field="embedding_zh")]
            labels.append("vector_zh")
        lists: dict[str, list[Hit]] = {"keyword": [], "vector": [], "vector_zh": []}
        if body:
            out = self.client.msearch(body=body)
            for label, response in zip(labels, out["responses"], strict=True):
                if "error" in response:
                    error = response["error"]
                    kind = error.get("type") if isinstance(error, dict) else str(error)
                    if label == "vector_zh":
                        # An index behind the alias without the Chinese field (rolled
                        # back, or not yet given it): recall goes on with the others.
                        logger.warning("chinese vector search failed", extra={"error": kind})
                        continue
                    raise RuntimeError(f"search failed: {kind}")
                scored_exactly = exact and label != "keyword"
                lists[label] = [_hit(h, exact=scored_exactly) for h in response["hits"]["hits"]]
        return SearchResult(
            keyword=lists["keyword"],
            vector=lists["vector"],
            took_ms=(time.perf_counter() - started) * 1000,
            vector_zh=lists["vector_zh"],
        )

    def get(self, tenant_id: str, chain_id: str) -> tuple[int, dict[str, Any]] | None:
        from opensearchpy.exceptions import NotFoundError

        try:
            out = self.client.get(index=self.name, id=chain_id, routing=tenant_id)
        except NotFoundError:
            return None
        if not out.get("found"):
            return None
        return int(out["_version"]), dict(out["_source"])

    def documents(self, tenant_id: str) -> dict[str, tuple[int, dict[str, Any]]]:
        from opensearchpy.helpers import scan

        self.refresh()
        found: dict[str, tuple[int, dict[str, Any]]] = {}
        for hit in scan(
            self.client,
            index=self.name,
            routing=tenant_id,
            query={"query": {"term": {"tenant_id": tenant_id}}, "version": True},
        ):
            found[hit["_id"]] = (int(hit["_version"]), dict(hit["_source"]))
        return found

    def refresh(self) -> None:
        self.client.indices.refresh(index=self.name)


def is_loopback(endpoint: str) -> bool:
    """Whether an endpoint names this machine (a local node shares its cores)."""
    from urllib.parse import urlsplit

    host = urlsplit(endpoint if "//" in endpoint else f"//{endpoint}").hostname or ""
    return host in ("localhost", "::1") or host.startswith("127.")


def opensearch_client(endpoint: str, *, region: str, sigv4: bool) -> Any:
    from opensearchpy import OpenSearch, RequestsHttpConnection

    kwargs: dict[str, Any] = {
        "hosts": [endpoint],
        "timeout": 10,
        "max_retries": 2,
        "retry_on_timeout": True,
        "pool_maxsize": 16,
    }
    if sigv4:
        import boto3
        from opensearchpy import AWSV4SignerAuth

        credentials = boto3.Session().get_credentials()
        kwargs.update(
            http_auth=AWSV4SignerAuth(credentials, region, "es"),
            use_ssl=True,
            verify_certs=True,
            connection_class=RequestsHttpConnection,
        )
    return OpenSearch(**kwargs)
