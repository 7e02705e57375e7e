"""The embedder seam: MiniLM on numpy, the hashing stand-in, Titan V2 on Bedrock, the factory."""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import boto3
import pytest
from botocore.response import StreamingBody
from botocore.stub import Stubber

import memvault.embeddings as embeddings
import memvault.embeddings.minilm as minilm_module
from memvault.config import Settings
from memvault.embeddings import Embedder, EmbeddingUnavailable, embedder_from_settings
from memvault.embeddings.bedrock import MAX_CHARS, TitanEmbedder
from memvault.embeddings.hashing import HashingEmbedder
from memvault.embeddings.minilm import MAX_TOKENS, MiniLmEmbedder, default_model_dir

SLUG_CHARS = set("abcdefghijklmnopqrstuvwxyz0123456789-")


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))


def norm(v: Sequence[float]) -> float:
    return math.sqrt(math.fsum(x * x for x in v))


# --- MiniLM ---------------------------------------------------------------------------

MIXED = [
    "The user prefers answers in Chinese.",
    "Deploy with cdk deploy --context tenant=acme, then run the smoke tests against "
    "the staging stage and watch the alarms for a quarter of an hour before promoting.",
    "用户喜欢用中文回答问题。",
    "ok",
    "",
    "Bob dislikes meetings before 10 a.m. and prefers asynchronous updates in Slack.",
    "ユーザーは毎朝コーヒーを飲みます。",
    "🚀 shipped",
]


@pytest.fixture(scope="module")
def minilm() -> MiniLmEmbedder:
    embedder = MiniLmEmbedder()
    embedder.load()
    return embedder


def test_minilm_vectors_are_unit_length_floats_of_384(minilm: MiniLmEmbedder) -> None:
    vectors = minilm.embed(MIXED)
    assert len(vectors) == len(MIXED)
    for vector in vectors:
        assert len(vector) == minilm.dimensions == 384
        assert all(type(x) is float for x in vector)
        assert norm(vector) == pytest.approx(1.0, abs=1e-5)
    assert minilm.embed([]) == []


def test_minilm_batch_equals_one_by_one_in_the_given_order(minilm: MiniLmEmbedder) -> None:
    batch = minilm.embed(MIXED)
    for text, vector in zip(MIXED, batch, strict=True):
        assert cosine(vector, minilm.embed_one(text)) > 0.9999, text
    # The same texts in another order give the same vectors, re-ordered.
    reordered = minilm.embed(list(reversed(MIXED)))
    for original, again in zip(batch, reversed(reordered), strict=True):
        assert cosine(original, again) > 0.9999
    # Distinct texts give distinct vectors (order is not lost in the length sort).
    assert cosine(batch[0], batch[1]) < 0.9


def test_minilm_batches_larger_than_one_pass(minilm: MiniLmEmbedder) -> None:
    texts = [
        f"Reminder number {i}: water the plants{' and the garden' * (i % 7)}." for i in range(75)
    ]
    vectors = minilm.embed(texts)
    for i in (0, 31, 32, 33, 64, 74):
        assert cosine(vectors[i], minilm.embed_one(texts[i])) > 0.9999


def test_minilm_places_related_texts_closer(minilm: MiniLmEmbedder) -> None:
    query, related, unrelated = minilm.embed(
        [
            "Which database does production use?",
            "The production database is PostgreSQL 16 running on RDS.",
            "The user's cat, Miso, had surgery last week.",
        ]
    )
    assert cosine(query, related) > cosine(query, unrelated) + 0.2
    chinese = minilm.embed(["用户喜欢中文回答", "用户喜欢用中文回答问题。", "数据库运行在服务器上"])
    assert cosine(chinese[0], chinese[1]) > cosine(chinese[0], chinese[2])


def test_minilm_cuts_long_texts_at_256_tokens(minilm: MiniLmEmbedder) -> None:
    long = " ".join(f"word{i}" for i in range(2000))
    tokenizer = minilm._loaded()[1]
    assert len(tokenizer.encode(long).ids) == MAX_TOKENS
    # Whatever follows the first 256 tokens does not change the vector.
    assert cosine(minilm.embed_one(long), minilm.embed_one(long + " completely different")) > 0.9999
    # Batched with short texts (padding against a truncated row) gives the same vector.
    batch = minilm.embed(["short", long, "another short one"])
    assert cosine(batch[1], minilm.embed_one(long)) > 0.9999


def test_minilm_is_safe_to_share_between_threads(minilm: MiniLmEmbedder) -> None:
    expected = minilm.embed(MIXED)
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda _: minilm.embed(MIXED), range(8)))
    for result in results:
        for got, want in zip(result, expected, strict=True):
            assert cosine(got, want) > 0.9999


