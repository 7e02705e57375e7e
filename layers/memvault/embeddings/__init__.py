"""Text embedders behind one seam: Titan V2 on AWS; locally MiniLM on numpy or a packaged
ONNX model (e5-small-v2, bge-small-en-v1.5, bge-small-zh-v1.5) on onnxruntime.

``embedder_from_settings`` picks one from ``MEMVAULT_EMBEDDING_MODEL``. Importing this
package needs neither numpy nor boto3; each embedder loads what it needs on use.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from memvault.embeddings.base import Embedder, EmbeddingUnavailable, model_names

if TYPE_CHECKING:
    from memvault.config import Settings
    from memvault.embeddings.bedrock import TitanEmbedder
    from memvault.embeddings.minilm import MiniLmEmbedder
    from memvault.embeddings.onnx import OnnxEmbedder

__all__ = [
    "Embedder",
    "EmbeddingUnavailable",
    "chinese_embedder_from_settings",
    "embedder_from_settings",
    "model_names",
]

_lock = threading.Lock()
_minilm: MiniLmEmbedder | None = None
_titan: dict[tuple[str, int, str], TitanEmbedder] = {}
_onnx: dict[str, OnnxEmbedder] = {}


def embedder_from_settings(settings: Settings) -> Embedder:
    """The embedder ``settings.embedding_model`` names.

    MiniLM and the ONNX models (their weights take a while to load) and Titan (its
    client) are made once per process and shared; the hashing embedder is for unit tests only.
    """
    return _embedder(settings, settings.embedding_model)


def chinese_embedder_from_settings(settings: Settings) -> Embedder | None:
    """The model ``settings.embedding_model_zh`` names for Chinese texts, or ``None``."""
    if settings.embedding_model_zh == "none":
        return None
    return _embedder(settings, settings.embedding_model_zh)


def _embedder(settings: Settings, kind: str) -> Embedder:
    global _minilm
    if kind == "minilm":
        from memvault.embeddings.minilm import MiniLmEmbedder  # numpy

        with _lock:
            if _minilm is None:
                _minilm = MiniLmEmbedder()
            return _minilm
    if kind in ("e5-small-v2", "bge-small-en-v1.5", "bge-small-zh-v1.5"):
        from memvault.embeddings.onnx import OnnxEmbedder  # onnxruntime

        with _lock:
            if kind not in _onnx:
                _onnx[kind] = OnnxEmbedder(kind)
            return _onnx[kind]
    if kind == "titan-v2":
        from memvault.embeddings.bedrock import TitanEmbedder

        key = (settings.bedrock_embedding_model_id, settings.titan_dimensions, settings.aws_region)
        with _lock:
            if key not in _titan:
                _titan[key] = TitanEmbedder(model_id=key[0], dimensions=key[1], region=key[2])
            return _titan[key]
    if kind == "hashing":
        from memvault.embeddings.hashing import HashingEmbedder

        return HashingEmbedder()
    raise ValueError(f"unknown embedding model {kind!r}")
