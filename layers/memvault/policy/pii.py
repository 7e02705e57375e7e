"""Recognising personal data by pattern, in English and Chinese.

Phone numbers use libphonenumber's matcher (via ``phonenumbers``), which checks
numbering plans rather than digit counts; card numbers must pass the Luhn check, IBANs
their mod-97 check, PRC resident ids their check digit, IP addresses Python's parser.
National ids also cover US SSNs and UK National Insurance numbers. Identifiers without a
checkable shape (passports, driving licences, bank accounts, medical record numbers),
dates of birth, street addresses, health data and coordinates are recognised by the
words around them.
"""

from __future__ import annotations

import ipaddress
import re
import threading
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from memvault.policy.secret_context import BASE64_RUN, base64_text
from memvault.policy.secret_patterns import normalise
from memvault.policy.secret_views import collapsed
from memvault_wire.errors import ValidationFailed

_EMAIL = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_CARD = re.compile(r"(?<![\d-])(?:\d[ -]?){12,18}\d(?![\d-])")
_SSN = re.compile(r"(?<!\d)(?!000|666|9\d\d)\d{3}([- ])(?!00)\d{2}\1(?!0000)\d{4}(?!\d)")
#: Nine digits with no separators, named as an SSN (bare, they are any number).
_SSN_NAMED = re.compile(
    r"(?i)(?:\bssn\b|social[ -]security(?: number| no\.?| #)?|社会安全号(?:码)?)"
    r"[^0-9A-Za-z\n]{0,12}(?:is |was |of |number |no\.? )?(?:[^0-9A-Za-z\n]{0,4})"
    r"(?<!\d)(?!000|666|9\d\d)\d{3}(?!00)\d{2}(?!0000)\d{4}(?!\d)"
)
#: An e-mail address spelled out against scrapers: ``jane [at] example [dot] org``,
#: ``maria dot gonzalez at gmail dot com``, ``li(at)example(dot)cn``.
_AT = r"(?:\s*[\[({<]\s*at\s*[\])}>]\s*|\s+at\s+)"
_DOT = r"(?:\s*[\[({<]\s*dot\s*[\])}>]\s*|\s+dot\s+|\.)"
_BRACKETED_AT = re.compile(r"(?i)[\[({<]\s*at\s*[\])}>]")
_MAIL_CUE = re.compile(r"(?i)\b(?:e-?mail|mail(?:box)?|inbox|address|write to)\b|邮箱|邮件|电邮")
_EMAIL_SPELLED = re.compile(
    r"(?i)\b[a-z0-9_%+-]+(?:"
    + _DOT
    + r"[a-z0-9_%+-]+)*"
    + _AT
    + r"[a-z0-9-]+(?:"
    + _DOT
    + r"[a-z0-9-]+)*"
    + _DOT
    + r"(?:com|org|net|edu|gov|io|co|cn|uk|de|fr|jp|info|me|ai|dev|us|ca|au|in|hk|tw|sg)\b"
)
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


_PHONENUMBERS_LOCK = threading.Lock()


def _phonenumbers() -> Any:
    """libphonenumber, imported on first use (a process that never checks a write, such as
    a read, the indexer or the purge, does not load it) and under a lock, so that threads
    checking their first writes at once never see it half imported."""
    with _PHONENUMBERS_LOCK:
        import phonenumbers

        return phonenumbers


def _has_phone(text: str) -> bool:
    # The matcher reads a number's digits only from decimal digits (no letters: it finds no
    # vanity numbers), so a text with fewer than _PHONE_MIN_DIGITS of them holds no number
    # it would report; most texts have none, and the four matchers cost far more than this.
    return _DECIMAL_DIGITS.search(text) is not None and _matched_phone(text)


def _matched_phone(text: str) -> bool:
    """libphonenumber's matcher, in each of ``_PHONE_REGIONS``, finds a valid number of a
    subscriber's length in ``text``."""
    phonenumbers = _phonenumbers()
    # Under the lock too: libphonenumber loads each region's metadata lazily, on the first
    # match that needs it, into shared dictionaries; threads matching their first numbers
    # at once can see a region half loaded. A match costs well under a millisecond.
    with _PHONENUMBERS_LOCK:
        for region in _PHONE_REGIONS:
            matcher = phonenumbers.PhoneNumberMatcher(
                text, region, leniency=phonenumbers.Leniency.VALID
            )
            # A number is a person's reach only with a subscriber's length: Germany's
            # plan holds valid four-digit service numbers, which would make "step 1640"
            # a phone number.
            if any(len(str(m.number.national_number)) >= _PHONE_MIN_DIGITS for m in matcher):
                return True
    return False


