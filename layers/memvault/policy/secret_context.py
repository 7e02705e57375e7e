"""Secrets judged in the context of the text around them.

The pattern rules (``secret_patterns``) read a name and the value that follows it. What
they cannot read is found here, on a whole text at a time:

* a value that had to be *derived* first (decoded from base64, hex or ``\\u`` escapes,
  closed up from ``t.e.a.p.o.t``, read backwards when the text says so, Chinese numerals
  read as digits, or put together from labelled halves), judged against the secret's name
  anywhere in its line;
* a random token in a line that names a secret (entropy in context), unless the line
  says the token is a hash, a commit, a fingerprint or an id;
* wallet keys: 64 hex digits beside a wallet's or a private key's name, 64-byte arrays
  (Solana key pairs), seed phrases of 12 to 24 words, labelled or not, numbered or not;
* credentials in URL query parameters (``?key=...``, ``&appid=...``);
* what a command that prints a stored secret printed (``kubectl get secret ... | base64
  -d`` and the line after it, ``op read op://... -> ...``).
* a password as people make them (``Tamarind-Sleet-91``, ``Quill&Ember2024``) after words
  about signing in ("sudo", "the vpn wanted", "login", an account's e-mail, "user / "),
  unless the text discusses passwords (examples, defaults, strength, policies).

Every derivation is bounded (lengths, counts), so a long text costs a few linear scans.
"""

from __future__ import annotations

import base64
import binascii
import re
import unicodedata
from collections.abc import Iterator

from memvault.policy.secret_values import (
    Kind,
    common_password,
    is_documentation_example,
    is_placeholder,
    looks_random,
    looks_secret,
    name_kind,
    wordlike,
)
from memvault.policy.secret_views import collapsed
from memvault.policy.secret_wordlist import bip39_share

__all__ = ["BASE64_RUN", "base64_text", "context_secrets"]

#: Texts longer than this are judged by the pattern rules only.
MAX_CONTEXT_CHARS = 20_000
_MAX_CANDIDATES = 24

# --- names in a line ----------------------------------------------------------------------

_NAME = re.compile(
    r"(?<![a-z0-9_.\-])[a-z0-9_.\-]{0,40}?(?:pass(?:word|wd|phrase|code)?|pwd|pw|secret|token|key|credentials?|pin"
    r"|puk|psk|seed|mnemonic|combination|combo|code|answer|appid)s?[a-z0-9_\-]*"
)
_ZH_NAME = re.compile(
    r"[\u4e00-\u9fff]{0,6}?(?:密码|口令|暗号|密钥|秘钥|私钥|令牌|授权码|助记词|密保|撤防码|解锁码|门禁码"
    r"|恢复码|备用码|安全码|通行码)"
)
_WORD_BEFORE = re.compile(r"([a-z][a-z0-9]*)[\s_.\-]*$")
_STRENGTH = {Kind.PIN: 1, Kind.PASSWORD: 2, Kind.PHRASE: 2, Kind.TOKEN: 3}


#: A cloud's access key id and secret key named as a pair (Huawei, Alibaba, Tencent,
#: Baidu and Volcengine consoles all say "AK/SK"): "sk" alone is too short a name.
_AK_SK = re.compile(r"(?<![a-z0-9])ak(?![a-z0-9]).{0,80}?(?<![a-z0-9])sk(?![a-z0-9])")

_DENIED = re.compile(r"\b(?:not|isn't|is not|never) (?:a|an|the|my|your)\s*$|不是|并非|并不是|不算")


def _names(line: str) -> list[Kind]:
    """The kinds of secret the names in a line call for (weak names left out)."""
    low = line.lower()
    kinds: list[Kind] = []
    for m in _NAME.finditer(low):
        if _DENIED.search(low[max(0, m.start() - 12) : m.start()]):
            continue  # "not a key", "isn't the password"
        word = m.group().strip("_.-")
        before = _WORD_BEFORE.search(low[max(0, m.start() - 24) : m.start()])
        kind = name_kind(f"{before.group(1)} {word}" if before else word)
        if kind is not None:
            kinds.append(kind)
    if "sk" in low and _AK_SK.search(low):
        kinds.append(Kind.TOKEN)  # "AK/SK", "AK 是 ..., SK 是 ...": a cloud's key pair
    if not line.isascii():
        for m in _ZH_NAME.finditer(line):
            if _DENIED.search(line[max(0, m.start() - 4) : m.start()]):
                continue  # "不是密钥": said not to be one
            kind = name_kind(m.group())
            if kind is not None and kind is not Kind.WEAK:
                kinds.append(kind)
    return kinds


#: A sentence that offers a value as a bad example or a rule, not as anyone's secret.
_GENERIC = re.compile(
    r"(?i)\b(?:e\.g\.|for example|for instance|such as|like|never use|avoid|don't use"
    r"|do not use|example|sample|placeholder|format|looks like|pattern)\b"
    r"|例如|比如|示例|格式|不要用"
)


#: Addresses whose names hold "example" ("example-shop.net", "ops@acme.example",
#: "https://example.com/..."): a domain reserved for examples, used for real-looking
#: hosts, says nothing of the value beside it.
_EXAMPLE_HOSTS = re.compile(
    r"(?<!\S)\S*(?:@|://)\S*|(?<![\w.-])[\w-]*example[\w-]*(?:\.[\w-]+)+"
    r"|(?<![\w-])(?:[\w-]+\.)+example\b",
    re.IGNORECASE,
)


