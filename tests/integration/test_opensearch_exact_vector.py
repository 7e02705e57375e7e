"""The OpenSearch adapter's two vector searches agree: scoring every filtered document
exactly (``script_score``, used up to ``EXACT_UP_TO`` documents under the filter) and
walking the HNSW graph find the same neighbours with the same scores, under the same hard
filters, on a real node.

Every embedder gives unit vectors (``embeddings.base``), and exact scoring relies on it
(it takes the inner product for the cosine), so the documents here are unit vectors too."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from memvault.search import opensearch as adapter
from memvault.search.backend import SearchFilter
from memvault.search.opensearch import OpenSearchIndex
from tests.support.opensearch import scratch_index

DIM = 8


@pytest.fixture(scope="module")
def index() -> Iterator[OpenSearchIndex]:
    with scratch_index("test-exact", DIM) as idx:
        rng = random.Random(5)
        for n in range(90):
            tenant = "t-a" if n % 3 else "t-b"  # t-b shares subject ids with t-a
            _put(
                idx,
                n,
                tenant,
                f"s-{n % 2}",
                _unit([rng.gauss(0, 1) for _ in range(DIM)]),
                n % 5 == 0,
            )
        idx.refresh()
        yield idx


def _unit(vec: list[float]) -> list[float]:
    norm = sum(x * x for x in vec) ** 0.5
    return [x / norm for x in vec]


def _put(
    idx: OpenSearchIndex, n: int, tenant: str, subject: str, vec: list[float], secret: bool
) -> None:
    doc: dict[str, Any] = {
        "doc_type": "memory",
        "chain_id": f"chn_{n}",
        "memory_id": f"mem_{n}",
        "memory_version": 1,
        "tenant_id": tenant,
        "subject_id": subject,
        "kind": "semantic",
        "status": "active",
        "content": f"fact number {n} about the pipeline",
        "sensitivity_rank": 3 if secret else 1,
        "visible_to_all": True,
        "expires_at": "2999-01-01T00:00:00Z",
        "embedding": vec,
    }
    idx.client.index(index=idx.name, id=f"chn_{n}", body=doc, routing=tenant)


def _flt(tenant: str = "t-a", subject: str = "s-1") -> SearchFilter:
    return SearchFilter(
        tenant_id=tenant,
        subject_id=subject,
        now="2026-01-01T00:00:00Z",
        max_sensitivity_rank=1,
        agent_role=None,
    )


def _vector_hits(
    idx: OpenSearchIndex, body: dict[str, Any], tenant: str, *, exact: bool = False
) -> list[Any]:
    out = idx.client.msearch(body=[{"index": idx.alias, "routing": tenant}, body])
    return [adapter._hit(h, exact=exact) for h in out["responses"][0]["hits"]["hits"]]


def test_exact_and_graph_find_the_same_neighbours_with_the_same_scores(
    index: OpenSearchIndex,
) -> None:
    rng = random.Random(11)
    for _ in range(5):
        query = [rng.gauss(0, 1) for _ in range(DIM)]
        body = adapter.vector_query(_flt(), query, 10, exact=True)
        exact = _vector_hits(index, body, "t-a", exact=True)
        graph = _vector_hits(index, adapter.vector_query(_flt(), query, 10), "t-a")
        assert [h.chain_id for h in exact] == [h.chain_id for h in graph]
        for e, g in zip(exact, graph, strict=True):
            assert e.score == pytest.approx(g.score, abs=1e-5)
            assert 0.0 <= e.score <= 1.0


def test_a_keyword_search_counts_the_filter_and_the_vector_search_then_goes_exact(
    index: OpenSearchIndex,
) -> None:
    flt = _flt()
    query = [0.5] * DIM
    index._sizes.clear()
    graph = index.search(flt, "", query, 40).vector  # nothing counted yet: the graph
    index.search(flt, "pipeline", None, 40)
    # Tenant t-a, subject s-1, sensitivity rank <= 1: 30 documents of 90, less 6 secret ones.
    assert index._sizes[adapter._size_key(flt)] == 24
    exact = index.search(flt, "", query, 40).vector
    assert [h.chain_id for h in exact] == [h.chain_id for h in graph]
    assert len(exact) == 24
    held = {f"chn_{n}" for n in range(90) if n % 3 and n % 2 == 1 and n % 5}
    assert {h.chain_id for h in exact} == held  # the other tenant's s-1 is never scored


def test_a_filter_past_the_exact_limit_walks_the_graph(
    index: OpenSearchIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(adapter, "EXACT_UP_TO", 5)
    flt = _flt(subject="s-0")
    index._sizes.clear()
    index.search(flt, "pipeline", None, 40)
    assert index._sizes[adapter._size_key(flt)] > adapter.EXACT_UP_TO
    sent: list[Any] = []
    msearch = index.client.msearch

    def recording(**kwargs: Any) -> Any:
        sent.append(kwargs["body"])
        return msearch(**kwargs)

    monkeypatch.setattr(index.client, "msearch", recording)
    assert index.search(flt, "", [0.1] * DIM, 40).vector
    assert "knn" in sent[-1][1]["query"]


def test_loopback_endpoints_are_local() -> None:
    assert adapter.is_loopback("http://127.0.0.1:9200")
    assert adapter.is_loopback("http://localhost:9200")
    assert not adapter.is_loopback("https://search-x.eu-west-1.es.amazonaws.com")


def test_an_index_is_made_with_the_tight_merge_policy(index: OpenSearchIndex) -> None:
    """Fewer segments per tier than Lucene's default: a recall's exact scoring works segment
    by segment, and at 100,000 memories it took half the time on a third of the segments
    (``MERGE_POLICY``'s note). The node holds the setting as it was asked."""
    (name,) = index.alias_target()
    held = index.client.indices.get_settings(index=name)[name]["settings"]["index"]["merge"]
    assert held["policy"] == {k: str(v) for k, v in adapter.MERGE_POLICY.items()}
    assert float(held["policy"]["segments_per_tier"]) < 10  # Lucene's default


def test_an_index_keeps_each_subject_together_and_searches_segments_side_by_side(
    index: OpenSearchIndex,
) -> None:
    """Index sorting by (tenant, subject) and concurrent segment search, the two settings
    that cut exact scoring's time at 100,000 memories (``INDEX_SORT`` and
    ``CONCURRENT_SEARCH``'s notes). The node holds both as they were asked."""
    (name,) = index.alias_target()
    held = index.client.indices.get_settings(index=name)[name]["settings"]["index"]
    assert held["sort"]["field"] == ["tenant_id", "subject_id"]
    assert held["search"]["concurrent_segment_search"]["mode"] == "all"


def test_exact_scores_are_cosines_on_the_graphs_scale(index: OpenSearchIndex) -> None:
    """The inner product the exact search takes, brought to (1 + cosine) / 2: a stored
    vector scores 1 against itself and 0 against its opposite, and a query given at any
    length ranks and scores as its unit vector does."""
    doc = index.get("t-a", "chn_1")
    assert doc is not None
    stored = doc[1]["embedding"]
    own = _vector_hits(
        index, adapter.vector_query(_flt(), stored, 1, exact=True), "t-a", exact=True
    )
    assert own[0].chain_id == "chn_1"
    assert own[0].score == pytest.approx(1.0, abs=1e-5)
    longer = [3.0 * x for x in stored]
    scaled = _vector_hits(
        index, adapter.vector_query(_flt(), longer, 5, exact=True), "t-a", exact=True
    )
    assert scaled[0].chain_id == "chn_1"
    assert scaled[0].score == pytest.approx(1.0, abs=1e-5)
    opposite = _vector_hits(
        index,
        adapter.vector_query(_flt(), [-x for x in stored], 90, exact=True),
        "t-a",
        exact=True,
    )
    assert opposite[-1].chain_id == "chn_1"
    assert opposite[-1].score == pytest.approx(0.0, abs=1e-5)