#: The fewest digits of a national number read as a phone number.
_PHONE_MIN_DIGITS = 7
#: That many decimal digits (``\d`` is any Unicode decimal digit, as in the matcher),
#: whatever lies between them.
_DECIMAL_DIGITS = re.compile(rf"\d(?:\D*\d){{{_PHONE_MIN_DIGITS - 1}}}")


_IBAN = re.compile(r"\b[A-Z]{2}\d{2}(?: ?[A-Z0-9]{4}){2,7}(?: ?[A-Z0-9]{1,4})?\b")
_NINO = re.compile(
    r"\b(?!BG|GB|NK|KN|TN|NT|ZZ)[A-CEGHJ-PR-TW-Z][A-CEGHJ-NPR-TW-Z]"
    r" ?\d{2} ?\d{2} ?\d{2} ?[A-D]\b"
)
_DATE = (
    r"(?:\d{4}-\d{1,2}-\d{1,2}|\d{1,2}[/.]\d{1,2}[/.]\d{2,4}"
    r"|\d{1,2}(?:st|nd|rd|th)? [A-Z][a-z]+,? \d{4}"
    r"|[A-Z][a-z]+ \d{1,2}(?:st|nd|rd|th)?,? \d{4}|\d{4}年\d{1,2}月\d{1,2}日)"
)
_BIRTH = re.compile(
    r"(?i)(?:\b(?:born(?: on| in)?|dob|d\.o\.b\.?|date of birth|birth ?date|birthday)\b"
    r"|出生日期|出生于|生日|生于)[^0-9A-Za-z\n]{0,8}"
    # "My birthday is 1990-04-12", "date of birth was 12 April 1990", "is on ...".
    r"(?:(?:is|was|falls|on)\b[^0-9A-Za-z\n]{0,4}){0,2}"
    + _DATE
    + r"|"
    + _DATE
    + r"\s*(?:出生|生(?![\u4e00-\u9fff]))"
)
_ADDRESS = re.compile(
    r"\b\d{1,5}[A-Z]?,? (?:(?:[A-Z][a-z]+|\d{1,3}(?:st|nd|rd|th)|[NSEW]\.?) ){1,3}"
    r"(?:Street|St|Road|Rd|Lane|Ln|Avenue|Ave|Boulevard|Blvd|Drive|Dr|Way|Court|Ct|Place|Pl"
    r"|Square|Sq|Terrace|Close|Crescent|Gardens|Row|Hill|Parkway|Pkwy|Highway|Hwy|Freeway"
    r"|Fwy|Expressway|Expy|Circle|Cir|Trail|Trl|Plaza|Alley|Mews|Grove|Parade|Quay|Turnpike"
    r"|Pike)\b"
    r"|[\u4e00-\u9fff]{1,8}(?:省|市|自治区)[\u4e00-\u9fff]{0,8}(?:区|县|市|镇)"
    r"[\u4e00-\u9fff0-9]{0,12}(?:路|街|道|巷|大道|胡同|弄)\d+号"
)
_IPV4 = re.compile(r"(?<![\d.])(?:\d{1,3}\.){3}\d{1,3}(?![\d.])")
_IPV6 = re.compile(r"(?<![0-9A-Fa-f:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![0-9A-Fa-f:])")
_VERSIONED = re.compile(r"(?i)(?:\bv|version|release|build|ver\.?)\s*$")
_HEALTH = re.compile(
    r"(?i)\b(?:diagnosed with|suffers? from|allergic to|prescribed|medication|chemotherapy"
    r"|diabetes|diabetic|asthma|hypertension|depression|anxiety disorder|cancer|tumou?r"
    r"|hiv|pregnan\w*|epilep\w*|dementia|adhd|bipolar|schizophreni\w*|insulin"
    r"|blood pressure|therapy for|surgery|sick leave"
    r"|takes \d+ ?(?:mg|mcg|µg|ml|g|iu)\b|\d+ ?(?:mg|mcg) \w+ daily)"
    r"|患有|确诊|手术|病假|诊断为|诊断出|服用|过敏|病史|糖尿病|高血压|抑郁|癌症|肿瘤|怀孕|哮喘|毫克|化疗|心脏病"
)
_KEYED = {
    "passport": re.compile(
        r"(?i)(?:passport(?:[ _-]?(?:no\.?|number|num|#))?|护照(?:号码|号)?)[^A-Za-z0-9\n]{0,6}"
        r"(?:is )?[A-Z]{0,2}\d{6,9}\b"
    ),
    "bank_account": re.compile(
        r"(?i)(?:\brouting(?: number)?|\bsort code|\bacct\.?|\baccount (?:number|no\.?)"
        r"|\bbank account|\b(?:checking|savings|current) account|\bABA\b"
        r"|\baccount\b(?=[^\n]{0,40}(?:sort code|routing))"
        r"|(?<=sort code \d\d-\d\d-\d\d, )account|账号|银行账户|银行卡号|卡号)"
        r"[^0-9\n]{0,6}\d[\d -]{5,}"
    ),
    "drivers_license": re.compile(
        r"(?i)(?:driver'?s? licen[cs]e|driving licen[cs]e|\bDL\b#?|驾驶证|驾照)"
        # A licence's number holds digits: "driver's license expired" names none.
        r"(?: (?:no\.?|number))?[^A-Za-z0-9\n]{0,8}(?:is )?(?=[A-Z0-9 -]{0,20}\d)"
        r"[A-Z0-9][A-Z0-9 -]{5,}"
    ),
    "medical_record": re.compile(
        r"(?i)(?:\bMRN\b|medical record(?: number| no\.?)?|病历号|住院号|病案号)"
        r"[^A-Za-z0-9\n]{0,8}(?:(?:at|is) [^:\n]{0,30}?)?[A-Z]{0,3}\d{5,}"
    ),
}
_COORDINATES = re.compile(
    r"(?<![\d.])([-+]?\d{1,2}\.\d{4,})°? ?([NS])?, ?([-+]?\d{1,3}\.\d{4,})°? ?([EW])?"
)