def _generic(line: str) -> bool:
    """Whether a line offers its value as an example, a rule or a bad one (its hosts'
    names aside)."""
    if not _GENERIC.search(line):
        return False
    return bool(_GENERIC.search(_EXAMPLE_HOSTS.sub(" ", line)))


#: A function applied to a named argument ("SHA256(code_verifier", "hmac(key, msg)"): a
#: formula that says how a value is made, not the value.
_FORMULA = re.compile(r"^[A-Za-z_][\w.]*\(\s*[A-Za-z_][\w.]*\s*(?:[,)]|$)")


def _judge(value: str, kinds: list[Kind]) -> bool:
    value = value.strip()
    if not value or len(value) > 200 or "\n" in value or _FORMULA.match(value):
        return False
    if ":" in value and _user_password(value):
        return True
    setting = _SETTING.match(value)
    if setting and name_kind(setting.group(1)) is None:
        return False  # "expires_in=3600": a setting whose name is not a secret's
    if Kind.WEAK in kinds and _strong(value):
        return True  # "key for the backup drive (hex): ...": a strong value, derived
    return any(
        looks_secret(value, prose=False, kind=kind) for kind in kinds if kind is not Kind.WEAK
    )


_SETTING = re.compile(r"([A-Za-z_][\w.\-]{1,40})=")


def _user_password(value: str) -> bool:
    """``user:password`` (what HTTP Basic credentials decode to)."""
    user, _, password = value.partition(":")
    if not re.fullmatch(r"[\w.@+\-]{1,40}", user) or not password or password == user:
        return False
    if " " in password or is_placeholder(password):
        return False
    return looks_secret(password, prose=False) and any(not c.isalpha() for c in password)


# --- derived values -----------------------------------------------------------------------

_B64 = re.compile(r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/_\-]{8,400}={0,2}(?![A-Za-z0-9+/=_\-])")
BASE64_RUN = re.compile(
    r"(?<![A-Za-z0-9+/=_\-])[A-Za-z0-9+/_\-]{12,400}={0,2}(?![A-Za-z0-9+/=_\-])"
)
_HEX = re.compile(r"(?<![0-9A-Za-z])(?:0x)?((?:[0-9A-Fa-f]{2}){4,200})(?![0-9A-Za-z])")
_ESCAPES = re.compile(r"(?:\\u[0-9a-fA-F]{4}|\\x[0-9a-fA-F]{2}){4,200}")
_PERCENT = re.compile(r"(?:%[0-9A-Fa-f]{2}|[A-Za-z0-9._~!*'()\-]){4,200}")
_SEPARATED = re.compile(r"(?<!\S)(?:[^\s][.·|,*/_ ]){3,60}[^\s](?!\S)")
_CN_DIGITS = re.compile(r"[零〇一二三四五六七八九两]{4,12}")
_CN_DIGIT_MAP = str.maketrans("零〇一二三四五六七八九两", "001234567892")
_BACKWARDS = re.compile(r"backwards?|reversed?|in reverse|倒过来|倒着|反过来|反着|倒序")
_TOKEN = re.compile(r"[^\s\"'`()\[\]{}<>,;]{6,80}")


def _printable(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) < 4 or not all(c.isprintable() for c in text):
        return None
    return text


def base64_text(run: str) -> str | None:
    """What a base64 or base64url run decodes to, when that is printable UTF-8 text of four
    characters or more (``None`` for runs of digits, hex or letters only)."""
    if run.isdigit() or re.fullmatch(r"[0-9a-fA-F]+", run) or run.isalpha():
        return None
    body = run.rstrip("=")
    body += "=" * (-len(body) % 4)
    for alt in (b"+/", b"-_"):
        try:
            found = _printable(base64.b64decode(body, altchars=alt, validate=True))
        except (binascii.Error, ValueError):
            continue
        if found is not None:
            return found
    return None


def _collapse(m: re.Match[str]) -> str | None:
    """``t.e.a.p.o.t.-.9.9`` closed up: every other character one same separator."""
    run = m.group()
    seps = set(run[1::2])
    return run[::2] if len(seps) == 1 else None


def _derived(line: str, backwards: bool) -> Iterator[str]:
    for m in _B64.finditer(line):
        found = base64_text(m.group())
        if found is not None and found[:1] not in "{[":
            yield found
    for m in _HEX.finditer(line):
        found = _printable(bytes.fromhex(m.group(1)))
        if found is not None:
            yield found
    if "\\" in line:
        for m in _ESCAPES.finditer(line):
            yield m.group().encode("ascii").decode("unicode_escape")
    if "%" in line:
        from urllib.parse import unquote

        for m in _PERCENT.finditer(line):
            if m.group().count("%") >= 2:
                yield unquote(m.group())
    for m in _SEPARATED.finditer(line):
        closed = _collapse(m)
        if closed is not None:
            yield closed
    if not line.isascii():
        for m in _CN_DIGITS.finditer(line):
            yield m.group().translate(_CN_DIGIT_MAP)
    if backwards:
        for m in _TOKEN.finditer(line):
            yield m.group()[::-1]
    for m in _QUOTED.finditer(line):
        if _strong(m.group("v")):
            yield m.group("v")


