"""Credential patterns that detect-secrets does not cover, or covers only in source code.

detect-secrets' keyword plugin matches quoted assignments in code; a memory is prose or
a pasted config line, so unquoted ``password: ...``, ``db_password=...`` and sentences
("my password is ...", "数据库口令是 ...") are matched here, with a check that the value
looks like a secret rather than a word or a placeholder (``${DB_PASSWORD}``,
``<redacted>``). Token formats detect-secrets lacks (GitHub fine-grained, current
OpenAI, Anthropic, Google, npm, JDBC, Azure, bearer headers) have their own patterns.

Every pattern runs on normalised text (NFKC, format characters such as zero-width
spaces removed), so full-width letters and split keys are matched as what they spell.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable, Iterator
from dataclasses import dataclass


def normalise(text: str) -> str:
    """NFKC (full-width letters become ASCII), without format characters (zero-width
    spaces and joiners, soft hyphens, byte-order marks): what a reader would see."""
    folded = unicodedata.normalize("NFKC", text)
    return "".join(ch for ch in folded if unicodedata.category(ch) != "Cf")


_PLACEHOLDER = re.compile(
    r"^(?:\$\{?[\w.]+\}?|\{\{.*\}\}|<[^>]*>?|\[[^\]]*\]?|%\w+%?|\*+|x{3,}|\.{3,}|_+|-+)$",
    re.IGNORECASE,
)
_MEASURE = re.compile(r"^[+-]?\d+(?:[.,]\d+)?[°%]?$")
#: A value that names where the secret is kept rather than the secret: an environment
#: variable or a secret manager's reference.
_REFERENCE = re.compile(
    r"^(?:os\.environ|os\.getenv|getenv|process\.env|env[.(\[:]|ENV\[|secrets?\.|vault:"
    r"|ssm:|arn:aws:(?:secretsmanager|ssm)|\$\(|!ref|\{\{)",
    re.IGNORECASE,
)
#: Values that stand for no secret at all.
_NOT_VALUES = frozenset(
    {
        *("null", "none", "nil", "true", "false", "yes", "no", "empty", "unset", "n/a"),
        *("redacted", "hidden", "masked", "required", "optional", "secret", "password"),
        *("changed", "expired", "reset", "rotated", "stored", "encrypted", "missing"),
        *("invalid", "incorrect", "wrong", "correct", "unknown", "same", "different"),
        *("example", "placeholder", "string", "str", "env", "vault", "file"),
    }
)


def looks_secret(value: str, *, prose: bool) -> bool:
    """Whether a value after a credential keyword is plausibly the credential itself."""
    if _PLACEHOLDER.match(value) or _REFERENCE.match(value):
        return False
    value = value.strip("\"'`\u201c\u201d\u2018\u2019()[]<>.,;:!?")
    if len(value) < 4 or _PLACEHOLDER.match(value) or value.lower() in _NOT_VALUES:
        return False
    if value.isdigit():
        return len(value) >= 6  # a PIN of six digits or more
    if _MEASURE.match(value):
        return False  # 39.9515°, 3.5%, -12
    has_digit = any(c.isdigit() for c in value)
    has_symbol = any(not c.isalnum() for c in value)
    mixed_case = any(c.isupper() for c in value) and any(c.islower() for c in value)
    if has_digit or has_symbol or mixed_case:
        return len(value) >= 6
    # One lower-case word: a pass phrase when long, a word of the sentence otherwise.
    return len(value) >= (10 if prose else 8) and not value.endswith(("ed", "ing", "ly"))


@dataclass(frozen=True)
class Pattern:
    secret_type: str
    regex: re.Pattern[str]
    #: Given the match, whether it is a secret (the value check); None: always.
    accept: Callable[[re.Match[str]], bool] | None = None


def _value(group: str, *, prose: bool) -> Callable[[re.Match[str]], bool]:
    return lambda m: looks_secret(m.group(group), prose=prose)


def _strict(group: str) -> Callable[[re.Match[str]], bool]:
    """For a value with no ``is`` or ``:`` before it ("password Xy7!..."): it must hold
    a digit or a symbol, so that "password manager" or "password Reset" pass."""

    def accept(m: re.Match[str]) -> bool:
        value = m.group(group).strip("\"'`.,;:!?()")
        marked = any(c.isdigit() for c in value) or any(not c.isalnum() for c in value)
        return marked and looks_secret(value, prose=True)

    return accept


def _aws_secret(m: re.Match[str]) -> bool:
    v = m.group("v")
    return (
        any(c.isupper() for c in v) and any(c.islower() for c in v) and any(c.isdigit() for c in v)
    )


_KEYWORDS = (
    r"pass(?:word|wd|phrase|code)?|pwd|secret(?:[_.-]?key)?|token|auth[_.-]?token"
    r"|access[_.-]?token|refresh[_.-]?token|api[_.-]?key|apikey|access[_.-]?key(?:[_.-]?id)?"
    r"|client[_.-]?secret|private[_.-]?key|credentials?|session[_.-]?key|signing[_.-]?key"
)
_ASCII_VALUE = r"[A-Za-z0-9!@#$%^&*()_+\-=\[\]{}.~/?|:;,'\"\\<>`]+"

PATTERNS: tuple[Pattern, ...] = (
    Pattern("GitHub Fine-Grained Token", re.compile(r"github_pat_[A-Za-z0-9_]{30,}")),
    Pattern("Anthropic API Key", re.compile(r"\bsk-ant-[a-z]+\d*-[A-Za-z0-9_-]{20,}")),
    Pattern(
        "OpenAI API Key",
        re.compile(r"\bsk-(?!ant-)(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}"),
    ),
    Pattern("Google API Key", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    Pattern("NPM Token", re.compile(r"\bnpm_[A-Za-z0-9]{36}\b")),
    Pattern("Hugging Face Token", re.compile(r"\bhf_[A-Za-z0-9]{34,}\b")),
    Pattern("Slack Token", re.compile(r"\bxox[abposr]-[A-Za-z0-9-]{10,}")),
    Pattern("Stripe Key", re.compile(r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{16,}")),
    Pattern("SendGrid API Key", re.compile(r"\bSG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{16,}")),
    Pattern(
        "AWS Secret Access Key",
        re.compile(
            r"(?i)aws[_.-]?secret(?:[_.-]?access)?[_.-]?key\W{0,3}[:=]\s*[\"']?"
            r"([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])"
        ),
    ),
    Pattern(
        "AWS Secret Access Key",
        re.compile(
            r"(?i)secret[ _.-]?(?:access[ _.-]?)?key\b.{0,12}?(?<![A-Za-z0-9/+])"
            r"(?P<v>[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])"
        ),
        _aws_secret,
    ),
    Pattern("Private Key", re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")),
    Pattern(
        "JDBC Password",
        re.compile(r"(?i)\bjdbc:oracle:[a-z]+:[^/\s@]+/(?P<v>[^@\s]+)@"),
        _value("v", prose=False),
    ),
    Pattern(
        "Password On A Command Line",
        re.compile(
            r"(?i)(?:\bmysql(?:dump|admin)?\b[^\n|;]*?\s-p(?P<a>[^\s-]\S*)"
            r"|\bredis-cli\b[^\n|;]*?\s-a\s+(?P<b>\S+)"
            r"|\bsshpass\s+-p\s*(?P<c>\S+)"
            r"|(?:^|\s)--[\w-]*(?:password|passwd|secret|token|api-key|apikey)(?:=|\s+)(?P<d>\S+))"
        ),
        lambda m: looks_secret(next(g for g in m.groups() if g), prose=False),
    ),
    Pattern(
        "JDBC Password",
        re.compile(r"(?i)\bjdbc:[a-z0-9]+:\S*?[;?&](?:password|pwd)=(?P<v>[^;&\s]+)"),
        _value("v", prose=False),
    ),
    Pattern(
        "URL Password",
        re.compile(r"(?i)\b[a-z][a-z0-9+.-]{1,20}://[^\s:/@]*:(?P<v>[^\s@/]{3,})@[\w.-]+"),
        _value("v", prose=False),
    ),
    Pattern(
        "Azure Storage Key",
        re.compile(r"(?i)\b(?:AccountKey|SharedAccessKey)=[A-Za-z0-9+/]{30,}={0,2}"),
    ),
    Pattern(
        "Azure SAS Signature", re.compile(r"(?i)(?:^|[?&;\s])sig=[A-Za-z0-9%+/=]{20,}(?:&|$|\s)")
    ),
    Pattern(
        "Bearer Token",
        re.compile(r"(?i)\b(?:bearer|token)\s+(?P<v>[A-Za-z0-9._~+/-]{20,}=*)"),
        _value("v", prose=False),
    ),
    Pattern(
        "Secret Keyword",
        re.compile(
            rf"(?i)(?:^|[^A-Za-z0-9])(?:[A-Za-z0-9]+[_.-])*(?:{_KEYWORDS})"
            r"\s*[\"']?\s*(?::=|=>|[:=])\s*[\"'`]?(?P<v>[^\s\"'`,;]+)"
        ),
        _value("v", prose=False),
    ),
    Pattern(
        "Secret In Prose",
        re.compile(
            r"(?i)\b(?:password|passphrase|passcode|pass code|pin(?: code)?|pwd|secret key"
            r"|api key|access key|access token|auth token|token|login"
            r"|(?:unlock|access|door|alarm|security|entry|gate|safe|wifi|wi-fi) code)"
            r"(?:\s+(?:for|of|to|on|at|in)\s+[^.,;:!?\n]{1,40}?)?"
            r"(?:\s+(?:is|was|are|will be|has been|reads|set to|now|to)\s*:?|\s*:)\s+"
            r"[\"'\u201c\u2018`]?(?P<v>\S+)"
        ),
        _value("v", prose=True),
    ),
    Pattern(
        "Secret In Prose",
        re.compile(
            r"(?i)\b(?:use|with|enter|type|log in with|sign in with)\s+"
            r"(?:the\s+)?(?:password|passphrase|passcode|pin)\s+[\"'\u201c\u2018`]?(?P<v>\S+)"
        ),
        _value("v", prose=True),
    ),
    Pattern(
        "Secret In Prose",
        # NFKC has made full-width commas, semicolons and colons ASCII.
        re.compile(
            r"(?:密码|口令|密钥|秘钥|私钥|令牌|授权码|通行码|暗号)[^,。;\n]{0,12}?"
            r"(?:是|为|為|:|=|改成|设为|设置为)\s*[\"'\u201c\u2018「]?(?P<v>" + _ASCII_VALUE + ")"
        ),
        _value("v", prose=False),
    ),
    Pattern(
        "Secret In Prose",
        re.compile(
            r"(?:パスワード|暗証番号|パスコード|合言葉)[^、。\n]{0,12}?(?:は|:|=|を)\s*"
            r"[\"'「]?(?P<v>" + _ASCII_VALUE + ")"
        ),
        _value("v", prose=False),
    ),
    Pattern(
        "Secret In Prose",
        re.compile(
            r"(?i)\b(?:contraseña|clave|mot de passe|passwort|kennwort|senha|пароль)\b"
            r"[^.,;\n]{0,30}?(?:\s+(?:es|est|ist|é|era|a|à|auf|para)|\s*[:=])\s+[\"'“«]?(?P<v>\S+)"
        ),
        _value("v", prose=True),
    ),
    Pattern(
        "Secret In Prose",
        re.compile(
            r"(?i)\b(?:password|passphrase|passcode|contraseña|clave|passwort|mot de passe)"
            r"\s+[\"'\u201c\u2018`«]?(?P<v>\S+)"
        ),
        _strict("v"),
    ),
)


def matches(text: str) -> Iterator[str]:
    """The secret types found in normalised text, one per pattern that matched."""
    for pattern in PATTERNS:
        for m in pattern.regex.finditer(text):
            if pattern.accept is None or pattern.accept(m):
                yield pattern.secret_type
                break
