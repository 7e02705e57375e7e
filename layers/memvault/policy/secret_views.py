"""The other ways a credential can be written down, undone before the text is scanned.

A credential is refused however it was wrapped: base64, hex, percent or backslash
escapes, HTML entities, broken across lines, spaced out character by character or in
groups, split into pieces around punctuation, written with look-alike letters, or
stored as structured data whose name and value only together say "this is a password"
(``{"db_password": "..."}``). Each function here returns the texts to scan *besides* the
text itself; most texts have none, and cost a few regex scans.
"""

from __future__ import annotations

import base64
import binascii
import html
import json
import re
import urllib.parse
from collections.abc import Callable, Iterator
from itertools import pairwise
from typing import Any

from memvault.policy.secret_formats import PREFIXES, format_at, prefix_at
from memvault.policy.secret_values import KNOWN_EXAMPLES, looks_random, names_a_fact, wordlike

#: What a text may grow to through its views before it is no longer unwrapped.
MAX_VIEW_CHARS = 200_000


# --- structured values -----------------------------------------------------------------


def structured(value: Any, path: str) -> list[tuple[str, str]]:
    """Every string and number of a JSON-like value with the names it is stored under, as
    ``(field, text)``: ``{"db": {"password": "x"}}`` under ``state`` gives
    ``("state (key)", "db")``, ``("state.db (key)", "password")`` and
    ``("state.db.password", "db.password: x")``, so that a name that calls its value a
    secret and a value that looks like one are judged together, as in a config line.
    Environment-variable lists (``[{"name": "API_TOKEN", "value": "..."}]``) pair their
    name and value the same way; a list of words is also given as one phrase (a seed
    phrase stored word by word)."""
    out: list[tuple[str, str]] = []
    _walk(value, path, (), out, 0)
    return out


_NAME_KEYS = (
    *("name", "key", "id", "label", "field", "variable", "var", "parameterkey", "k", "type"),
    *("kind", "item", "类型", "名称", "名字", "项目", "标签", "字段", "种类"),
    # What the value is, said in words: {"what": "debit card PIN", "value": "7316"}.
    *("what", "title", "description", "desc", "purpose", "事项", "用途", "说明", "描述", "标题"),
    # A browser automation step's target: {"selector": "#password", "value": "..."}.
    *("selector", "locator", "xpath", "选择器", "定位器"),
)
_VALUE_KEYS = (
    *("value", "val", "secret", "parametervalue", "data", "v", "content"),
    *("内容", "值", "数值", "数据"),
)


_PLAIN_KEY = re.compile(r"[\w\- .$@]{1,40}")


def shown_key(key: str, index: int) -> str:
    """A key as the field names show it: findings name their field, never a secret, and a
    key may be one (``{"token=ghp_...": 1}``); such a key is shown by its position."""
    if _PLAIN_KEY.fullmatch(key) and not looks_random(key, min_length=12):
        return key
    return f"<key {index}>"


def _label(names: tuple[str, ...]) -> str:
    return ".".join(names[-2:])


def _number(value: float) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


#: How many numbers a list of bytes holds to be read as one array.
_BYTES_LENGTHS = (32, 96)


def _walk(
    value: Any, path: str, names: tuple[str, ...], out: list[tuple[str, str]], depth: int
) -> None:
    if depth > 40:
        return
    if isinstance(value, str):
        out.append((path, f"{_label(names)}: {value}" if names else value))
    elif isinstance(value, bool) or value is None:
        return
    elif isinstance(value, int | float):
        if names:
            out.append((path, f"{_label(names)}: {_number(value)}"))
    elif isinstance(value, dict):
        _name_value_pair(value, path, out)
        _noted_values(value, path, out)
        note = _example_note(value)
        for index, (key, item) in enumerate(value.items()):
            name = str(key)
            out.append((f"{path} (key)", name))
            where = f"{path}.{shown_key(name, index)}"
            if note is not None and isinstance(item, str) and "EXAMPLE" in item:
                # A scanner's finding its verdict calls documentation's example: read with it.
                out.append((where, f"{_label((*names, name))}: {item} ({note})"))
                continue
            _walk(item, where, (*names, name), out, depth + 1)
    elif isinstance(value, list | tuple):
        if (
            names
            and _BYTES_LENGTHS[0] <= len(value) <= _BYTES_LENGTHS[1]
            and all(
                isinstance(item, int) and not isinstance(item, bool) and 0 <= item <= 255
                for item in value
            )
        ):
            # A key as bytes (a Solana key pair is 64): read as the array it is.
            out.append((path, f"{_label(names)}: {json.dumps(list(value))}"))
            return
        words = [item for item in value if isinstance(item, str)]
        if names and 2 <= len(words) == len(value) <= 32 and all(len(w) <= 64 for w in words):
            out.append((path, f"{_label(names)}: {' '.join(words)}"))
        for i, item in enumerate(value):
            _walk(item, f"{path}[{i}]", names, out, depth + 1)


