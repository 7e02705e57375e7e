"""Credentials written the way people and configuration files write them.

detect-secrets' pattern plugins and the provider formats (``secret_formats``) find tokens
by their shape. What has no shape of its own is found by its name: ``db_password=...``,
``"api_key": "..."``, ``Authorization: Basic ...``, "my password is ...", "the door code
is 4821", "数据库密码改成了 ...", "助记词 ...". Every such rule hands the name to
``secret_values.name_kind`` and the value to ``secret_values.looks_secret``, so that a
value under a secret's name is judged the same way in a sentence, a config line and a
run's state, and placeholders, references, measures and phrases pass.

Every pattern runs on normalised text (NFKC, format characters such as zero-width spaces
removed), so full-width letters and split keys are matched as what they spell; a line
runs the named rules only when it holds one of their words (``GATE``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from memvault.policy.secret_formats import formats_in
from memvault.policy.secret_values import (
    MIXED_SCRIPT_VALUE,
    Kind,
    is_documentation_example,
    is_placeholder,
    is_seed_phrase,
    looks_random,
    looks_secret,
    mixed_script_password,
    name_kind,
    random_letters,
)

__all__ = ["PATTERNS", "Pattern", "fold", "looks_secret", "matches", "normalise"]

#: Format characters (Unicode category Cf): zero-width spaces and joiners, soft hyphens,
#: bidirectional marks, byte-order marks, tags. Invisible, so a reader sees through them.
_FORMAT_CHARS = re.compile(
    "[\u00ad\u0600-\u0605\u061c\u06dd\u070f\u0890\u0891\u08e2\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000110bd\U000110cd"
    "\U00013430-\U0001343f\U0001bca0-\U0001bca3\U0001d173-\U0001d17a\U000e0001"
    "\U000e0020-\U000e007f]"
)


def normalise(text: str) -> str:
    """NFKC (full-width letters become ASCII), without format characters (zero-width
    spaces and joiners, soft hyphens, byte-order marks): what a reader would see."""
    if text.isascii():
        return text
    return _FORMAT_CHARS.sub("", unicodedata.normalize("NFKC", text))


@dataclass(frozen=True)
class Pattern:
    secret_type: str
    regex: re.Pattern[str]
    #: Given the match and the line, whether it is a secret (the value check); None: always.
    accept: Callable[[re.Match[str], str], bool] | None = None
    #: Lower-case strings of which the line must hold one for the pattern to run (a
    #: substring test costs far less than a regex): every match holds one of them.
    needs: tuple[str, ...] = ()
    #: Whether the regex is written in lower case and runs on the lower-cased line (a
    #: case-insensitive alternation of names is ten times slower in ``re``); the value
    #: is still read from the line as written.
    folded: bool = False
    #: A scan of its own, instead of the regex and ``accept`` (the regex then says where
    #: the scan starts).
    scan: Callable[[str], bool] | None = None
    #: Whether only a line with Chinese or Japanese text can hold what the pattern accepts
    #: (its verbs or its words are), so that a line of ASCII skips it.
    cjk: bool = False


def _group(m: re.Match[str], line: str, name: str) -> str:
    """A group of a match as the line writes it (the match may be on the folded line)."""
    start, end = m.span(name)
    return line[start:end] if start >= 0 else ""


_QUOTES = (
    "\"'`\u201c\u201d\u2018\u2019\u300c\u300d\u300e\u300f\u00ab\u00bb"
    "\u300a\u300b\u3008\u3009\u3010\u3011"
)


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] in _QUOTES and value[-1] in _QUOTES:
        return value[1:-1]
    return value


_CJK_TAIL = re.compile(r"[\u2e80-\u9fff\uac00-\ud7af\uf900-\ufaff].*$")


def _first_word(rest: str) -> str:
    """The value a sentence gives: a quoted string, else its next word."""
    rest = rest.lstrip()
    if rest[:1] in _QUOTES:
        close = re.search(r"[\"'`\u201d\u2019\u300d\u300f\u00bb\u300b\u3009\u3011]", rest[1:])
        if close:
            return rest[1 : close.start() + 1]
    word = rest.split(maxsplit=1)[0] if rest.strip() else ""
    mixed = MIXED_SCRIPT_VALUE.match(word)
    if mixed and mixed_script_password(mixed.group()):
        return mixed.group()  # "青山-Blue-River-5521,万一...": Chinese words in the password
    return _CJK_TAIL.sub("", word)  # "Hunter2024!,别告诉别人": the sentence goes on


def _words_run(rest: str, limit: int = 24) -> str:
    """The words a sentence gives as a phrase: up to the end of the clause."""
    rest = rest.lstrip().lstrip(_QUOTES)
    clause = re.split(r"[.;!?\n\"'\u201d\u300d)]|,\s(?=[A-Za-z])", rest, maxsplit=1)[0]
    words = re.findall(r"[^\s,]+", clause)[:limit]
    return " ".join(w.strip(_QUOTES) for w in words)


def _judge(name: str, rest: str, *, prose: bool, kind: Kind | None = None) -> bool:
    """Whether ``rest`` (what follows a secret's name and its "is", "=", "是") starts with
    the secret the name calls it."""
    kind = kind or name_kind(name)
    if kind is None:
        return False
    rest = _FILLER.sub("", rest, count=1)
    three = _THREE_DIGITS.match(rest) if kind is Kind.PIN else None
    if three and _COMBINATION_LOCK.search(name) and _not_a_run(three.group("v")):
        return True  # "行李箱密码锁设置为 739": a luggage lock's combination has three digits
    if kind is Kind.PHRASE or (kind is Kind.PASSWORD and "phrase" in name.lower()):
        phrase = _words_run(rest)
        if phrase.count(" ") >= 2 and looks_secret(phrase, prose=prose, kind=Kind.PHRASE):
            return True
    if kind is Kind.PASSWORD and _APP_PASSWORD.match(rest):
        return True  # "abcd efgh ijkl mnop": an app password, in the groups it is shown in
    if kind is Kind.PIN and _DIAL.match(rest):
        return True  # "left 37 right 12 left 58", "左 37 右 12 左 58": a dial's turns
    if kind is Kind.PHRASE or (kind is Kind.PASSWORD and "phrase" in name.lower()):
        quoted = _QUOTED_PHRASE.match(rest)
        if quoted and _quoted_phrase(quoted.group("p")):
            return True  # "the passphrase for ~/.ssh/id_work is 'copper kettle under ...'"
    return looks_secret(_first_word(rest), prose=prose, kind=kind)


#: Locks whose combination is three digits (a suitcase's, a padlock's).
_COMBINATION_LOCK = re.compile(r"(?i)密码锁|行李箱|combination|combo|padlock|luggage|suitcase")
_THREE_DIGITS = re.compile(
    r"\s*[\"'\u201c\u300c]?(?P<v>\d{3})(?!\d|[.,:/]\d|[%\-])"
    r"(?!\s*(?:位|个|次|元|块|号|年|天|秒|分|digits?|numbers?|percent|times|dials?|wheels?))"
)


def _not_a_run(digits: str) -> bool:
    """Digits that are not one digit repeated or a run ("000", "123"): a lock's factory
    setting, not anyone's combination."""
    return len(set(digits)) > 1 and digits not in "0123456789" and digits not in "9876543210"


#: A combination given as a dial's turns: three to six, each a direction and a number.
_DIAL = re.compile(
    r"(?i)\s*[\"'\u201c\u300c]?(?:(?:left|right|l|r|cw|ccw|左|右)\s*(?:转\s*|to\s+)?\d{1,3}"
    r"(?![\d.:])\s*(?:圈|格)?[\s,;/>\-\u2192\u3001]*){3,6}"
)
#: A phrase set off in quotes, right where the value starts.
_QUOTED_PHRASE = re.compile(
    r"\s*[\"'`\u201c\u2018\u300c](?P<p>[^\"'`\u201d\u2019\u300d\n]{8,120})"
    r"[\"'`\u201d\u2019\u300d]"
)


def _quoted_phrase(phrase: str) -> bool:
    """A passphrase set off in quotes: three to twelve words, no template, few of them the
    small words of a sentence (a third at most: "copper kettle under the bridge 19")."""
    words = phrase.split()
    if not 3 <= len(words) <= 12 or is_placeholder(phrase) or _CJK_TAIL.search(phrase):
        return False
    small = sum(w.lower().strip(_QUOTES + ".,;:!?") in _SMALL_WORDS for w in words)
    return words[0].lower() not in _SMALL_WORDS and small <= len(words) // 3


_SMALL_WORDS = frozenset(
    {
        *("a", "an", "the", "in", "on", "at", "to", "for", "of", "from", "with", "by", "as"),
        *("is", "was", "be", "it", "its", "my", "your", "our", "their", "his", "her", "this"),
        *("that", "and", "or", "but", "if", "when", "then", "so", "not", "no", "same", "one"),
        *("stored", "kept", "saved", "written", "see", "ask", "check", "use", "set", "still"),
        *("under", "over", "into", "onto", "about", "where", "what", "which", "who", "how"),
    }
)


_APP_PASSWORD = re.compile(r"\s*[\"'`]?[a-z]{4}(?: [a-z]{4}){3}\b")
#: An app password shown without its spaces: sixteen lower-case letters.
_APP_LETTERS = re.compile(r"\s*[\"'`]?(?P<v>[a-z]{16})(?![A-Za-z0-9])")


def _app_password(rest: str) -> bool:
    """Google's and Apple's app passwords: four groups of four letters, or the sixteen
    letters in one run, as random as a generated code ("qzrmwkxtvbnlpsdh")."""
    if _APP_PASSWORD.match(rest):
        return True
    run = _APP_LETTERS.match(rest)
    return run is not None and random_letters(run.group("v"))


#: Words that open the clause giving a value: "the PIN, if I ask: it's 4719".
_FILLER = re.compile(
    r"(?i)^\s*(?:(?:it'?s|it\s+is|that'?s|that\s+is|this\s+is|they'?re|they\s+are)\s+"
    # "rotated the password -> new value Xy7!...": what the new value is, named.
    r"|(?:the\s+|a\s+)?new\s+(?:value|one)(?:\s+is)?\s*:?\s+"
    # "答案设成了随机串 Bw9#...", "改成了新的 ...": a word that says what the value is.
    r"|(?:一个|一串|一组)?(?:新的?|随机的?)(?:字符串|字符|串|密码|口令|值)?\s*:?\s*)"
)

# --- names in sentences -----------------------------------------------------------------

_KEY_QUALIFIER = (
    r"api|access|private|secret|signing|encryption|decryption|master|deploy|ssh|gpg|pgp"
    r"|wallet|license|licence|activation|product|admin|root|app|client|bot|webhook|sas"
    r"|storage|account|hmac|jwt|session|service|aws|stripe|openai|github|gitlab|slack"
    r"|recovery|bitlocker|backup|unlock|vault|wi-?fi|wpa|network"
)
_EN_NAMES = (
    r"pass(?:word|wd|phrase|code)s?|pass[ -](?:word|phrase|code)|p[a@4][s$5]{2}w[o0]rd|pwd"
    r"|pin(?:[ -]?(?:code|number))?|puk|combo|pw|psk|pre-?shared key|secret(?:[ _-]?key)?|(?:"
    + _KEY_QUALIFIER
    + r")[ _-]?keys?"
    r"|client[ _-]?secret|(?:key|app|api|consumer|merchant|signing|webhook)[ _]?secret"
    r"|(?:access|auth(?:entication)?|refresh|bearer|api|bot|personal access"
    r"|session|id|oauth|deploy|github|gitlab|slack|npm|vault|service account)[ _-]?token|token"
    r"|credentials?|(?:unlock|access|door|alarm|security|entry|gate|safe|wi-?fi|lock[ -]?screen"
    r"|garage|locker|vault|keypad|building|backup|recovery|lockbox|padlock|phone) code"
    r"|(?:backup|recovery|2fa|mfa|otp|emergency) codes|keypad|app password|pat"
    r"|(?:unlock|android|lock[ -]?screen|phone) pattern|community string"
    r"|(?:security|secret) (?:question )?answer|answer to (?:the|my) security question|answer"
    r"|(?:safe|lock|locker|padlock) combination|combination|seed(?: phrase| words)?"
    r"|mnemonic(?: phrase)?"
    r"|(?:recovery|backup|secret|mnemonic|wallet)(?: recovery)? (?:phrase|words|seed)|key"
    r"|code"
)
#: What joins a name to its value in a sentence, longest first (a regex alternation takes
#: the first that fits: "has been" would leave "changed to" for the value).
_LINK_WORDS = sorted(
    (
        *("is", "was", "are", "were", "will be", "has been", "have been", "reads", "read"),
        *("equals", "set to", "changed to", "updated to", "reset to", "now", "became"),
        *("becomes", "is now", "is still", "should be", "would be", "is set to", "to", "as"),
        *("was changed to", "was set to", "was reset to", "got changed to", "was updated to"),
        *("has been changed to", "has been set to", "has been reset to", "is changed to"),
        *("has been updated to", "is now set to", "is currently", "was just changed to"),
    ),
    key=len,
    reverse=True,
)
_LINK = (
    r"(?:\s+(?:" + "|".join(w.replace(" ", r"\s+") for w in _LINK_WORDS) + r")\s*:?"
    # A dash that starts an arrow or a flag ("--from-env-file") is no dash between them.
    # A colon that starts "//" is a URL's ("API key at https://..."), not a name's.
    r"|\s*(?::(?!//)|=)|\s+[-\u2013\u2014](?![->])|\s*(?:->|=>|\u2192|\u21d2))\s*"
)
#: A name starts a word, not a path, an ARN or an identifier ("arn:...:secret:prod").
_NAME_START = r"(?<![a-z0-9:/.\-_@<${%])"
_QUALIFIER = (
    r"(?:\s*\([^)\n]{0,60}\))?"
    r"(?P<q>,?\s+(?:for|of|to|on|at|in|from|if|when|in case)\s+(?:[^.,;:!?\n=]|\.(?=\S)){1,40}?)?"
    r"(?:\s*\([^)\n]{0,60}\))?(?:\s+(?:here|below|again|too|then))?"
)


#: Words before a secret's name, or in what it is for, that say the value is no one's
#: secret: documentation's example, or a public key ("the TOTP example secret in every
#: tutorial is ...", "my public SSH key: ...", "the publishable key pk_live_...").
_NOT_ANYONES = frozenset(
    {
        *("example", "examples", "sample", "tutorial", "tutorials", "documentation", "docs"),
        *("placeholder", "dummy", "fake", "public", "publishable", "documented"),
    }
)
_WORDS_BEFORE = re.compile(r"[a-z][a-z0-9-]*")


#: What ends the phrase a name is part of: the words before it belong to another setting
#: ("name=mysql-secret,key=password" has no "mysql-secret key").
_PHRASE_END = re.compile(r"[,;=(){}\[\]\"]")


def _words_before(low: str, start: int, count: int = 2) -> list[str]:
    """The last words of the (folded) line before ``start``, in the name's own phrase."""
    window = low[max(0, start - 32) : start]
    ends = list(_PHRASE_END.finditer(window))
    words_from = 0
    if ends:
        window = window[ends[-1].end() :]
        # "dc=example / bindpw ...": the word right after "=" is that setting's value.
        words_from = 1 if ends[-1].group() == "=" and window[:1].isalnum() else 0
    return _WORDS_BEFORE.findall(window)[words_from:][-count:]


#: Chinese words just before a secret's name that say the value is documentation's
#: example ("jwt.io 上那个示例 token 的 payload 是 ...", "文档里的 API key 是 ...").
_ZH_EXAMPLE_BEFORE = re.compile(
    r"(?:示例|样例|范例|例子|演示|文档里?|教程里?)(?:的|中的|里的)?\s*$"
)


def _zh_example_before(line: str, start: int) -> bool:
    return not line.isascii() and bool(_ZH_EXAMPLE_BEFORE.search(line[max(0, start - 8) : start]))


#: What a name is for that makes its value a hash or an id of that thing.
_HASHED = frozenset(
    {"commit", "hash", "sha", "sha1", "sha256", "digest", "checksum", "fingerprint", "txid"}
)


#: Password managers and secret stores: a secret said to be *in* one is pointed to.
_STORES = frozenset(
    {
        *("1password", "lastpass", "bitwarden", "keepass", "keepassxc", "dashlane", "keychain"),
        *("keyring", "doppler", "infisical", "vault", "vaultwarden", "passbolt", "psono"),
    }
)


def _kept_in_a_store(qualifier: str | None) -> bool:
    """Whether what a name is "in" or "from" is a password manager or a secret store
    ("the new API key in 1Password", "the token from Vault"): the value after it names
    the entry, not the secret."""
    words = re.findall(r"[a-z0-9]+", qualifier or "")
    if len(words) < 3 or words[0] not in ("in", "from", "inside") or _STORES.isdisjoint(words):
        return False
    # The value is the entry's coordinates ("(vault: Engineering, item: ...)"); "the DB
    # password in 1Password is Hx7!..." still gives the password itself.
    return words[-1] in _ENTRY_WORDS


_ENTRY_WORDS = frozenset({"vault", "item", "entry", "folder", "collection", "title", "path"})


def _prose(m: re.Match[str], line: str) -> bool:
    name = _group(m, line, "k")
    kind = name_kind(name)
    before = _words_before(m.string, m.start())
    qualifier = m.group("q").split()[1:] if m.group("q") else []
    if _NOT_ANYONES.intersection(before) or _NOT_ANYONES.intersection(qualifier):
        return False
    if _HASHED.intersection(qualifier):
        return False  # "the token for the merge commit is 9fce...": the commit's hash
    if _kept_in_a_store(m.group("q")):
        return False  # "the Stripe key in 1Password (vault: Engineering)": where it is kept
    if _zh_example_before(line, m.start()):
        return False
    if (
        kind is None
        and name == "answer"
        and _SECURITY_QUESTION.search(m.string[max(0, m.start() - 120) : m.start()])
    ):
        kind = Kind.PASSWORD  # "for the security question ... I set the answer to Pq7!..."
    if kind in (None, Kind.WEAK):
        # "the code to the front door is ...", "the alarm disarm code is ...": what the
        # name is for, or the word before it, says what it is.
        # "the guest wifi is ... and the key is ...": a place or a network named earlier in
        # the sentence says what a bare "key" or "code" opens.
        for word in (*qualifier, *reversed(before), *_sentence_places(m.string, m.start())):
            qualified = name_kind(f"{word} {name}")
            if qualified not in (None, Kind.WEAK):
                kind = qualified
                break
    return kind is not None and _judge(name, _group(m, line, "rest"), prose=True, kind=kind)


#: A security question named before a bare "answer" (on the folded line).
_SECURITY_QUESTION = re.compile(r"(?:security|secret|memorable) question|maiden name")

#: Things a bare "key" or "code" opens, named earlier in its sentence.
_PLACES = frozenset(
    {
        *("wifi", "wi-fi", "wpa", "wpa2", "wlan", "network", "ssid", "door", "alarm", "gate"),
        *("garage", "safe", "locker", "lockbox", "padlock", "keypad"),
    }
)


def _sentence_places(low: str, start: int) -> list[str]:
    """The places and networks the (folded) sentence names before ``start``, last first."""
    window = low[max(0, start - 80) : start]
    end = max(window.rfind(". "), window.rfind(";"), window.rfind("!"), window.rfind("?"))
    words = _WORDS_BEFORE.findall(window[end + 1 :])
    return [w for w in reversed(words) if w in _PLACES]


_WORD_BEFORE = re.compile(r"([a-z][a-z0-9]*)[\s_.-]*$")


#: Words between a secret's name and its value that say the value is not the secret.
_GAP_NOT = frozenset(
    {
        *("not", "no", "never", "don't", "dont", "doesn't", "isn't", "wasn't", "without"),
        *("forgot", "forgotten", "lost", "wrong", "incorrect", "old", "previous"),
        *("example", "examples", "sample", "tutorial", "docs", "documentation", "hint"),
        *("how", "what", "why", "where", "which", "whether", "if"),
        # Words that make it a fact about the secret ("PIN length for new cards: 6").
        *("length", "count", "policy", "policies", "rule", "rules", "rotation", "rotated"),
        *("expiry", "expires", "expired", "manager", "reset", "id", "hash", "hashed"),
        *("format", "pattern", "field", "type", "requirements", "strength", "complexity"),
        *("limit", "min", "max", "minimum", "maximum", "digits", "characters", "chars"),
        *("attempts", "retries", "tries", "prefix", "suffix", "public", "accessor"),
    }
)


def _gapped(m: re.Match[str], line: str) -> bool:
    """ "my card PIN, next time I ask, it's 5924", "backup codes, keep them for me: 4829
    1037, ...": a name, a few words of the same clause, then the value after "it's" or a
    colon. The words between must not make the value something else."""
    name = _group(m, line, "k")
    words = _ASKED.sub(" ", m.group("gap"))
    if _GAP_NOT.intersection(re.findall(r"[a-z']+", words)):
        return False
    before = _words_before(m.string, m.start(), count=4)
    if _NOT_ANYONES.intersection(before[-2:]) or "public" in before:
        return False  # "the JWKS public key for token verification: {...}"
    if _zh_example_before(line, m.start()):
        return False
    kind = name_kind(name)
    if kind in (None, Kind.WEAK):
        return False
    # "... PIN if I ask: it's 4719": the words that say the value comes are not it.
    rest = _SAID_FIRST.sub("", _group(m, line, "rest"), count=1)
    if kind is Kind.PIN and not _DIGITS_FIRST.match(rest):
        return False  # "Pin the base image: python:3.12@sha256:...": the verb
    return _judge(name, rest, prose=True, kind=kind)


#: "if I ask", "in case you need it": when the value is wanted, not a condition on it.
_ASKED = re.compile(
    r"\b(?:if|when|whenever|in case)\s+(?:i|you|we|they|he|she)\s+(?:ever\s+)?"
    r"(?:ask|asks|need|needs|forget|forgets|want|wants)\b"
)
_DIGITS_FIRST = re.compile(r"\s*[\"'`]?\d[\d\s#*,-]{3,}")
_SAID_FIRST = re.compile(r"^\s*(?:it'?s|it is|that'?s|that is|they'?re|they are|mine is)\s+(?=\S)")


def _near_name(m: re.Match[str], line: str) -> bool:
    """A random value right after a secret's name, unless the word before the name says
    it is no secret ("public key MIIB...", "next token ...")."""
    name = _group(m, line, "k")
    if _NOT_ANYONES.intersection(_words_before(m.string, m.start())):
        return False
    if name.isascii():
        before = _WORD_BEFORE.search(line[max(0, m.start() - 24) : m.start()].lower())
        if name_kind(f"{before.group(1) if before else ''} {name}") is None:
            return False
    value = _group(m, line, "v")
    if looks_secret(value, prose=False, kind=Kind.WEAK):
        return True
    # "twitch client secret ojtmdyteciyk...": a key or secret of random lower-case letters
    # (one character class, too plain for a weak name) under a name that says so.
    return name_kind(name) is Kind.TOKEN and random_letters(value)


_PGPASS = re.compile(
    r"(?<![\w.:/@-])(?:[A-Za-z][\w.\-]*|\*):(?:\d{2,5}|\*):[\w*\-]+:[\w*\-.@]+:(?P<v>\S+)"
)


def _first_strict(regex: re.Pattern[str], line: str) -> bool:
    return any(_strict_value(m.group("v")) for m in regex.finditer(line))


#: Bytes in hex joined by colons: a certificate's or a key's fingerprint
#: ("B6:07:27:6F:..."), read as no host:port:database:user:password line.
_COLON_HEX = re.compile(r"(?<![0-9A-Za-z:])(?:[0-9A-Fa-f]{2}:){5,}[0-9A-Fa-f]{2}(?![0-9A-Za-z:])")


def _pgpass_line(line: str) -> bool:
    if line.count(":") < 4:
        return False
    if _COLON_HEX.search(line):
        line = _COLON_HEX.sub(" ", line)
    return _first_strict(_PGPASS, line)


def _quoted_pair(m: re.Match[str], line: str) -> bool:
    kind = name_kind(m.group("k"))
    return kind is not None and looks_secret(_unquote(m.group("v")), prose=False, kind=kind)


def _strong(value: str) -> bool:
    """A value as strong as a password: eight characters or more, letters, digits and a
    symbol."""
    value = value.strip("\"'`.,;:!?()")
    return (
        len(value) >= 8
        and any(c.isalpha() for c in value)
        and any(c.isdigit() for c in value)
        and any(not c.isalnum() for c in value)
        and looks_secret(value, prose=False)
    )


def _in_url(line: str, m: re.Match[str]) -> bool:
    """Whether a match lies in a URL (a path of a documentation link is no login)."""
    word_start = max(line.rfind(" ", 0, m.start("u")), line.rfind("\t", 0, m.start("u"))) + 1
    return "://" in line[word_start : m.end()]


def _strict_value(value: str) -> bool:
    value = value.strip("\"'`.,;:!?()")
    marked = any(c.isdigit() for c in value) or any(not c.isalnum() for c in value)
    return marked and looks_secret(value, prose=True)


_GENERIC = re.compile(r"\b(?:most|least|common|popular|worst|best|default|example|typical|weak)")


def _reverse(m: re.Match[str], line: str) -> bool:
    """ "Tr0ub4dor&3 is my password", not "123456 is the most common password"."""
    return not _GENERIC.search(m.group()) and _strict(m, line)


def _strict(m: re.Match[str], line: str) -> bool:
    """For a value with no ``is`` or ``:`` before it ("password Xy7!..."): it must hold
    a digit or a symbol, so that "password manager" or "password Reset" pass; and the
    words before it must not show documentation ("our tutorial uses the password ...")."""
    if _NOT_ANYONES.intersection(_words_before(m.string, m.start(), count=4)):
        return False
    if "quote" in m.re.groupindex and m.group("quote"):
        # 'walletpassphrase "amber lantern quietly forty"': a quoted phrase is one value.
        close = line.find(_CLOSING.get(m.group("quote"), m.group("quote")), m.start("v"))
        quoted = line[m.start("v") : close] if close > 0 else ""
        if " " in quoted and looks_secret(quoted, prose=False, kind=Kind.PASSWORD):
            return True
    value = _group(m, line, "v").strip("\"'`.,;:!?()")
    if _OTHER_SETTING.match(value) and name_kind(value.partition("=")[0]) is None:
        return False  # "method=password mfa=totp": a log line's next setting, not a value
    marked = any(c.isdigit() for c in value) or any(not c.isalnum() for c in value)
    return marked and looks_secret(value, prose=True)


#: A setting of its own: a lower-case name, "=", its value.
_OTHER_SETTING = re.compile(r"[a-z_][a-z0-9_.\-]{1,30}=[^=]")

_CLOSING = {"\u201c": "\u201d", "\u2018": "\u2019", "«": "»"}


def _value(group: str, *, prose: bool) -> Callable[[re.Match[str], str], bool]:
    return lambda m, line: looks_secret(_group(m, line, group), prose=prose)


# --- names in configuration ---------------------------------------------------------------

#: ``name = value``, ``name: value``, ``"name": "value"``, ``name => value``,
#: ``config["name"] = value``: a config line, an environment file, JSON, YAML, code. The
#: name decides what the value must look like. Found from each separator backwards (a
#: regex for the name would be tried at every word of every line).
_SEPARATOR = re.compile(r":=|=>|->|==|[:=]")
_VALUE = re.compile(r"\s*(?P<v>\"[^\"\n]*\"|'[^'\n]*'|`[^`\n]*`|[^\s,;]+)")
_NAME_CHARS = frozenset("_.-")


def _name_before(line: str, end: int) -> tuple[str, int] | None:
    """The name that ends where a separator starts, and where the name starts: a quoted
    string, or letters, digits, ``_``, ``.`` and ``-`` that start with a letter, with an
    index after it (``config["password"]`` is named by what is inside)."""
    j = end
    while j > 0 and line[j - 1] in " \t":
        j -= 1
    if j > 0 and line[j - 1] == "]":
        opened = line.rfind("[", max(0, j - 44), j - 1)
        if opened >= 0 and line[opened + 1 : j - 1].strip(" \"'"):
            return line[opened + 1 : j - 1].strip(" \"'"), opened
    if j > 0 and line[j - 1] in "\"'":
        opened = line.rfind(line[j - 1], max(0, j - 82), j - 1)
        return (line[opened + 1 : j - 1], opened) if opened >= 0 else None
    i = j
    while i > 0 and j - i <= 80 and (line[i - 1].isalnum() or line[i - 1] in _NAME_CHARS):
        i -= 1
    run = i
    while i < j and not (line[i].isalpha() or line[i] == "_"):
        i += 1  # a name starts with a letter ("2fa.backup_codes" is read from "fa")
    return (line[i:j], run) if i < j else None


def _starts_a_name(line: str, start: int, separator: str = ":") -> bool:
    """A name starts a word: not a path, a host or a field of an ARN ("arn:aws:..."); the
    last segment of a path may name what follows an ``=`` ("prod/db/password=...")."""
    if start > 0 and line[start - 1] in "$@":
        start -= 1
    if start == 0:
        return True
    before = line[start - 1]
    if before == "/" and separator == "=" and "://" not in line[:start]:
        return True
    if before in "/.-@$_" or (before.isascii() and before.isalnum()):
        return False
    return not (
        before == ":" and start > 1 and line[start - 2].isascii() and line[start - 2].isalnum()
    )


def _assignments(line: str) -> bool:
    for separator in _SEPARATOR.finditer(line):
        if line.startswith("://", separator.start()):
            continue  # a URL's scheme ("1password://vaults/..."), not a name and its value
        found = _name_before(line, separator.start())
        if found is None or not _starts_a_name(line, found[1], separator.group()):
            continue
        kind = name_kind(found[0].strip("\"'$@:"))
        value = _VALUE.match(line, separator.end())
        if kind is None or value is None:
            continue
        if kind is Kind.PASSWORD and _APP_PASSWORD.match(line, separator.end()):
            return True  # "smtp.pass: abcd efgh ijkl mnop": an app password in its groups
        if _PAIR_NAME.search(found[0]) and _user_and_password(line[separator.end() :]):
            return True  # "http.auth: svc-export Dun3^1978": a user and a password
        text = value.group("v")
        if text[:1] not in "\"'`":
            text = _CJK_TAIL.sub("", text).rstrip("([")  # "SK:Xy7...(华为云)"
        if looks_secret(_unquote(text) if text[:1] in "\"'`" else text, prose=False, kind=kind):
            return True
    return False


#: Names whose value is a user and a password together.
_PAIR_NAME = re.compile(r"(?i)(?:^|[^a-z])(?:auth|basic_?auth|credentials?|creds|login|userpass)$")


def _jwt_header(token: str) -> bool:
    """Whether a token's first part decodes to a JWT header (``{"alg": ...}``) and the
    token is not documentation's sample."""
    head = token.split(".", 1)[0]
    try:
        decoded = json.loads(base64.urlsafe_b64decode(head + "=" * (-len(head) % 4)))
    except (ValueError, binascii.Error):
        return False
    return isinstance(decoded, dict) and "alg" in decoded and not is_documentation_example(token)


def _user_and_password(rest: str) -> bool:
    words = rest.split()
    return (
        len(words) == 2
        and bool(re.fullmatch(r"[\w.@+\-]{2,40}", words[0]))
        and _strict_value(words[1])
    )


_B64 = re.compile(r"^[A-Za-z0-9+/]+={0,2}$")


def _decoded_basic(value: str) -> str | None:
    try:
        raw = base64.b64decode(value + "=" * (-len(value) % 4), validate=True)
        return raw.decode("utf-8")
    except (binascii.Error, ValueError):
        return None


def basic_credentials_secret(value: str) -> bool:
    """An HTTP Basic credential (base64 of ``user:password``) whose password is real."""
    if not _B64.match(value):
        return False
    decoded = _decoded_basic(value)
    if decoded is None or ":" not in decoded:
        return False
    user, _, password = decoded.partition(":")
    if not password or password == user or not decoded.isprintable():
        return False
    return looks_secret(password, prose=False) or looks_random(password, min_length=12)


def _authorization(m: re.Match[str], line: str) -> bool:
    scheme = (m.group("scheme") or "").lower()
    value = _group(m, line, "v")
    if scheme == "basic":
        return basic_credentials_secret(value)
    if is_placeholder(value):
        return False
    return looks_secret(value, prose=False, kind=Kind.TOKEN)


def _bearer(m: re.Match[str], line: str) -> bool:
    value = _group(m, line, "v")
    return looks_secret(value, prose=False, kind=Kind.TOKEN) and (
        looks_random(value, min_length=16) or value.count(".") == 2
    )


def _url_password(m: re.Match[str], line: str) -> bool:
    """A password in a URL, unless the URL is a documentation example: the password is the
    user name again or a placeholder, or a plain word on an example or local host."""
    user, password = _group(m, line, "u"), _group(m, line, "v")
    host = m.group("h").lower()
    if password == user or not looks_secret(password, prose=False):
        return False
    example_host = host in {"host", "hostname", "localhost", "127.0.0.1", "server", "db"} or (
        "example" in host or host.startswith(("your-", "your_", "my-host", "db-host"))
    )
    plain = password.isalpha() and password.islower() and len(password) <= 12
    return not (example_host and plain)


def _aws_secret(m: re.Match[str], line: str) -> bool:
    v = _group(m, line, "v")
    return not is_documentation_example(v) and (
        any(c.isupper() for c in v) and any(c.islower() for c in v) and any(c.isdigit() for c in v)
    )


# --- Chinese and Japanese ----------------------------------------------------------------

#: Written in lower case: the rule runs on the folded line.
_ZH_NAMES = (
    r"助记词|恢复短语|种子短语|口令短语|密语|助记码|密保(?:答案|问题)?|安全问题的?答案|撤防码|布防码|开门码|报警码|恢复码"
    r"|恢复代码|备用代码|备份代码|救援码|验证码|校验码|动态码"
    r"|备用码|备份码|安全码|取款密码|支付密码|银行卡密码|门禁密码|保险箱密码"
    r"|开机密码|锁屏密码|解锁码|门禁码|密码锁|交易密码|手机密码|数字密码|平板密码|pin ?码"
    r"|私钥|密钥|秘钥|令牌|授权码"
    r"|访问码|凭证|密码|口令|暗号|通行码|团体字|团体名|共同体名"
    r"|password|passwd|pwd|passphrase|token|api ?key"
    r"|secret(?: ?key)?|access ?key|private ?key|pin|key"
)
_ZH_VERBS = (
    r"(?P<verb>是|为|為|:|=|设的是|设置的是|定的是|存着|改成了?|改为了?|改到了?|换成了?|设为|设置为|设置成|设成了?|更新为|更新成|修改为"
    r"|修改成|重置为|重置成|变成了?|变为|就是|叫做?|用的是|填的是|填|输入|记得是|写的是|如下|发你|给你"
    r"|存一下|记一下|记下|存下|收好|保存一下|备份一下|用(?=\s*[A-Za-z0-9\"'\u201c\u300c]))"
    r"(?:了|的是|是)?"
)
_ZH_NEGATORS = re.compile(
    r"长度|策略|规则|要求|位数|复杂度|过期|有效期|轮换|管理|提示|格式|算法|类型|强度|找回|重置流程|文件|路径"
    r"|地址|链接|名称|名字|哈希|摘要|指纹|公钥|位置|引用|次数|不能|不要|别|忘了|忘记|错误|错了|泄露"
    r"|模板|示例|样例|范例|前缀|开头|结尾|后缀|名(?!字|称)|条数|数量|个数|总数|上限|下限|配额|额度"
    r"|(?<![a-z])id(?![a-z])"
)
_ZH_STEMS = (
    *("密", "口令", "钥", "令牌", "助记", "暗号", "凭", "授权", "码", "短语", "密语", "答案"),
    *("团体字", "团体名", "共同体名"),
)
_ZH_NEEDS = (*_ZH_STEMS, "pass", "pwd", "token", "key", "secret", "pin")
#: The Chinese names alone, for a value that follows with only a space ("口令 Xy7!...").
_ZH_ONLY_NAMES = _ZH_NAMES.split("|password")[0]


_ZH_UNIT = re.compile(r"\s*(?:年|月|日|号|位|秒|分|小时|天|次|个|元|块|条|周)")


def _zh_near(m: re.Match[str], line: str) -> bool:
    """ "口令 Xy7!...", "授权码 brdjghtqztfwxnrw": a name, then a value in another script, so
    the value must be marked as one (a digit, a symbol, capitals inside it) or, for a
    code, be a run of random letters."""
    value = _group(m, line, "v").strip("\"'`.,;:!?()")
    if value.startswith("@"):
        return False  # "mysql://用户名:密码@localhost": the name stands for the value
    if value.isdigit() and _ZH_UNIT.match(line, m.end("v")):
        return False  # "验证码 60 秒内有效": a measure
    marked = (
        any(c.isdigit() for c in value)
        or any(not c.isalnum() for c in value)
        or (any(c.isupper() for c in value[1:]) and any(c.islower() for c in value))
    )
    kind = name_kind(_group(m, line, "k"))
    if kind is Kind.PASSWORD and _ZH_PIN_CONTEXT.search(line[max(0, m.start() - 8) : m.start()]):
        kind = Kind.PIN  # "快递柜密码_5820": a locker's code
    if kind is Kind.TOKEN and value.isalpha() and len(value) >= 12:
        return random_letters(value)
    return kind is not None and marked and looks_secret(value, prose=False, kind=kind)


#: Commands that read a password from what they are fed, and names of what they are fed.
_READS_A_SECRET = re.compile(
    r"\blogin\b|\bsudo\b[^\n|;<]*\s-s\b|passwd|password|passphrase|secret|token|\bpat\b"
    r"|\bpin\b|--pass|-passin|\bauth"
)


def _flag_value(m: re.Match[str], line: str) -> bool:
    kind = name_kind(_group(m, line, "k"))
    return kind is not None and looks_secret(_group(m, line, "v"), prose=False, kind=kind)


def _xml_pair(m: re.Match[str]) -> bool:
    name = m.group("k") or m.group("k2") or ""
    value = m.group("v") if m.group("k") else m.group("v2")
    kind = name_kind(name.rpartition(":")[2])
    return kind is not None and looks_secret(value or "", prose=False, kind=kind)


_UUID_SEGMENT = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)


