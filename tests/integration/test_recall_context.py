"""Conversation context in recall: a turn next to a strong match ranks up with it.

Memories written with ``source.thread`` and ``source.turn`` are turns of a conversation.
The answer to a question often sits one turn after the words that match it ("I adopted a
puppy" ... "we called him Biscuit"), so a turn gains ``recall_context_weight`` of its best
neighbour's fused score. Run on both search backends and both stores' codecs. Only
neighbours the table admits for the reader count: a hidden turn moves nothing.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws
from pydantic import ValidationError

from memvault.embeddings.hashing import HashingEmbedder
from memvault_wire.memory import MemoryWrite, Sensitivity, Source
from memvault_wire.recall import RecallRequest
from tests.support.harness import a_write, ctx
from tests.support.opensearch import opensearch_url
from tests.support.recall import BACKENDS, RecallRig, drop_opensearch_index, make_rig

EMBEDDER = HashingEmbedder()
ANSWER = "We called him Biscuit, after the colour of his coat"


def _rig(backend: str, **settings: Any) -> Iterator[RecallRig]:
    with mock_aws():
        url = opensearch_url() if backend == "opensearch" else None
        built = make_rig(
            backend,
            EMBEDDER,
            opensearch_url=url,
            **{"recall_relevance_floor": -1.0, "recall_similarity_margin": 2.0, **settings},
        )
        try:
            yield built
        finally:
            if backend == "opensearch":
                drop_opensearch_index(built.index)


@pytest.fixture(params=BACKENDS)
def rig(request: pytest.FixtureRequest) -> Iterator[RecallRig]:
    yield from _rig(request.param)


def _write(rig: RecallRig, content: str, source: dict[str, Any], **kw: Any) -> Any:
    body = {
        "request_id": uuid.uuid4().hex,
        "kind": "episodic",
        "canonical_key": None,
        "scope": {},
        "tags": [],
        "source": {"type": "user_statement", "ref": f"turn-{uuid.uuid4().hex[:6]}", **source},
        **kw,
    }
    return rig.services.memory.write(
        ctx(max_sensitivity=Sensitivity.PII), "u-1", a_write(content=content, **body)
    ).memory


def _conversation(
    rig: RecallRig, *, question_turn: dict[str, Any] | None = None
) -> tuple[Any, Any]:
    """A thread whose turn 1 matches the query and whose turn 2 answers it, and the same
    answer's words written again outside any thread (identical scores but for context)."""
    _write(rig, "Good morning! How was the weekend?", {"thread": "chat-7", "turn": 0})
    _write(
        rig,
        "Maria adopted a puppy from the shelter on Saturday",
        {"thread": "chat-7", "turn": 1},
        **(question_turn or {}),
    )
    threaded = _write(rig, ANSWER, {"thread": "chat-7", "turn": 2})
    _write(rig, "The quarterly report is due on Friday", {"thread": "chat-7", "turn": 3})
    loose = _write(rig, ANSWER, {})
    rig.sync()
    return threaded, loose


def _recall(rig: RecallRig, query: str, **caller: Any) -> Any:
    return rig.services.recall.recall(ctx(**caller), "u-1", RecallRequest(query=query, limit=10))


def _item(result: Any, memory_id: str) -> Any:
    return next(i for i in result.items if i.memory.memory_id == memory_id)


def test_the_turn_after_a_strong_match_ranks_ahead_of_the_same_words_out_of_context(
    rig: RecallRig,
) -> None:
    threaded, loose = _conversation(rig)
    result = _recall(rig, "Maria adopted a puppy: what is its name?")
    order = [i.memory.memory_id for i in result.items]
    assert order.index(threaded.memory_id) < order.index(loose.memory_id)
    gained = _item(result, threaded.memory_id)
    match = next(i for i in result.items if "puppy" in i.memory.content)
    # 0.3 of the matching turn's fused score (relevance without its own context).
    assert gained.why.context == pytest.approx(
        0.3 * (match.why.relevance - (match.why.context or 0)), abs=1e-5
    )
    assert _item(result, loose.memory_id).why.context is None


