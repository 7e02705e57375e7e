"""The secret-detection corpus: two parts, one measurement.

``tests/data/secret_corpus_tuning.json`` (written by ``scripts/make_secret_corpus.py``) is
what the detector was tuned on; ``tests/data/secret_corpus_heldout.json`` was written
independently, by a helper that never saw the detector or the tuning part (its brief is
``tests/data/secret_corpus_heldout.prompt.md``), and is only ever measured.
``tests/data/secret_corpus_seen.json`` is an earlier held-out part whose misses were read
after its one measurement: it is tuning material now, with the tuning target.
``tests/data/secret_corpus_tuning_b.json`` is more tuning material, written from the same
brief by another helper that saw neither the detector nor the other parts. All have the
same format: items labelled ``secret`` or ``benign``, each with the field it is stored in
(``run.state`` and the other structured fields carry a JSON ``value``, the rest a
``text``).

Values in a provider's token format are written as templates, ``{{rand:ALPHABET:N}}``,
filled here from a generator seeded by the item's id, so that the files hold no string a
repository's secret scanner would take for a credential; ``{{enc:KIND:...}}`` wraps what
it holds (base64, hex, percent-encoding, spaced out...) after the templates are filled.

Each item is scanned as the service stores it: a memory's fields through the write
policy's own field list, a run's state and budget through ``structured_fields``, every
other field as the text of that field.
"""

from __future__ import annotations

import base64
import hashlib
import json
import random
import re
import string
import urllib.parse
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from memvault.policy import secrets, write_policy
from memvault_wire.memory import Sensitivity, Source, SourceType

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
PARTS = {
    "tuning": DATA / "secret_corpus_tuning.json",
    "seen": DATA / "secret_corpus_seen.json",
    "tuning_b": DATA / "secret_corpus_tuning_b.json",
    "tuning_c": DATA / "secret_corpus_tuning_c.json",
    "tuning_d": DATA / "secret_corpus_tuning_d.json",
    "tuning_e": DATA / "secret_corpus_tuning_e.json",
    "tuning_f": DATA / "secret_corpus_tuning_f.json",
    "tuning_g": DATA / "secret_corpus_tuning_g.json",
    "seen_b": DATA / "secret_corpus_seen_b.json",
    "seen_c": DATA / "secret_corpus_seen_c.json",
    "seen_d": DATA / "secret_corpus_seen_d.json",
    "heldout": DATA / "secret_corpus_heldout.json",
    "heldout_e": DATA / "secret_corpus_heldout_e.json",
    "heldout_f": DATA / "secret_corpus_heldout_f.json",
    "heldout_g": DATA / "secret_corpus_heldout_g.json",
}
LABELS = ("secret", "benign")
LANGS = ("en", "zh")
TEXT_FIELDS = (
    "memory.content",
    "memory.canonical_key",
    "memory.tag",
    "memory.source_ref",
    "session.message",
    "session.summary",
    "run.step",
    "operation.result_ref",
    "artifact.name",
)
VALUE_FIELDS = ("memory.scope", "run.state", "run.budget", "run.pending_approvals")
FIELDS = TEXT_FIELDS + VALUE_FIELDS

ALPHABETS = {
    "digits": string.digits,
    "hex": "0123456789abcdef",
    "HEX": "0123456789ABCDEF",
    "lower": string.ascii_lowercase,
    "upper": string.ascii_uppercase,
    "alpha": string.ascii_letters,
    "alnum": string.ascii_letters + string.digits,
    "b64": string.ascii_letters + string.digits + "+/",
    "b64url": string.ascii_letters + string.digits + "-_",
    "base58": "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz",
    "base32": string.ascii_uppercase + "234567",
}
_RAND = re.compile(r"\{\{rand:(\w+):(\d+)\}\}")
_ENC = re.compile(r"\{\{enc:(\w+):(.*?)\}\}", re.DOTALL)

Item = dict[str, Any]
Fields = list[tuple[str, str]]
Detector = Callable[[Iterable[tuple[str, str]]], Sequence[Any]]


def _spaced(text: str) -> str:
    return " ".join(text)


def _split_lines(text: str) -> str:
    third = max(1, len(text) // 3)
    return "\n".join(text[i : i + third] for i in range(0, len(text), third))


def _groups(text: str) -> str:
    return " ".join(text[i : i + 4] for i in range(0, len(text), 4))


def _full_width(text: str) -> str:
    return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in text)


ENCODINGS: dict[str, Callable[[str], str]] = {
    "b64": lambda t: base64.b64encode(t.encode()).decode(),
    "b64url": lambda t: base64.urlsafe_b64encode(t.encode()).decode().rstrip("="),
    "hex": lambda t: t.encode().hex(),
    "hexpairs": lambda t: " ".join(f"{b:02x}" for b in t.encode()),
    "url": lambda t: urllib.parse.quote(t, safe=""),
    "spaced": _spaced,
    "lines": _split_lines,
    "groups": _groups,
    "zwsp": lambda t: "\u200b".join(t[i : i + 5] for i in range(0, len(t), 5)),
    "fullwidth": _full_width,
    "json": lambda t: json.dumps(t)[1:-1],
}


