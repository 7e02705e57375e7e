"""The id and one-line text checks answer printable values at C speed, and the same as
their definition, character by character.

The definition: an id may hold no character of ``INVISIBLE_CATEGORIES``, no variation
selector and no space but U+0020; a one-line text no ``Cc``, ``Zl``, ``Zp``, ``Cs`` and no
``Cf`` but the joiners. The fast path leans on ``str.isprintable``; every code point is
checked against the definition, so a Python whose ``isprintable`` drew the line elsewhere
fails here.
"""

from __future__ import annotations

import sys
import unicodedata

from hypothesis import given
from hypothesis import strategies as st

from memvault_wire.types import INVISIBLE_CATEGORIES, invisible_char, unsafe_text_char


def _bad_in_id(ch: str) -> bool:
    code = ord(ch)
    category = unicodedata.category(ch)
    return (
        category in INVISIBLE_CATEGORIES
        or 0xFE00 <= code <= 0xFE0F
        or 0xE0100 <= code <= 0xE01EF
        or (ch != " " and category == "Zs")
    )


def _bad_in_text(ch: str) -> bool:
    category = unicodedata.category(ch)
    return category in {"Cc", "Zl", "Zp", "Cs"} or (category == "Cf" and ch not in "\u200c\u200d")


def test_every_code_point_is_judged_as_the_definition_says() -> None:
    wrong_id, wrong_text = [], []
    for code in range(sys.maxunicode + 1):
        ch = chr(code)
        if (invisible_char(f"a{ch}b") is not None) != _bad_in_id(ch):
            wrong_id.append(f"U+{code:04X}")
        if (unsafe_text_char(f"a{ch}b") is not None) != _bad_in_text(ch):
            wrong_text.append(f"U+{code:04X}")
    assert wrong_id == [] and wrong_text == []


@given(st.text(alphabet=st.characters(codec=None, exclude_categories=())))
def test_the_first_offending_character_is_named(value: str) -> None:
    assert invisible_char(value) == next((c for c in value if _bad_in_id(c)), None)
    assert unsafe_text_char(value) == next((c for c in value if _bad_in_text(c)), None)
