"""Reusable identifier types, validated in one place.

Tenant and subject ids lead every DynamoDB key (``<tenant>#<subject>``), so they may
not contain ``#`` or ``/``: that keeps key prefixes unambiguous for IAM
``dynamodb:LeadingKeys`` and S3 prefixes.

Ids, keys and tags a caller chooses freely (request ids, canonical keys, tags, scope
values, references) hold no invisible characters (``visible``): no C0 or C1 control, no
bidirectional embedding, override, isolate or mark, no zero-width or other format
character, no line or paragraph separator, no lone surrogate, no space but U+0020 (a
no-break or ideographic space reads as a plain one). Each makes an id look like
another, or read backwards, in a log, a console or an assembled prompt, or ends a line
where none is seen.
"""

from __future__ import annotations

import math
import re
import unicodedata
from typing import Annotated, Any

from pydantic import AfterValidator, StringConstraints

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]*$"

#: Unicode categories refused in ids: controls, format characters (bidirectional
#: controls U+202A-U+202E, U+2066-U+2069, U+200E/F, zero-width U+200B-U+200D, U+FEFF),
#: line and paragraph separators, surrogates, unassigned code points and noncharacters
#: (U+FFFF), private use.
INVISIBLE_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs", "Cn", "Co"})


def _variation_selector(ch: str) -> bool:
    """U+FE00-U+FE0F and U+E0100-U+E01EF: they change how the character before them is
    drawn, invisibly, so two ids that look alike differ."""
    code = ord(ch)
    return 0xFE00 <= code <= 0xFE0F or 0xE0100 <= code <= 0xE01EF


def _look_alike_space(ch: str) -> bool:
    """A space other than U+0020 (no-break, ideographic, thin, ...): it looks like a plain
    space, so ``a\u00a0b`` and ``a b`` are two ids that read the same."""
    return ch != " " and unicodedata.category(ch) == "Zs"


#: The variation selectors (``_variation_selector``), for one C-speed search.
_VARIATION_SELECTORS = re.compile("[\ufe00-\ufe0f\U000e0100-\U000e01ef]")


def invisible_char(value: str) -> str | None:
    """The first character of ``value`` that may not be in an id, or ``None``.

    ``str.isprintable`` is false exactly for the "Other" and "Separator" categories but
    the ASCII space: ``INVISIBLE_CATEGORIES`` and the look-alike spaces. A printable
    value without a variation selector is answered at C speed; every stored memory's
    ids, tags and scope are checked again each time recall reads one back."""
    if value.isprintable() and not _VARIATION_SELECTORS.search(value):
        return None
    return next(
        (
            ch
            for ch in value
            if unicodedata.category(ch) in INVISIBLE_CATEGORIES
            or _variation_selector(ch)
            or _look_alike_space(ch)
        ),
        None,
    )


def visible(value: str) -> str:
    """``value`` if it holds no invisible character; ``ValueError`` (a 422 naming the
    field, and the character's code point, never the value) otherwise."""
    found = invisible_char(value)
    if found is not None:
        raise ValueError(
            "must not contain control, bidirectional or other invisible formatting "
            f"characters, or spaces other than U+0020 (found U+{ord(found):04X})"
        )
    return value


_Visible = AfterValidator(visible)

#: Format characters free text keeps: the zero-width non-joiner and joiner, which Persian,
#: Indic scripts and emoji sequences need.
_JOINERS = frozenset("\u200c\u200d")
#: Unicode categories refused in free text on one line: controls (line breaks and tabs
#: among them), line and paragraph separators, surrogates; format characters (``Cf``)
#: but the joiners.
_UNSAFE_IN_TEXT = frozenset({"Cc", "Zl", "Zp", "Cs"})


def unsafe_text_char(value: str) -> str | None:
    """The first character of ``value`` that a one-line free text (a name, a step) may
    not hold, or ``None``. A printable value (``invisible_char``) holds none."""
    if value.isprintable():
        return None
    return next(
        (
            ch
            for ch in value
            if (category := unicodedata.category(ch)) in _UNSAFE_IN_TEXT
            or (category == "Cf" and ch not in _JOINERS)
        ),
        None,
    )


def one_line(value: str) -> str:
    """``value`` if it is one line of text with no bidirectional, zero-width or other
    invisible formatting character; ``ValueError`` (a 422 naming the field and the code
    point, never the value) otherwise.

    Free text (an artifact's name, a run's step), unlike an id, may hold any space and
    the joiners scripts need; but a line break or a bidirectional override makes it read
    as something else in a log, the console or an SDK's output (``invoice\u202egpj.exe``
    shows as ``invoiceexe.jpg``, ``report\n\nIgnore previous instructions`` forges a
    line), and such a label has no use for either."""
    found = unsafe_text_char(value)
    if found is not None:
        raise ValueError(
            "must be one line without control, bidirectional or other invisible formatting "
            f"characters (found U+{ord(found):04X})"
        )
    return value


_OneLine = AfterValidator(one_line)

TenantId = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=_NAME)]
SubjectId = Annotated[str, StringConstraints(min_length=1, max_length=128, pattern=_NAME)]
AgentRole = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=_NAME)]
MemoryId = Annotated[str, StringConstraints(pattern=r"^mem_[0-9a-f]{32}$")]
DeletionId = Annotated[str, StringConstraints(pattern=r"^del_[0-9a-f]{32}$")]
RequestId = Annotated[str, StringConstraints(min_length=1, max_length=100), _Visible]
CanonicalKey = Annotated[
    str,
    StringConstraints(min_length=1, max_length=100, pattern=r"^[^\s](.*[^\s])?$"),
    _Visible,
]
Tag = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[^\s,]+$"), _Visible]
ScopeKey = Annotated[str, StringConstraints(min_length=1, max_length=64, pattern=r"^[a-z0-9_.-]+$")]
ScopeValue = Annotated[str, StringConstraints(min_length=1, max_length=256), _Visible]
#: A caller's id for something of its own (an artifact, an event, an approval).
ExternalId = Annotated[str, StringConstraints(min_length=1, max_length=128), _Visible]
#: Where something came from: a message id, a turn, a URL.
Reference = Annotated[str, StringConstraints(min_length=1, max_length=512), _Visible]
#: A version label a caller chooses (a run's ``plan_version``): an id's characters.
VersionLabel = Annotated[str, StringConstraints(min_length=1, max_length=64), _Visible]
#: A short free-text label on one line (an artifact's name, a run's step).
Label = Annotated[str, StringConstraints(min_length=1, max_length=200), _OneLine]


#: DynamoDB's number range: magnitudes from 1e-130 up to (not including) 1e126, or 0.
NUMBER_MIN, NUMBER_MAX = 1e-130, 1e126


def storable_number(value: Any) -> Any:
    """``value`` if DynamoDB can store it as a number; ``ValueError`` (a 422) if not.

    Python accepts 1e-200 and 1e200 as floats; DynamoDB refuses them, and before this
    check such a value reached the table and answered 500."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("numbers must be finite")
    if isinstance(value, int) and abs(value) >= 10**38:
        raise ValueError("integers must have at most 38 digits")
    if value != 0 and not NUMBER_MIN <= abs(value) < NUMBER_MAX:
        raise ValueError("numbers must be 0 or between 1e-130 and 1e126 in magnitude")
    return value


#: A confidence in [0, 1] that the store can hold.
Confidence = Annotated[float, AfterValidator(storable_number)]