#: A field that says its record shows documentation's example (a scanner's verdict).
_EXAMPLE_NOTE = re.compile(
    r"(?i)\b(?:documentation|docs?|example|sample|allowlist(?:ed)?|false positive)\b"
    r"|示例|文档|样例"
)


def _example_note(value: dict[Any, Any]) -> str | None:
    """The first string of a record that calls the record documentation's example."""
    for item in value.values():
        if isinstance(item, str) and len(item) <= 200 and _EXAMPLE_NOTE.search(item):
            return item
    return None


#: A sibling field that says what a field holds: ``{"k": "...", "k_note": "AWS secret"}``.
_NOTE_SUFFIX = re.compile(
    r"(?i)^(?P<k>.{1,40}?)[_.\- ]?(?:note|notes|desc|description|comment|hint|label|what"
    r"|purpose|about|说明|备注|描述|用途)$"
)


def _noted_values(value: dict[Any, Any], path: str, out: list[tuple[str, str]]) -> None:
    """A value read with the sibling field that describes it, as ``note: value``, unless
    the value's own key or the note calls it a hash, an id or a public value."""
    keys = {str(k): v for k, v in value.items()}
    for key, note in keys.items():
        m = _NOTE_SUFFIX.match(key)
        if m is None or not isinstance(note, str) or len(note) > 200 or _NOT_SECRET.search(note):
            continue
        described = keys.get(m.group("k"))
        named = m.group("k")
        if isinstance(described, str) and described and named != key and not names_a_fact(named):
            out.append((f"{path}.{named}", f"{note}: {described}"))


#: Words of a note that make the value something other than a secret.
_NOT_SECRET = re.compile(
    r"(?i)(?<![a-z])(?:hash|hashed|md5|sha\d*|digest|checksum|fingerprint|id|ids|public"
    r"|address|path|arn|ref|reference|url|name|region|length|count|ttl|expir\w*)(?![a-z])"
    r"|哈希|摘要|指纹|公钥|地址|路径|编号|名称"
)


def _name_value_pair(value: dict[Any, Any], path: str, out: list[tuple[str, str]]) -> None:
    """``{"name": "DB_PASSWORD", "value": "..."}``: the name is in a field of its own."""
    lowered = {str(k).lower(): (str(k), v) for k, v in value.items()}
    found = next((lowered[k] for k in _VALUE_KEYS if k in lowered), None)
    if found is None or isinstance(found[1], bool) or not isinstance(found[1], str | int | float):
        return
    text = found[1] if isinstance(found[1], str) else _number(found[1])
    # Each field that may name the value ({"name": "Zhang", "类型": "取款密码", "内容": ...}).
    for key in _NAME_KEYS:
        name = lowered.get(key, (None, None))[1]
        if isinstance(name, str) and key != found[0].lower():
            out.append((f"{path}.{found[0]}", f"{name}: {text}"))


def json_lines(text: str) -> str | None:
    """A text that is JSON (an object or a list), as the name: value lines of its values."""
    stripped = text.strip()
    if stripped[:1] not in ("{", "[") or len(stripped) > MAX_VIEW_CHARS:
        return None
    try:
        parsed = json.loads(stripped)
    except ValueError:
        return None
    if not isinstance(parsed, dict | list):
        return None
    return "\n".join(text for _, text in structured(parsed, "$"))


# --- text views ----------------------------------------------------------------------------

_TOKEN_SET = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-+/=")
_HEAD = re.compile(r"[A-Za-z0-9_\-+/=]+")


def _tail(text: str) -> str:
    """The run of token characters a text ends with (scanned from the end)."""
    i = len(text)
    while i > 0 and text[i - 1] in _TOKEN_SET:
        i -= 1
    return text[i:]


_SEPARATOR_END = re.compile(r"(?:[:=]|是|为|為|:)\s*$")