def _webhook_path(path: str) -> bool:
    """A webhook URL's path holds its secret: a UUID or a random token among its segments
    (a numbered hook of a settings page holds neither)."""
    return any(
        _UUID_SEGMENT.fullmatch(segment) or looks_random(segment, min_length=20)
        for segment in path.split("/")
    ) and not is_documentation_example(path)


def _given_as(m: re.Match[str], line: str) -> bool:
    """A value given as a password or an answer, unless the line offers it as a common,
    a default or an example one."""
    if _GENERIC.search(m.string) or _NOT_ANYONES.intersection(_words_before(m.string, m.start())):
        return False
    given = _group(m, line, "v")
    value = _unquote(given)
    kind = Kind.PIN if m.group("k") == "pin" else Kind.PASSWORD
    if value == given and not any(not c.isalpha() for c in value):
        return False  # "used Python as the answer": a word, unquoted and unmarked
    return looks_secret(value, prose=False, kind=kind)


def _pin_near(m: re.Match[str], line: str) -> bool:
    return name_kind(_group(m, line, "k")) is Kind.PIN


_ASCII_VALUE = r"[A-Za-z0-9!@#$%^&*()_+\-=\[\]{}.~/?|:;,'\"\\<>`]+"


#: What a clause says of a secret that is not what the secret is about ("密码忘了"): the
#: value may still follow, in the next clause ("之前设的是 ...").
_ZH_STATE = re.compile(r"忘了|忘记|错了|错误")


