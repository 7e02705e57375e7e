"""The numpy MiniLM reproduces sentence-transformers' all-MiniLM-L6-v2 vectors.

The reference vectors (``tests/data/minilm_reference.json``) were made by
sentence-transformers on torch (versions recorded in the file) from the same weights;
the shared copy under ``../shared/embeddings`` is checked against it when present.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer

from memvault.embeddings.minilm import DIMENSIONS, MAX_TOKENS, MODEL_ID, MiniLmEmbedder

REPO = Path(__file__).resolve().parents[2]
REFERENCE = REPO / "tests" / "data" / "minilm_reference.json"
SHARED_REFERENCE = REPO / ".." / "shared" / "embeddings" / "minilm_reference.json"
MIN_COSINE = 0.999

REF: dict[str, Any] = json.loads(REFERENCE.read_text(encoding="utf-8"))
ITEMS: list[dict[str, Any]] = REF["items"]


def cosine(a: list[float], b: list[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))


@pytest.fixture(scope="module")
def minilm() -> MiniLmEmbedder:
    return MiniLmEmbedder()


@pytest.fixture(scope="module")
def batch_vectors(minilm: MiniLmEmbedder) -> list[list[float]]:
    return minilm.embed([item["text"] for item in ITEMS])


def test_reference_describes_this_model(minilm: MiniLmEmbedder) -> None:
    assert REF["model"] == MODEL_ID == minilm.model_id
    assert REF["dim"] == DIMENSIONS == minilm.dimensions
    assert REF["max_seq_length"] == MAX_TOKENS
    assert REF["normalized"] is True
    assert len(ITEMS) >= 50


def test_weights_are_the_reference_weights(minilm: MiniLmEmbedder) -> None:
    digest = hashlib.sha256(minilm.weights_path.read_bytes()).hexdigest()
    assert digest == REF["weights_sha256"]
    assert minilm.weights_sha256 == REF["weights_sha256"]
    assert minilm.model_version == REF["weights_sha256"][:12]


def test_repo_copy_matches_the_shared_reference() -> None:
    if not SHARED_REFERENCE.is_file():
        pytest.skip("no ../shared checkout next to the repository")
    assert json.loads(SHARED_REFERENCE.read_text(encoding="utf-8")) == REF


@pytest.mark.parametrize("index", range(len(ITEMS)))
def test_batched_vector_matches_reference(index: int, batch_vectors: list[list[float]]) -> None:
    item = ITEMS[index]
    similarity = cosine(batch_vectors[index], item["embedding"])
    assert similarity >= MIN_COSINE, (index, item["text"][:60], similarity)


def test_one_by_one_vectors_match_reference(minilm: MiniLmEmbedder) -> None:
    worst = min(cosine(minilm.embed_one(item["text"]), item["embedding"]) for item in ITEMS)
    assert worst >= MIN_COSINE


def test_reference_covers_a_text_longer_than_256_tokens(
    minilm: MiniLmEmbedder, batch_vectors: list[list[float]]
) -> None:
    tokenizer = Tokenizer.from_file(str(minilm.model_dir / "tokenizer.json"))
    tokenizer.no_truncation()
    lengths = [len(tokenizer.encode(item["text"]).ids) for item in ITEMS]
    long = [i for i, n in enumerate(lengths) if n > MAX_TOKENS]
    assert long, "the reference should hold a text the model truncates"
    for i in long:
        assert cosine(batch_vectors[i], ITEMS[i]["embedding"]) >= MIN_COSINE