def _tokenish(fragment: str) -> bool:
    """A piece of a token rather than a word: digits, inner capitals, or token symbols."""
    return len(fragment) >= 4 and (
        any(c.isdigit() for c in fragment)
        or any(c.isupper() for c in fragment[1:])
        or any(c in "_+/=" for c in fragment)
    )


#: A line that starts a setting of its own (``password_require_symbol = true``,
#: ``  - secretKey: stripe``, ``STRIPE_SECRET=``): a name of words, then its separator.
#: It continues no token and is no value of the line before (a config file's lines).
_KEY_LINE = re.compile(
    r"(?:-\s+)?[\"']?(?:(?:[a-z][a-z0-9]*(?:[_.\-][a-z0-9]+)*|[A-Z][A-Z0-9]*(?:[_.\-][A-Z0-9]+)*"
    r"|[A-Za-z][a-z0-9]+(?:[A-Z][a-z0-9]+)+)[\"']?\s*(?::(?=\s|$)|=>|=(?=\s*[^\s=]))"
    r"|[A-Za-z][A-Za-z0-9]*(?:[_.\-][A-Za-z0-9]+)+\s*=\s*$)"
)


def _settings(line: str, nxt: str) -> bool:
    """Whether two lines each start a setting of their own (a config file's lines)."""
    return bool(_KEY_LINE.match(nxt)) and bool(_KEY_LINE.match(line.strip()))


def joined_lines(text: str) -> list[str]:
    """Lines joined where a token was broken across them (``ghp_abcd`` / ``efgh...``), or
    where a name ends one line and its value is the next (``password:`` / ``Hunter2!``);
    only the joined lines are returned. Of two lines that each start a setting of their
    own (``name: value`` then ``NAME=``: a config file), neither continues the other."""
    lines = text.split("\n")
    if len(lines) < 2:
        return []
    out: list[str] = []
    current, joined = lines[0].rstrip(), False
    previous = lines[0]
    for line in lines[1:]:
        nxt = line.strip()
        tail, head = _tail(current), _HEAD.match(nxt)
        bare = bool(tail) and " " not in nxt and 0 < len(nxt) <= 12 and len(tail) <= 12
        if tail and head and (_tokenish(tail) or _tokenish(head.group()) or bare):
            glue: str | None = current
        elif nxt and _SEPARATOR_END.search(current):
            glue = current.rstrip() + " "
        else:
            glue = None
        if glue is not None and _settings(previous, nxt):
            glue = None  # each line a setting of its own
        previous = line
        if glue is not None:
            current, joined = glue + nxt, True
        else:
            if joined:
                out.append(current)
            current, joined = line.rstrip(), False
    if joined:
        out.append(current)
    return out


#: Four or more single characters with spaces between them: "H u n t e r 2 0 2 4".
_SPACED = re.compile(r"(?<![A-Za-z0-9_])(?:\S[ \t]{1,3}){3,}\S(?!\S)")
#: Single characters joined by one separator: "H-u-n-t-e-r-2-0-2-4", "A.K.I.A...".
_SEPARATED = re.compile(r"(?<![\w])\w(?P<s>[-.·_|,*/])\w(?:(?P=s)\w){4,}(?![\w])")
#: Groups of two to eight token characters with spaces between: "AKIA IOSF ODNN 7EXA".
#: Each group holds a capital, a digit or a token symbol, so words of prose never start one.
_GROUPED = re.compile(r"(?<![A-Za-z0-9])(?:(?=\S{0,7}[^\sa-z])\S{2,9}[ \t]){2,}\S{1,8}(?!\S)")


_LEAD_PUNCTUATION = "\"'`([{<:;,.!?*#~|"


def _prose_word(group: str) -> bool:
    """A group that is a word of prose: lower-case letters that read as English ("add",
    "it", "live"), which a token's piece written in groups seldom is."""
    core = group.rstrip(_LEAD_PUNCTUATION)
    if not (core.isascii() and core.isalpha() and core.islower()):
        return False
    return core in _SMALL_WORDS or (len(core) >= 3 and wordlike(core) >= 0.5)


#: Words of two letters a sentence is full of.
_SMALL_WORDS = frozenset({"a", "an", "as", "at", "by", "if", "in", "is", "it", "of", "on", "or"})
_SMALL_WORDS |= {"to", "up", "we", "be", "do", "go", "me", "my", "no", "so", "us"}


