"""Recall routed by language: memories that hold Chinese carry a second vector from the
Chinese model, and a Chinese query searches it as well as the English model's, on both
backends, under the same hard filter.

The two models here are stand-ins whose cosines the test sets: each maps a text to the
axes of the concepts it names. The "English" model relates the query to the distractor
only; the "Chinese" model relates it to the target only. So whether the target comes back
says whether the Chinese vectors were written, searched and fused. The stand-ins are not
the code under test: the indexer, both indexes, fusion and the relevance margin are.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from moto import mock_aws

from memvault.clock import iso
from memvault.embeddings.base import EmbeddingUnavailable, check_slug
from memvault.search.backend import SearchFilter
from memvault_wire.memory import MemoryPatch, MemoryStatus
from memvault_wire.recall import RecallRequest
from tests.support.harness import a_write, ctx
from tests.support.opensearch import opensearch_url
from tests.support.recall import BACKENDS, RecallRig, drop_opensearch_index, make_rig

QUERY = "宠物叫什么"
TARGET = "家中小猫咪花花"  # no character in common with the query
DISTRACTOR = "明天问问他什么时候到"  # shares 什么 with the query


class ConceptEmbedder:
    """Unit vectors on one axis per named concept; a text naming none is on axis 0."""

    model_version = "1"

    def __init__(self, model_id: str, dimensions: int, concepts: dict[str, int]) -> None:
        self.model_id = model_id
        self.dimensions = dimensions
        self.concepts = concepts
        self.queries: list[str] = []
        self.texts: list[str] = []

    @property
    def slug(self) -> str:
        return check_slug(f"{self.model_id.split('/')[-1]}-{self.dimensions}")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.texts.extend(texts)
        return [self.embed_one(t) for t in texts]

    def embed_one(self, text: str) -> list[float]:
        axes = {axis for word, axis in self.concepts.items() if word in text} or {0}
        norm = len(axes) ** 0.5
        return [1.0 / norm if i in axes else 0.0 for i in range(self.dimensions)]

    def embed_query(self, text: str) -> list[float]:
        self.queries.append(text)
        return self.embed_one(text)


def english() -> ConceptEmbedder:
    return ConceptEmbedder("test/english", 8, {"什么": 1, "when": 1, "pet": 2})


def chinese() -> ConceptEmbedder:
    return ConceptEmbedder("test/chinese", 12, {"宠物": 1, "猫": 1, "狗": 2})


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


def rig_for(backend: str, routed: bool) -> tuple[RecallRig, ConceptEmbedder | None]:
    zh = chinese() if routed else None
    url = opensearch_url() if backend == "opensearch" else None
    built = make_rig(backend, english(), opensearch_url=url, chinese=zh)
    return built, zh


@pytest.fixture
def routed(backend: str) -> Iterator[tuple[RecallRig, ConceptEmbedder]]:
    with mock_aws():
        built, zh = rig_for(backend, routed=True)
        assert zh is not None
        try:
            yield built, zh
        finally:
            drop_opensearch_index(built.index)


def write(rig: RecallRig, content: str, subject: str = "u-1", **kw: Any) -> Any:
    body = {"request_id": uuid.uuid4().hex, "canonical_key": None, "scope": {}, "tags": []}
    return rig.services.memory.write(
        ctx("acme", subject), subject, a_write(content=content, **{**body, **kw})
    ).memory


def internal_reader(rig: RecallRig) -> SearchFilter:
    """The hard filter of u-1's recall by a caller whose ceiling is ``internal``."""
    return SearchFilter(
        tenant_id="acme",
        subject_id="u-1",
        now=iso(rig.clock.now()),
        max_sensitivity_rank=1,
        agent_role=None,
        statuses=(MemoryStatus.ACTIVE.value,),
    )


def recalled(rig: RecallRig, query: str, **kw: Any) -> list[str]:
    caller = {k: kw.pop(k) for k in ("max_sensitivity",) if k in kw}
    answer = rig.services.recall.recall(
        ctx("acme", "u-1", **caller), "u-1", RecallRequest(query=query, **kw)
    )
    return [i.memory.content for i in answer.items]


def test_a_chinese_query_finds_what_only_the_chinese_model_relates(backend: str) -> None:
    """Without the Chinese model the target is a candidate (the English k-NN returns every
    memory of so small a subject) but far below the distractor's similarity, so the
    relevance margin drops it; with the model it is the Chinese list's best match."""
    found: dict[bool, list[str]] = {}
    for routed in (False, True):
        with mock_aws():
            rig, _ = rig_for(backend, routed)
            try:
                write(rig, TARGET)
                write(rig, DISTRACTOR)
                rig.sync()
                found[routed] = recalled(rig, QUERY)
            finally:
                drop_opensearch_index(rig.index)
    assert TARGET not in found[False]
    assert DISTRACTOR in found[False]
    assert TARGET in found[True]
    assert DISTRACTOR in found[True]


