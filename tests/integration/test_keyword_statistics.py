"""What a reader may not see moves none of its recall's scores.

BM25 weighs a word by how many documents hold it. Counted over the whole subject (the
embedded index) or the whole shard (OpenSearch, where a pool deployment's tenants share
one index), a memory the reader may not read, or another tenant's, changes the weight of
a word it holds: an agent that plants notes with a word and compares their scores learns
whether a hidden memory holds that word (a fresh probe found it, stop 49), or how many
hidden memories there are. Statistics
are now counted over what the recall's own filter admits. Run on both search backends
and both stores.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from memvault.embeddings.hashing import HashingEmbedder
from memvault.search.opensearch import OpenSearchIndex
from memvault_wire.memory import Sensitivity
from memvault_wire.recall import RecallRequest
from tests.support.harness import a_write, ctx
from tests.support.recall import RIG_PARAMS, RecallRig, rig_for

QUERY = "apple cherry zephyrine"
READER = ctx(agent_role="support")  # an agent with an internal ceiling


@pytest.fixture(params=RIG_PARAMS, ids="-".join)
def rig(request: pytest.FixtureRequest) -> Iterator[RecallRig]:
    yield from rig_for(request.param, HashingEmbedder())


def _write(
    rig: RecallRig, content: str, *, tenant: str = "acme", subject: str = "u-1", **kw: Any
) -> Any:
    body = {"request_id": uuid.uuid4().hex, "kind": "semantic", "canonical_key": None, **kw}
    writer = ctx(tenant, subject, max_sensitivity=Sensitivity.PII)
    return rig.services.memory.write(writer, subject, a_write(content=content, **body)).memory


def _scores(rig: RecallRig, mode: str) -> dict[str, float]:
    rig.sync()
    result = rig.services.recall.recall(
        READER, "u-1", RecallRequest(query=QUERY, mode=mode, relevance_floor=False)
    )
    # To four places: OpenSearch's float32 scores move a relevance by 1e-6 between two
    # recalls of the same data; a weight counted over hidden memories moves it by 1e-2.
    return {i.memory.content: round(i.why.relevance, 4) for i in result.items}


@pytest.mark.parametrize("mode", ["keyword", "hybrid"])
def test_hidden_and_foreign_memories_move_no_score(rig: RecallRig, mode: str) -> None:
    # "apple" twice: its weight against the others' then depends on how many documents
    # are counted, so a hidden memory without any of the words moves it too.
    for word in ("apple", "apple pie", "cherry", "zephyrine"):
        _write(rig, f"Canary note number one about {word} here")
    _write(rig, "Planted filler about nothing much")
    before = _scores(rig, mode)
    assert len(before) >= 4
    # Each holds the rare word, and none may be read by this reader.
    _write(rig, "Zephyrine clinic notes", sensitivity=Sensitivity.PII)
    _write(rig, "Zephyrine plan for the clinic team", visibility=["clinic"])
    _write(rig, "Zephyrine budget of another tenant", tenant="globex")
    _write(rig, "Zephyrine notes about another subject", subject="u-2")
    _write(rig, "A zephyrine candidate", source={"type": "model_inferred"})
    assert _scores(rig, mode) == before


def _answer(rig: RecallRig, query: str, limit: int) -> tuple[Any, ...]:
    """Everything a reader observes of one recall: items (ids, ranks, scores), conflicts
    and the trace's counts and drops."""
    rig.sync()
    result = rig.services.recall.recall(
        READER, "u-1", RecallRequest(query=query, limit=limit, relevance_floor=False)
    )
    trace = rig.services.traces.recall_trace(READER, result.recall_id)
    return (
        [
            (i.memory.memory_id, i.why.keyword_rank, i.why.vector_rank, round(i.why.relevance, 4))
            for i in result.items
        ],
        [sorted(c.memory_ids) for c in result.conflicts],
        dict(trace.candidates),
        [(d.reason, d.memory_id) for d in trace.dropped],
        trace.dropped_withheld,
    )


