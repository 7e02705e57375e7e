"""Paging tokens: what a listing hands back as ``next_token`` and takes again.

A token names only the key a page stopped after, as URL-safe base64 of a small JSON
object (``{"v": <format>, "after": <key>}``). It carries no owner: the tenant, subject
and run always come from the caller and the path, so a token from another listing or
another caller can at most skip within the caller's own items. A token this code did
not make, or one whose key fails ``valid``, is a ``validation_failed`` on
``next_token``, never a 500.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable

from memvault_wire.errors import ValidationFailed


def encode_after(after: str | None, *, version: int) -> str | None:
    """The token for the page after ``after`` (None: there is no next page)."""
    if after is None:
        return None
    raw = json.dumps({"v": version, "after": after}).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_after(token: str | None, valid: Callable[[str], bool]) -> str | None:
    """The key a token names (None: the first page)."""
    if token is None:
        return None
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        after = json.loads(raw)["after"]
    except (binascii.Error, ValueError, KeyError, TypeError, RecursionError):
        after = None
    if not isinstance(after, str) or not valid(after):
        raise ValidationFailed(
            "next_token is not one this listing returned; start again without it",
            {"field": "next_token"},
        )
    return after