def _zh(m: re.Match[str], line: str) -> bool:
    first, comma, last = _QUOTED.sub("", m.group("gap")).rpartition(",")
    if _ZH_NEGATORS.search(last) or (comma and _ZH_NEGATORS.search(_ZH_STATE.sub("", first))):
        return False
    if _zh_example_before(line, m.start()):
        return False
    name, gap = _group(m, line, "k"), _group(m, line, "gap").strip()
    if name.isascii() and comma:
        return False  # "gitlab-deploy-key,流水线里用 ...": a clause of its own
    if name.isascii() and m.group("verb") in (":", "="):
        return False  # "password: ...": the English rules read it, with its whole name
    if name.isascii():
        # "next_token 是 ...": the name is the whole identifier it ends.
        start = m.start("k")
        while start > 0 and (
            line[start - 1].isascii() and (line[start - 1].isalnum() or line[start - 1] in "_-.")
        ):
            start -= 1
        name = line[start : m.end("k")]
    if name.isascii() and gap.isascii() and gap:
        name = f"{name} {gap}"  # "token limit: ...": the words after the name count
    kind = name_kind(name)
    before = line[max(0, m.start() - 8) : m.start()] + m.group("gap")
    if kind is Kind.PASSWORD and _ZH_PIN_CONTEXT.search(before):
        kind = Kind.PIN  # "银行卡的密码是 4821": a card's PIN
    # A full-width semicolon (ASCII after NFKC) ends a Chinese clause: "新版项目密钥是
    # sk-proj-;Anthropic 的是 sk-ant-" gives a prefix, then another clause.
    rest = _group(m, line, "rest").split(";", 1)[0]
    if kind is None:
        return False
    if _judge(name, rest, prose=False, kind=kind):
        return True
    # "密保问题……我填的答案是 Qz8-...": the verb found was a word of the clause, whose own
    # verb comes a few characters on.
    again = _ZH_AGAIN.match(rest)
    return (
        again is not None
        and not _ZH_NEGATORS.search(again.group())
        and _judge(name, rest[again.end() :], prose=False, kind=kind)
    )


