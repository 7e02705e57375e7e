"""Personal-data scans that skip work they cannot need, and find all the same.

Three shortcuts on the write path (each write scans its content and ids): libphonenumber's
matcher, the dearest check, runs only on a text that holds a subscriber's length of decimal
digits; a text without a digit is not searched for the kinds that need one; and a scan for
some kinds (``personal_id_findings`` wants only the kinds refused in an id) looks for those
kinds alone. Each test here fails when its shortcut is removed or
when the shortcut drops a finding the full scan makes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memvault.policy import pii

CORPUS = Path(__file__).resolve().parents[1] / "data" / "policy_corpus.json"

#: Decimal digits as the matcher reads them: ASCII, full-width, Arabic-Indic, Devanagari.
_DIGITS = "".join(chr(zero + i) for zero in (0x30, 0xFF10, 0x0660, 0x0966) for i in range(10))
#: What may stand around and between a number's digits.
_AROUND = ["+", "+1 ", "+44 ", "+49 ", "+86 ", "+378 ", "+7 ", "00", "(0)", "tel: ", "call "]
_BETWEEN = [" ", "-", ".", "/", "(", ")", " ext. ", "x", "#", "a", "号", ""]


def _corpus_texts() -> list[tuple[str, str]]:
    items = json.loads(CORPUS.read_text(encoding="utf-8"))["items"]
    return [(item["field"], item["text"]) for item in items]


def test_the_phone_matcher_is_not_run_on_a_text_with_six_digits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    matched: list[str] = []
    monkeypatch.setattr(pii, "_matched_phone", lambda text: matched.append(text) or False)
    assert not pii._has_phone("2 cats, 1 dog, and the dog was born in 2019")
    assert matched == []
    pii._has_phone("call 415 555 2671 after six")
    assert matched == ["call 415 555 2671 after six"]


@settings(max_examples=300, deadline=None)
@given(
    around=st.sampled_from(_AROUND),
    digits=st.lists(st.sampled_from(_DIGITS), min_size=1, max_size=6),
    between=st.lists(st.sampled_from(_BETWEEN), min_size=6, max_size=6),
)
def test_no_text_with_six_digits_holds_a_number_the_matcher_reports(
    around: str, digits: list[str], between: list[str]
) -> None:
    """What the shortcut relies on, asked of the matcher itself: with at most six decimal
    digits in a text (country code included), no region's matcher finds a valid number of
    a subscriber's length (seven digits) in it."""
    room = 6 - sum(ch.isdecimal() for ch in around)
    text = around + "".join(d + sep for d, sep in zip(digits[:room], between, strict=False))
    assert sum(ch.isdecimal() for ch in text) <= 6
    assert not pii._matched_phone(text)


def test_phone_numbers_in_the_corpus_are_found_as_before() -> None:
    """Every corpus text the full matcher reads a phone number in, the shortcut does too."""
    texts = [pii.normalise(text) for _, text in _corpus_texts()]
    with_phone = [t for t in texts if pii._matched_phone(pii._without_hex_ids(t))]
    assert len(with_phone) >= 20
    assert all(pii._has_phone(pii._without_hex_ids(t)) for t in with_phone)


@pytest.mark.parametrize(
    "kinds",
    [
        pii.ID_REFUSED_KINDS,
        frozenset({"phone_number"}),
        frozenset({"email", "national_id"}),
        frozenset({"card_number", "health", "address"}),
    ],
    ids=lambda kinds: "+".join(sorted(kinds)),
)
def test_a_narrowed_scan_finds_what_the_full_scan_finds_of_those_kinds(
    kinds: frozenset[str],
) -> None:
    fields = _corpus_texts()
    full = pii.find_pii(fields)
    narrowed = pii.find_pii(fields, kinds)
    assert narrowed == [f for f in full if f.pii_type in kinds]
    assert narrowed  # the corpus holds each of these kinds