@pytest.mark.parametrize("backend", ["embedded"])
def test_a_context_weight_of_zero_turns_it_off(backend: str) -> None:
    for rig in _rig(backend, recall_context_weight=0.0):
        threaded, loose = _conversation(rig)
        result = _recall(rig, "Maria adopted a puppy: what is its name?")
        a, b = _item(result, threaded.memory_id), _item(result, loose.memory_id)
        assert a.why.context is None and a.why.relevance == pytest.approx(b.why.relevance)


def test_a_neighbour_the_reader_may_not_see_gives_nothing(rig: RecallRig) -> None:
    """The matching turn is personal data; an internal-ceiling reader's recall does not
    know it exists, so its neighbour gains nothing from it."""
    threaded, _ = _conversation(rig, question_turn={"sensitivity": "pii", "consent": True})
    hidden = _recall(rig, "Maria adopted a puppy: what is its name?")
    assert all("puppy" not in i.memory.content for i in hidden.items)
    # Its one visible neighbour (turn 3) still counts; the hidden turn 1 does not.
    after = next(i for i in hidden.items if "quarterly" in i.memory.content)
    gained = _item(hidden, threaded.memory_id).why.context
    assert gained == pytest.approx(0.3 * (after.why.relevance - (after.why.context or 0)), abs=1e-5)
    seen = _recall(rig, "Maria adopted a puppy: what is its name?", max_sensitivity=Sensitivity.PII)
    assert (_item(seen, threaded.memory_id).why.context or 0) > 0


def test_neighbours_beyond_the_first_page_are_read_back() -> None:
    """Only limit + 2 candidates are read back at first; when they hold a conversation's
    turns, the rest of the first ``recall_context_candidates`` are read back too, where
    the neighbours of the best matches are."""

    def run(weight: float) -> list[str]:
        for rig in _rig("embedded", recall_context_weight=weight):
            _write(rig, "Maria adopted a puppy from the shelter", {"thread": "c", "turn": 0})
            answer = _write(rig, "We called him Biscuit", {"thread": "c", "turn": 1})
            for n in range(12):
                _write(rig, f"Maria and the neighbours met for tea, week {n}", {})
            rig.sync()
            result = rig.services.recall.recall(
                ctx(), "u-1", RecallRequest(query="Maria adopted a puppy", limit=3)
            )
            return [answer.memory_id, *(i.memory.memory_id for i in result.items)]
        raise AssertionError("no rig")

    answer, *found = run(0.3)
    assert answer in found
    answer, *found = run(0.0)
    assert answer not in found


def test_a_turn_needs_its_thread_and_unset_fields_keep_the_fingerprint() -> None:
    with pytest.raises(ValidationError, match=r"source\.thread"):
        Source.model_validate({"type": "user_statement", "turn": 3})
    with pytest.raises(ValidationError):
        Source.model_validate({"type": "user_statement", "thread": "t", "turn": -1})
    plain = a_write()
    assert plain.fingerprint_payload()["source"] == {"type": "user_statement", "ref": "msg-17"}
    threaded = MemoryWrite.model_validate(
        {
            **plain.model_dump(),
            "source": {"type": "user_statement", "ref": "m", "thread": "t", "turn": 0},
        }
    )
    assert threaded.fingerprint_payload()["source"]["turn"] == 0


def test_the_turn_next_to_a_relevant_one_passes_the_similarity_margin() -> None:
    """With a margin of 0 only the best match is relevant by its own words; its
    neighbouring turn (the answer) comes back with it, the same words out of context do
    not."""
    for rig in _rig("embedded", recall_similarity_margin=0.0, recall_keyword_coverage=1.0):
        threaded, loose = _conversation(rig)
        result = _recall(rig, "Maria adopted a puppy from the shelter on Saturday")
        found = [i.memory.memory_id for i in result.items]
        assert threaded.memory_id in found and loose.memory_id not in found
        assert len(found) == 3  # the match and its two neighbours


def test_a_thread_is_scanned_like_every_stored_text() -> None:
    from memvault_wire.errors import SecretDetected

    for rig in _rig("embedded"):
        with pytest.raises(SecretDetected) as refused:
            _write(
                rig, "hello", {"thread": "ghp_" + "Zq8vR2mXk4Lp7Tn1Wc5Yb3Hd9Fs6Ja0Ge2Ku", "turn": 0}
            )
        assert [f["field"] for f in refused.value.details["findings"]] == ["source.thread"]