_ZH_AGAIN = re.compile(r"[\u4e00-\u9fff]{1,8}?(?:是|为|:)")


#: A quoted phrase inside the words between a name and its value (the question a
#: security answer answers): its words say nothing about the name.
_QUOTED = re.compile(r"[\u201c\u300c\"][^\u201d\u300d\"]{0,20}[\u201d\u300d\"]")
_ZH_PIN_CONTEXT = re.compile(
    r"银行卡|取款|支付|门禁|门锁|保险箱|保险柜|密码箱|报警|撤防|开机|锁屏|手机|atm|信用卡|储蓄卡|借记卡"
    r"|柜|门|锁|箱|平板"
)


# --- seed phrases ------------------------------------------------------------------------

_SEED_CONTEXT = (
    r"seed(?: phrase| words)?|recovery (?:phrase|words|seed)|mnemonic(?: phrase| words)?"
    r"|secret (?:recovery )?phrase|backup (?:phrase|words)|wallet (?:phrase|words|seed)"
    r"|(?:12|24|twelve|twenty-four)[ -]words?|助记词|恢复短语|种子短语|钱包短语|恢复词"
)
_SEED_NEEDS = ("seed", "mnemonic", "phrase", "words", "助记", "恢复", "种子", "钱包")


def _seed_words(m: re.Match[str], line: str) -> bool:
    words = re.findall(r"[a-z]{3,8}", m.group("w"))
    return len(words) >= 12 and len(set(words)) >= len(words) - 3