@pytest.mark.parametrize(
    "hidden",
    [
        {"sensitivity": Sensitivity.PII},
        {"visibility": ["clinic"]},
        {"sensitivity": Sensitivity.PII, "source": {"type": "model_inferred"}},
        {"sensitivity": Sensitivity.PII, "ttl_seconds": 1},
    ],
    ids=["above the ceiling", "outside the role", "a hidden candidate", "hidden, expired"],
)
def test_naming_a_hidden_facts_key_changes_nothing(rig: RecallRig, hidden: dict[str, Any]) -> None:
    """A fresh probe (stop 49): a fact the reader may not read, found by the key the
    query named, took a place in re-validation's first batch (a limit of 1 then answered
    another memory, and conflicts lost one) and, expired or still a candidate, was
    counted in the trace. The answer is now the same whether or not it exists."""
    for n in range(4):
        _write(rig, f"Billing address note {n}: invoices go to the office", scope={})
    _write(rig, "Ships by courier", canonical_key="shipping-preference", scope={"site": "a"})
    _write(rig, "Ships by post", canonical_key="shipping-preference", scope={})
    query = "billing-address and shipping-preference"
    before = [_answer(rig, query, limit) for limit in (1, 10)]
    _write(
        rig, "Billing address is the clinic", canonical_key="billing-address", scope={}, **hidden
    )
    if "ttl_seconds" in hidden:
        rig.clock.advance(seconds=5)
    after = [_answer(rig, query, limit) for limit in (1, 10)]
    assert after == before


def test_equal_scores_rank_by_chain_id_not_by_where_the_index_put_them(rig: RecallRig) -> None:
    """A fresh probe (stop 49): equal scores were ranked in the embedded index's slot
    order, and a slot is reused after a delete, so a note's rank told whether a memory
    the reader may not see had been deleted. Equal scores now rank by chain id."""
    notes = [_write(rig, f"Tied note about the zephyrine plan, take {n}") for n in range(6)]
    rig.sync()
    # Written in an order that is not their chain ids' (slots follow the writes).
    assert [m.chain_id for m in notes] != sorted(m.chain_id for m in notes)
    result = rig.services.recall.recall(
        READER, "u-1", RecallRequest(query="zephyrine plan", mode="keyword")
    )
    ranked = [(i.why.keyword_rank, i.memory.chain_id) for i in result.items]
    assert len(ranked) == len(notes)
    assert [chain for _, chain in sorted(ranked)] == sorted(chain for _, chain in ranked)


@pytest.fixture(params=[p for p in RIG_PARAMS if p[0] == "opensearch"], ids="-".join)
def os_rig(request: pytest.FixtureRequest) -> Iterator[RecallRig]:
    yield from rig_for(request.param, HashingEmbedder())


def test_the_count_stays_out_of_the_shards_request_cache(os_rig: RecallRig) -> None:
    """OpenSearch keeps the answer of a search that returns no hits (``size: 0``, as the
    count is) in the shard's request cache by default. The count's filter holds the time
    of the recall, so no entry would ever be read again: each would only push out one that
    might be, and keep the query's words in the node's memory. The count asks not to be
    cached."""
    rig = os_rig
    for word in ("apple", "cherry", "zephyrine"):
        _write(rig, f"A note about {word} for the cache")
    rig.sync()
    assert isinstance(rig.index, OpenSearchIndex)
    client, name = rig.index.client, rig.index.name

    def cached() -> tuple[int, int]:
        stats = client.indices.stats(index=name, metric="request_cache")
        held = stats["indices"][name]["total"]["request_cache"]
        return int(held["miss_count"]), int(held["memory_size_in_bytes"])

    before = cached()
    for query in ("apple cherry", "zephyrine note", "cherry cache"):
        result = rig.services.recall.recall(
            READER, "u-1", RecallRequest(query=query, mode="hybrid", relevance_floor=False)
        )
        assert result.items
    assert cached() == before
