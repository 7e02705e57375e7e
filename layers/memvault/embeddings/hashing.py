"""A deterministic stand-in embedder, for unit tests only.

It is never a default and never chosen for a deployment's recall: its vectors are
hashed bags of words, so texts are close only when they share words. Tests use it to
exercise the recall pipeline without model weights.
"""

from __future__ import annotations

import hashlib
import math
import re
import unicodedata
from collections.abc import Iterator, Sequence

from memvault.embeddings.base import check_slug

# Han, Hiragana, Katakana, Hangul: scripts written without spaces between words.
_CJK_CLASS = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_SEGMENT = re.compile(f"[{_CJK_CLASS}]+|[^{_CJK_CLASS}]+")
_CJK = re.compile(f"[{_CJK_CLASS}]")
_WORD = re.compile(r"[^\W_]+")
#: What an empty (or punctuation-only) text hashes, so that its vector has unit length.
_EMPTY_FEATURE = "\x00"


def tokens(text: str) -> Iterator[str]:
    """Lowercased words; a CJK run gives its characters and its character bigrams."""
    for word in _WORD.findall(unicodedata.normalize("NFKC", text).lower()):
        for segment in _SEGMENT.findall(word):
            if _CJK.match(segment):
                yield from segment
                for i in range(len(segment) - 1):
                    yield segment[i : i + 2]
            else:
                yield segment


class HashingEmbedder:
    """Signed feature hashing of words (and CJK characters and bigrams), L2-normalised.

    Deterministic across processes and machines (BLAKE2b, not Python's salted
    ``hash``). For unit tests only; never a default.
    """

    model_id: str = "memvault/hashing"
    model_version: str = "1"

    def __init__(self, dimensions: int = 384) -> None:
        if dimensions < 8:
            raise ValueError("dimensions must be at least 8")
        self.dimensions = dimensions

    @property
    def slug(self) -> str:
        return check_slug(f"hashing-{self.dimensions}")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts; use embed_one for one text")
        return [self.embed_one(text) for text in texts]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_one(text)

    def embed_one(self, text: str) -> list[float]:
        vector = [0.0] * self.dimensions
        counted = False
        for token in tokens(text):
            self._add(vector, token)
            counted = True
        if not counted:
            self._add(vector, _EMPTY_FEATURE)
        norm = math.sqrt(math.fsum(x * x for x in vector))
        if norm == 0.0:  # every token cancelled out: fall back to the empty text's vector
            vector = [0.0] * self.dimensions
            self._add(vector, _EMPTY_FEATURE)
            norm = 1.0
        return [x / norm for x in vector]

    def _add(self, vector: list[float], token: str) -> None:
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8).digest()
        value = int.from_bytes(digest, "big")
        vector[(value >> 1) % self.dimensions] += -1.0 if value & 1 else 1.0
