"""Recall on a remote index sends the keyword search while the query is being embedded.

The index here is the embedded one marked remote, wrapped to record what each search
asked for; the embedder waits (bounded) for the keyword search to arrive before it
answers, which only happens when the two run at once."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from memvault.embeddings.hashing import HashingEmbedder
from memvault.indexing.indexer import Indexer
from memvault.search.backend import SearchFilter, SearchResult
from memvault.search.embedded import EmbeddedIndex
from memvault.services.recall import RecallService
from memvault.storage.sqlite.db import OutboxFeed
from memvault_local.outbox_pump import OutboxPump
from memvault_wire.errors import SearchUnavailable
from memvault_wire.recall import RecallRequest
from tests.support.harness import FakeClock, a_write, ctx, make_services


class RemoteLike:
    """An embedded index that says it is remote, and records each search's shape."""

    remote = True

    def __init__(self, inner: EmbeddedIndex, fail_keyword: bool = False) -> None:
        self.inner = inner
        self.name = inner.name
        self.asked: list[tuple[bool, bool]] = []  # (with text, with vector)
        self.keyword_arrived = threading.Event()
        self.fail_keyword = fail_keyword

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def search(
        self, flt: SearchFilter, text: str, vector: Sequence[float] | None, k: int
    ) -> SearchResult:
        self.asked.append((bool(text), vector is not None))
        if text and vector is None:
            self.keyword_arrived.set()
            if self.fail_keyword:
                raise ConnectionError("the node went away")
        return self.inner.search(flt, text, vector, k)


class WaitsForKeyword(HashingEmbedder):
    def __init__(self, index: RemoteLike) -> None:
        super().__init__()
        self.index = index
        self.saw_keyword_first: list[bool] = []

    def embed_query(self, text: str) -> list[float]:
        self.saw_keyword_first.append(self.index.keyword_arrived.wait(timeout=5))
        return super().embed_query(text)


@pytest.fixture
def rig(aws: None, tmp_path: Path) -> Any:
    services, _, clock = make_services(
        store="sqlite", data_dir=str(tmp_path / "data"), clock=FakeClock()
    )
    plain = HashingEmbedder()
    inner = EmbeddedIndex(f"overlap-{tmp_path.name}--{plain.slug}")
    pump = OutboxPump(
        OutboxFeed(services.stores.database),
        Indexer(inner, plain, services.stores.memory, clock),
        backoff_seconds=0,
    )
    written = services.memory.write(ctx(), "u-1", a_write(content="Lin prefers green tea"))
    pump.drain()
    yield services, inner, clock, written.memory
    services.stores.database.close()


def test_hybrid_recall_sends_the_keyword_search_before_the_embedding_is_done(rig: Any) -> None:
    services, inner, clock, memory = rig
    index = RemoteLike(inner)
    embedder = WaitsForKeyword(index)
    recall = RecallService(services.stores.memory, index, embedder, services.recall.settings, clock)

    found = recall.recall(ctx(), "u-1", RecallRequest(query="green tea"))

    assert embedder.saw_keyword_first == [True]
    assert sorted(index.asked) == [(False, True), (True, False)]
    assert [i.memory.memory_id for i in found.items] == [memory.memory_id]
    assert set(found.items[0].why.matched_by) >= {"keyword", "vector"}


def test_a_local_index_is_searched_once_after_the_embedding(rig: Any) -> None:
    services, inner, clock, memory = rig
    index = RemoteLike(inner)
    index.remote = False
    recall = RecallService(
        services.stores.memory, index, HashingEmbedder(), services.recall.settings, clock
    )
    found = recall.recall(ctx(), "u-1", RecallRequest(query="green tea"))
    assert index.asked == [(True, True)]
    assert [i.memory.memory_id for i in found.items] == [memory.memory_id]


def test_a_failed_early_keyword_search_is_a_retryable_503_not_a_500(rig: Any) -> None:
    services, inner, clock, _ = rig
    index = RemoteLike(inner, fail_keyword=True)
    recall = RecallService(
        services.stores.memory, index, HashingEmbedder(), services.recall.settings, clock
    )
    with pytest.raises(SearchUnavailable) as raised:
        recall.recall(ctx(), "u-1", RecallRequest(query="green tea"))
    assert raised.value.details == {"retryable": True}
