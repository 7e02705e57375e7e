"""Tokens for keyword search in the embedded index: English words stemmed, CJK as bigrams.

It mirrors what the OpenSearch mapping does with its ``english`` and ``cjk`` analyzers,
so that both backends rank keyword matches alike.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

_WORD = re.compile(r"[a-z0-9]+")
_CJK = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]+")

#: Lucene's English stop words, plus the possessive's ``s``.
STOPWORDS = frozenset(
    (
        *("a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in"),
        *("into", "is", "it", "no", "not", "of", "on", "or", "such", "that", "the"),
        *("their", "then", "there", "these", "they", "this", "to", "was", "will", "with"),
        "s",
    )
)


class _LightStemmer:
    """Used where PyStemmer is not installed (the Lambda layer): plural and -ing/-ed only."""

    @staticmethod
    def stemWords(words: list[str]) -> list[str]:  # PyStemmer's method name
        out = []
        for w in words:
            for suffix in ("ies", "ing", "ed", "es", "s"):
                if len(w) > len(suffix) + 2 and w.endswith(suffix):
                    w = w[: -len(suffix)]
                    break
            out.append(w)
        return out


@lru_cache(maxsize=2)
def _stemmer(algorithm: str = "english") -> Any:
    """PyStemmer's ``algorithm``: Snowball's English for the embedded index's tokens, or
    ``porter``, the original Porter stemmer that OpenSearch's ``english`` analyzer uses
    (``porter_stem``), for OpenSearch's query words. Snowball stems "skies" as "sky" where
    the index has "ski", and keeps "community" and "communism" apart where the index has
    "commun" for both; on the shared evaluation set's 2,308 words, Porter stemmed 9 unlike
    the index (Snowball 77)."""
    try:
        import Stemmer
    except ImportError:
        return _LightStemmer()
    return Stemmer.Stemmer(algorithm)


#: Words that say nothing about a topic: pronouns, question words, auxiliaries and the
#: commonest prepositions and determiners. BM25 keeps them (as OpenSearch's ``english``
#: analyzer does); the relevance floor's word coverage does not, or "Do I have a PMP
#: certification?" would agree with any memory holding "I have" on two words of five.
FUNCTION_WORDS = frozenset(
    (
        *("i", "me", "my", "mine", "myself", "we", "us", "our", "ours", "you", "your"),
        *("yours", "he", "him", "his", "she", "her", "hers", "its", "them", "theirs"),
        *("what", "which", "who", "whom", "whose", "when", "where", "why", "how"),
        *("do", "does", "did", "done", "doing", "have", "has", "had", "having", "am"),
        *("were", "been", "being", "can", "could", "should", "would", "shall", "may"),
        *("might", "must", "about", "from", "up", "down", "out", "over", "any", "some"),
        *("all", "each", "every", "here", "those", "than", "so", "very", "just", "also"),
        *("get", "got", "go", "going", "like", "usually", "ever", "ll", "ve", "re", "d"),
    )
)


def tokens(text: str, stop: frozenset[str] = STOPWORDS) -> list[str]:
    lowered = text.lower()
    # An ASCII text (most) has no CJK to split out: skipping both passes is a third faster.
    plain = lowered.isascii()
    words = _WORD.findall(lowered if plain else _CJK.sub(" ", lowered))
    out: list[str] = list(_stemmer().stemWords([w for w in words if w not in stop]))
    if not plain:
        out.extend(_cjk_pairs(lowered))
    return out


def _cjk_pairs(lowered: str) -> list[str]:
    """Each pair of adjacent CJK characters in ``lowered`` (a lone one alone)."""
    out: list[str] = []
    for run in _CJK.findall(lowered):
        out.extend([run] if len(run) == 1 else (run[i : i + 2] for i in range(len(run) - 1)))
    return out


_NOT_CONTENT = STOPWORDS | FUNCTION_WORDS
#: A keyword search on OpenSearch weighs at most this many distinct words: each is a
#: clause (an English word two, one per field), and the node refuses a query of more than
#: 1,024 (``indices.query.bool.max_clause_count``); a 2,000-character Chinese paragraph
#: has about 2,000 pairs. The vector search still embeds the whole query.
MAX_QUERY_WORDS = 256


def content_tokens(text: str) -> list[str]:
    """``tokens`` without function words: what a text says it is about."""
    return tokens(text, _NOT_CONTENT)


def query_words(text: str) -> list[tuple[str, bool]]:
    """The words a keyword search on OpenSearch weighs one by one: each English word that
    is not a stop word, once per stem as the index stems it (Porter's; written as given,
    for the index's analyzer to stem), and each pair of CJK characters (a lone one
    alone); with whether it is CJK. In query order, English first, at most
    ``MAX_QUERY_WORDS``."""
    lowered = text.lower()
    words = [w for w in _WORD.findall(_CJK.sub(" ", lowered)) if w not in STOPWORDS]
    out: dict[str, tuple[str, bool]] = {}
    for word, stem in zip(words, _stemmer("porter").stemWords(words), strict=True):
        out.setdefault(stem, (word, False))
    for pair in _cjk_pairs(lowered):
        out.setdefault(pair, (pair, True))
    return list(out.values())[:MAX_QUERY_WORDS]