#: A value in quotes or brackets, however many: "「『Pg#Zh!2024db』」 ... 数据库密码".
_QUOTED = re.compile(
    r"[\"'`\u201c\u2018\u300c\u300e\u3010\u00ab(\[]+"
    r"(?P<v>[^\s\"'`\u201d\u2019\u300d\u300f\u3011\u00bb)\]]{8,64})"
    r"[\"'`\u201d\u2019\u300d\u300f\u3011\u00bb)\]]"
)


def _strong(value: str) -> bool:
    """Letters, digits and symbols mixed: a password, not a word or a path."""
    return (
        any(c.isalpha() for c in value)
        and any(c.isdigit() for c in value)
        and any(not c.isalnum() for c in value)
        and not _wordy(value)
        and not any("\u4e00" <= c <= "\u9fff" for c in value)
    )


#: Labelled pieces of one secret: "first half: Kq7#m", "后半段 Lz2!pX", "part 2/3: ...".
_PIECE = re.compile(
    r"(?:(?:first|second|third|fourth|last|other)\s+(?:half|part|piece|bit)|part\s*\d(?:/\d)?"
    r"|piece\s*\d|前半段?|后半段?|前半部分|后半部分|上半段?|下半段?|第[一二三四1-4]段|第[一二三四1-4]部分"
    r"|[前后]\s*[一二两三四五六七八九十\d]{1,2}\s*位|(?:first|last)\s+(?:\w+\s+)?(?:digits|characters|chars))"
    r"\s*(?:[:=]|是|为|(?:is|are)(?=\s))?\s*[\"'\u201c\u300c]?(?P<v>[^\s\"'\u201d\u300d,;\uff0c\uff1b\u3002]{2,40})"
)


_PIECE_WORDS = ("half", "part", "piece", "半", "段", "部分", "位", "digits", "char")


def _pieces(text: str) -> str | None:
    low = text.lower()
    if not any(word in low for word in _PIECE_WORDS):
        return None
    if len(low) != len(text):
        return None  # a letter whose lower case is longer: the spans would not line up
    # Matched on the lower-cased text (a case-insensitive alternation is slow in ``re``);
    # the pieces are read from the text as written.
    found = [text[m.start("v") : m.end("v")] for m in _PIECE.finditer(low)]
    return "".join(found) if 2 <= len(found) <= 6 else None


# --- wallets and seed phrases ---------------------------------------------------------------

_HEX_KEY = re.compile(r"(?<![0-9A-Za-z])(?:0x)?([0-9a-fA-F]{64})(?![0-9A-Za-z])")
_WALLET = re.compile(
    r"(?i)wallet|private|priv|secret|metamask|phantom|keystore|signer|ledger|trezor|keypair"
    r"|(?<![a-z])pk(?![a-z])|eth|私钥|钱包|密钥"
)
_NOT_A_KEY = re.compile(
    r"(?i)(?<![a-z])(?:tx|txid|txn|transaction|hash|digest|sha\d*|checksum|commit|block"
    r"|merkle|fingerprint|public|pubkey|address|contract|nonce|salt|id|sid|identifier|git|revert"
    r"|reverted|rebase|cherry-pick|regression|introduced in)(?![a-z])"
    r"|交易|哈希|摘要|校验|公钥|地址|区块|提交"
)
#: A 64-byte key pair in base58 (a Solana wallet's export: 86 to 88 characters). A
#: transaction's signature has the same shape, so a wallet must be named, and no
#: signature or transaction.
_BASE58_64 = re.compile(r"(?<![1-9A-Za-z])[1-9A-HJ-NP-Za-km-z]{86,88}(?![0-9A-Za-z])")
_NOT_A_KEY_PAIR = re.compile(r"(?i)signature|(?<![a-z])sig(?![a-z])|签名|explorer|solscan")


def _base58_key(line: str) -> bool:
    if len(line) < 86 or not (_WALLET.search(line) or "solana" in line.lower()):
        return False
    m = _BASE58_64.search(line)
    return (
        m is not None
        and not _NOT_A_KEY.search(line)
        and not _NOT_A_KEY_PAIR.search(line)
        and looks_random(m.group(), min_length=32)
    )


_BYTE_ARRAY = re.compile(r"\[\s*(?:\d{1,3}\s*,\s*){63}\d{1,3}\s*\]")
#: Matched on the lower-cased text (a case-insensitive alternation is slow in ``re``).
_SEED_CONTEXT = re.compile(
    r"seed|mnemonic|recovery (?:phrase|words)|backup (?:phrase|words)|secret phrase"
    r"|\b(?:12|24|twelve|twenty-four)[ -]words?|ledger|trezor|metamask|助记词|恢复短语"
    r"|种子|钱包|(?:restore|recover|import)\w*\s+(?:the\s+|my\s+|a\s+)?wallet"
)
_SEED_SPLIT = re.compile(r"[\s,、;:()]+")
_NUMBERING = re.compile(r"^\d{1,2}[.):]?")
_SEED_WORD = re.compile(r"[a-z]{3,8}")
_STOP = frozenset(
    {
        *("the", "and", "for", "are", "but", "not", "you", "all", "any", "can", "had", "her"),
        *("was", "one", "our", "out", "has", "him", "his", "how", "its", "may", "new", "now"),
        *("see", "two", "who", "did", "get", "let", "put", "say", "she", "too", "use", "that"),
        *("with", "have", "this", "will", "your", "from", "they", "been", "were", "what"),
        *("when", "there", "their", "which", "would", "about", "could", "into", "than"),
        *("then", "them", "these", "those", "some", "here", "only", "also", "just", "very"),
    }
)