#: What a first group starts with up to its last separator or Chinese character: a label.
_GLUED_LABEL = re.compile(r".*[:=\u3000-\u303f\u4e00-\u9fff\uff00-\uffef]")


def _grouped(m: re.Match[str]) -> str:
    """Equal groups closed up; a first group of another size (a prefix, or the word
    before the groups) is kept apart, for the prefix is reassembled on its own."""
    groups = m.group().split()
    label = _GLUED_LABEL.match(groups[0])
    if label and label.end() == len(groups[0]) and len(groups) >= 3:
        # A label of its own ("fridge):", "组):"): the groups start after it.
        labelled = _grouped_after(groups[0], groups[1:])
        return labelled if labelled is not None else m.group()
    # A label glued to the first group ("一组):a/El+", "key=AKIA"): kept as its lead.
    head = groups[0][label.end() :] if label else groups[0]
    first = head.lstrip(_LEAD_PUNCTUATION)
    lead = groups[0][: len(groups[0]) - len(first)]
    sizes = {len(g) for g in groups[1:-1]}
    if len(sizes) != 1 or len(groups[-1]) > min(sizes) or len(first) < 2:
        return m.group()
    if len(groups) <= 3 and any(_prose_word(g) for g in groups[1:]):
        # "refresh; 8b21e0d add", "'Stripe live": two pieces, one a word of the sentence.
        return m.group()
    body = "".join(groups[1:])
    joined = lead + first + body if len(first) in sizes else f"{lead}{first} {body}"
    cased = any(c.isupper() for c in joined) and any(c.islower() for c in joined)
    mixed = cased or (any(c.isdigit() for c in joined) and any(c.isalpha() for c in joined))
    return joined if mixed and len(first + body) >= 8 else m.group()


def _grouped_after(label: str, groups: list[str]) -> str | None:
    """Groups after a label, closed up when they are equal (the last may be shorter)."""
    sizes = {len(g) for g in groups[:-1]}
    if len(sizes) != 1 or len(groups[-1]) > min(sizes):
        return None
    if len(groups) <= 3 and any(_prose_word(g) for g in groups):
        return None
    body = "".join(groups)
    cased = any(c.isupper() for c in body) and any(c.islower() for c in body)
    mixed = cased or (any(c.isdigit() for c in body) and any(c.isalpha() for c in body))
    return f"{label} {body}" if mixed and len(body) >= 8 else None


#: An OpenPGP fingerprint as GnuPG prints it: ten groups of four hex digits, two spaces
#: after the fifth. It names a public key; it is not a token written in groups.
_FINGERPRINT = re.compile(
    r"(?<![0-9A-Za-z])(?:[0-9A-Fa-f]{4} ){4}[0-9A-Fa-f]{4} {1,2}(?:[0-9A-Fa-f]{4} ){4}"
    r"[0-9A-Fa-f]{4}(?![0-9A-Za-z])"
)


#: Single characters listed one by one, with an enumeration comma or a comma between
#: them: "W、7、#、k、p、2", "Q, 7, !, x, z, 4".
_LISTED = re.compile(
    r"(?<![^\s:=(\[\u3000-\u303f\u4e00-\u9fff])(?:[^\s、,](?:、|,[ \t]?)){5,}[^\s、,]"
    r"(?![^\s.)\]\u3000-\u303f])"
)


def collapsed(text: str) -> str | None:
    """The text with spaced-out, separated or listed characters, and grouped tokens, closed
    up (an OpenPGP fingerprint's groups are left as they are)."""
    out = _SPACED.sub(lambda m: re.sub(r"[ \t]+", "", m.group()), text)
    out = _LISTED.sub(lambda m: re.sub(r"、|,[ \t]?", "", m.group()), out)
    out = _SEPARATED.sub(lambda m: m.group().replace(m.group("s"), ""), out)
    prints = [f.span() for f in _FINGERPRINT.finditer(out)]
    out = _GROUPED.sub(
        lambda m: (
            m.group() if any(a < m.end() and m.start() < b for a, b in prints) else _grouped(m)
        ),
        out,
    )
    return out if out != text else None


