"""Text embedders behind one seam: Titan V2 on AWS, MiniLM on numpy locally.

``embedder_from_settings`` picks one from ``MEMVAULT_EMBEDDING_MODEL``. Importing this
package needs neither numpy nor boto3; each embedder loads what it needs on use.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from memvault.embeddings.base import Embedder, EmbeddingUnavailable

if TYPE_CHECKING:
    from memvault.config import Settings
    from memvault.embeddings.bedrock import TitanEmbedder
    from memvault.embeddings.minilm import MiniLmEmbedder

__all__ = ["Embedder", "EmbeddingUnavailable", "embedder_from_settings"]

_lock = threading.Lock()
_minilm: MiniLmEmbedder | None = None
_titan: dict[tuple[str, int, str], TitanEmbedder] = {}


def embedder_from_settings(settings: Settings) -> Embedder:
    """The embedder ``settings.embedding_model`` names.

    MiniLM (its weights take a while to load) and Titan (its client) are made once per
    process and shared; the hashing embedder is for unit tests only.
    """
    global _minilm
    kind = settings.embedding_model
    if kind == "minilm":
        from memvault.embeddings.minilm import MiniLmEmbedder  # numpy

        with _lock:
            if _minilm is None:
                _minilm = MiniLmEmbedder()
            return _minilm
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