#: What a sentence about a seed phrase says ("请妥善保管", "不要截图"): not the words.
_ABOUT_THE_PHRASE = re.compile(
    r"请|不要|千万|务必|保管|妥善|备份|丢失|泄露|截图|忘记|写在|抄写|保存|记下|输入|导入|找回"
    r"|钱包|生成|随机|汉字|单词|中文|英文|顺序"
)


def _joined_seed(m: re.Match[str], line: str) -> bool:
    """12, 15, 18, 21 or 24 Chinese characters, one BIP-39 word each, written together
    after a seed phrase's label: distinct characters (a random draw from 2048 rarely
    repeats one), and no words of a sentence that speaks about the phrase."""
    run = m.group("w")
    if len(run) % 3 or len(set(run)) < len(run) - 2:
        return False
    return not _ABOUT_THE_PHRASE.search(run)


def _card_code(m: re.Match[str], line: str) -> bool:
    """A card's security code (CVV, CVC, 安全码): three or four digits, unless the words
    between say it is a fact about the code ("CVV length: 3") or the line is a test
    card's or documentation's, or the digits are a run ("123", "000")."""
    gap = m.group("gap") or ""
    if _GAP_NOT.intersection(re.findall(r"[a-z']+", gap)) or _ZH_NEGATORS.search(gap):
        return False
    value = m.group("v")
    if len(set(value)) == 1 or value in "0123456789" or _ZH_UNIT.match(line, m.end("v")):
        return False
    return not _CARD_EXAMPLE.search(m.string)


_CARD_EXAMPLE = re.compile(
    r"\b(?:test|testing|example|sample|dummy|fake|any|sandbox)\b|测试|示例|样例|沙箱|任意"
)


def _decoded_input(value: str) -> str | None:
    """What a hex or base64 value decodes to, when that is printable text."""
    raw: bytes | None = None
    if re.fullmatch(r"(?:[0-9a-fA-F]{2})+", value):
        raw = bytes.fromhex(value)
    else:
        body = value.rstrip("=")
        alt = b"-_" if "-" in body or "_" in body else None
        try:
            raw = base64.b64decode(body + "=" * (-len(body) % 4), altchars=alt, validate=True)
        except (binascii.Error, ValueError):
            return None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return text.strip() if text.strip().isprintable() and len(text.strip()) >= 6 else None


def _fed_decoded(m: re.Match[str], line: str) -> bool:
    """ "echo -n 4a65... | xxd -r -p > /tmp/p && cli -auth admin:@/tmp/p": a value fed to
    a command as hex or base64, decoded on the way, on a line that reads a secret."""
    if not _READS_A_SECRET.search(m.string):
        return False
    decoded = _decoded_input(_group(m, line, "v"))
    if decoded is None or " " in decoded:
        return False
    if ":" in decoded and _user_and_password(decoded.replace(":", " ", 1)):
        return True
    return _strong(decoded) or looks_random(decoded, min_length=16)


_EN_NEEDS = (
    *("pass", "p@ss", "p4ss", "pw", "pin", "secret", "key", "token", "credential", "code"),
    *("combination", "seed", "mnemonic", "phrase", "words", "answer", "puk", "combo", "pat"),
    *("psk", "pattern", "community"),
)

#: What a name that calls its value a secret holds (``secret_values.name_kind``).
_NAME_NEEDS = (
    *_EN_NEEDS,
    *("pw", "pa$$", "passwort", "kennwort", "contrase", "senha", "motdepasse", "mdp", "пароль"),
    *("cred", "bearer", "auth", "pat", "hmac", "sid", "cookie", "session", "license", "sig"),
    *("sk", "psk", "puk", "combo"),
    *_ZH_STEMS,
    *("パスワード", "暗証"),
)


def _jwk_private(m: re.Match[str], line: str) -> bool:
    """A JSON Web Key with its private part ("d", RFC 7518): an EC, RSA or OKP private key."""
    return looks_random(_group(m, line, "v"), min_length=20)


def _typed_into_password(m: re.Match[str], line: str) -> bool:
    """A browser automation step that types a value into a password field ("fill
    #password with 'Quokka-Harbor-2290'")."""
    return looks_secret(_unquote(_group(m, line, "v")), prose=False, kind=Kind.PASSWORD)