def _iban_ok(raw: str) -> bool:
    code = raw.replace(" ", "")
    if not 15 <= len(code) <= 34:
        return False
    moved = code[4:] + code[:4]
    digits = "".join(str(int(c, 36)) for c in moved)
    return int(digits) % 97 == 1


def _has_ip(text: str) -> bool:
    for m in _IPV4.finditer(text):
        if _VERSIONED.search(text[: m.start()]):
            continue
        try:
            ipaddress.IPv4Address(m.group())
        except ValueError:
            continue
        return True
    for m in _IPV6.finditer(text):
        if m.group().count(":") >= 2:
            try:
                ipaddress.IPv6Address(m.group())
            except ValueError:
                continue
            return True
    return False


def _has_coordinates(text: str) -> bool:
    for m in _COORDINATES.finditer(text):
        lat, lon = float(m.group(1)), float(m.group(3))
        if -90 <= lat <= 90 and -180 <= lon <= 180:
            return True
    return False


_CHECKS: tuple[tuple[str, Callable[[str], bool]], ...] = (
    ("iban", lambda t: any(_iban_ok(m.group()) for m in _IBAN.finditer(t))),
    ("date_of_birth", lambda t: _BIRTH.search(t) is not None),
    ("address", lambda t: _ADDRESS.search(t) is not None),
    ("ip_address", _has_ip),
    ("health", lambda t: _HEALTH.search(t) is not None),
    ("location", _has_coordinates),
    *((kind, (lambda t, r=regex: r.search(t) is not None)) for kind, regex in _KEYED.items()),
)


def _spelled_email(text: str) -> bool:
    """An address written around scrapers (``[at]``, `` at ... dot ``), or percent-encoded
    (``%40``). A plain one is ``_EMAIL``'s."""
    if "%40" in text and _EMAIL.search(urllib.parse.unquote(text)):
        return True
    for found in _EMAIL_SPELLED.finditer(text):
        spelled = found.group()
        if "@" in spelled:
            continue
        if _BRACKETED_AT.search(spelled):
            return True
        # " at ... dot com" is also prose ("we work at example dot com"): an address only
        # when the mailbox looks like one or the text says it is one.
        mailbox = re.split(r"(?i)\s+at\s+", spelled, maxsplit=1)[0]
        if re.search(r"[0-9_]|\sdot\s|\.", mailbox) or _MAIL_CUE.search(text):
            return True
    return False