#: Parts renamed when their misses were read (held-out parts that became tuning material)
#: keep the seed of their first name, so their filled values stay what was measured.
SEED_NAMES = {"seen_b": "heldout_b", "seen_c": "heldout_c", "seen_d": "heldout_d"}


def _rng(part: str, item_id: str) -> random.Random:
    name = SEED_NAMES.get(part, part)
    seed = int.from_bytes(hashlib.sha256(f"{name}:{item_id}".encode()).digest()[:8], "big")
    return random.Random(seed)


def fill(text: str, rng: random.Random) -> str:
    """The text with its templates filled: random bodies first, then encodings."""
    out = _RAND.sub(lambda m: "".join(rng.choice(ALPHABETS[m[1]]) for _ in range(int(m[2]))), text)
    return _ENC.sub(lambda m: ENCODINGS[m[1]](m[2]), out)


def _filled(value: Any, rng: random.Random) -> Any:
    if isinstance(value, str):
        return fill(value, rng)
    if isinstance(value, dict):
        return {fill(str(k), rng): _filled(v, rng) for k, v in value.items()}
    if isinstance(value, list):
        return [_filled(v, rng) for v in value]
    return value


def load(part: str) -> list[Item]:
    """The items of one part, templates filled (the same values on every run)."""
    data = json.loads(PARTS[part].read_text(encoding="utf-8"))
    items: list[Item] = []
    for raw in data["items"]:
        rng = _rng(part, raw["id"])
        item = dict(raw)
        if "text" in item:
            item["text"] = fill(item["text"], rng)
        if "value" in item:
            item["value"] = _filled(item["value"], rng)
        items.append(item)
    return items


def exists(part: str) -> bool:
    return PARTS[part].exists()


def header(part: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(PARTS[part].read_text(encoding="utf-8"))
    return {k: v for k, v in data.items() if k != "items"}


def _memory(**fields: Any) -> Fields:
    draft = write_policy.Draft(
        content=fields.get("content", ""),
        canonical_key=fields.get("canonical_key"),
        tags=fields.get("tags", []),
        scope=fields.get("scope", {}),
        source=Source(type=SourceType.TOOL_RESULT, ref=fields.get("ref")),
        sensitivity=Sensitivity.INTERNAL,
        consent=True,
    )
    return [(name, text) for name, text in write_policy._text_fields(draft) if text]


def rendered(item: Item) -> Fields:
    """The ``(field, text)`` pairs the service scans when the item is written."""
    field, text, value = item["field"], item.get("text", ""), item.get("value")
    if field == "memory.content":
        return _memory(content=text)
    if field == "memory.canonical_key":
        return _memory(canonical_key=text)
    if field == "memory.tag":
        return _memory(tags=[text])
    if field == "memory.source_ref":
        return _memory(ref=text)
    if field == "memory.scope":
        return _memory(scope={str(k): str(v) for k, v in (value or {}).items()})
    if field in ("run.state", "run.budget", "run.pending_approvals"):
        return secrets.structured_fields(value, field.removeprefix("run."))
    names = {
        "session.message": "content",
        "session.summary": "content",
        "run.step": "step",
        "operation.result_ref": "result_ref",
        "artifact.name": "name",
    }
    return [(names[field], text)]


def _rate(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def _table(rows: list[tuple[Item, bool]], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[bool]] = defaultdict(list)
    for item, hit in rows:
        groups[str(item[key])].append(hit)
    return {
        name: {"items": len(hits), "hits": sum(hits), "rate": _rate(sum(hits), len(hits))}
        for name, hits in sorted(groups.items())
    }


def measure(
    items: list[Item], detector: Detector, render: Callable[[Item], Fields] = rendered
) -> dict[str, Any]:
    """Recall over secret items and false positives over benign ones, overall and by
    language, field and kind; ids of the misses and false positives (never the text)."""
    hits = [(item, bool(detector(render(item)))) for item in items]
    secret = [(item, hit) for item, hit in hits if item["label"] == "secret"]
    benign = [(item, hit) for item, hit in hits if item["label"] == "benign"]
    found = sum(hit for _, hit in secret)
    flagged = sum(hit for _, hit in benign)
    structured = [(i, h) for i, h in secret if i["field"] in VALUE_FIELDS]
    return {
        "secret": {
            "items": len(secret),
            "detected": found,
            "recall": _rate(found, len(secret)),
            "by_lang": _table(secret, "lang"),
            "by_field": _table(secret, "field"),
            "by_kind": _table(secret, "kind"),
            "structured": {
                "items": len(structured),
                "detected": sum(h for _, h in structured),
                "recall": _rate(sum(h for _, h in structured), len(structured)),
            },
            "missed": [item["id"] for item, hit in secret if not hit],
        },
        "benign": {
            "items": len(benign),
            "false_positives": flagged,
            "rate": _rate(flagged, len(benign)),
            "by_lang": _table(benign, "lang"),
            "by_field": _table(benign, "field"),
            "by_kind": _table(benign, "kind"),
            "flagged": [item["id"] for item, hit in benign if hit],
        },
    }
