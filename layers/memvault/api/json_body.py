"""How the API reads a JSON body: as ``json.loads`` does, less what a hostile client can
hide in it.

- A key given twice in one object (``{"consent": false, "consent": true}``): ``json``
  keeps the last, a proxy or a log that checked the first saw another request. RFC 8259
  says names SHOULD be unique; we refuse an object whose names are not.
- U+0000 (NUL) in any string or key: it ends a string in C, so a log line, a search
  engine or a terminal shows less than was stored.
- A body that is not one object (``[{...}, {...}]``): Powertools' validation takes the
  first item of an array for a model and drops the rest unread.
- An integer of more than 4,300 digits: Python's int parsing limit raises a plain
  ``ValueError`` inside ``json.loads`` (a 500 before), not a ``JSONDecodeError``. No
  memvault field takes a number anywhere near that long.

Each is a ``json.JSONDecodeError``, which Powertools' validation answers as the 422
``validation_failed`` of any malformed body, naming the problem.
"""

from __future__ import annotations

import json
from typing import Any

NUL_REFUSED = "strings must not contain U+0000 (NUL)"
NOT_AN_OBJECT = "the body must be one JSON object, not an array or a bare value"
NUMBER_TOO_LONG = (
    "a number has more digits than any field takes; send each number within its "
    "field's range (see GET /v1/openapi.json)"
)


class _RepeatedKey(Exception):
    pass


def _unique_pairs(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj: dict[str, Any] = {}
    for key, value in pairs:
        if key in obj:
            from memvault.policy.echo import echoable  # the scanners load with a refusal only

            # Named only when naming it repeats no credential or personal data.
            named = json.dumps(key)[:80] if echoable(key) else "(not shown)"
            raise _RepeatedKey(f"the key {named} appears twice in one object")
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
    """``body`` parsed; ``json.JSONDecodeError`` for malformed JSON, a body that is not
    one object, a repeated key, a NUL in any string or key or an integer too long to
    parse."""
    text = body.decode("utf-8") if isinstance(body, bytes) else body
    try:
        value = json.loads(text, object_pairs_hook=_unique_pairs)
    except _RepeatedKey as repeated:
        raise json.JSONDecodeError(str(repeated), text, 0) from None
    except json.JSONDecodeError:
        raise
    except ValueError:
        # Python's limit on int digits (sys.get_int_max_str_digits): its message
        # names the limit and the count, never the number itself.
        raise json.JSONDecodeError(NUMBER_TOO_LONG, text, 0) from None
    # A NUL can only come from a \u0000 escape (json refuses raw control characters).
    if "\\u0000" in text and _holds_nul(value):
        raise json.JSONDecodeError(NUL_REFUSED, text, 0)
    if not isinstance(value, dict):
        # Every body is one object; validation would take the first item of an array
        # and drop the rest unread.
        raise json.JSONDecodeError(NOT_AN_OBJECT, text, 0)
    return value