#: Labels of a part of one phrase ("first half: ... second half: ..."): the run goes on.
_PART_LABELS = frozenset({"half", "part", "piece", "rest", "remainder", "continued"})


def _seed_runs(text: str) -> Iterator[tuple[int, bool]]:
    """Runs of seed-shaped words: (length, whether only spaces or numbers separate them)."""
    run, plain = 0, True
    for raw in re.finditer(r"\S+", text):
        token = raw.group()
        if token.endswith((":", "=")) and token[:-1].isalpha():
            if token[:-1] in _PART_LABELS:
                continue  # "second half:": the phrase goes on, in its next part
            if run:
                yield run, plain
            run, plain = 0, True
            continue  # "phrase:": a label, not a word of the phrase
        pieces = [p for p in _SEED_SPLIT.split(token) if p]
        if len(pieces) > 1 or (pieces and pieces[0] != token):
            plain = plain and bool(re.fullmatch(r"\d{1,2}[.):]?[a-z]+|\d{1,2}[.):]", token))
        for piece in pieces or [token]:
            word = _NUMBERING.sub("", piece)
            if not word:
                continue  # "1." alone
            # A small word that is also a BIP-39 word ("can", "any") stays in the run.
            if _SEED_WORD.fullmatch(word) and (word not in _STOP or bip39_share([word]) == 1):
                run += 1
                continue
            if run:
                yield run, plain
            run, plain = 0, True
    if run:
        yield run, plain


_LABEL = re.compile(r"^\s*[A-Za-z][\w .\-]{0,30}:\s*")


def _seed_phrase(text: str) -> bool:
    """12 to 24 seed-shaped words: anywhere in a text that speaks of a seed or a wallet;
    otherwise only a line that is nothing else (after a label), 12, 15, 18, 21 or 24 of
    them, numbered or not."""
    low = text.lower()
    context = _SEED_CONTEXT.search(low if len(low) == len(text) else text.lower())
    if context:
        # The word that says "seed" may be one of the phrase's own (BIP-39 has "seed"):
        # the run may start a little before it.
        near = text[max(0, context.start() - 120) : context.start() + 800]
        if any(12 <= count <= 25 for count, _ in _seed_runs(near)):
            return True
    for line in text.split("\n"):
        if not 12 <= len(line.split()) <= 40:
            continue  # fewer than twelve words (with a label), or a paragraph
        body = _LABEL.sub("", line, count=1)
        if ":" in body and len(body.rsplit(":", 1)[1].split()) in (12, 15, 18, 21, 24):
            body = body.rsplit(":", 1)[1]  # "writing this here so I don't lose it: ..."
        tokens = body.split()
        if len(tokens) not in (12, 15, 18, 21, 24):
            continue
        words = [_NUMBERING.sub("", t) for t in tokens]
        # Nothing calls it a seed: all words but one are BIP-39's (not a shopping list).
        if all(_SEED_WORD.fullmatch(w) and w not in _STOP for w in words) and (
            bip39_share(words) >= 1 - 1.5 / len(words)
        ):
            return True
    return False


def _words_distinct(text: str) -> bool:
    words = re.findall(r"[a-z]{3,8}", text)
    return len(set(words)) >= 0.75 * len(words)


# --- query parameters and entropy in context ------------------------------------------------

_QUERY = re.compile(r"[?&;](?P<k>[A-Za-z][\w.\-]{0,30})=(?P<v>[^&#\s\"'<>]{8,300})")
_QUERY_KEYS = frozenset({"key", "appid", "app_key", "appkey", "sig", "signature", "auth", "k"})
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}", re.I)
#: An id: a UUID, or a ULID (a time and randomness in Crockford's base32, 26 characters).
_ID = re.compile(
    r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-7][0-9A-HJKMNP-TV-Z]{25}",
    re.I,
)
_RANDOM = re.compile(r"[A-Za-z0-9+/_\-]{20,200}={0,2}")
_HEX_TOKEN = re.compile(r"(?<![0-9A-Za-z])[0-9a-f]{32,64}(?![0-9A-Za-z])")


def _query_secret(line: str) -> bool:
    for m in _QUERY.finditer(line):
        name, value = m.group("k"), m.group("v")
        kind = name_kind(name)
        if kind is None and name.lower() not in _QUERY_KEYS:
            continue
        if is_documentation_example(value):
            continue
        if _UUID.fullmatch(value) or looks_random(value) or _HEX_TOKEN.fullmatch(value):
            return True
        if kind not in (None, Kind.WEAK) and looks_secret(value, prose=False, kind=kind):
            return True
    return False


def _wordy(token: str) -> bool:
    """Words and short parts joined by punctuation: a path, a name, not a key."""
    pieces = [p for p in re.split(r"[/_\-.+:]", token) if p]
    if len(pieces) < 2:
        return False
    return all(len(p) <= 6 or p.isdigit() or (p.isalpha() and wordlike(p) >= 0.6) for p in pieces)