def test_the_id_scan_looks_for_the_refused_kinds_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    def not_wanted(text: str) -> bool:
        raise AssertionError("an id was scanned for a kind it is not refused for")

    for check in ("_has_phone", "_has_card", "_has_ip", "_has_coordinates"):
        monkeypatch.setattr(pii, check, not_wanted)
    found = pii.personal_id_findings(
        [("request_id", "call 415 555 2671"), ("session_id", "jane.doe@example.org")]
    )
    assert [(f.field, f.pii_type) for f in found] == [("session_id", "email")]


def _digit_kinds_seen_by_each_check(text: str) -> list[str]:
    """Every check of a kind that needs a digit, run on ``text`` whatever it holds."""
    found = [kind for kind, check in pii._CHECKS if kind in pii._DIGIT_KINDS and check(text)]
    if pii._SSN.search(text) or pii._SSN_NAMED.search(text) or pii._NINO.search(text):
        found.append("national_id")
    if any(pii._prc_id_ok(m.group()) for m in pii._PRC_ID.finditer(text)):
        found.append("national_id")
    if pii._has_card(text):
        found.append("card_number")
    if pii._matched_phone(text):
        found.append("phone_number")
    return found


#: Pieces of near misses: the words around each kind, and the characters its numbers use.
_PIECES = [
    "passport", "passport no.", "born on", "date of birth", "DOB", "birthday is",
    "account number", "routing number", "sort code", "IBAN", "GB", "DE", "driver's license",
    "DL#", "MRN", "medical record no.", "Street", "St", "Ave", "th", "st", "N", "E", "°",
    "年", "月", "日", "号", "路", "省", "市", "区", "护照", "出生", "账号", "驾照", "病历号",
    "SSN", "social security", "AB", "QQ", "X", "x", " ", ",", ".", "-", "/", ":", "+", "(",
    ")", "is", "at", "April", "Ⅻ", "½", "²", "①",
]  # fmt: skip


@settings(max_examples=400, deadline=None)
@given(st.lists(st.sampled_from(_PIECES), min_size=1, max_size=14))
def test_no_text_without_a_digit_holds_a_kind_that_needs_one(pieces: list[str]) -> None:
    """What the shortcut relies on, asked of each check itself: a text with no decimal
    digit (the numeral-like characters above are not decimal digits) is never found to
    hold a date of birth, an id, an account, an address or any other kind in
    ``_DIGIT_KINDS``."""
    text = pii.normalise(" ".join(pieces))
    if any(ch.isdecimal() for ch in text):  # NFKC turns some of them into digits
        return
    assert _digit_kinds_seen_by_each_check(text) == []


def test_the_corpus_without_its_digits_holds_no_kind_that_needs_one() -> None:
    texts = [pii.normalise(text) for _, text in _corpus_texts()]
    stripped = ["".join(ch for ch in t if not ch.isdecimal()) for t in texts]
    assert [t for t in stripped if _digit_kinds_seen_by_each_check(t)] == []


def test_a_text_without_a_digit_is_not_searched_for_kinds_that_need_one(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def not_wanted(*args: object) -> bool:
        raise AssertionError("a text without a digit was searched for a kind that needs one")

    checks = tuple(
        (kind, not_wanted if kind in pii._DIGIT_KINDS else check) for kind, check in pii._CHECKS
    )
    monkeypatch.setattr(pii, "_CHECKS", checks)
    monkeypatch.setattr(pii, "_has_card", not_wanted)
    monkeypatch.setattr(pii, "_has_phone", not_wanted)
    monkeypatch.setattr(pii, "_prc_id_ok", not_wanted)
    found = pii.find_pii([("content", "my passport and my date of birth: jane@example.org")])
    assert [f.pii_type for f in found] == ["email"]


def test_a_scan_for_an_unknown_kind_is_refused_not_run_empty() -> None:
    with pytest.raises(ValueError, match="ssn"):
        pii.find_pii([("content", "078-05-1120")], {"ssn"})
    assert [f.pii_type for f in pii.find_pii([("content", "078-05-1120")], ["national_id"])] == [
        "national_id"
    ]
