"""The words OpenSearch's keyword search weighs (``text.query_words``) are the words the
index holds: stemmed as its ``english`` analyzer stems them (Porter's stemmer), so that
two words the index keeps apart are both searched and two it merges count once; and never
more than the node takes in one query (a fresh probe of stop 50 found each of the three
wrong: "sky skies" found one of its two memories, "community communism" weighed
"commun" twice, and a 2,000-character Chinese paragraph got a retryable 503 forever).

On a real node."""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

import pytest

from memvault.search import text
from memvault.search.backend import SearchFilter
from memvault.search.opensearch import OpenSearchIndex
from tests.support.opensearch import scratch_index

DIM = 4
CONTENTS = [
    "clear blue sky tonight",
    "the skies were grey",
    *["community meeting notes"] * 6,
    *["zyxq item notes"] * 3,
    *[f"filler line number {n}" for n in range(9)],
]


@pytest.fixture(scope="module")
def index() -> Iterator[OpenSearchIndex]:
    with scratch_index("test-words", DIM) as idx:
        for n, content in enumerate(CONTENTS):
            doc: dict[str, Any] = {
                "doc_type": "memory",
                "chain_id": f"chn_{n:02d}",
                "memory_id": f"mem_{n:02d}",
                "memory_version": 1,
                "tenant_id": "t-a",
                "subject_id": "s-1",
                "kind": "semantic",
                "status": "active",
                "content": content,
                "sensitivity_rank": 1,
                "visible_to_all": True,
                "expires_at": "2999-01-01T00:00:00Z",
                "embedding": [0.5] * DIM,
            }
            idx.client.index(index=idx.name, id=f"chn_{n:02d}", body=doc, routing="t-a")
        idx.refresh()
        yield idx


def _flt() -> SearchFilter:
    return SearchFilter(
        tenant_id="t-a",
        subject_id="s-1",
        now="2026-01-01T00:00:00Z",
        max_sensitivity_rank=1,
        agent_role=None,
    )


def _found(index: OpenSearchIndex, query: str) -> list[str]:
    return [CONTENTS[int(h.chain_id[4:])] for h in index.search(_flt(), query, None, 40).keyword]


@pytest.mark.parametrize("query", ["skies sky", "sky skies"])
def test_words_the_index_stems_apart_are_both_searched(index: OpenSearchIndex, query: str) -> None:
    assert set(_found(index, query)) == {"clear blue sky tonight", "the skies were grey"}


def test_words_the_index_stems_alike_count_once(index: OpenSearchIndex) -> None:
    """ "community" and "communism" are one stem in the index: counted twice, the six
    community notes would outrank the three notes holding the rarer "zyxq"."""
    found = _found(index, "community communism zyxq")
    assert found[:3] == ["zyxq item notes"] * 3
    assert found[3:] == ["community meeting notes"] * 6


_RNG = random.Random(7)


@pytest.mark.parametrize(
    "query",
    [
        "".join(chr(_RNG.randint(0x4E00, 0x9FFF)) for _ in range(2000)),
        " ".join(f"w{n}x" for n in range(700)),
        "zyxq " + " ".join(f"w{n}x" for n in range(700)),
    ],
    ids=["2000 CJK characters", "700 English words", "a known word, then 700"],
)
def test_a_query_of_thousands_of_words_is_searched(index: OpenSearchIndex, query: str) -> None:
    assert len(text.query_words(query)) == text.MAX_QUERY_WORDS
    found = _found(index, query)  # the node refused such a query before
    if query.startswith("zyxq"):
        assert found == ["zyxq item notes"] * 3