def test_the_models_that_embedded_and_ranked_are_named(
    routed: tuple[RecallRig, ConceptEmbedder],
) -> None:
    """A memory that holds Chinese records both models that embedded it, and a recall
    whose Chinese list was searched names both models that ranked it; an English memory
    and an English recall name the English model alone."""
    rig, _ = routed
    cn = write(rig, TARGET)
    en = write(rig, "the cat is called Huahua")
    rig.sync()
    store = rig.services.stores.memory
    stored = {m.memory_id: store.version("acme", "u-1", m.memory_id) for m in (cn, en)}
    assert stored[cn.memory_id].embedding_model == "test/english@1+test/chinese@1"
    assert stored[en.memory_id].embedding_model == "test/english@1"
    ask = rig.services.recall.recall
    chinese_answer = ask(ctx("acme", "u-1"), "u-1", RecallRequest(query=QUERY))
    english_answer = ask(ctx("acme", "u-1"), "u-1", RecallRequest(query="what is the pet"))
    assert chinese_answer.embedding_model == "test/english@1+test/chinese@1"
    assert english_answer.embedding_model == "test/english@1"


def test_only_memories_that_hold_chinese_are_embedded_twice(
    routed: tuple[RecallRig, ConceptEmbedder],
) -> None:
    rig, zh = routed
    cn = write(rig, TARGET)
    en = write(rig, "the cat is called Huahua")
    rig.sync()
    assert zh.texts == [TARGET]
    held = {m.chain_id: rig.index.get("acme", m.chain_id) for m in (cn, en)}
    cn_doc, en_doc = held[cn.chain_id], held[en.chain_id]
    assert cn_doc is not None and en_doc is not None
    assert cn_doc[1]["embedding_zh"] == pytest.approx(chinese().embed_one(TARGET))
    assert "embedding_zh" not in en_doc[1]


def test_a_writer_can_name_a_memorys_language(
    routed: tuple[RecallRig, ConceptEmbedder],
) -> None:
    """Named, the language decides the models, whatever the content looks like; it is
    kept with the memory, carried to its corrections and changed by one."""
    rig, zh = routed
    named = write(rig, "猫 Huahua", language="zh")  # one Han character: not detected
    kept_out = write(rig, "我的猫叫花花", language="en")
    rig.sync()
    assert zh.texts == ["猫 Huahua"]
    assert named.language == "zh" and kept_out.language == "en"
    doc = rig.index.get("acme", kept_out.chain_id)
    assert doc is not None and "embedding_zh" not in doc[1]
    corrected = rig.services.memory.correct(
        ctx(), "u-1", kept_out.memory_id, MemoryPatch(expected_version=1, language="auto")
    )
    fixed = rig.services.memory.correct(
        ctx(), "u-1", named.memory_id, MemoryPatch(expected_version=1, content="猫 Mimi")
    )
    rig.sync()
    assert corrected.language == "auto" and fixed.language == "zh"
    assert zh.texts == ["猫 Huahua", "我的猫叫花花", "猫 Mimi"]
    stored = rig.services.memory.get(ctx(), "u-1", fixed.memory_id)
    assert stored.language == "zh"


def test_the_query_language_is_detected_and_can_be_named(
    routed: tuple[RecallRig, ConceptEmbedder],
) -> None:
    rig, zh = routed
    write(rig, TARGET)
    write(rig, DISTRACTOR)
    rig.sync()
    # An English query is not embedded by the Chinese model.
    recalled(rig, "when does he arrive")
    assert zh.queries == []
    # A Chinese one is; naming the language overrides the detection either way.
    assert TARGET in recalled(rig, QUERY)
    assert zh.queries == [QUERY]
    assert TARGET not in recalled(rig, QUERY, language="en")
    assert zh.queries == [QUERY]
    # One Han character alone is not Chinese, unless the caller says it is.
    assert TARGET not in recalled(rig, "猫, when?")
    assert zh.queries == [QUERY]
    assert TARGET in recalled(rig, "猫, when?", language="zh")
    assert zh.queries == [QUERY, "猫, when?"]


