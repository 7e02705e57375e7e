"""Secret detection: detect-secrets' pattern plugins, provider token formats
(``secret_formats``), and memvault's rules for credentials given by name
(``secret_patterns``), all run on normalised text (NFKC, no zero-width characters) and on
what that text unwraps to (``secret_views``: decoded base64 and hex, escapes undone,
broken lines joined, spaced-out characters closed up, JSON read as name: value lines).

Entropy plugins are off: prose and ids trip them constantly; randomness is judged only
in context, for a value under a secret's name (``secret_values``). ``IPPublicDetector``
is off too: an address is not a credential. The keyword and basic-auth plugins are off:
memvault's own rules cover what they match (quoted assignments, URLs with a password)
and judge the value, where the plugins take ``password = "password"`` or
``postgres://user:password@host`` from documentation for a credential. Values the
plugins find that are masks or documentation examples (the jwt.io token, keys that
say EXAMPLE, a token whose signature is a placeholder) are not reported, and the common
passwords a text calls defaults, tests' or common ones ("the default password 123456")
are read as the placeholders they are. Findings carry the secret's *type* and the field
it was found in, never the secret itself.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from memvault.policy.secret_context import context_secrets
from memvault.policy.secret_patterns import mask_references, matches, normalise
from memvault.policy.secret_values import common_password, is_documentation_example, is_mask
from memvault.policy.secret_views import MAX_VIEW_CHARS, split_tokens, structured, unwrapped
from memvault_wire.errors import SecretDetected

_DISABLED = {
    "Base64HighEntropyString",
    "HexHighEntropyString",
    "IPPublicDetector",
    "KeywordDetector",
    "BasicAuthDetector",
}
#: The file name detect-secrets' own ad hoc scan (``scan_line``) reports; the keyword
#: plugin chooses its patterns by it (no extension: quotes required around the value).
_ADHOC = "adhoc-string-scan"
#: A plugin runs on a line only when the line holds what every one of its patterns needs
#: (each gate is implied by the plugin's own patterns, so no finding is lost): a line of
#: prose runs none of them.
_GATES = {
    "AWSKeyDetector": r"A3T|ABIA|ACCA|AKIA|ASIA|(?i:aws)",
    "ArtifactoryDetector": r"AKC|AP[\dA-F]",
    "AzureStorageKeyDetector": r"AccountKey=",
    "CloudantDetector": r"(?i:key|pw|pass|token|cloudant)",
    "DiscordBotTokenDetector": r"[MNO][\w-]{23,25}\.",
    "GitHubTokenDetector": r"gh[pousr]_",
    "GitLabTokenDetector": r"gl[a-z]{1,6}-|GR1348941",
    "IbmCloudIamDetector": r"(?i:key|pwd|pass|token)",
    "IbmCosHmacDetector": r"(?i:secret)",
    "JwtTokenDetector": r"eyJ",
    "MailchimpDetector": r"-us\d",
    "NpmDetector": r"_authToken",
    "OpenAIDetector": r"T3BlbkFJ",
    "PrivateKeyDetector": r"PRIVATE KEY|PuTTY-User-Key-File",
    "PypiTokenDetector": r"pypi-AgE",
    "SendGridDetector": r"SG\.",
    "SlackDetector": r"xox|hooks\.slack",
    "SoftlayerDetector": r"(?i:key|pwd|pass|token|softlayer)",
    "SquareOAuthDetector": r"sq0csp-",
    "StripeDetector": r"k_live_",
    "TelegramBotTokenDetector": r"\d{8}:",
    "TwilioKeyDetector": r"AC[a-z0-9]{32}|SK[a-z0-9]{32}",
}
_COMPILED_GATES = {name: re.compile(gate) for name, gate in _GATES.items()}
#: Every kept plugin's pattern but the private-key header's and the JWT's (gated on their
#: literals) needs a run of ten token characters holding a digit, a symbol or an inner
#: capital, or a run of twenty: a line without one runs no plugin at all.
_TOKEN_RUN = re.compile(r"[A-Za-z0-9_\-+/=.]{10,}")
_LITERALS = ("PRIVATE KEY", "PuTTY", "eyJ")


@lru_cache(maxsize=1)
def _all_gated(count: int) -> bool:
    """Whether every plugin in use has a gate (a plugin without one runs on every line)."""
    from detect_secrets.settings import get_plugins

    return count == len(get_plugins()) and all(
        type(plugin).__name__ in _GATES for plugin in get_plugins()
    )


def _may_hold_a_token(line: str) -> bool:
    if any(literal in line for literal in _LITERALS):
        return True
    for m in _TOKEN_RUN.finditer(line):
        run = m.group()
        if len(run) >= 20 or not run.isalpha() or not run[1:].islower():
            return True
    return False


#: How deep views of views go (base64 inside base64), and how many a field may have.
_MAX_DEPTH = 2
_MAX_VIEWS = 32
#: detect-secrets keeps its settings (the plugins a scan uses) in one process-wide global.
#: Swapping them per scan (``transient_settings``) costs milliseconds and races: two
#: threads scanning at once see each other's restore, and a scan can run with no plugin at
#: all (a missed credential). memvault is the only user of detect-secrets in its process,
#: so the settings are configured once, under this lock, and never swapped again.
_SETTINGS_LOCK = threading.Lock()
_configured = threading.Event()


def _configure() -> None:
    if _configured.is_set():
        return
    with _SETTINGS_LOCK:
        if _configured.is_set():
            return
        # detect-secrets (with requests, which it imports) loads on the first scan, not
        # with this module: the services import it, and most of their callers never scan.
        # Under the lock: its plugin modules import one another, and threads importing
        # them at once can see a module half initialised (an ImportError, a 500).
        import detect_secrets.util.code_snippet  # noqa: F401 (loaded here, used below)
        from detect_secrets.settings import (
            cache_bust,
            configure_settings_from_baseline,
            get_plugins,
        )

        cache_bust()
        configure_settings_from_baseline({"plugins_used": list(_plugins()), "filters_used": []})
        get_plugins()  # build the plugin cache before any scan reads it
        _configured.set()


@dataclass(frozen=True)
class SecretFinding:
    field: str
    secret_type: str


@lru_cache(maxsize=1)
def _plugins() -> tuple[dict[str, str], ...]:
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class

    classes: list[type] = list(get_mapping_from_secret_type_to_class().values())
    names = sorted(cls.__name__ for cls in classes)
    return tuple({"name": name} for name in names if name not in _DISABLED)


def _plugin_secrets(line: str) -> Iterator[tuple[str, str | None]]:
    """The (secret type, value) pairs the plugins find in one line.

    What detect-secrets' ``scan_line`` does, less its per-call costs: it re-reads every
    plugin's signature to inject arguments and clears a global filter cache on every line
    (about 2 ms per memory). Its filters are not used here (see ``find_secrets``), and the
    plugins kept take exactly these arguments.
    """
    from detect_secrets.settings import get_plugins
    from detect_secrets.util.code_snippet import get_code_snippet

    plugins = get_plugins()
    if not _may_hold_a_token(line) and _all_gated(len(plugins)):
        return
    context = get_code_snippet(lines=[line], line_number=1)
    for plugin in plugins:
        gate = _COMPILED_GATES.get(type(plugin).__name__)
        if gate is not None and not gate.search(line):
            continue
        for secret in plugin.analyze_line(
            filename=_ADHOC, line=line, line_number=0, context=context
        ):
            yield str(secret.type), secret.secret_value


def _types_in(line: str) -> Iterator[str]:
    """The secret types the plugins find in one line, as ``scan_line`` reports them."""
    for secret_type, _ in _plugin_secrets(line):
        yield secret_type


_JWT, _AWS_KEY_ID, _PRIVATE_KEY = "JSON Web Token", "AWS Access Key", "Private Key"
_TWILIO = "Twilio API Key"
#: A Twilio API key's SID named just before it ("the API key SID for the notifier is SK...").
_SID_BEFORE = re.compile(r"(?i)\bsid\b")
_JWT_EXAMPLES = ("john doe", "jane doe", "1234567890", "jwt.io", "example")


#: Words that say a text shows documentation's example, not anyone's credential.
_DOCUMENTED = re.compile(
    r"(?i)\b(?:docs?|documentation|documented|example|examples|sample|samples|placeholder"
    r"|tutorial|illustrat\w*|demo|published|guides?|manuals?|handbook|readme|cheat ?sheet)\b"
    r"|示例|演示|文档|样例|例子|范例|示范|指南|手册"
)


def _is_example(secret_type: str, value: str | None, line: str = "", text: str = "") -> bool:
    """A plugin's finding that documentation shows: a mask, an ``...EXAMPLE`` key, the
    jwt.io sample token (its payload names John Doe or subject 1234567890), a token
    whose signature is a placeholder. ``text``: the whole text the line is of."""
    if not value:
        return False
    if secret_type == _JWT:
        if any(is_documentation_example(part) for part in value.split(".")[1:]):
            return True  # "....SIGNATURE_PLACEHOLDER": no signature, nothing it unlocks
        parts = value.split(".")
        try:
            payload = base64.urlsafe_b64decode(parts[1] + "=" * (-len(parts[1]) % 4))
            claims = json.loads(payload)
        except (IndexError, ValueError, binascii.Error):
            return False
        text = json.dumps(claims).lower()
        return any(marker in text for marker in _JWT_EXAMPLES)
    if secret_type == _TWILIO and value.startswith("AC"):
        return True  # an account SID: the account's identifier, shown on its dashboard
    if secret_type == _TWILIO and _SID_BEFORE.search(line[: max(0, line.find(value))][-40:]):
        return True  # "API key SID SK...": the key's identifier; its secret is another value
    if secret_type == _AWS_KEY_ID:
        # AWS's own example key id (``AKIAIOSFODNN7EXAMPLE``) stays refused: a key id is
        # an identifier rather than the secret, clients and tests use that one as the
        # credential a write must never store, and the secret key beside it in the same
        # documentation is recognised as an example. A text that itself says the key is
        # documentation's example ("the example key from the AWS docs") is taken at its
        # word, on any of its lines (a docs sample file: its title, then its lines).
        if "EXAMPLE" in value and _DOCUMENTED.search((text or line).replace(value, " ")):
            return True
        return is_mask(value)
    return is_documentation_example(value)


_TOKEN_CHARS = re.compile(r"[A-Za-z0-9_\-+/=.~$]*")


def _whole_token(line: str, value: str | None) -> str | None:
    """The token of the line a plugin's value is part of: plugins whose pattern has a
    group report only that group ("ghp" of ``ghp_XXXX...``)."""
    if not value:
        return value
    at = line.find(value)
    if at < 0:
        return value
    start = at
    while start > 0 and _TOKEN_CHARS.fullmatch(line[start - 1]):
        start -= 1
    tail = _TOKEN_CHARS.match(line, at)
    # Never less than the value itself: a URL's value ("https://hooks...") holds a colon.
    end = max(tail.end() if tail else 0, at + len(value))
    return line[start:end] or value


def _line_types(line: str, text: str = "") -> Iterator[str]:
    for secret_type, value in _plugin_secrets(line):
        if not _is_example(secret_type, _whole_token(line, value), line, text):
            yield secret_type
    yield from matches(line)


_PEM_BLOCK = re.compile(
    r"-----BEGIN (?P<kind>[A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?)-----(?P<body>.{0,8000}?)"
    r"-----END (?P=kind)-----",
    re.DOTALL,
)
_PEM_BODY = re.compile(r"[A-Za-z0-9+/=]{16,}")


_PEM_MENTION = re.compile(r"BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?(?:-----)?")
#: How far after a header without its end line a key's body must start.
_PEM_REACH = 300


def _pem_templates(text: str) -> bool:
    """Whether every private key header of a text holds no key: its block's body holds no
    base64 (``...paste your key here...``), or, without an end line, no base64 follows it
    ("a key file starts with -----BEGIN OPENSSH PRIVATE KEY-----; ...")."""
    if "PRIVATE KEY" not in text:
        return False
    blocks = list(_PEM_BLOCK.finditer(text))
    if any(_PEM_BODY.search(block.group("body")) for block in blocks):
        return False
    # Every mention of a private key's header, with or without its dashes ("private keys
    # use BEGIN PRIVATE KEY instead"): each must be followed by no key body.
    mentions = list(_PEM_MENTION.finditer(text))
    if not mentions:
        return False
    inside = [(block.start(), block.end()) for block in blocks]
    return not any(
        _PEM_BODY.search(text, mention.end(), mention.end() + _PEM_REACH)
        for mention in mentions
        if not any(start <= mention.start() < end for start, end in inside)
    )


#: Words that say a text's password is a default, a test's or a common one: published,
#: shipped, on every list, and so no one's secret ("delete the test fixture's default
#: password 'password123'", "已删除测试夹具里的默认密码 123456"); on the lower-cased text.
_DEFAULTS_SAID = re.compile(
    r"\b(?:default|defaults|fixtures?|mock|dummy|common(?:ly)?|most[ -]used|weak|weakest"
    r"|breach(?:ed)?|pwned|rockyou|leaked[ -]password|top[ -]\d+|blocklist(?:ed)?|denylist"
    r"|banned|rejected|initial|factory|examples?|samples?|docs?|documentation|tutorial)\b"
    r"|默认|缺省|常见|弱口令|弱密码|初始|出厂|示例|样例|文档|教程"
)
#: A common password as a word of its own (not a part of a longer value).
_COMMON_CANDIDATE = re.compile(
    r"(?<![A-Za-z0-9_@#$!&*%+=-])[A-Za-z0-9_@#$!&*.%+=-]{4,20}(?![A-Za-z0-9_@#$!&*%+=-])"
)


def _defaults_masked(text: str) -> str:
    """The text with the common passwords it calls defaults, tests' or common ones written
    as the placeholder they are."""
    if not _DEFAULTS_SAID.search(text.lower()):
        return text
    return _COMMON_CANDIDATE.sub(
        lambda m: "<default>" if common_password(m.group().rstrip(".")) else m.group(), text
    )


def _scan(text: str, depth: int, budget: list[int], template: bool = False) -> Iterator[str]:
    """The secret types in a text, its views included (until one is found)."""
    clean = normalise(text)
    if depth == 0:
        clean = _defaults_masked(clean)  # (its views are of the text so masked)
    found = False
    template = template or _pem_templates(clean)
    for line in clean.splitlines() or [clean]:
        for secret_type in _line_types(line, clean):
            if template and secret_type == _PRIVATE_KEY:
                continue
            found = True
            yield secret_type
    for secret_type in split_tokens(clean):
        found = True
        yield secret_type
    if not found and depth == 0:
        # A store's reference reads as words to the context rules: what it says (a
        # secret is kept there) still counts for a value beside it, its suffix does not.
        for secret_type in context_secrets(mask_references(clean, "the secret store")):
            found = True
            yield secret_type
    if found or depth >= _MAX_DEPTH or len(clean) > MAX_VIEW_CHARS:
        return
    for view in unwrapped(clean):
        if budget[0] <= 0:
            return
        budget[0] -= 1
        for secret_type in _scan(view, depth + 1, budget, template):
            found = True
            yield secret_type
        if found:
            return


def find_secrets(fields: Iterable[tuple[str, str]]) -> list[SecretFinding]:
    """Scan each ``(field name, text)``; return one finding per type and field."""
    findings: list[SecretFinding] = []
    seen: set[tuple[str, str]] = set()
    # No filters: detect-secrets' heuristics exist to cut noise in source code,
    # and here a false negative stores a credential.
    _configure()
    for field, text in fields:
        for secret_type in _scan(text, 0, [_MAX_VIEWS]):
            key = (field, secret_type)
            if key not in seen:
                seen.add(key)
                findings.append(SecretFinding(field=field, secret_type=secret_type))
    return findings


def text_fields(value: Any, path: str) -> list[tuple[str, str]]:
    """Every string of a JSON-like value, keys included, named by where it sits
    (``state.notes[2]``): what a run's state or budget stores, as the personal-data
    scan reads it. The secret scan reads ``structured_fields`` instead."""
    out: list[tuple[str, str]] = []
    if isinstance(value, str):
        out.append((path, value))
    elif isinstance(value, dict):
        for key, item in value.items():
            out.append((f"{path} (key)", str(key)))
            out += text_fields(item, f"{path}.{key}")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            out += text_fields(item, f"{path}[{i}]")
    return out


def structured_fields(value: Any, path: str) -> list[tuple[str, str]]:
    """What the secret scan reads of a JSON-like value (a run's state, budget, pending
    approvals): every key, and every string and number *with the names it is stored
    under* (``state.db.password`` reads ``db.password: ...``), so that a name that calls
    its value a secret and a value that looks like one are judged together."""
    return structured(value, path)


def refuse_secrets(fields: Iterable[tuple[str, str | None]], what: str) -> None:
    """Raise ``secret_detected`` naming the fields (never the value) when any holds a
    credential; ``what`` says what is being written ("the checkpoint")."""
    findings = find_secrets((name, text) for name, text in fields if text)
    if findings:
        raise SecretDetected(
            f"{what} contains what looks like a credential; it is not kept. Remove it "
            "(store a reference to a secret manager instead) and send it again",
            {"findings": [{"field": f.field, "type": f.secret_type} for f in findings]},
        )