PATTERNS: tuple[Pattern, ...] = (
    Pattern(
        "JSON Web Key (private)",
        re.compile(r"\"kty\"[^{}]{0,400}?\"d\"\s*:\s*\"(?P<v>[A-Za-z0-9_\-]{20,})\""),
        _jwk_private,
        needs=('"kty"',),
    ),
    Pattern(
        "Secret In Automation Step",
        re.compile(
            r"\b(?:fill|type|enter|input|send_keys|sendkeys)\s+(?:in(?:to)?\s+)?(?:the\s+)?"
            r"[\"'`]?[#.\[]?[\w\-=\"'\[\]]{0,30}?(?:password|passwd|pwd|passcode|pin)\b"
            r"[\w\-=\"'\]]{0,20}\s+(?:field\s+)?with\s+(?P<v>\"[^\"\n]+\"|'[^'\n]+'|\S+)"
        ),
        _typed_into_password,
        needs=("pass", "pwd", "pin"),
        folded=True,
    ),
    Pattern(
        "AWS Secret Access Key",
        re.compile(
            r"aws[_.-]?secret(?:[_.-]?access)?[_.-]?key\W{0,3}[:=]\s*[\"']?"
            r"(?P<v>[a-z0-9/+]{40})(?![a-z0-9/+])"
        ),
        lambda m, line: not is_documentation_example(_group(m, line, "v")),
        needs=("aws",),
        folded=True,
    ),
    Pattern(
        "AWS Secret Access Key",
        re.compile(
            r"secret[ _.-]?(?:access[ _.-]?)?key\b.{0,12}?(?<![a-z0-9/+])"
            r"(?P<v>[a-z0-9/+]{40})(?![a-z0-9/+=])"
        ),
        _aws_secret,
        needs=("secret",),
        folded=True,
    ),
    Pattern(
        "Private Key",
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|PuTTY-User-Key-File-\d"),
        needs=("private key", "putty"),
    ),
    Pattern(
        "JDBC Password",
        re.compile(r"\bjdbc:oracle:[a-z]+:[^/\s@]+/(?P<v>[^@\s]+)@"),
        _value("v", prose=False),
        needs=("jdbc",),
        folded=True,
    ),
    Pattern(
        "Password On A Command Line",
        re.compile(
            r"(?:\bmysql(?:dump|admin)?\b[^\n|;]*?\s-p(?P<a>[^\s-]\S*)"
            r"|\bredis-cli\b[^\n|;]*?\s-a\s+(?P<b>\S+)"
            r"|\bsshpass\s+-p\s*(?P<c>\S+)"
            r"|\bnet\s+use\b[^\n|;]*?/user:\S+\s+(?P<f>[^\s/]\S*)"
            r"|\b(?:curl|wget|http)\b[^\n|;]*?\s(?:-u|--user)\s*[\"']?[^\s:\"']+:(?P<e>[^\s\"']+)"
            r"|(?:^|\s)--[\w-]*(?:password|passwd|secret|token|api-key|apikey)(?:=|\s+)(?P<d>\S+))"
        ),
        lambda m, line: looks_secret(
            _unquote(next(_group(m, line, g) for g in "abcedf" if m.group(g))), prose=False
        ),
        needs=("mysql", "redis-cli", "sshpass", "curl", "wget", "http", "--", "net use"),
        folded=True,
    ),
    Pattern(
        "JDBC Password",
        re.compile(r"\bjdbc:[a-z0-9]+:\S*?[;?&](?:password|pwd)=(?P<v>[^;&\s]+)"),
        _value("v", prose=False),
        needs=("jdbc",),
        folded=True,
    ),
    Pattern(
        "URL Password",
        re.compile(
            r"\b[a-z][a-z0-9+.-]{1,20}://(?P<u>[^\s:/@]*):(?P<v>[^\s/]{3,})@(?P<h>[\w.-]+)"
            r"(?=[:/?#\s\"'),;]|$)"
        ),
        _url_password,
        needs=("://",),
        folded=True,
    ),
    Pattern(
        # A JSON Web Token whose header says it is one ({"alg": ...}), whatever its payload.
        "JSON Web Token",
        re.compile(r"(?<![\w.-])(?P<v>eyJ[\w-]{10,}\.[\w-]{10,}\.[\w-]{10,})(?![\w.-])"),
        lambda m, line: _jwt_header(_group(m, line, "v")),
        needs=("eyj",),
    ),
    Pattern(
        # A Wi-Fi QR code's text: WIFI:T:WPA;S:<network>;P:<password>;;
        "Wi-Fi Password",
        re.compile(r"\bwifi:(?:[tsh]:[^;\n]*;)*p:(?P<v>[^;\n]{4,63});"),
        lambda m, line: looks_secret(_group(m, line, "v"), prose=False),
        needs=("wifi:",),
        folded=True,
    ),
    Pattern(
        # "root:Maple!copper48", "admin:Hunter2!": an administrator's account and password.
        "Basic Auth Credentials",
        re.compile(
            r"(?<![\w/:.@-])(?P<u>root|admin|administrator|ubuntu|ec2-user|postgres|sa|oracle"
            r"|pi|elastic|grafana|rabbitmq|guest):(?P<v>[^\s:@/]{6,64})(?![^\s])"
        ),
        lambda m, line: _strict_value(_group(m, line, "v")),
        needs=(
            "root:",
            "admin",
            "ubuntu:",
            "ec2-user:",
            "postgres:",
            "sa:",
            "oracle:",
            "pi:",
            "elastic:",
            "grafana:",
            "rabbitmq:",
            "guest:",
        ),
        folded=True,
    ),
    Pattern(
        # "dump_admin:Pelican!Rock-33@db-prod.sql.gz": a URL's credentials without its scheme.
        "URL Password",
        re.compile(
            r"(?<![\w:/.])(?P<u>[a-z][\w.\-]{1,30}):(?P<v>[^\s:@/]{6,64})@(?P<h>[a-z0-9][\w\-]*"
            r"(?:\.[\w\-]+)*)"
        ),
        lambda m, line: not m.group("h").startswith("sha") and _strict_value(_group(m, line, "v")),
        needs=("@",),
        folded=True,
    ),
    Pattern(
        # "wandb login 3f9c...", "snyk auth 1c9e...": a CLI given its token.
        "Token On A Command Line",
        re.compile(
            r"(?:^|[;&|]\s*)(?:\$\s*)?[\w.\-]+(?:\s+[\w.\-]+)?\s+(?:login|auth)\s+"
            r"(?P<v>[a-z0-9][a-z0-9_\-]{23,})(?:\s|$)"
        ),
        lambda m, line: (
            looks_random(_group(m, line, "v"), min_length=24)
            or bool(re.fullmatch(r"[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}", m.group("v")))
        ),
        needs=("login", "auth"),
        folded=True,
    ),
    Pattern(
        "Azure Storage Key",
        re.compile(r"\b(?:accountkey|sharedaccesskey)=[a-z0-9+/]{30,}={0,2}"),
        needs=("accountkey=", "sharedaccesskey="),
        folded=True,
    ),
    Pattern(
        "Azure SAS Signature",
        re.compile(r"(?:^|[?&;\s])sig=[a-z0-9%+/=]{20,}(?:&|$|\s)"),
        needs=("sig=",),
        folded=True,
    ),
    Pattern(
        "Authorization Header",
        re.compile(
            r"\b(?:proxy-)?authori[sz]ation\b[\"']?\s*[:=]\s*[\"']?(?:(?P<scheme>bearer|token"
            r"|basic|digest|bot|apikey|api-key|sso-key|ssws|key|dpop|otoken)\s+)?"
            r"(?P<v>[^\s\"',;]+)"
        ),
        _authorization,
        needs=("authori",),
        folded=True,
    ),
    Pattern(
        "Basic Auth Credentials",
        re.compile(r"\bbasic\s+(?P<v>[a-z0-9+/]{8,}={0,2})(?![a-z0-9+/=])"),
        lambda m, line: basic_credentials_secret(_group(m, line, "v")),
        needs=("basic",),
        folded=True,
    ),
    Pattern(
        "Bearer Token",
        re.compile(r"\b(?:bearer|token)\s+(?P<v>[a-z0-9._~+/-]{16,}=*)"),
        _bearer,
        needs=("bearer", "token"),
        folded=True,
    ),
    Pattern(
        # A secret's name and a random value with little between: "private key 0x...",
        # "(base58 private key): 4vJ9...", "AppSecret 2460f3...".
        "Secret Near Name",
        re.compile(
            rf"{_NAME_START}(?P<k>(?:[a-z]{{2,12}}(?=secret|password|passwd|token))?"
            rf"(?:{_EN_NAMES}|{_ZH_NAMES}))"
            r"(?:\s+|\s*[\"'(\[)\]:=]+\s*|(?<=[^\x00-\x7f]))(?P<v>[a-z0-9][a-z0-9._~+/=\-]{15,})"
        ),
        lambda m, line: _near_name(m, line),
        needs=(*_EN_NEEDS, *_ZH_STEMS),
        folded=True,
    ),
    Pattern("Secret Keyword", _SEPARATOR, needs=_NAME_NEEDS, scan=_assignments),
    Pattern(
        "Secret In Prose",
        re.compile(
            rf"{_NAME_START}(?P<k>{_EN_NAMES})\b(?P<gap>[\s,(?](?:[^.!?\n:=;]|[.?](?=\S)|\?){{0,60}}?)"
            r"(?:(?:,\s*|\s+)(?:it'?s|it\s+is|they'?re|they\s+are|mine\s+is|mine'?s)\s+"
            r"|:(?!//)\s*)"
            r"(?P<rest>[^\n]{1,400})"
        ),
        _gapped,
        needs=_EN_NEEDS,
        folded=True,
    ),
    Pattern(
        # "app password tqvx mplr hwzd kacn": Google's and Apple's app passwords, shown as
        # four groups of four letters.
        "Secret In Prose",
        re.compile(r"\bapp[ -]?(?:specific[ -])?password\b[\s:=\-]*(?P<rest>[^\n]{16,80})"),
        lambda m, line: _app_password(_group(m, line, "rest")),
        needs=("password",),
        folded=True,
    ),
    Pattern(
        "Secret In Prose",
        re.compile(
            rf"{_NAME_START}(?P<k>{_EN_NAMES})\b\)?{_QUALIFIER}{_LINK}(?P<rest>[^\n]{{1,400}})"
        ),
        _prose,
        needs=_EN_NEEDS,
        folded=True,
    ),
    Pattern(
        # "the safe in the closet opens with 27-14-39": what a lock opens with.
        "Secret In Prose",
        re.compile(
            r"\b(?:safe|lock|locker|padlock|lockbox|door|gate|garage|vault)\b[^.;\n]{0,40}?"
            r"\bopens?\s+with\s+(?:the\s+)?(?:code\s+|combination\s+|pin\s+)?"
            r"(?P<v>\d[\d\s#*-]{2,20}\d#?)(?![\d.,:/])"
        ),
        lambda m, line: looks_secret(_group(m, line, "v").strip(), prose=False, kind=Kind.PIN),
        needs=("open",),
        folded=True,
    ),
    Pattern(
        "Secret In Prose",
        re.compile(
            r"\b(?:use|with|enter|type|try|log in with|sign in with|login with|unlock with)\s+"
            r"(?:the\s+|my\s+|our\s+)?(?P<k>password|passphrase|passcode|pin|code)\s+"
            r"[\"'\u201c\u2018`]?(?P<v>\S+)"
        ),
        lambda m, line: looks_secret(
            _group(m, line, "v"), prose=True, kind=name_kind(m.group("k")) or Kind.PASSWORD
        ),
        needs=("pass", "pin", "code"),
        folded=True,
    ),
    Pattern(
        "Secret In Prose",
        re.compile(
            r"(?<!\S)[\"'\u201c\u2018`]?(?P<v>\S{6,}?)[\"'\u201d\u2019`]?\s+(?:is|was)\s+"
            r"(?:my|the|our|your|his|her|their)\s+(?:new\s+|current\s+|old\s+)?(?:[\w-]+\s+){0,2}"
            r"(?:password|passcode|passphrase|pin)\b"
        ),
        _reverse,
        needs=("pass", "pin"),
        folded=True,
    ),
    Pattern(
        "Secret In Prose",
        re.compile(
            r"\b(?:[a-z]{2,12}(?=pass(?:word|wd|phrase)))?(?:password|passphrase|passcode|pass"
            r"|pwd|pw|contraseña|clave|passwort|mot de passe|community string|requirepass"
            r"|masterauth|bindpw)\s+"
            r"(?P<quote>[\"'\u201c\u2018`«]?)(?P<v>\S+)"
        ),
        _strict,
        needs=("pass", "pwd", "pw", "contrase", "clave", "mot de passe", "community", "auth"),
        folded=True,
    ),
    Pattern(
        "Secret In Prose",
        # NFKC has made full-width commas, semicolons and colons ASCII.
        re.compile(
            # Between the name and its verb: an aside in brackets ("(不是助记词)"), and
            # at most one comma ("网易云音乐密码忘了,之前设的是 ...").
            rf"(?P<k>{_ZH_NAMES})(?P<gap>(?:\([^()\n]{{0,20}}\)|[\u201c\u300c\"][^\u201d\u300d\"\n]{{0,20}}"
            rf"[\u201d\u300d\"]|[^,。;!?\n(]){{0,14}}?"
            rf"(?:,[^,。;!?\n]{{0,12}}?)?){_ZH_VERBS}"
            r"\s*(?P<rest>[^\n]{1,400})"
        ),
        _zh,
        needs=_ZH_NEEDS,
        folded=True,
        # An ASCII name with ":" or "=" is left to the English rules (``_zh``); every
        # other verb is Chinese.
        cjk=True,
    ),
    Pattern(
        "Secret In Prose",
        re.compile(rf"(?P<k>{_ZH_ONLY_NAMES})[\s,_\-]*[\"'\u201c\u300c]?(?P<v>{_ASCII_VALUE})"),
        _zh_near,
        needs=_ZH_STEMS,
    ),
    Pattern(
        # "login is jdoe / Sunfl0wer!88", "账号 zhangwei / Vpn@2024zw": a user, a slash, a password.
        "Secret In Prose",
        re.compile(
            r"(?:login|logon|log (?:in|on)(?:to)?|signed? in(?:to)?|creds|credentials|account"
            r"|sign[- ]in|user(?:name)?|登录信息?|账号|账户"
            r"|账密|用户名)[^\n/]{0,60}?(?<![\w/$])(?P<u>[\w.@+\-]{2,40})\s*/\s*(?P<v>[^\s/]{6,})"
            r"(?!\S*/)"
        ),
        lambda m, line: not _in_url(line, m) and _strict_value(_group(m, line, "v")),
        needs=(
            *("login", "logon", "log in", "log on", "cred", "account", "sign", "user"),
            *("登录", "账"),
        ),
        folded=True,
    ),
    Pattern(
        # "I gave 'Xq7 Pickle Mardi' as the answer", "used Kp9#... as my new password": a
        # value given, then what it was given as.
        "Secret In Prose",
        re.compile(
            r"\b(?:gave|give|used|use|set|chose|picked|put|entered|typed|made)\s+"
            r"(?P<v>\"[^\"\n]{4,60}\"|'[^'\n]{4,60}'|\u201c[^\u201d\n]{4,60}\u201d|\S{6,40})\s+as\s+"
            r"(?:the|my|our|his|her|their|its)\s+(?:new\s+)?(?:security\s+|secret\s+)?"
            r"(?P<k>answer|password|passcode|passphrase|pin)\b"
            r"(?=\s*(?:$|[,.;:!?)\u2014-]|(?:for|on|to|of|in|at|so|and|but)\b))"
        ),
        lambda m, line: _given_as(m, line),
        needs=tuple(f" as {w} " for w in ("the", "my", "our", "his", "her", "their", "its")),
        folded=True,
    ),
    Pattern(
        # "building door 7742", "smart lock 519960": a door's or a lock's keypad code.
        "Secret In Prose",
        re.compile(
            r"(?<![a-z0-9])(?:(?:front|back|side|main|building|garage|entry|gate)\s+door"
            r"|(?:smart|door|keypad|digital|combination)\s+lock|lockbox|key\s*safe)"
            # The digits end the phrase: "door 1203 is the conference room" is a room.
            r"\s*[:#]?\s*(?P<v>\d{4,8})#?(?=\s*(?:$|[,;.)]|and\b|then\b|\())"
        ),
        lambda m, line: not _NOT_ANYONES.intersection(_words_before(m.string, m.start())),
        needs=("door", "lock", "key safe", "keysafe"),
        folded=True,
    ),
    Pattern(
        # "debit card pin 9367", "door code 4821#": a PIN's name, then its digits.
        "Secret In Prose",
        re.compile(
            r"(?<![a-z0-9])(?P<k>(?:[a-z-]+\s)?(?:pin(?: code| number)?|passcode|code|combination"
            r"|combo|puk))\s*[:#]?\s*(?P<v>\d{4,8}|\d{1,3}(?:-\d{1,3}){2,5})#?(?![\d.,:/-])"
        ),
        _pin_near,
        needs=("pin", "code", "combination", "combo", "puk"),
        folded=True,
    ),
    Pattern(
        "Secret In Prose",
        re.compile(
            r"(?:パスワード|暗証番号|パスコード|合言葉)[^、。\n]{0,12}?(?:は|:|=|を)\s*"
            r"[\"'「]?(?P<v>" + _ASCII_VALUE + ")"
        ),
        _value("v", prose=False),
        needs=("パスワード", "暗証番号", "パスコード", "合言葉"),
    ),
    Pattern(
        "Secret In Prose",
        re.compile(
            r"\b(?:contraseña|clave|mot de passe|passwort|kennwort|senha|пароль)\b"
            r"[^.,;\n]{0,30}?(?:\s+(?:es|est|ist|é|era|a|à|auf|para)|\s*[:=])\s+[\"'“«]?(?P<v>\S+)"
        ),
        _value("v", prose=True),
        needs=("contrase", "clave", "mot de passe", "passwort", "kennwort", "senha", "пароль"),
        folded=True,
    ),
    Pattern(
        "Password On A Command Line",
        re.compile(
            r"\b(?:cqlsh|sqlcmd|bcp|isql|osql|mongo|mongosh|mongodump|mongorestore|mongoexport"
            r"|mongoimport|ldapsearch|ldapmodify|ldapadd|ldapdelete|ldapwhoami|influx|vsql"
            r"|hdbsql|clickhouse-client|mysqlsh|rabbitmqctl|ipmitool|smbclient|net use|rclone"
            r"|sqlcl|nzsql|beeline|snowsql|impala-shell|mosquitto_pub|mosquitto_sub|lftp|vncpasswd)"
            r"\b[^\n|;]*?\s(?:-p|-P|-w|-a|--password|--pass|--pwd|-pw|-passwd)(?:=|\s+)"
            r"(?P<v>'[^'\n]+'|\"[^\"\n]+\"|\S+)"
        ),
        lambda m, line: looks_secret(_unquote(_group(m, line, "v")), prose=False),
        needs=(
            *("cqlsh", "sqlcmd", "bcp", "isql", "osql", "mongo", "ldap", "influx", "vsql"),
            *("hdbsql", "clickhouse", "mysqlsh", "rabbitmq", "ipmitool", "smbclient"),
            *("net use", "rclone", "sqlcl", "nzsql", "beeline", "snowsql", "impala"),
            *("mosquitto", "lftp", "vncpasswd"),
        ),
        folded=True,
    ),
    Pattern(
        # "sqlplus system/Orcl#19c@//host/db", "expdp scott/tiger@orcl": user/password@.
        "Password On A Command Line",
        re.compile(
            r"\b(?:sqlplus|rman|expdp|impdp|dgmgrl|sqlldr|sqlcl)\s+"
            r"(?:-\w+\s+)*[\"']?[\w$#]+/(?P<v>[^@\s/\"']+)@"
        ),
        _value("v", prose=False),
        needs=("sqlplus", "rman", "expdp", "impdp", "dgmgrl", "sqlldr", "sqlcl"),
        folded=True,
    ),
    Pattern(
        # "-u deploy:Dpl0y!Key-7" (curl, wget, httpie), "-U user%pass" (smbclient).
        "Password On A Command Line",
        re.compile(r"(?:^|\s)(?:-u|--user|-U)(?:=|\s*)[\"']?[^\s:%\"'/]+[:%](?P<v>[^\s\"']+)"),
        lambda m, line: looks_secret(_group(m, line, "v"), prose=False),
        needs=("-u", "--user"),
        folded=True,
    ),
    Pattern(
        # "echo -n 4a65... | xxd -r -p | ... -auth ...", "echo ... | base64 -d | login":
        # a secret fed to a command in hex or base64, decoded on the way.
        "Password On A Command Line",
        re.compile(
            r"\b(?:echo|printf)\s+(?:-[a-z]{1,3}\s+)*[\"']?(?P<v>[a-z0-9+/_\-]{12,400}={0,2})[\"']?"
            r"\s*\|\s*(?:xxd\b[^|\n]*\s-r|base64\b[^|\n]*\s(?:-d|--decode|-D)\b"
            r"|openssl\s+(?:base64|enc\b[^|\n]*-base64)[^|\n]*\s-d\b)"
        ),
        _fed_decoded,
        needs=("xxd", "base64"),
        folded=True,
    ),
    Pattern(
        # "CVV 417", "信用卡 CVV安全码: 417": a card's security code, three or four digits.
        "Card Security Code",
        re.compile(
            r"(?<![a-z0-9])(?P<k>cvv2?|cvc2?|card security code|card verification (?:code|value)"
            r"|安全码)(?P<gap>\s*(?:安全码|码|code|number|no\.?|#|\([^()\n\d]{0,16}\)))?"
            r"(?:\s*[:=]|\s+is|是|为|\s)\s*[\"'\u201c\u300c]?(?P<v>\d{3,4})(?![\d/.:,-]?\d)"
        ),
        _card_code,
        needs=("cvv", "cvc", "card security", "card verification", "安全码"),
        folded=True,
    ),
    Pattern(
        # "echo 'Hb4$Lq9z' | docker login ... --password-stdin"
        "Password On A Command Line",
        re.compile(
            r"\b(?:echo|printf)\s+(?:-n\s+)?(?P<v>'[^'\n]+'|\"[^\"\n]+\"|\S+)\s*\|[^\n]*"
            r"(?:--password-stdin|--stdin\b|\bsudo\b[^\n|]*\s-s\b|\bchpasswd\b)"
        ),
        lambda m, line: looks_secret(_unquote(_group(m, line, "v")), prose=False),
        needs=("stdin", "sudo", "chpasswd"),
        folded=True,
    ),
    Pattern(
        # "sudo -S <<< 'Sudo#Pass4412' ...", "az devops login ... <<< \"...\"  # PAT": a
        # here-string fed to a command that reads a password, or beside a secret's name.
        "Password On A Command Line",
        re.compile(r"<<<\s*(?P<v>'[^'\n]+'|\"[^\"\n]+\"|[^\s'\"]+)"),
        lambda m, line: (
            bool(_READS_A_SECRET.search(line.lower()))
            and looks_secret(_unquote(_group(m, line, "v")), prose=False)
        ),
        needs=("<<<",),
    ),
    Pattern(
        # "docker login registry -u ops -p fNX9z6OxTzUBBYKX": a login's password flag.
        "Password On A Command Line",
        re.compile(
            r"\blogin\b[^\n|;]*?\s(?:-p|--password|--pass)(?:=|\s+)(?P<v>'[^'\n]+'|\"[^\"\n]+\"|\S+)"
        ),
        lambda m, line: looks_secret(_unquote(_group(m, line, "v")), prose=False),
        needs=("login",),
        folded=True,
    ),
    Pattern(
        # "--authkey tskey-...", "--api-key ...": a flag that names a key, with a value as
        # random as one.
        "Password On A Command Line",
        re.compile(r"(?:^|\s)--(?P<k>[\w-]{0,30}key)(?:=|\s+)(?P<v>[^\s\"']+)"),
        lambda m, line: _flag_value(m, line),
        needs=("--",),
        folded=True,
    ),
    Pattern(
        # <password>...</password>, <add key="ApiKey" value="..."/>: XML elements and
        # attribute pairs named for a secret.
        "Secret Keyword",
        re.compile(
            r"<(?P<k>[A-Za-z_][\w:.\-]{0,40})(?:\s[^<>\n]{0,80})?>(?P<v>[^<>\n]{1,200})</(?P=k)\s*>"
            r"|(?:key|name)\s*=\s*\"(?P<k2>[^\"\n]{1,60})\"\s+value\s*=\s*\"(?P<v2>[^\"\n]{1,200})\""
        ),
        lambda m, line: _xml_pair(m),
        needs=("</", "value"),
    ),
    Pattern(
        # CREATE USER ... IDENTIFIED BY 'qL9#vX2!mT7p': SQL's password clause.
        "Password In SQL",
        re.compile(
            r"\bidentified\s+(?:with\s+\S+\s+)?by\s+(?:password\s+)?"
            r"(?P<v>'[^'\n]+'|\"[^\"\n]+\"|[^\s;]+)"
        ),
        lambda m, line: looks_secret(_unquote(_group(m, line, "v")), prose=False),
        needs=("identified",),
        folded=True,
    ),
    Pattern(
        # https://open.feishu.cn/open-apis/bot/v2/hook/<uuid>, .../webhooks/<random>: a
        # webhook's URL, whose secret is its path.
        "Webhook URL",
        re.compile(
            r"\bhttps?://[^\s/]+/(?:[^\s/]+/){0,6}(?:hooks?|webhooks?|webhookb2)/"
            r"(?P<v>[^\s?#\"'<>),;]{16,300})"
        ),
        lambda m, line: _webhook_path(_group(m, line, "v")),
        needs=("hook",),
        folded=True,
    ),
    Pattern(
        # define('DB_PASSWORD', '...'), setenv("API_TOKEN", "..."): a name and its value
        # as two quoted arguments.
        "Secret Keyword",
        re.compile(
            r"[\"'](?P<k>[A-Za-z_][\w.\-]{1,40})[\"']\s*,\s*(?P<v>\"[^\"\n]{4,200}\"|'[^'\n]{4,200}')"
        ),
        lambda m, line: _quoted_pair(m, line),
        needs=_NAME_NEEDS,
    ),
    Pattern(
        # ~/.pgpass and similar: host:port:database:user:password.
        "Secret Keyword",
        _PGPASS,
        needs=(":",),
        scan=_pgpass_line,
    ),
    Pattern(
        # "work laptop login: Quill-Harbor-2024!": what a login or unlock takes, when the
        # value is as strong as a password (letters, digits and a symbol).
        "Secret In Prose",
        re.compile(
            r"\b(?:login|log-in|logon|sign-in|signin|unlock)\b[^\n:=]{0,20}?(?:\s+is|\s*[:=])"
            r"\s*[\"'\u201c]?(?P<v>[^\s\"'\u201d]+)"
        ),
        lambda m, line: _strong(_group(m, line, "v")),
        needs=("login", "log-in", "logon", "sign", "unlock"),
        folded=True,
    ),
    Pattern(
        # "security question 'mother's maiden name' ... the fake answer PurpleOtter!73"
        "Secret In Prose",
        re.compile(
            r"security question[^\n]{0,80}?\banswer\b\s*(?:is\s+|:\s*)?[\"'\u201c]?(?P<v>\S+)"
        ),
        _strict,
        needs=("security question",),
        folded=True,
    ),
    Pattern(
        "Seed Phrase",
        re.compile(
            rf"(?:{_SEED_CONTEXT})[^\n]{{0,40}}?(?P<w>(?:\b\d{{1,2}}[.):]?\s*)?[a-z]{{3,8}}"
            r"(?:[\s,、;]+(?:\d{1,2}[.):]?\s*)?[a-z]{3,8}){11,23})\b"
        ),
        _seed_words,
        needs=_SEED_NEEDS,
        folded=True,
    ),
    Pattern(
        "Seed Phrase",
        re.compile(rf"(?:{_SEED_CONTEXT})[^\n]{{0,20}}?(?:[\u4e00-\u9fff][\s,、]+){{11,23}}"),
        needs=_SEED_NEEDS,
        folded=True,
        cjk=True,
    ),
    Pattern(
        # "助记词:经性有重平社代各了经国前": a Chinese seed phrase (a character a word) with
        # no spaces, right after its label.
        "Seed Phrase",
        re.compile(
            rf"(?:{_SEED_CONTEXT})\s*(?:是|为)?[\s:=\"'\u201c\u300c]{{0,4}}"
            r"(?P<w>[\u4e00-\u9fff]{12,24})(?![\u4e00-\u9fff])"
        ),
        _joined_seed,
        needs=_SEED_NEEDS,
        folded=True,
        cjk=True,
    ),
)

