"""Recognising personal data by pattern: emails, phone numbers, card numbers, national ids.

Phone numbers use libphonenumber's matcher (via ``phonenumbers``), which checks
numbering plans rather than digit counts; card numbers must pass the Luhn check;
national ids cover US SSNs and PRC resident ids (with their check digit).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

import phonenumbers

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
_SSN = re.compile(r"(?<!\d)(?!000|666|9\d\d)\d{3}-(?!00)\d{2}-(?!0000)\d{4}(?!\d)")
_PRC_ID = re.compile(r"(?<![0-9A-Za-z])\d{17}[\dXx](?![0-9A-Za-z])")
_PRC_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_PRC_CHECK = "10X98765432"
#: Regions whose national formats are tried besides the international (+CC) form.
_PHONE_REGIONS = ("US", "CN", "GB", "DE")


@dataclass(frozen=True)
class PiiFinding:
    field: str
    pii_type: str


def _luhn_ok(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _prc_id_ok(text: str) -> bool:
    total = sum(int(c) * w for c, w in zip(text[:17], _PRC_WEIGHTS, strict=True))
    return _PRC_CHECK[total % 11] == text[17].upper()


def _has_card(text: str) -> bool:
    for match in _CARD.finditer(text):
        digits = re.sub(r"\D", "", match.group())
        if 13 <= len(digits) <= 19 and _luhn_ok(digits) and len(set(digits)) > 1:
            return True
    return False


def _has_phone(text: str) -> bool:
    for region in _PHONE_REGIONS:
        matcher = phonenumbers.PhoneNumberMatcher(
            text, region, leniency=phonenumbers.Leniency.VALID
        )
        if matcher.has_next():
            return True
    return False


def _kinds_in(text: str) -> list[str]:
    kinds = []
    if _EMAIL.search(text):
        kinds.append("email")
    if _SSN.search(text) or any(_prc_id_ok(m.group()) for m in _PRC_ID.finditer(text)):
        kinds.append("national_id")
    if _has_card(text):
        kinds.append("card_number")
    if _has_phone(text):
        kinds.append("phone_number")
    return kinds


def find_pii(fields: Iterable[tuple[str, str]]) -> list[PiiFinding]:
    return [PiiFinding(field, kind) for field, text in fields for kind in _kinds_in(text)]