_MAX_DECODED = 20


def _encoded_email(text: str) -> bool:
    """An e-mail address written in base64 (``amFuZUBleGFtcGxlLm9yZw==``), as a probe
    stored one to pass the classifier; what the run decodes to must be printable text."""
    for m in list(BASE64_RUN.finditer(text))[:_MAX_DECODED]:
        decoded = base64_text(m.group())
        if decoded is not None and _EMAIL.search(decoded):
            return True
    return False


#: A hex identifier in dash-joined groups (a UUID, a truncated or dashed digest): three or
#: more groups, at least one with a hex letter; also after a prefix (``run-<uuid>``).
_HEX_ID = re.compile(r"(?<![0-9A-Za-z])[0-9A-Fa-f]+(?:-[0-9A-Fa-f]+){2,}(?![0-9A-Za-z])")


def _without_hex_ids(text: str) -> str:
    """The text with each hex identifier blanked, for the checks that read numbers: a
    UUID's last group is all digits one time in 280 and then often a valid phone number
    (``...-bfff-114013845259``), which would make any run state or record holding a
    UUID personal data, withheld from its own writer's token."""
    return _HEX_ID.sub(
        lambda m: " " * len(m.group()) if re.search("[A-Fa-f]", m.group()) else m.group(),
        text,
    )


#: Every kind of personal data recognised in text.
KINDS: frozenset[str] = frozenset(
    ("email", "national_id", "card_number", "phone_number", *(kind for kind, _ in _CHECKS))
)


#: The kinds that hold a decimal digit wherever they are found: each of their patterns
#: needs one (``\d``) in every alternative (a date's or an id's digits, a street number,
#: an account's or a card's digits, a coordinate's degrees). A text without a digit is not
#: searched for them. (An IPv6 address may be written without one, ``fe::ab``; an e-mail
#: address or a health term needs none.)
_DIGIT_KINDS = frozenset(
    (
        "national_id", "card_number", "phone_number", "iban", "date_of_birth", "address",
        "location", "passport", "bank_account", "drivers_license", "medical_record",
    )
)  # fmt: skip
_ANY_DIGIT = re.compile(r"\d")


def _kinds_in(text: str, wanted: frozenset[str] = KINDS) -> list[str]:
    """The ``wanted`` kinds found in ``text`` (each kind is looked for on its own)."""
    if _ANY_DIGIT.search(text) is None:
        wanted = wanted - _DIGIT_KINDS
    kinds = []
    if "email" in wanted and (_EMAIL.search(text) or _spelled_email(text) or _encoded_email(text)):
        kinds.append("email")
    numbers = _without_hex_ids(text) if wanted & _NUMBER_KINDS else text
    if "national_id" in wanted and (
        _SSN.search(numbers)
        or _SSN_NAMED.search(numbers)
        or _NINO.search(text)
        or any(_prc_id_ok(m.group()) for m in _PRC_ID.finditer(numbers))
    ):
        kinds.append("national_id")
    if "card_number" in wanted and _has_card(numbers):
        kinds.append("card_number")
    if "phone_number" in wanted and _has_phone(numbers):
        kinds.append("phone_number")
    kinds += [kind for kind, found in _CHECKS if kind in wanted and found(text)]
    return kinds


#: The kinds read in a text with its hex ids blanked out.
_NUMBER_KINDS = frozenset(("national_id", "card_number", "phone_number"))


#: The kinds looked for in a text's disguised views as well: what spacing out or base64
#: hides whole. (Other kinds are read in the text as written: closing up spaced digits
#: would make counts and codes look like phone or card numbers.)
_DISGUISED_KINDS = frozenset(("email", "national_id"))


def _disguised(text: str) -> list[str]:
    """The text closed up where it is spaced out character by character
    (``1 2 3 - 4 5 - 6 7 8 9``), and what its base64 runs decode to."""
    views = [view] if (view := collapsed(text)) else []
    for m in list(BASE64_RUN.finditer(text))[:_MAX_DECODED]:
        decoded = base64_text(m.group())
        if decoded is not None:
            views.append(decoded)
    return views