_BARE_SEED = re.compile(r"^\s*(?:[a-z]{3,8}\s+){11,23}[a-z]{3,8}\s*$")


def fold(line: str) -> str:
    """The line in lower case, character for character (so spans stay the same)."""
    low = line.lower()
    if len(low) == len(line):
        return low
    return "".join(ch.lower() if len(ch.lower()) == 1 else ch for ch in line)


def _stems(needs: set[str]) -> dict[str, str]:
    """Each need to the shortest need inside it ("passwort" to "pass"): a line holding the
    longer holds the shorter, so testing the shorter alone keeps every gate sound."""
    return {need: min((n for n in needs if n in need), key=len) for need in needs}


_STEM = _stems({need for pattern in PATTERNS for need in pattern.needs})
#: Every string some pattern needs: tested once a line, then each pattern's by set.
_NEEDS = tuple(sorted(set(_STEM.values())))
_NEEDS_OF = tuple(frozenset(_STEM[need] for need in pattern.needs) for pattern in PATTERNS)


#: Where a secret is kept, not the secret: an Amazon Resource Name ("arn:aws:
#: secretsmanager:...:secret:prod/db-AbCdEf", "arn:aws:ssm:...:parameter/..."), a Vault
#: KV path ("secret/data/payments/stripe", "vault:secret/data/prod/db", what "vault kv
#: get" reads). Its colons and slashes are no name's separator, its last segment (the
#: random suffix Secrets Manager adds) no value.
_STORE_REFERENCE = re.compile(
    r"(?<![\w:/.\-])arn:aws[\w-]*:[a-z0-9-]+:[a-z0-9-]*:\d{0,12}:[^\s,;'\"()\[\]{}<>]*"
    r"[^\s,;'\"()\[\]{}<>.]"
    r"|(?<![\w/.\-])(?:vault:(?://)?)?[a-z][\w-]{0,20}/(?:data|metadata)/[\w.\-]+(?:/[\w.\-]+)*"
    r"(?<!\.)"
    r"|(?<=\bvault kv get )(?:-[\w=-]+ )*[a-z][\w-]{0,20}(?:/[\w.\-]+)+(?<!\.)"
    r"|(?<=\bvault read )(?:-[\w=-]+ )*[a-z][\w-]{0,20}(?:/[\w.\-]+)+(?<!\.)"
)
_STORE_HINTS = ("arn:aws", "/data/", "/metadata/", "vault ")