#: A run of base64 with a capital, a digit or a symbol in it: base64 of text has them, a
#: long lower-case word ("configuration") does not.
_B64_RUN = re.compile(
    r"(?<![A-Za-z0-9+/=_\-])(?=[A-Za-z0-9+/_\-]?[a-z_\-]*[A-Z0-9+/])[A-Za-z0-9+/_\-]{16,}={0,2}"
    r"(?![A-Za-z0-9+/=_\-])"
)
_HEX_RUN = re.compile(r"(?<![0-9A-Za-z])(?:0x)?([0-9A-Fa-f]{12,})(?![0-9A-Za-z])")
_HEX_PAIRS = re.compile(
    r"(?<![0-9A-Za-z])(?:[0-9A-Fa-f]{2}[ :,\-]){5,}[0-9A-Fa-f]{2}(?![0-9A-Za-z])"
)


def _printable(raw: bytes) -> str | None:
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if len(text) < 4 or not any(c.isalnum() for c in text):
        return None
    shown = sum(c.isprintable() or c in "\n\r\t" for c in text)
    return text if shown >= 0.95 * len(text) else None


def _decode_b64(run: str) -> str | None:
    if run.isdigit() or re.fullmatch(r"[0-9a-fA-F]+", run):
        return None  # a number or hex: decoded as hex
    padded = run.rstrip("=")
    padded += "=" * (-len(padded) % 4)
    for alt in (b"+/", b"-_"):
        try:
            raw = base64.b64decode(padded, altchars=alt, validate=True)
        except (binascii.Error, ValueError):
            continue
        found = _printable(raw)
        if found is not None:
            return found
    return None


def _hex_text(run: str) -> str | None:
    return _printable(bytes.fromhex(run)) if len(run) % 2 == 0 else None


def _decode_run(m: re.Match[str], text: str) -> str:
    """A base64 run decoded, unless it is a part of a JSON Web Token (the token is judged
    whole: its header decoded next to its signature reads as a made-up value)."""
    run = m.group()
    if run.startswith("eyJ") and "." in text[max(0, m.start() - 1) : m.end() + 1]:
        return run
    return _decode_b64(run) or run


def decoded(text: str) -> str | None:
    """The text with its base64 and hex runs decoded in place, where they decode to text
    (so that "password (base64): SHVudGVy..." reads "password (base64): Hunter..."."""
    out = _B64_RUN.sub(lambda m: _decode_run(m, text), text)
    out = _HEX_RUN.sub(lambda m: _hex_text(m.group(1)) or m.group(), out)
    out = _HEX_PAIRS.sub(
        lambda m: _printable(bytes.fromhex(re.sub(r"[ :,\-]", "", m.group()))) or m.group(), out
    )
    return out if out != text else None


_PERCENT = re.compile(r"%[0-9A-Fa-f]{2}")
_ESCAPE = re.compile(r"\\(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|([\"'\\/]))|\\([nrt])")
_CONTROL = {"n": "\n", "r": "\n", "t": "\t"}


def _unescape(m: re.Match[str]) -> str:
    if m.group(1) or m.group(2):
        return chr(int(m.group(1) or m.group(2), 16))
    if m.group(3):
        return m.group(3)
    return _CONTROL[m.group(4)]


#: Cyrillic and Greek letters that look like Latin ones ("password" with a Cyrillic a).
_CONFUSABLES = str.maketrans(
    "аеорсухіјѕԁԛԝАВЕКМНОРСТХІЈЅαεοριυνκτΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "aeopcyxijsdqwABEKMHOPCTXIJSaeopiuvktABEZHIKMNOPTYX",
)
_LOOK_ALIKE = re.compile(r"[\u0370-\u03ff\u0400-\u04ff]")
_MIXED_WORD = re.compile(r"\w*[\u0370-\u03ff\u0400-\u04ff]\w*")


def _fold_word(m: re.Match[str]) -> str:
    word = m.group()
    return word.translate(_CONFUSABLES) if re.search("[A-Za-z0-9]", word) else word


def _per_line(text: str, rewrite: Callable[[str], str]) -> list[str]:
    """The lines a rewrite changes, rewritten (the rest were scanned already)."""
    out = []
    for line in text.split("\n"):
        rewritten = rewrite(line)
        if rewritten != line:
            out.append(rewritten)
    return out


def _unescape_all(line: str) -> str:
    return _ESCAPE.sub(_unescape, line) if "\\" in line else line


def _collapse_line(line: str) -> str:
    return collapsed(line) or line


def _decode_line(line: str) -> str:
    return decoded(line) or line


_PATH_TEXT = re.compile(r"[\w.\-]+(?:/[\w.\-]+){2,11}")


