"""OpenSearch's keyword search brings back a window of candidates, counts its statistics
under the filter in the same request, and scores the window here
(``opensearch.keyword_window`` / ``window_best``). Its answer must be the one the exact
search by the counted weights gives (``keyword_query``): when the window cannot show
that it holds the best ``k``, the adapter asks that search.

On a real node: one subject of 240 documents whose words follow a steep frequency curve,
so that a window of ``k`` (``keyword_window`` 1) is often incomplete, and queries of two
to four words. The test asserts that both ways were taken (the window shown to hold the
best, and the second search), so that it cannot pass on one of them alone."""

from __future__ import annotations

import itertools
import random
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch

from memvault.search import opensearch as adapter
from memvault.search.backend import SearchFilter
from memvault.search.opensearch import OpenSearchIndex
from tests.support.opensearch import opensearch_url

DIM = 4
VOCABULARY = [f"w{n:02d}" for n in range(30)]
K = 5


@pytest.fixture(scope="module")
def index() -> Iterator[OpenSearchIndex]:
    client = OpenSearch(hosts=[opensearch_url()], timeout=30)
    alias = f"test-window-{uuid.uuid4().hex[:10]}"
    idx = OpenSearchIndex(
        client, alias, model_slug="m", model_id="m", model_version="1", dimensions=DIM
    )
    idx.ensure()
    rng = random.Random(17)
    # Word n is drawn with weight 1 / (n + 1): a few words in most documents, most in few.
    weights = [1 / (n + 1) for n in range(len(VOCABULARY))]
    for n in range(240):
        words = set(rng.choices(VOCABULARY, weights=weights, k=rng.randint(1, 5)))
        _put(idx, n, "t-a", " ".join(sorted(words)))
    # Another tenant's documents under the same subject id: never counted, never returned.
    for n in range(240, 300):
        _put(idx, n, "t-b", " ".join(VOCABULARY[20:]))
    idx.refresh()
    yield idx
    for name in idx.alias_target():
        client.indices.delete(index=name, ignore_unavailable=True)


def _put(idx: OpenSearchIndex, n: int, tenant: str, content: str) -> None:
    doc: dict[str, Any] = {
        "doc_type": "memory",
        "chain_id": f"chn_{n:03d}",
        "memory_id": f"mem_{n:03d}",
        "memory_version": 1,
        "tenant_id": tenant,
        "subject_id": "s-1",
        "kind": "semantic",
        "status": "active",
        "content": content,
        "sensitivity_rank": 1,
        "visible_to_all": True,
        "expires_at": "2999-01-01T00:00:00Z",
        "embedding": [0.5] * DIM,
    }
    idx.client.index(index=idx.name, id=f"chn_{n:03d}", body=doc, routing=tenant)


def _flt() -> SearchFilter:
    return SearchFilter(
        tenant_id="t-a",
        subject_id="s-1",
        now="2026-01-01T00:00:00Z",
        max_sensitivity_rank=1,
        agent_role=None,
    )


def _exact(idx: OpenSearchIndex, text: str) -> list[float]:
    """The best ``K`` scores by the exact search, with the statistics counted over the
    whole filter (a window larger than the subject)."""
    words = adapter.query_words(text)
    body = adapter.keyword_window(_flt(), words, [1.0] * len(words), 1000)
    out = idx.client.search(index=idx.alias, routing="t-a", body=body)
    statistics, best = adapter.window_best(out, words, [1.0] * len(words), 1000, K)
    assert best is not None  # a window larger than the filter is complete
    exact = idx.client.search(
        index=idx.alias, routing="t-a", body=adapter.keyword_query(_flt(), statistics.weights(), K)
    )
    scores = [round(float(h["_score"]), 4) for h in exact["hits"]["hits"]]
    assert scores == [round(h.score, 4) for h in best]
    return scores


def test_the_window_answers_as_the_exact_search_does(
    index: OpenSearchIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    index.keyword_window = 1
    second_searches: list[Any] = []
    search = index.client.search

    def counted(**kwargs: Any) -> Any:
        second_searches.append(kwargs["body"])
        return search(**kwargs)

    rng = random.Random(3)
    shown = asked = 0
    queries = [" ".join(rng.sample(VOCABULARY, rng.randint(2, 4))) for _ in range(60)] + [
        " ".join(pair) for pair in itertools.combinations(VOCABULARY[:6], 2)
    ]
    for text in queries:
        expected = _exact(index, text)
        monkeypatch.setattr(index.client, "search", counted)
        before = len(second_searches)
        got = index.search(_flt(), text, None, K).keyword
        monkeypatch.setattr(index.client, "search", search)
        assert [round(h.score, 4) for h in got] == expected, text
        assert all(h.chain_id < "chn_240" for h in got)  # the other tenant's never come back
        assert [(-h.score, h.chain_id) for h in got] == sorted((-h.score, h.chain_id) for h in got)
        if len(second_searches) > before:
            asked += 1
        else:
            shown += 1
    assert shown >= 10 and asked >= 10, (shown, asked)


def test_the_next_window_is_chosen_by_the_counts_under_the_same_filter(
    index: OpenSearchIndex,
) -> None:
    """Boosts come from the last count under the same filter, and only from it: another
    filter (here a lower ceiling) starts from equal boosts."""
    index._sizes.clear()
    index._counts.clear()
    words = adapter.query_words("w00 w25")
    assert index._boosts(adapter._size_key(_flt()), words) == [1.0, 1.0]
    index.search(_flt(), "w00 w25", None, K)
    common, rare = index._boosts(adapter._size_key(_flt()), words)
    assert rare > common > 0
    other = SearchFilter(
        tenant_id="t-a",
        subject_id="s-1",
        now="2026-01-01T00:00:00Z",
        max_sensitivity_rank=0,
        agent_role=None,
    )
    assert index._boosts(adapter._size_key(other), words) == [1.0, 1.0]


def test_the_outside_bound_is_never_below_the_best_choice() -> None:
    """The fractional knapsack bound is at least the best whole set of words a document
    outside the window could hold (brute force over every set)."""
    rng = random.Random(5)
    for _ in range(500):
        n = rng.randint(1, 7)
        idf = [rng.choice([0.0, rng.uniform(0.1, 9)]) for _ in range(n)]
        boosts = [rng.uniform(0.001, 9) for _ in range(n)]
        outside = [rng.random() < 0.7 for _ in range(n)]
        cap = rng.uniform(0, sum(boosts))
        best = max(
            sum(idf[i] for i in chosen)
            for size in range(n + 1)
            for chosen in itertools.combinations([i for i in range(n) if outside[i]], size)
            if sum(boosts[i] for i in chosen) <= cap
        )
        assert adapter._outside_bound(idf, boosts, outside, cap) >= best - 1e-9