def test_minilm_loads_once_under_concurrent_first_use() -> None:
    embedder = MiniLmEmbedder()
    with ThreadPoolExecutor(max_workers=4) as pool:
        vectors = list(pool.map(embedder.embed_one, ["a", "b", "c", "d"]))
    assert all(len(v) == 384 for v in vectors)
    weights = embedder._loaded()[0]
    embedder.embed_one("again")
    assert embedder._loaded()[0] is weights


def test_minilm_runs_blas_on_one_thread_and_restores_it(
    minilm: MiniLmEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    blas = minilm_module._blas_threads
    with blas.one():  # finds numpy's OpenBLAS, if it is loaded
        pass
    if blas._api is None:
        pytest.skip("numpy is not linked with OpenBLAS here")
    get_threads, set_threads = blas._api
    seen: list[int] = []
    encode = minilm_module._encode

    def spy(*args: Any) -> Any:
        seen.append(get_threads())
        return encode(*args)

    monkeypatch.setattr(minilm_module, "_encode", spy)
    before = get_threads()
    set_threads(2)
    configured = get_threads()  # 2, or 1 where OpenBLAS has a single core
    try:
        minilm.embed(["one", "two"])
        assert seen == [1]
        assert get_threads() == configured
    finally:
        set_threads(before)


def test_minilm_identity_names_the_weights(minilm: MiniLmEmbedder) -> None:
    digest = hashlib.sha256(minilm.weights_path.read_bytes()).hexdigest()
    assert minilm.weights_sha256 == digest
    assert minilm.model_version == digest[:12]
    assert minilm.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    assert minilm.slug == f"minilm-l6-v2-{digest[:12]}"
    assert set(minilm.slug) <= SLUG_CHARS
    assert isinstance(minilm, Embedder)


def test_minilm_takes_an_explicit_model_dir(tmp_path: Path, minilm: MiniLmEmbedder) -> None:
    explicit = MiniLmEmbedder(model_dir=default_model_dir())
    assert cosine(explicit.embed_one("hello"), minilm.embed_one("hello")) > 0.9999
    missing = MiniLmEmbedder(model_dir=tmp_path)
    with pytest.raises(EmbeddingUnavailable, match="model file missing"):
        missing.embed_one("hello")


def test_minilm_refuses_a_bare_string(minilm: MiniLmEmbedder) -> None:
    with pytest.raises(TypeError):
        minilm.embed("not a list")


# --- hashing --------------------------------------------------------------------------


def test_hashing_is_deterministic_across_processes() -> None:
    text = "The user prefers dark mode; 用户喜欢中文"
    here = HashingEmbedder().embed_one(text)
    assert HashingEmbedder().embed_one(text) == here
    code = (
        "import json, sys; from memvault.embeddings.hashing import HashingEmbedder; "
        "print(json.dumps(HashingEmbedder().embed_one(sys.argv[1])))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    out = subprocess.run(
        [sys.executable, "-c", code, text], capture_output=True, text=True, check=True, env=env
    )
    assert json.loads(out.stdout) == here


def test_hashing_vectors_are_normalised_and_word_sensitive() -> None:
    embedder = HashingEmbedder(dimensions=256)
    a, b, c, empty = embedder.embed(
        [
            "Alice prefers dark mode in her editor",
            "dark mode editor settings for Alice",
            "quarterly revenue grew twelve percent",
            "",
        ]
    )
    for vector in (a, b, c, empty):
        assert len(vector) == 256
        assert norm(vector) == pytest.approx(1.0)
    assert cosine(a, b) > 0.3
    assert cosine(a, b) > cosine(a, c)
    assert embedder.embed([]) == []
    assert embedder.slug == "hashing-256"
    assert isinstance(embedder, Embedder)


def test_hashing_splits_cjk_into_characters_and_bigrams() -> None:
    embedder = HashingEmbedder()
    a, b, c = embedder.embed(["用户喜欢中文回答", "用户喜欢用中文", "数据库服务器"])
    assert cosine(a, b) > 0.3
    assert cosine(a, b) > cosine(a, c)


# --- Titan V2 on Bedrock --------------------------------------------------------------


def _titan_response(vector: list[float], tokens: int = 7) -> dict[str, Any]:
    payload = json.dumps({"embedding": vector, "inputTextTokenCount": tokens}).encode()
    return {
        "body": StreamingBody(io.BytesIO(payload), len(payload)),
        "contentType": "application/json",
    }


@pytest.fixture
def bedrock() -> Iterator[tuple[Any, Stubber, list[dict[str, Any]]]]:
    client = boto3.client("bedrock-runtime", region_name="us-east-1")
    sent: list[dict[str, Any]] = []

    def capture(params: dict[str, Any], **_: Any) -> None:
        sent.append(dict(params))

    client.meta.events.register("provide-client-params.bedrock-runtime.InvokeModel", capture)
    with Stubber(client) as stubber:
        yield client, stubber, sent
        stubber.assert_no_pending_responses()


def test_titan_sends_one_text_with_dimensions_and_normalize(
    bedrock: tuple[Any, Stubber, list[dict[str, Any]]],
) -> None:
    client, stubber, sent = bedrock
    raw = [3.0, 4.0] + [0.0] * 254
    stubber.add_response("invoke_model", _titan_response(raw))
    titan = TitanEmbedder(dimensions=256, client=client)
    vector = titan.embed_one("The user prefers metric units.")
    assert vector[:2] == pytest.approx([0.6, 0.8])
    assert len(vector) == 256
    (params,) = sent
    assert params["modelId"] == "amazon.titan-embed-text-v2:0"
    assert json.loads(params["body"]) == {
        "inputText": "The user prefers metric units.",
        "dimensions": 256,
        "normalize": True,
    }


def test_titan_cuts_input_at_50000_characters(
    bedrock: tuple[Any, Stubber, list[dict[str, Any]]],
) -> None:
    client, stubber, sent = bedrock
    stubber.add_response("invoke_model", _titan_response([1.0] + [0.0] * 511))
    TitanEmbedder(client=client).embed_one("x" * (MAX_CHARS + 10))
    body = json.loads(sent[0]["body"])
    assert len(body["inputText"]) == MAX_CHARS == 50_000
    assert body["dimensions"] == 512


@pytest.mark.parametrize(
    ("code", "status", "retryable"),
    [("ThrottlingException", 429, True), ("ValidationException", 400, False)],
)
def test_titan_errors_surface_as_embedding_unavailable(
    bedrock: tuple[Any, Stubber, list[dict[str, Any]]], code: str, status: int, retryable: bool
) -> None:
    client, stubber, _ = bedrock
    stubber.add_client_error("invoke_model", service_error_code=code, http_status_code=status)
    with pytest.raises(EmbeddingUnavailable) as caught:
        TitanEmbedder(client=client).embed_one("hello")
    assert caught.value.code == code
    assert caught.value.retryable is retryable
    assert caught.value.model_id == "amazon.titan-embed-text-v2:0"
    assert "hello" not in str(caught.value)


def test_titan_rejects_a_wrongly_sized_answer(
    bedrock: tuple[Any, Stubber, list[dict[str, Any]]],
) -> None:
    client, stubber, _ = bedrock
    stubber.add_response("invoke_model", _titan_response([1.0] * 256))
    with pytest.raises(EmbeddingUnavailable, match="512-dimension"):
        TitanEmbedder(dimensions=512, client=client).embed_one("hello")


class FakeBedrock:
    """Answers each text with a vector derived from it, from any thread."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def invoke_model(self, **kwargs: Any) -> dict[str, Any]:
        body = json.loads(kwargs["body"])
        self.calls.append(body["inputText"])
        vector = [0.0] * body["dimensions"]
        vector[len(body["inputText"]) % body["dimensions"]] = 2.0
        return _titan_response(vector)


def test_titan_batch_calls_once_per_text_and_keeps_order() -> None:
    fake = FakeBedrock()
    titan = TitanEmbedder(dimensions=1024, client=fake, max_workers=4)
    texts = ["a" * n for n in (5, 1, 9, 3, 7, 2, 8, 4, 6, 10)]
    vectors = titan.embed(texts)
    assert sorted(fake.calls) == sorted(texts)
    for text, vector in zip(texts, vectors, strict=True):
        assert vector[len(text)] == 1.0
        assert norm(vector) == pytest.approx(1.0)
    assert titan.embed([]) == []
    assert titan.slug == "titan-v2-1024"
    assert titan.model_version == "v2"
    assert isinstance(titan, Embedder)


# --- the factory ----------------------------------------------------------------------


def test_factory_picks_the_configured_embedder() -> None:
    hashing = embedder_from_settings(Settings(embedding_model="hashing"))
    assert isinstance(hashing, HashingEmbedder)

    titan = embedder_from_settings(
        Settings(
            embedding_model="titan-v2",
            titan_dimensions=256,
            bedrock_embedding_model_id="amazon.titan-embed-text-v2:0",
            aws_region="eu-west-1",
        )
    )
    assert isinstance(titan, TitanEmbedder)
    assert (titan.dimensions, titan.region, titan.slug) == (256, "eu-west-1", "titan-v2-256")
    assert titan.client.meta.region_name == "eu-west-1"

    minilm = embedder_from_settings(Settings(embedding_model="minilm"))
    assert isinstance(minilm, MiniLmEmbedder)
    # Loading weights costs time: one instance per process.
    assert embedder_from_settings(Settings(embedding_model="minilm")) is minilm
    assert embeddings._minilm is minilm