def _kinds_seen(text: str, wanted: frozenset[str] = KINDS) -> list[str]:
    kinds = _kinds_in(text, wanted)
    hidden = wanted & _DISGUISED_KINDS
    if hidden:
        for view in _disguised(text):
            kinds += [k for k in _kinds_in(view, hidden) if k not in kinds]
    return kinds


def find_pii(fields: Iterable[tuple[str, str]], kinds: Iterable[str] = KINDS) -> list[PiiFinding]:
    """One finding per kind and field, on text normalised as for secrets (NFKC, no
    zero-width characters): full-width digits and split numbers are what they spell, and
    an e-mail address or national id spaced out or in base64 is what it hides. ``kinds``
    narrows the search to those kinds (the others are not looked for)."""
    kinds = frozenset(kinds)
    if not kinds <= KINDS:
        raise ValueError(f"unknown kinds of personal data: {sorted(kinds - KINDS)}")
    return [
        PiiFinding(field, kind)
        for field, text in fields
        for kind in _kinds_seen(normalise(text), kinds)
    ]


# --- structured values: a run's state and budget, a memory's scope --------------------------

#: What a key says its value is, read on the key as words (``date_of_birth``,
#: ``dateOfBirth`` and ``DATE-OF-BIRTH`` all read "date of birth"); a name given beside
#: a value (``{"type": "ssn", "value": ...}``) counts as its key. A number is judged only
#: for the kinds its names name (``{"tokens": 4155550132}`` is a count, ``{"phone":
#: 4155550132}`` a phone number), and so is a string beyond what it shows alone.
_NAMED_KINDS: tuple[tuple[str, re.Pattern[str]], ...] = (
    (
        "phone_number",
        re.compile(
            r"\b(?:(?:tele|cell ?|mobile ?|smart ?)?phones?|tel|mobiles?|cells?|msisdn"
            r"|whatsapp|fax)\b|phonenumber|手机|电话|联系方式"
        ),
    ),
    (
        "national_id",
        re.compile(
            r"\b(?:ssns?|social (?:security|insurance)|national (?:id|identity|insurance)"
            r"|nino|tax ?id|taxpayer id|itin|id card|identity (?:card|number)|citizen id"
            r"|resident id|personal id number)\b|身份证|社会安全号|身份号|社保号"
        ),
    ),
    (
        "card_number",
        re.compile(
            r"\b(?:cards?|(?:credit|debit|payment) cards?|cc|ccn|pan)\b|cardnumber|creditcard"
            r"|卡号|信用卡|银行卡"
        ),
    ),
    (
        "date_of_birth",
        re.compile(
            r"\b(?:dob|birth|birthday|birth ?date|date of birth|born(?: on)?|birth day)\b"
            r"|dateofbirth|出生|生日"
        ),
    ),
    ("address", re.compile(r"\b(?:address(?:es)?|addr|street)\b|地址|住址|住所")),
    ("passport", re.compile(r"\bpassports?\b|护照")),
    (
        "bank_account",
        re.compile(
            r"\b(?:account (?:number|no|num)s?|acct|bank accounts?|iban|routing(?: number)?"
            r"|sort code|aba)\b|账号|银行账户|银行卡号"
        ),
    ),
    (
        "drivers_license",
        re.compile(r"\b(?:driver(?: ?s)?|driving) licen[cs]es?\b|驾驶证|驾照"),
    ),
    ("medical_record", re.compile(r"\b(?:mrn|medical records?)\b|病历号|住院号|病案号")),
)
#: Addresses that are no one's home: a network's, a wallet's, a mailbox's (an e-mail
#: address is judged as one whatever its key).
_NOT_STREET = re.compile(
    r"\b(?:ip|ipv4|ipv6|e ?mail|mac|memory|wallet|contract|server|host|url|uri|web|bind"
    r"|listen|remote|local|base|eth|btc|bitcoin|crypto|hex|pointer|network|net|gateway|proxy"
    r"|node|peer|socket|broadcast|multicast|onion|public|private|return|reply|sender|from|to"
    r"|bucket|endpoint|api|callback|webhook)\b"
)
_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Za-z])(?=\d)")
_NOT_WORD = re.compile(r"[^0-9A-Za-z\u4e00-\u9fff]+")