def path_pairs(text: str) -> list[str]:
    """A key written as a path ("user/phone_unlock_code/280461") as name: value lines,
    each segment naming the next."""
    if len(text) > 300 or not _PATH_TEXT.fullmatch(text.strip()):
        return []
    segments = text.strip().split("/")
    return [f"{a}: {b}" for a, b in pairwise(segments)]


def unwrapped(text: str) -> list[str]:
    """The text with its escapes undone (percent, backslash, HTML entities, JSON), its
    look-alike letters folded, its broken or spaced-out tokens closed up, and what its
    base64 and hex runs decode to: the lines each of these changes, as texts to scan."""
    changed: list[str] = []
    if _PERCENT.search(text):
        changed += _per_line(text, urllib.parse.unquote)
    if "\\" in text and _ESCAPE.search(text):
        changed += _per_line(text, _unescape_all)
    if "&" in text and re.search(r"&(?:#\d+|#x[0-9a-fA-F]+|[a-z]+);", text):
        changed += _per_line(text, html.unescape)
    if not text.isascii() and _LOOK_ALIKE.search(text):
        changed += _per_line(text, lambda line: _MIXED_WORD.sub(_fold_word, line))
    changed += joined_lines(text)
    if (
        _SPACED.search(text)
        or _SEPARATED.search(text)
        or _GROUPED.search(text)
        or (("、" in text or "," in text) and _LISTED.search(text))
    ):
        closed = _per_line(text, _collapse_line)
        changed += closed
        for line in closed:
            changed += joined_lines(line)
    if _B64_RUN.search(text) or _HEX_RUN.search(text) or _HEX_PAIRS.search(text):
        changed += _per_line(text, _decode_line)
    changed += path_pairs(text)
    changed += _words_joined(text)
    changed += [m.group().replace(m.group("j"), " ") for m in _SEED_JOINED.finditer(text)]
    if ('""' in text or "''" in text) and _CONCATENATED.search(text):
        changed += _per_line(text, lambda line: _CONCATENATED.sub("", line))
    out = ["\n".join(changed)] if changed else []
    found = json_lines(text)
    if found:
        out.append(found)
    return out


#: Quoted strings written side by side, which a shell or a compiler joins into one
#: ("Corv""id-Tr""ail#61", 'ab''cd'): the quotes between them, removed.
_CONCATENATED = re.compile(r"(?<=[^\s\"'=:(\[{,])(?:\"\"|'')(?=[^\s\"',;:)\]}])")

_JOINER = re.compile(r"[_\-]")
#: Twelve to twenty-four short lower-case words joined by one joiner, anywhere (a seed
#: phrase in a key path, "amazing-beef-honey-..."): read as words, on a line of their own.
_SEED_JOINED = re.compile(
    r"(?<![A-Za-z])[a-z]{3,8}(?P<j>[-_./+])[a-z]{3,8}(?:(?P=j)[a-z]{3,8}){10,23}(?![A-Za-z])"
)


def _words_joined(text: str) -> list[str]:
    """An id-like text of words joined by ``_`` or ``-`` ("my_password_is_Hunter2024!",
    "my-bank-pin-is-4821", a seed phrase joined by hyphens), read with spaces: a tag, a
    key or a request id holds no spaces, so a sentence is written this way to fit one."""
    if len(text) > 400 or any(c.isspace() for c in text) or len(_JOINER.findall(text)) < 2:
        return []
    if "/" in text:
        return []  # a path or a URL: its hyphens join the words of a name
    views = []
    for joiner in ("_", "-"):
        if text.count(joiner) >= 2:
            views.append(text.replace(joiner, " "))
    # A file's name ("backup_pg_pass-Rz7!mK29q.tar.gz"): its words, both joiners read as
    # spaces and its extension dropped, so the last word is a value of its own.
    stem = _EXTENSION.sub("", text)
    if stem != text and len(_JOINER.findall(stem)) >= 2:
        views.append(_JOINER.sub(" ", stem))
    return views


#: A file name's extension, a compressed one's two (".tar.gz", ".sql.gz").
_EXTENSION = re.compile(r"(?:\.[a-z]{2,4})?\.[a-z0-9]{1,4}$")


# --- tokens in pieces ---------------------------------------------------------------------

