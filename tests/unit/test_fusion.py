"""Score fusion of the keyword and vector lists, and each embedder's recall tuning."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from memvault.config import Settings
from memvault.embeddings.hashing import HashingEmbedder
from memvault.search.backend import Hit
from memvault.search.fusion import DEFAULT_TUNING, TUNINGS, normalised, tuning_for
from memvault.search.text import content_tokens, tokens
from memvault.services.recall import RecallService, _Candidate
from memvault_wire.recall import RecallRequest
from tests.support.harness import FakeClock


class _Named(HashingEmbedder):
    def __init__(self, model_id: str) -> None:
        super().__init__()
        self._id = model_id

    @property
    def model_id(self) -> str:  # type: ignore[override]
        return self._id


def _service(model_id: str = "test/hashing", **settings: Any) -> RecallService:
    return RecallService(
        None,  # type: ignore[arg-type] - fusion reads no table
        None,
        _Named(model_id),
        Settings(**settings),
        FakeClock(),
    )


def _hit(chain: str, score: float) -> Hit:
    return Hit(chain, f"{chain}-v1", 1, score)


def test_scores_are_brought_to_zero_one_over_their_list() -> None:
    assert normalised([_hit("a", 12.0), _hit("b", 7.0), _hit("c", 2.0)]) == [1.0, 0.5, 0.0]
    assert normalised([_hit("a", 3.0), _hit("b", 3.0)]) == [1.0, 1.0]
    assert normalised([]) == []


def test_a_candidate_near_the_top_of_both_lists_beats_one_that_leads_one_and_trails_the_other() -> (
    None
):
    """Rank fusion gives "a" (first by keyword, a distant second by vector) and "b" (a
    close second by keyword, first by vector) the same credit; scores tell them apart."""
    keyword = [_hit("a", 10.0), _hit("b", 9.9), _hit("c", 0.1)]
    vector = [_hit("b", 0.95), _hit("a", 0.60), _hit("c", 0.595)]  # (1 + cos) / 2
    fused = _service()._fuse(keyword, vector)
    ranked = sorted(fused.values(), key=lambda c: (-c.fused, c.chain_id))
    assert [c.chain_id for c in ranked] == ["b", "a", "c"]
    assert fused["b"].fused == pytest.approx(0.5 * 9.8 / 9.9 + 0.5)
    assert (fused["a"].keyword_rank, fused["a"].vector_rank) == (1, 2)


def test_the_vector_weight_is_the_embedders() -> None:
    keyword = [_hit("k", 5.0), _hit("x", 1.0)]
    vector = [_hit("v", 0.9), _hit("x", 0.5)]
    e5 = _service("intfloat/e5-small-v2")._fuse(keyword, vector)
    assert e5["v"].fused == pytest.approx(0.55) and e5["k"].fused == pytest.approx(0.45)
    assert TUNINGS["intfloat/e5-small-v2"].vector_weight == 0.55


def test_each_model_has_its_floor_and_margin_unless_settings_name_them() -> None:
    e5 = tuning_for("intfloat/e5-small-v2")
    assert (e5.relevance_floor, e5.corroborated_floor, e5.cjk_floor) == (0.825, 0.805, 0.81)
    assert tuning_for("sentence-transformers/all-MiniLM-L6-v2").relevance_floor == 0.35
    assert tuning_for("amazon.titan-embed-text-v2:0") == DEFAULT_TUNING
    assert _service("intfloat/e5-small-v2").tuning == e5
    assert Settings().recall_relevance_floor is None
    assert Settings(recall_relevance_floor=0.2).recall_relevance_floor == 0.2


def test_a_cosine_under_the_floor_passes_only_when_some_of_the_querys_words_agree() -> None:
    """e5's unrelated queries reach cosines of 0.78-0.82 with some memory, and share a
    word or two with some memory, but not both at once (the shared evaluation set's
    "expect empty" queries): either signal strong, or both moderate."""
    e5 = tuning_for("intfloat/e5-small-v2")
    assert e5.passes(0.83, 0.0, 0.825, 0.4)  # the cosine alone
    assert e5.passes(0.70, 0.4, 0.825, 0.4)  # the words alone
    assert e5.passes(0.81, 0.25, 0.825, 0.4)  # both moderate
    assert not e5.passes(0.815, 0.2, 0.825, 0.4)  # too few words agree
    assert not e5.passes(0.80, 0.34, 0.825, 0.4)  # too low a cosine
    # A floor set lower than the corroborated one leaves nothing for it to add.
    assert not e5.passes(0.70, 0.3, 0.72, 0.4) and e5.passes(0.72, 0.0, 0.72, 0.4)
    minilm = tuning_for("sentence-transformers/all-MiniLM-L6-v2")
    assert minilm.corroborated_floor is None and not minilm.passes(0.34, 0.39, 0.35, 0.4)


def test_a_chinese_query_keeps_e5s_single_floor() -> None:
    e5 = tuning_for("intfloat/e5-small-v2")
    assert e5.floor_for("which LaTeX template to use") == 0.825
    assert e5.floor_for("表单校验用什么库") == 0.81
    assert e5.floor_for("billing-api 回滚命令") == 0.81
    assert tuning_for("sentence-transformers/all-MiniLM-L6-v2").floor_for("表单校验") == 0.35


def _turn(content: str) -> Any:
    return SimpleNamespace(
        content=content, canonical_key=None, tags=[], source=SimpleNamespace(thread=None, turn=None)
    )


def _kept(service: RecallService, query: str, similarity: float, content: str) -> list[str]:
    cand = _Candidate("c1", "m1", vector_rank=1, similarity=similarity)
    kept = service._relevant([(cand, _turn(content))], RecallRequest(query=query))
    return [c.chain_id for c, _ in kept]


def test_recall_answers_nothing_unless_the_floor_or_the_corroborated_floor_passes() -> None:
    e5 = _service("intfloat/e5-small-v2")
    query = "Spring Security OAuth2 resource server"  # five words
    assert _kept(e5, query, 0.817, "The interview covers Spring Boot starters") == []
    assert _kept(e5, query, 0.817, "Spring Security and session cookies") == ["c1"]
    assert _kept(e5, query, 0.83, "Nothing in common at all") == ["c1"]
    # A setting moves the floor; the corroborated floor is capped at it.
    assert (
        _kept(
            _service("intfloat/e5-small-v2", recall_relevance_floor=0.9),
            query,
            0.85,
            "Nothing in common",
        )
        == []
    )
    # The Chinese floor: 0.81 for a Chinese query with no word in common.
    assert _kept(e5, "表单校验用什么库", 0.815, "Forms use react-hook-form") == ["c1"]
    assert _kept(e5, "表单校验用什么库", 0.805, "Forms use react-hook-form") == []


def test_function_words_are_no_agreement() -> None:
    """A fresh probe found "Do I have a PMP certification?" passing the floor on "I" and
    "have" alone (two words of five, the 40% keyword coverage): pronouns, question words
    and auxiliaries now count neither in the query nor in a memory."""
    e5 = _service("intfloat/e5-small-v2")
    query = "Do I have a PMP certification?"
    assert _kept(e5, query, 0.80, "I have an interview with Stripe on Friday") == []
    assert _kept(e5, query, 0.80, "I passed the PMP exam in May") == ["c1"]
    assert content_tokens("What do I usually have for breakfast?") == ["breakfast"]
    assert "have" in tokens("I have a dog")  # keyword search keeps them, as OpenSearch does