def _key_words(name: str) -> str:
    """A key as the words it spells: ``customerSSN`` reads "customer ssn"."""
    return " ".join(_NOT_WORD.split(_CAMEL.sub(" ", normalise(name)))).strip().lower()


def _named_kinds(words: str) -> frozenset[str]:
    kinds = {kind for kind, regex in _NAMED_KINDS if regex.search(words)}
    if "address" in kinds and _NOT_STREET.search(words):
        kinds.discard("address")
    return frozenset(kinds)


_YEAR_FIRST_DATE = re.compile(
    r"(?:\d{4}(?P<sep>[-/.])(?P<m>\d{1,2})(?P=sep)(?P<d>\d{1,2})|\d{4}(?P<cm>\d\d)(?P<cd>\d\d))"
    r"(?:[T ][\d:.]+(?:Z|[+-]\d\d:?\d\d)?)?"
)
_DOCUMENT_NUMBER = re.compile(r"(?=(?:\D*\d){4})[A-Za-z0-9]{5,20}")
_NATIONAL_NUMBER = re.compile(r"[A-Za-z]{0,2}\d{6,18}[A-Za-z0-9]?")


def _a_date(value: str) -> bool:
    """A whole calendar date: any form prose uses, year first (``1990/04/12``, an ISO
    timestamp), or ``19900412``."""
    if re.fullmatch(_DATE, value):
        return True
    m = _YEAR_FIRST_DATE.fullmatch(value)
    if m is None:
        return False
    month, day = int(m.group("m") or m.group("cm")), int(m.group("d") or m.group("cd"))
    return 1 <= month <= 12 and 1 <= day <= 31


_HOUSE_FIRST = re.compile(r"\d{1,6}[A-Za-z]?,? +[^\W\d_]{2,}")
_STREET_FIRST = re.compile(
    r"(?i)(?:[^\W\d_]+(?:straße|strasse|str\.|weg|gasse|platz|allee|damm|straat|gatan|gata"
    r"|vej|veien)|(?:via|viale|calle|rue|avenida|rua|piazza|plaza|carrer|ulica) [^\d,\n]{2,40}?)"
    r",? +\d{1,5}[A-Za-z]?\b"
)


def _a_street(value: str) -> bool:
    """A street address: a house number and the street's name, in either order
    (``1600 Amphitheatre Parkway``, ``Hauptstraße 5``, ``Via Roma 10``), not a network
    address, a link or a mailbox, nor a note that merely holds a number."""
    if re.search(r"[@/]|\b0x[0-9a-fA-F]", value):
        return False
    if re.search(r"[\u4e00-\u9fff]", value):
        return re.search(r"[路街道巷弄]\s*\d+\s*号", value) is not None
    return (
        _HOUSE_FIRST.match(value) is not None
        or _STREET_FIRST.search(value) is not None
        or _ADDRESS.search(value) is not None
    )


#: What a value must be, once its name says what it is, for the kinds prose recognises
#: only by the words around them.
def _document_number(value: str) -> bool:
    """A document's number: letters and at least four digits (a date, as a passport's
    expiry under ``passport.expires``, is not one)."""
    return not _a_date(value) and _DOCUMENT_NUMBER.fullmatch(re.sub(r"[ -]", "", value)) is not None


def _national_number(value: str) -> bool:
    return (
        not _a_date(value) and _NATIONAL_NUMBER.fullmatch(re.sub(r"[ .-]", "", value)) is not None
    )


_NAMED_VALUE: dict[str, Callable[[str], bool]] = {
    "date_of_birth": _a_date,
    "address": _a_street,
    "national_id": _national_number,
    "passport": _document_number,
    "drivers_license": _document_number,
    "medical_record": _document_number,
}


def _named_findings(names: tuple[str, ...], value: str, field: str) -> list[PiiFinding]:
    """The personal data a value is by its names (the last two, as ``customer.ssn``):
    what the value says read after them, as a line ``customer ssn: 123456789`` of a
    form, and what a value of that name must look like; only of the kinds they name."""
    words = " ".join(_key_words(name) for name in names[-2:])
    kinds = _named_kinds(words)
    if not kinds:
        return []
    value = normalise(value).strip()
    found = set(_kinds_in(normalise(f"{words}: {value}"), kinds & KINDS))
    found |= {kind for kind in kinds - found if kind in _NAMED_VALUE and _NAMED_VALUE[kind](value)}
    return [PiiFinding(field, kind) for kind in sorted(found)]