_FRAGMENT = re.compile(r"[A-Za-z0-9_\-+/=.~]+")
#: What may stand between the pieces of a split token: spaces, line breaks, quotes,
#: concatenation signs, and short Chinese or Japanese text ("前半段 ..., 后半段 ...").
_GAP = re.compile(
    r"(?:\s|[\"'`+|,·\\;:()\[\]]|[\u3000-\u303f\u3040-\u30ff\u4e00-\u9fff\uff00-\uffef]"
    r"|(?i:part|piece|chunk|segment|line)\s*\d{1,2}(?:\s*/\s*\d{1,2})?(?!\w)){1,16}"
)
#: Token formats only detect-secrets knows, reassembled here from their pieces too.
_EXTRA = {
    "AKIA": re.compile(r"AKIA[0-9A-Z]{16}"),
    "ASIA": re.compile(r"ASIA[0-9A-Z]{16}"),
}


#: Where a token may start, with its first two characters (looked up in ``_HEADS``).
_TOKEN_HEAD = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9][A-Za-z0-9_\-.$:/]")
_HEADS = frozenset({*(p[:2] for p in PREFIXES), *(p[:2] for p in _EXTRA)})


#: Spaces around a prefix's joiner ("xoxb - ...", "sk - proj - ..."): closed up to find it.
_SPACED_JOINER = re.compile(r"[ \t]+(?=[-_.])|(?<=[-_.])[ \t]+")


def _spaced_prefix(text: str, start: int) -> bool:
    """Whether a token's prefix starts at ``start`` with spaces around its joiner."""
    window = text[start : start + 32]
    if " " not in window[:12] and "\t" not in window[:12]:
        return False
    return prefix_at(_SPACED_JOINER.sub("", window), 0) is not None


def split_tokens(text: str) -> Iterator[str]:
    """The secret types of provider tokens written in pieces: a prefix, then fragments
    with spaces, line breaks, quotes or a little text between them. A reassembled body
    must look random, so that a sentence after a prefix ("ghp_ followed by 36 ...") is
    not read as one."""
    tried = 0
    for word in _TOKEN_HEAD.finditer(text):
        if word.group() not in _HEADS:
            continue
        start = word.start()
        if (
            prefix_at(text, start) is None
            and text[start : start + 4] not in _EXTRA
            and not _spaced_prefix(text, start)
        ):
            continue  # no prefix here, nor one spaced out ("xoxb - 7579...")
        tried += 1
        if tried > 16:
            return
        candidate, pos, words = "", start, 0
        for pieces in range(1, 17):
            fragment = _FRAGMENT.match(text, pos)
            if not fragment:
                break
            if pieces == 1 and _whole(fragment.group()):
                break  # a token in one piece: the formats judged it already
            if pieces > 1 and prefix_at(fragment.group(), 0) is not None:
                break  # the next token's prefix: "sk-proj-), Anthropic with sk-ant-"
            if pieces > 1 and _a_word(fragment.group()):
                # "glpat- followed by 8_fgTp73WW and then ...": words between pieces are
                # skipped, a few of them; "sk-ant-api03- followed by a long string" is prose.
                words += 1
                if words > 4:
                    break
            else:
                candidate += fragment.group()
            if pieces >= 2:
                found = _reassembled(candidate)
                if found:
                    yield found
                    break
            gap = _GAP.match(text, fragment.end())
            if not gap:
                break
            pos = gap.end()


def _a_word(fragment: str) -> bool:
    """A word of prose rather than a piece of a token ("with", "Anthropic")."""
    return (
        fragment.isalpha()
        and (fragment.islower() or fragment[1:].islower())
        and wordlike(fragment) >= 0.7
    )


def _whole(fragment: str) -> bool:
    """A fragment that is a token, or an example of one, all by itself."""
    return (
        fragment.strip(".") in KNOWN_EXAMPLES
        or format_at(fragment.rstrip(".")) is not None
        or any(e.fullmatch(fragment) for e in _EXTRA.values())
    )


def _reassembled(candidate: str) -> str | None:
    extra = _EXTRA.get(candidate[:4])
    if extra is not None:
        whole = extra.fullmatch(candidate)
        return "AWS Access Key" if whole and looks_random(candidate[4:], min_length=12) else None
    found = format_at(candidate)
    if found is None:
        return None
    secret_type, body = found
    # The body, or one of its segments (Slack's: two numbers, then the random part).
    random = looks_random(body, min_length=12) or any(
        looks_random(segment, min_length=16) for segment in re.split(r"[-_.]", body)
    )
    return secret_type if random else None
