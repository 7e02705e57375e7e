"""How the API reads a JSON body: as ``json.loads`` does, less what a hostile client can
hide in it.

- A key given twice in one object (``{"consent": false, "consent": true}``): ``json``
  keeps the last, a proxy or a log that checked the first saw another request. RFC 8259
  says names SHOULD be unique; we refuse an object whose names are not.
- U+0000 (NUL) in any string or key: it ends a string in C, so a log line, a search
  engine or a terminal shows less than was stored.

Either is a ``json.JSONDecodeError``, which Powertools' validation answers as the 422
``validation_failed`` of any malformed body, naming the problem.
"""

from __future__ import annotations

import json
from typing import Any

NUL_REFUSED = "strings must not contain U+0000 (NUL)"


class _RepeatedKey(Exception):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            raise _RepeatedKey(f"the key {json.dumps(key)[:80]} appears twice in one object")
        obj[key] = value
    return obj


def _holds_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any("\x00" in key or _holds_nul(item) for key, item in value.items())
    if isinstance(value, list):
        return any(_holds_nul(item) for item in value)
    return False


def loads(body: str | bytes) -> Any:
    """``body`` parsed; ``json.JSONDecodeError`` for malformed JSON, a repeated key or a
    NUL in any string or key."""
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    try:
        value = json.loads(text, object_pairs_hook=_unique_pairs)
    except _RepeatedKey as repeated:
        raise json.JSONDecodeError(str(repeated), text, 0) from None
    # A NUL can only come from a \u0000 escape (json refuses raw control characters).
    if "\\u0000" in text and _holds_nul(value):
        raise json.JSONDecodeError(NUL_REFUSED, text, 0)
    return value