#: The keys that hold a value, and those that name it beside it (``{"type": "phone",
#: "value": 4155550132}``).
_VALUE_KEYS = frozenset({"value", "val", "v", "data", "content", "number", "内容", "值", "号码"})
_NAME_KEYS = ("name", "key", "field", "type", "kind", "label", "what", "title", "类型", "名称")
_MAX_DEPTH = 40


def _number(value: float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def find_structured_pii(value: Any, path: str) -> list[PiiFinding]:
    """Personal data in a JSON-like value (a run's state or budget, a memory's scope),
    one finding per kind and field, named by where it sits (``state.customer.ssn``).
    Every key and every string is read as prose is; every string and number is read
    again with the names it is stored under, for the kinds those names name
    (``{"customer": {"ssn": 123456789}}``, ``{"date_of_birth": "1990-04-12"}``). A number
    under a name that names no personal data (a count, a step, an id) is no one's."""
    out: list[PiiFinding] = []
    _walk(value, path, (), out, 0)
    seen: set[tuple[str, str]] = set()
    unique = []
    for finding in out:
        if (finding.field, finding.pii_type) not in seen:
            seen.add((finding.field, finding.pii_type))
            unique.append(finding)
    return unique


def _walk(value: Any, path: str, names: tuple[str, ...], out: list[PiiFinding], depth: int) -> None:
    if depth > _MAX_DEPTH or value is None or isinstance(value, bool):
        return
    if isinstance(value, str):
        out += find_pii([(path, value)])
        if names:
            out += _named_findings(names, value, path)
    elif isinstance(value, int | float):
        if names:
            out += _named_findings(names, _number(value), path)
    elif isinstance(value, dict):
        lowered = {str(key).lower(): item for key, item in value.items()}
        beside = next(
            (item for key in _NAME_KEYS if isinstance(item := lowered.get(key), str)), None
        )
        for key, item in value.items():
            name = str(key)
            out += find_pii([(f"{path} (key)", name)])
            named = (
                (*names, beside, name) if beside and name.lower() in _VALUE_KEYS else (*names, name)
            )
            _walk(item, f"{path}.{name}", named, out, depth + 1)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            _walk(item, f"{path}[{i}]", names, out, depth + 1)


#: The kinds an identifier may never hold. Ids are keys: listed, logged by id, shown to
#: every reader of what they name, and never withheld or classified, so personal data in
#: one would reach readers below its class. Only the precise kinds are judged here (an id
#: of digits is often a phone number's shape, a dotted one an address's; a run of digits
#: in a UUID-derived id passes a card number's checksum one time in ten, and 18- and
#: 19-digit ids, snowflake ids say, pass a national id number's checks now and then).
ID_REFUSED_KINDS = frozenset({"email", "iban", "passport"})


def personal_id_findings(fields: Iterable[tuple[str, str | None]]) -> list[PiiFinding]:
    """The personal data an id may never hold (``ID_REFUSED_KINDS``, and an SSN with its
    separators), one finding per kind and field."""
    named = [(name, value) for name, value in fields if value]
    found = find_pii(named, ID_REFUSED_KINDS)
    # A US social security number written with its separators (078-05-1120) is precise
    # enough to refuse in an id: no UUID or snowflake has that shape.
    found += [
        PiiFinding(name, "national_id") for name, value in named if _SSN.search(normalise(value))
    ]
    return found


def refuse_personal_ids(fields: Iterable[tuple[str, str | None]], what: str) -> None:
    """Refuse ids (a run's, a session's, an operation's, an event's...) that hold personal
    data: a 422 naming the field and the kind, never the value."""
    found = personal_id_findings(fields)
    if found:
        first = found[0]
        raise ValidationFailed(
            f"{what}: {first.field} holds personal data ({first.pii_type}); ids are shown to "
            "every reader of what they name and are never withheld, so use an opaque id "
            "(a random or sequential one) and keep the personal data in a field that is "
            "classified",
            {
                "field": first.field,
                "reason": "pii_in_id",
                "pii_types": sorted({f.pii_type for f in found}),
            },
        )
