"""Rebuilding the embedded index from the table (the ``memvault reindex`` path: scan the
memory table, turn each item into the op the stream would have produced, write through
the indexer) keeps deleted memories dead.

The rebuilt index must hold a tombstone for every deleted chain, at a version above any
live one, so that a late stream record of the chain (a replayed INSERT, on a stream that
is read again from its start) is refused as stale instead of resurrecting the content.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from memvault.clock import iso
from memvault.embeddings.hashing import HashingEmbedder
from memvault.handlers.indexer import handle
from memvault.indexing.indexer import Indexer
from memvault.indexing.rebuild import rebuild
from memvault.search.backend import SearchFilter, SearchIndex
from memvault.search.embedded import EmbeddedIndex
from memvault.services.recall import RecallService
from memvault.storage.dynamodb import keys
from memvault_wire.memory import Memory, MemoryPatch
from memvault_wire.recall import RecallRequest
from tests.support.harness import a_write, ctx
from tests.support.recall import RecallRig, make_rig

EMBEDDER = HashingEmbedder()


@pytest.fixture
def rig() -> Iterator[RecallRig]:
    with mock_aws():
        yield make_rig("embedded", EMBEDDER, recall_relevance_floor=0.1)


def write(rig: RecallRig, content: str, **kw: Any) -> Memory:
    body = {"request_id": uuid.uuid4().hex, "canonical_key": None, "scope": {}, "tags": []}
    return rig.services.memory.write(
        ctx(), "u-1", a_write(content=content, **{**body, **kw})
    ).memory


def captured_records(rig: RecallRig) -> list[dict[str, Any]]:
    """Drain the stream into the live index, keeping a copy of every record delivered."""
    captured: list[dict[str, Any]] = []
    real = rig.pump.handler

    def keep(event: dict[str, Any]) -> dict[str, Any]:
        captured.extend(event["Records"])
        return real(event)

    rig.pump.handler = keep
    try:
        rig.sync()
    finally:
        rig.pump.handler = real
    return captured


def insert_of(records: list[dict[str, Any]], m: Memory) -> dict[str, Any]:
    return next(
        r
        for r in records
        if r["eventName"] == "INSERT"
        and r["dynamodb"]["Keys"]["sk"]["S"] == keys.version_sk(m.memory_id)
    )


def rebuilt_index(rig: RecallRig) -> tuple[EmbeddedIndex, Indexer]:
    """A fresh embedded index, built from the memory table alone."""
    index = EmbeddedIndex(f"rebuilt-{uuid.uuid4().hex[:8]}--{EMBEDDER.slug}")
    index.ensure()
    store = rig.services.memory.repo
    indexer = Indexer(index, EMBEDDER, store, rig.clock)
    report = rebuild(indexer, store.rebuild_records("acme"), batch=2)
    assert report.failed == 0
    index.refresh()
    return index, indexer


def recall_from(rig: RecallRig, index: SearchIndex, query: str) -> list[str]:
    service = RecallService(rig.services.memory.repo, index, EMBEDDER, rig.settings, rig.clock)
    return [
        i.memory.memory_id for i in service.recall(ctx(), "u-1", RecallRequest(query=query)).items
    ]


def proposed(rig: RecallRig, index: SearchIndex, query: str) -> set[str]:
    flt = SearchFilter(
        tenant_id="acme",
        subject_id="u-1",
        now=iso(rig.clock.now()),
        max_sensitivity_rank=1,
        agent_role=None,
    )
    found = index.search(flt, query, EMBEDDER.embed([query])[0], 10)
    return {h.chain_id for h in [*found.keyword, *found.vector]}


def test_a_rebuilt_index_refuses_a_replayed_insert_of_a_deleted_memory(rig: RecallRig) -> None:
    gone = write(rig, "Lin's locker is number 3172 in the west wing")
    kept = write(rig, "Lin's locker is in the east corridor")
    records = captured_records(rig)
    rig.services.memory.delete(ctx(), "u-1", gone.memory_id)  # the purge runs inline
    rig.sync()

    index, indexer = rebuilt_index(rig)

    held = index.get("acme", gone.chain_id)
    assert held is not None and held[1]["doc_type"] == "tombstone"
    assert "content" not in held[1]
    assert index.get("acme", kept.chain_id) is not None
    query = "Lin's locker combination"
    assert recall_from(rig, index, query) == [kept.memory_id]

    # The stream is read again from its start: the memory's own INSERT arrives late.
    answer = handle({"Records": [insert_of(records, gone)]}, indexer)
    index.refresh()

    assert answer == {"batchItemFailures": []}
    after = index.get("acme", gone.chain_id)
    assert after is not None and after[1]["doc_type"] == "tombstone"
    assert gone.chain_id not in proposed(rig, index, query)
    assert recall_from(rig, index, query) == [kept.memory_id]


def test_a_rebuilt_index_keeps_a_deleted_chain_dead_whichever_version_replays(
    rig: RecallRig,
) -> None:
    """A corrected, then deleted fact: neither version's INSERT brings it back, and a
    superseded chain left alive is rebuilt at its current version."""
    v1 = write(rig, "the release train leaves on Tuesdays", canonical_key="release-day")
    v2 = rig.services.memory.correct(
        ctx(), "u-1", v1.memory_id, MemoryPatch(expected_version=1, content="release on Weds")
    )
    live1 = write(rig, "the release notes live in the wiki", canonical_key="release-notes")
    live2 = rig.services.memory.correct(
        ctx(),
        "u-1",
        live1.memory_id,
        MemoryPatch(expected_version=1, content="the release notes live in the handbook"),
    )
    records = captured_records(rig)
    rig.services.memory.delete(ctx(), "u-1", v1.memory_id)
    rig.sync()

    index, indexer = rebuilt_index(rig)

    before = index.get("acme", v1.chain_id)
    assert before is not None and before[1]["doc_type"] == "tombstone"
    live = index.get("acme", live1.chain_id)
    assert live is not None and live[1]["memory_id"] == live2.memory_id
    answer = handle({"Records": [insert_of(records, v1), insert_of(records, v2)]}, indexer)
    index.refresh()

    assert answer == {"batchItemFailures": []}
    held = index.get("acme", v1.chain_id)
    assert held is not None and held[1]["doc_type"] == "tombstone"
    assert v1.chain_id not in proposed(rig, index, "release train Tuesdays Weds")
    recalled = recall_from(rig, index, "which day does the release train leave")
    assert {v1.memory_id, v2.memory_id}.isdisjoint(recalled)
    assert recall_from(rig, index, "where do the release notes live") == [live2.memory_id]
