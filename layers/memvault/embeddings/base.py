"""The embedder seam: what recall needs from a text-embedding model.

An embedder turns texts into L2-normalised vectors of plain Python floats, so that the
cosine of two vectors is their dot product and core code never needs numpy. Its
``slug`` names the model and weights in index names: a different model or version
writes to a different index and never mixes vectors from two models.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol, runtime_checkable

_SLUG = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")


class EmbeddingUnavailable(RuntimeError):
    """The embedding model could not answer (a service fault, throttling, missing weights).

    ``retryable`` is true when the same request may succeed later (throttling, a model
    not ready, a timeout). ``code`` is the provider's error code where there is one.
    The message names the model and the provider's code, never the text embedded.
    """

    def __init__(self, message: str, *, model_id: str, code: str = "", retryable: bool = False):
        super().__init__(message)
        self.model_id = model_id
        self.code = code
        self.retryable = retryable


@runtime_checkable
class Embedder(Protocol):
    """A text-embedding model.

    ``model_id`` names the model (``sentence-transformers/all-MiniLM-L6-v2``),
    ``model_version`` the weights behind it (short and stable), ``dimensions`` the
    vector size, and ``slug`` both in index-name form (lowercase ``[a-z0-9-]``).
    """

    @property
    def model_id(self) -> str: ...

    @property
    def model_version(self) -> str: ...

    @property
    def dimensions(self) -> int: ...

    @property
    def slug(self) -> str: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One unit vector per text, in the order given; an empty input gives ``[]``."""
        ...

    def embed_one(self, text: str) -> list[float]:
        """The unit vector of one text."""
        ...

    def embed_query(self, text: str) -> list[float]:
        """The unit vector of a search query. Models trained with instructions (e5's
        ``query: ``) ask a query otherwise than a stored text; the others answer
        ``embed_one``."""
        ...


def model_names(*embedders: Embedder) -> str:
    """What ``embedding_model`` records of the models that embedded or ranked something:
    ``id@version`` each, joined by ``+`` (the English model first)."""
    return "+".join(f"{e.model_id}@{e.model_version}" for e in embedders)


def check_slug(slug: str) -> str:
    """``slug`` if it is fit for an index name, else ``ValueError``."""
    if not _SLUG.match(slug) or len(slug) > 60:
        raise ValueError(f"embedder slug {slug!r} is not lowercase [a-z0-9-]")
    return slug


def file_sha256(path: Path) -> str:
    """SHA-256 (hex) of a model file, read a megabyte at a time."""
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()
