"""Which embedding model reads a text: the language routing of recall.

Locally the English model (e5-small-v2) reads Chinese only through English word pieces.
A deployment with a Chinese model (``embedding_model_zh``, bge-small-zh-v1.5) embeds
every memory that holds Chinese a second time with it, and a Chinese query searches those
vectors as well as the English model's (``memvault.search.fusion``). A text counts as
Chinese when it holds at least ``MIN_HAN`` Han characters: a Chinese sentence, a
Chinese name inside an English one; Japanese kana alone or one stray character does not.
Routing a memory by mistake costs one more embedding, never a lost memory: every memory
keeps its English vector.
"""

from __future__ import annotations

import re
from typing import Literal

#: The CJK unified ideographs, extension A and the compatibility block.
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
MIN_HAN = 2

Language = Literal["en", "zh"]


def resolve(text: str, named: str = "auto") -> str:
    """The language that decides which models read ``text``: the one its writer or
    asker named, else the detected one."""
    return detect(text) if named == "auto" else named


def detect(text: str) -> Language:
    """``zh`` for a text holding ``MIN_HAN`` Han characters, else ``en``."""
    for found, _ in enumerate(_HAN.finditer(text), 1):
        if found >= MIN_HAN:
            return "zh"
    return "en"