def mask_references(line: str, placeholder: str = "<secret-ref>") -> str:
    """The line with each reference to a secret store written as a placeholder."""
    if not any(hint in line for hint in _STORE_HINTS):
        return line
    return _STORE_REFERENCE.sub(placeholder, line)


def matches(line: str) -> Iterator[str]:
    """The secret types found in one normalised line, one per rule that matched."""
    yield from formats_in(line)
    line = mask_references(line)
    low = fold(line)
    present = {need for need in _NEEDS if need in low}
    separated = ":" in line or "=" in line or "->" in line
    ascii_only = line.isascii()
    for pattern, needs in zip(PATTERNS, _NEEDS_OF, strict=True):
        if (needs and present.isdisjoint(needs)) or (ascii_only and pattern.cjk):
            continue
        if pattern.scan is not None:
            if separated and pattern.scan(line):
                yield pattern.secret_type
            continue
        if _first(pattern, low if pattern.folded else line, line):
            yield pattern.secret_type
    if _BARE_SEED.match(line) and is_seed_phrase(line.split()):
        yield "Seed Phrase"


def _first(pattern: Pattern, text: str, line: str) -> bool:
    """Whether the pattern matches somewhere in the line and its value check holds. A
    rejected match resumes the search after its name, not after its value, so that
    "Note: password=..." is still read from "password" on."""
    pos = 0
    while pos <= len(text):
        m = pattern.regex.search(text, pos)
        if m is None:
            return False
        if pattern.accept is None or pattern.accept(m, line):
            return True
        named = "k" in pattern.regex.groupindex and m.end("k") > m.start()
        pos = m.end("k") if named else m.start() + 1
    return False