def _random_near_name(line: str, kinds: list[Kind]) -> bool:
    """A random token in a line that names a key, token or password, unless the words
    around the token say it is a hash, a commit, an address or an id."""
    if not any(k in (Kind.TOKEN, Kind.PASSWORD) for k in kinds):
        return False
    if _generic(line):
        return False
    for m in _RANDOM.finditer(line):
        token = m.group().rstrip("=")
        if is_documentation_example(m.group()) or is_documentation_example(token):
            continue  # a published example, with its padding or without
        if _ID.fullmatch(token) or _wordy(token):
            continue
        if _said_not_a_key(line, m.start(), m.end()):
            continue
        if _b64_text(m.group()):
            continue  # base64 of ordinary text: what it says is scanned as its own view
        start = line.rfind(" ", 0, m.start()) + 1
        if "://" in line[start : m.end()] or line.startswith("arn:", start):
            continue  # a link or a resource name
        end = line.find(" ", m.end())
        if is_documentation_example(line[start : end if end >= 0 else len(line)]):
            continue  # a part of a documentation example (the jwt.io token's signature)
        if looks_random(token, min_length=20) or _HEX_TOKEN.fullmatch(token):
            return True
    return False


#: Where the clause a token ends goes on to another: what follows says nothing of it.
_CLAUSE_END = re.compile(r"[.;!?\u2014\u2013]|\s-\s|,\s|\u3002|\uff1b")


def _said_not_a_key(line: str, start: int, end: int) -> bool:
    """Whether the words before a token in its line, or after it in its clause, call it a
    hash, a commit, an address or an id ("commit 3f9a...", "... (the tx hash)"); a key id
    named in another clause ("... — the key id is in the ticket") says nothing of it."""
    if _NOT_A_KEY.search(line, 0, start):
        before = line[:start]
        # Only in the token's own sentence.
        cut = max(before.rfind(". "), before.rfind("; "), before.rfind("\u3002"))
        if _NOT_A_KEY.search(before[cut + 1 :] if cut >= 0 else before):
            return True
    after = line[end : end + 60]
    clause = _CLAUSE_END.search(after)
    return bool(_NOT_A_KEY.search(after[: clause.start()] if clause else after))


def _b64_text(run: str) -> bool:
    """Whether a base64 run decodes to ordinary text (mostly letters, CJK included)."""
    decoded = base64_text(run)
    if decoded is None or len(decoded) < 4:
        return False
    letters = sum(
        c.isalpha() or c.isspace() or unicodedata.category(c).startswith("P") for c in decoded
    )
    return not decoded.isascii() and letters / len(decoded) >= 0.8


def _basic_pair(line: str) -> bool:
    """A base64 run that decodes to ``user:password``."""
    for m in BASE64_RUN.finditer(line):
        found = base64_text(m.group())
        if found is not None and ":" in found and _user_password(found):
            return True
    return False


# --- a secret a command printed ---------------------------------------------------------

#: Commands that print a stored secret in clear (a Kubernetes secret decoded, a vault's
#: field, a secret manager's value, a password store's entry).
_REVEALS = re.compile(
    r"kubectl\s+get\s+secrets?\b[^\n]*\|\s*base64\s+(?:-d|--decode|-D)\b"
    r"|\bvault\s+(?:kv\s+get|read)\b[^\n]*\s-field[= ]"
    r"|\baws\s+secretsmanager\s+get-secret-value\b"
    r"|\bgcloud\s+secrets\s+versions\s+access\b"
    r"|\bop\s+read\s+\S*op://"
    r"|\bpass\s+show\s"
    r"|\baz\s+keyvault\s+secret\s+show\b[^\n]*--query\s+\S*value"
    r"|\bsecurity\s+find-(?:generic|internet)-password\b[^\n]*\s-w\b"
)
_REVEAL_WORDS = (
    "kubectl",
    "vault",
    "secretsmanager",
    "gcloud",
    "op read",
    "pass show",
    "keyvault",
    "find-",
)
#: What the command printed: on the lines after it, alone or after "output:", "输出:";
#: or after an arrow on its own line.
_PRINTED = re.compile(
    r"(?i)^\s*(?:(?:输出|结果|返回|打印|output|result|stdout|prints?|printed|returns?|got)"
    r"\s*[:=]?|=>|->|\u2192|>)?\s*[\"'`]?(?P<v>[^\s\"'`]{6,200})[\"'`]?\s*[.,;]?\s*$"
)
_ARROW = re.compile(
    r"(?:=>|->|\u2192|#\s*(?:output|prints?)\s*:?)\s*[\"'`]?(?P<v>[^\s\"'`]{6,200})"
)


def _printed_secret(value: str) -> bool:
    if is_documentation_example(value) or _ID.fullmatch(value):
        return False
    # What such a command prints is the secret itself, unless it is a mask or a word.
    return looks_secret(value, prose=False) and not value.isalpha()