def test_the_chinese_vectors_are_searched_under_the_same_hard_filter(
    routed: tuple[RecallRig, ConceptEmbedder],
) -> None:
    """Each memory here is the Chinese model's best match for the query, and none may
    reach it: another subject's, one above the reader's sensitivity ceiling, a deleted
    one and the old version of an updated one."""
    rig, _ = routed
    other = write(rig, "邻居家的猫叫咪咪", subject="u-2")
    secret = write(rig, "我的猫的病历在这里", sensitivity="pii")
    gone = write(rig, "以前养过一只猫", canonical_key=None)
    old = write(rig, "现在养了一只猫", canonical_key="pet")
    rig.sync()
    rig.services.memory.delete(ctx(), "u-1", gone.memory_id)
    newer = write(rig, "cat adopted by my sister", canonical_key="pet")
    rig.sync()
    assert newer.chain_id == old.chain_id and newer.version == old.version + 1
    flt = internal_reader(rig)
    found = rig.index.search(
        flt, "", english().embed_one(QUERY), 10, vector_zh=chinese().embed_one(QUERY)
    )
    chains = {h.chain_id for h in found.vector_zh}
    assert not chains & {other.chain_id, secret.chain_id, gone.chain_id, old.chain_id}
    answer = recalled(rig, QUERY)
    for m in (other, secret, gone, old):
        assert m.content not in answer


class BrokenChinese(ConceptEmbedder):
    """The Chinese model failing, as a worker that died or weights gone missing would."""

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise EmbeddingUnavailable("the model is gone", model_id=self.model_id, retryable=True)

    def embed_query(self, text: str) -> list[float]:
        raise EmbeddingUnavailable("the model is gone", model_id=self.model_id, retryable=True)


def test_a_failing_chinese_model_leaves_indexing_and_recall_to_the_english_one(
    backend: str,
) -> None:
    """Neither the batch (English memories and tombstones with it) nor the recall fails:
    both go on as they would without the Chinese model."""
    with mock_aws():
        url = opensearch_url() if backend == "opensearch" else None
        rig = make_rig(
            backend, english(), opensearch_url=url, chinese=BrokenChinese("test/zh", 12, {})
        )
        try:
            cn = write(rig, DISTRACTOR)
            en = write(rig, "when does the train leave")
            rig.sync()
            for m in (cn, en):
                held = rig.index.get("acme", m.chain_id)
                assert held is not None and held[1]["doc_type"] == "memory"
                assert "embedding_zh" not in held[1]
            assert DISTRACTOR in recalled(rig, QUERY)
        finally:
            drop_opensearch_index(rig.index)


def test_an_opensearch_index_made_before_the_chinese_model_gains_its_field() -> None:
    """Turning the Chinese model on keeps the index recall reads (its name is the English
    model's): the field joins the mapping in place, and an index behind the alias that
    lacks it answers a Chinese query with its other lists instead of an error."""
    from memvault.search.opensearch import OpenSearchIndex

    with mock_aws():
        url = opensearch_url()
        plain = make_rig("opensearch", english(), opensearch_url=url)
        try:
            write(plain, DISTRACTOR)
            plain.sync()
            old = plain.index
            assert isinstance(old, OpenSearchIndex)
            # A process told of the Chinese model, before it ensured the index.
            routed = OpenSearchIndex(
                old.client,
                old.alias,
                model_slug=english().slug,
                model_id=old.model_id,
                model_version=old.model_version,
                dimensions=old.dimensions,
                dimensions_zh=12,
            )
            flt = internal_reader(plain)
            zh = chinese().embed_one(QUERY)
            before = routed.search(flt, QUERY, english().embed_one(QUERY), 5, vector_zh=zh)
            assert before.vector and before.vector_zh == []
            routed.ensure()
            assert routed.name == old.name
            mapped = old.client.indices.get_mapping(index=old.name)[old.name]["mappings"]
            assert mapped["properties"]["embedding_zh"]["dimension"] == 12
        finally:
            drop_opensearch_index(plain.index)


def test_the_chinese_lists_best_match_needs_a_cosine_to_be_kept(
    routed: tuple[RecallRig, ConceptEmbedder],
) -> None:
    """A subject whose one Chinese memory the Chinese model finds unrelated to the query
    (cosine 0): the best of a one-item list, it would be kept on the margin alone."""
    rig, zh = routed
    unrelated = write(rig, "王磊负责周一的站会")
    write(rig, DISTRACTOR)
    rig.sync()
    answer = recalled(rig, QUERY)
    assert zh.queries == [QUERY]
    assert DISTRACTOR in answer
    assert unrelated.content not in answer
