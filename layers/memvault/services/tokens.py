"""Token estimates with a real tokenizer: OpenAI's cl100k_base BPE, through bpe-openai
(the Rust ``bpe-openai`` crate, which ships its token tables, so nothing is fetched)."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Protocol


class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int: ...


@lru_cache(maxsize=1)
def _cl100k() -> Any:
    import bpe_openai

    return bpe_openai.get_encoding("cl100k_base")


class Cl100kCounter:
    name = "cl100k_base (bpe-openai)"

    def count(self, text: str) -> int:
        return len(_cl100k().encode(text))