def _revealed(text: str) -> bool:
    """A command that prints a secret, and what it printed: "kubectl get secret db -o
    jsonpath={.data.password} | base64 -d" then "输出: K8s#Db_Pass91"."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = _REVEALS.search(line)
        if m is None:
            continue
        after = _ARROW.search(line, m.end())
        if after and _printed_secret(after.group("v")):
            return True
        for nxt in [n for n in lines[i + 1 : i + 4] if n.strip()][:2]:
            printed = _PRINTED.match(nxt)
            if printed and _printed_secret(printed.group("v")):
                return True
    return False


# --- passwords people make ------------------------------------------------------------------

#: A run a password may be: ASCII letters, digits and the symbols passwords use, not a
#: piece of a path (no "/" or "\\" beside it); eight to forty characters.
_MADE_RUN = re.compile(
    r"(?<![A-Za-z0-9_!#$%&*+=?@^~.\-/\\])[A-Za-z0-9_!#$%&*+=?@^~.\-]{8,40}"
    r"(?![A-Za-z0-9_!#$%&*+=?@^~\-/\\])"
)
_MADE_SYMBOLS = frozenset("!#$%&*?@^~")
_MADE_PART = re.compile(
    r"[A-Z][a-z]{2,}|[a-z]{2,}|\d{1,6}|[A-Z][a-z]{2,}\d{1,4}|[A-Z][a-z]+\d{1,4}[A-Z][a-z]+"
    r"|[A-Z]?[a-z]+(?:[0134][a-z]+)+"  # a word in leetspeak: "Tr1ton"
)
_LEET = str.maketrans("0134", "oiea")
_MADE_SPLIT = re.compile(r"[-_.+=!#$%&*?@^~]+")
_EMAIL_LIKE = re.compile(r"@[A-Za-z0-9-]+\.[A-Za-z]")
#: Shapes with a password's symbols that are something else: a user at a host
#: (``deploy@Build01``), percent-encoding (``Hello%20World2``), a query string
#: (``?id=42&Page=2``).
_NOT_MADE = re.compile(
    r"^[a-z][a-z0-9._\-]{1,30}@[A-Za-z][A-Za-z0-9.\-]*$|%[0-9A-Fa-f]{2}|[?&][A-Za-z_]\w*="
)
_FILE_LIKE = re.compile(r"\.[A-Za-z]{2,4}$")


#: Words that name products, editions, environments, teams and documents: a run of
#: them with a number is a name ("Windows-Server-2022", "Q&A-Session-2024"), where
#: people's passwords join unrelated words ("Cobalt-Hedge-902").
_NAMING_WORDS = frozenset(
    {
        *("windows", "server", "studio", "office", "team", "build", "release", "cloud", "data"),
        *("web", "app", "node", "edge", "pro", "plus", "ultra", "max", "mini", "home", "lts"),
        *("enterprise", "standard", "basic", "premium", "update", "service", "pack", "edition"),
        *("version", "beta", "alpha", "stable", "preview", "test", "dev", "prod", "stage"),
        *("staging", "sprint", "review", "planning", "budget", "report", "session", "group"),
        *("project", "phase", "rollout", "cluster", "pool", "region", "zone", "model", "series"),
        *("ubuntu", "debian", "linux", "macos", "android", "ios", "python", "java", "node"),
        *("docker", "kubernetes", "postgres", "mysql", "redis", "sql", "api", "sdk", "cli"),
        *("patch", "hotfix", "fix", "feature", "branch", "draft", "final", "notes", "meeting"),
        *("quarter", "roadmap", "plan", "guest", "lab", "demo", "sample", "example", "template"),
        *("bravo", "charlie", "delta", "squad", "unit", "batch", "run", "job", "task", "ticket"),
        *("invoice", "order", "case", "issue", "room", "floor", "building", "site", "store"),
    }
)


def _unleet(part: str) -> str:
    """Digits inside a word read as the letters they stand for ("Tr1ton": "Triton")."""
    return re.sub(r"(?<=[A-Za-z])[0134](?=[a-z])", lambda m: m.group().translate(_LEET), part)


def made_password(run: str) -> str | None:
    """Whether a run is a password as people make them, and which way: "symbols" (letters
    of both cases, digits and a symbol of a password's: ``Wr8#Lq!vZ2pM``,
    ``Quill&Ember2024``) or "words" (capitalised words joined by punctuation, with
    digits: ``Tamarind-Sleet-91``, ``Velvet.Cobalt.71``). None for anything else: ids,
    hashes, base64, versions, file names, e-mail addresses, masks and examples."""
    run = run.rstrip(".?")
    if run[:1] in "*_~" and run[-1:] == run[:1]:
        run = run.strip(run[0])  # "**Step2**": emphasis around a word
    if len(run) < 8 or run[0] in "@#" or _EMAIL_LIKE.search(run) or _FILE_LIKE.search(run):
        return None
    if _NOT_MADE.search(run) or "**" in run:
        return None  # (a password with letters starred out is a mask)
    if not (
        any(c.isupper() for c in run)
        and any(c.islower() for c in run)
        and any(c.isdigit() for c in run)
        and sum(c.isalpha() for c in run) >= 4
    ):
        return None
    shape = _shape(run)
    if shape is None or common_password(run) or is_documentation_example(run):
        return None
    return None if shape == "symbols" and looks_random(run, min_length=24) else shape


def _shape(run: str) -> str | None:
    """The way a run of both cases and digits is made, before what it may be else."""
    if any(c in _MADE_SYMBOLS for c in run):
        named = any(w.lower() in _NAMING_WORDS for w in re.findall(r"[A-Za-z]{3,}", run))
        return None if named else "symbols"
    parts = [p for p in _MADE_SPLIT.split(run) if p]
    if len(parts) < 2 or not all(_MADE_PART.fullmatch(p) for p in parts):
        return None
    words = [w for p in parts for w in re.findall(r"[A-Za-z]{3,}", _unleet(p))]
    if len(words) < 2 or not any(w[0].isupper() for w in words):
        return None
    if any(w.lower() in _NAMING_WORDS for w in words):
        return None  # "Windows-Server-2022", "Team-Bravo-07": a product's or a group's name
    if sum(c.isdigit() for c in run) < 2 or not all(wordlike(w) >= 0.5 for w in words):
        return None
    return "words"


#: What says a text is about signing in to something: a password made of words needs it
#: (``Windows-Server-2019`` is a product's name).
_SIGN_IN = re.compile(
    r"(?i)pass(?:word|wd|phrase|code)?|(?<![a-z])(?:pw|pwd|pin|creds?|vpn|ssh|rdp|sudo|auth"
    r"|key|code|safe|seed|user(?:name)?)(?![a-z])|credential|log(?:ged)?[ -]?(?:in|on)"
    r"|sign(?:ed)?[ -]?in|account|wi-?fi|router|admin|prompt|unlock|locked|mailbox|smtp"
    r"|imap|e-?mail|bastion|jump[ -]?(?:host|box)|sticky note|laptop|secret|wallet|trezor"
    r"|ledger|combination|vault|keychain|htpasswd|token"
    # A user's name, a slash, then the password: "use deploy / ...".
    r"|(?<![\w/])[a-z][\w.@+\-]{1,39}\s+[/+]\s+(?=\S|$)|psk|pre-?shared"
    # An account named by its e-mail address.
    r"|[\w.+\-]+@[\w\-]+(?:\.[\w\-]+)+"
    r"|密码|口令|密钥|账号|账户|帐号|登录|登陆|开机|解锁|堡垒机|跳板机|电脑|路由器|管理员|后台|邮箱"
    r"|用户名|钱包|助记|私钥|令牌|门禁|凭证|密保"
)
#: What says a password shown is an example, a rule's, a weak or a default one: a
#: discussion of passwords, not anyone's (matched on the lower-cased text).
_ABOUT_PASSWORDS = re.compile(
    r"\b(?:e\.g|i\.e|for example|for instance|such as|example|examples|sample|samples"
    r"|placeholder|dummy|fake|mock|fixtures?|default|common|weak|weakest|weaker|strength"
    r"|stronger|crack\w*|guess\w*|brute|bits|entropy|zxcvbn|xkcd|breach\w*|pwned|rockyou"
    r"|dictionary|wordlist|policy|policies|rejected|reject|never use|avoid|don't use"
    r"|do not use|instead of|format|pattern|regex|rated|rates|rating|score|complexity"
    r"|masked|redacted|obfuscated|truncated|censored"
    r"|(?:looks|sounds|something|things|passwords?|ones?) like|like\s+[\"'`\u201c])\b"
    r"|例如|比如|示例|样例|举例|默认|弱|强度|常见|破解|不要用|格式|正则|复杂度|脱敏|打码"
)


#: Addresses, whose words say nothing of a password ("ops@acme.example", "example.com").
_ADDRESSES = re.compile(
    r"(?<!\S)\S*(?:@|://)\S*|(?<![\w-])(?:[\w-]+\.)+example(?:\.[a-z]{2,})?\b"
    r"|\bexample\.(?:com|org|net|edu)\b"
)


#: Six or more characters spelled out one by one with spaces between them.
_SPELLED_OUT = re.compile(r"(?<!\S)(?:\S[ \t]{1,3}){5,}\S(?!\S)")


def _made_passwords(text: str) -> bool:
    """A password as people make them, after words about signing in to something in its
    sentence (or on the line before), unless the text discusses passwords. One made of
    words must also end its phrase ("... Cinder-Wharf-19 over 587", not "Team-Alpha-01
    was created") or follow a secret's name ("wifi key Clover-Pantry-93")."""
    about: bool | None = None
    previous = ""
    tried = 0
    for line in text.split("\n"):
        signs: list[tuple[int, int]] | None = None
        for m in _MADE_RUN.finditer(line):
            shape = made_password(m.group())
            if shape is None:
                continue
            tried += 1
            if tried > _MAX_MADE:
                return False
            if signs is None:  # where the line speaks of signing in, found once
                signs = [s.span() for s in _SIGN_IN.finditer(line)]
                signed_before = bool(_SIGN_IN.search(previous[-100:]))
            start = max(0, m.start() - 100)
            window = line[start : m.start()]
            ends = list(_SENTENCE_END.finditer(window))
            if ends and shape == "words":
                start += ends[-1].end()  # words need the sign-in in their sentence
                window = line[start : m.start()]
            if not (signed_before or any(start <= a and b <= m.start() for a, b in signs)):
                continue
            if shape == "words" and not (
                _PHRASE_ENDS.match(line, m.end()) or _NAMED_JUST_BEFORE.search(window)
            ):
                continue
            if about is None:  # asked once, and only of a text that shows such a password
                about = bool(_ABOUT_PASSWORDS.search(_ADDRESSES.sub(" ", text.lower())))
            if not about:
                return True
        previous = line
    return False


#: How many password-shaped runs a text is judged by (a long list of names is no one's).
_MAX_MADE = 24
_SENTENCE_END = re.compile(r"[.;!?\u3002](?:\s|$)")
#: What may follow a password that ends its phrase: the end, punctuation, Chinese, or a
#: small word that starts another phrase ("... over 587", "... on the first try").
_PHRASE_ENDS = re.compile(
    r"\s*(?:$|[,;.!?)\]}\"'`\u3002\uff0c\u4e00-\u9fff]|(?:over|on|in|at|for|from|with|and|but|so"
    r"|now|then|as|to|via|if|when|same|until|since|because|please|too|again|here|there"
    r"|without|instead|first|or)\b)"
)
#: A secret's name right before the password ("wifi key ...", "密码: ...").
_NAMED_JUST_BEFORE = re.compile(
    r"(?i)(?:pass(?:word|wd|phrase|code)?|pw|pwd|key|pin|secret|密码|口令|密钥)\s*[:=\-]?\s*$"
)


# --- the whole text ------------------------------------------------------------------------


#: A text that says it wrote a value encoded ("hex-encoded so the filter keeps it").
_ENCODED_SAID = re.compile(
    r"(?i)\b(?:hex|base64|base-64|b64|base32)[- ]?(?:encoded|encoding|encode)\b"
    r"|\bencoded\s+(?:in|as|with|to)\s+(?:hex|base64|base-64|b64|base32)\b"
    r"|(?:十六进制|base64|hex)\s*编码|编码成\s*(?:十六进制|base64|hex)"
)


def _encoded_password(text: str) -> bool:
    """A value the text calls encoded that decodes to a password as people make them:
    no one encodes a password-shaped string but to pass a password along."""
    for line in text.split("\n"):
        if _generic(line):
            continue  # "for example, hex of 'Hunter2!' is ..."
        decoded = [base64_text(m.group()) for m in _B64.finditer(line)]
        decoded += [_printable(bytes.fromhex(m.group(1))) for m in _HEX.finditer(line)]
        for value in decoded:
            if (
                value is not None
                and made_password(value) is not None
                and not is_documentation_example(value)
            ):
                return True
    return False


def context_secrets(text: str) -> Iterator[str]:
    """The secret types found in a normalised text by its context."""
    if len(text) > MAX_CONTEXT_CHARS:
        return
    found = _text_wide_secret(text)
    if found is not None:
        yield found
        return
    backwards = bool(_BACKWARDS.search(text.lower()))
    lines = text.split("\n")
    tried = 0
    for line in lines:
        if not line.strip():
            continue
        found = _shaped_secret(line)
        if found is not None:
            yield found
            return
        kinds = _names(line)
        if not kinds:
            continue
        if _random_near_name(line, kinds):
            yield "Secret In Context"
            return
        if _generic(line):
            continue
        for value in _derived(line, backwards):
            tried += 1
            if tried > _MAX_CANDIDATES:
                return
            if _judge(value, kinds):
                yield "Secret In Context"
                return
    found = _pieced_or_made_secret(text, lines)
    if found is not None:
        yield found


def _text_wide_secret(text: str) -> str | None:
    """A secret the whole text shows before its lines are read: a private key written as a
    byte array, a seed phrase, a secret a tool printed, a password it says it encoded."""
    if _BYTE_ARRAY.search(text):
        for m in _BYTE_ARRAY.finditer(text):
            numbers = [int(n) for n in re.findall(r"\d+", m.group())]
            if all(n <= 255 for n in numbers) and len(set(numbers)) >= 32:
                return "Solana Private Key"
    if _seed_phrase(text) and _words_distinct(text):
        return "Seed Phrase"
    if any(word in text for word in _REVEAL_WORDS) and _revealed(text):
        return "Secret In Tool Output"
    if _ENCODED_SAID.search(text) and _encoded_password(text):
        return "Secret In Context"
    return None


def _shaped_secret(line: str) -> str | None:
    """A secret a line shows by its shape whatever names it: a URL's secret parameter, a
    basic-auth pair, a wallet's private key (in hex beside a wallet's name, or base58)."""
    if "=" in line and _query_secret(line):
        return "Secret In URL"
    if _basic_pair(line):
        return "Basic Auth Credentials"
    hex_key = _HEX_KEY.search(line)
    if (
        hex_key
        and _WALLET.search(line)
        and not _NOT_A_KEY.search(line)
        and looks_random(hex_key.group(1), min_length=32)
    ):
        return "Wallet Private Key"
    if _base58_key(line):
        return "Wallet Private Key"
    return None


def _pieced_or_made_secret(text: str, lines: list[str]) -> str | None:
    """What the text shows once no line did: a value split in pieces across it, beside a
    secret's name; or a password as people make them, perhaps spelled out."""
    joined = _pieces(text)
    if joined is not None:
        text_kinds = [k for line in lines for k in _names(line)]
        if text_kinds and _judge(joined, text_kinds):
            return "Secret In Context"
    if _made_passwords(text):
        return "Password In Context"
    spelled = collapsed(text) if _SPELLED_OUT.search(text) else None
    if spelled is not None and _made_passwords(spelled):
        return "Password In Context"  # "T r 1 t o n - K e l p - 5 5", read off a note
    return None
