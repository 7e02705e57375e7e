"""The write policy's detectors measured on a labelled corpus (tests/data/policy_corpus.json).

The corpus (made by scripts/make_policy_corpus.py) holds fake credentials in their real
formats, fake personal data and benign memories, each with the field it arrives in. An
item is *detected* when ``find_secrets`` (label secret) or ``find_pii`` (label pii)
returns anything for it; a benign item is a *false positive* when either does. The
figures go to build/policy_corpus.json (ids only, never the text); the targets are
asserted one per test, each failure naming the per-kind figures to fix.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from functools import lru_cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from memvault.policy.pii import find_pii
from memvault.policy.secrets import find_secrets
from tests.support import reliability
from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
CORPUS_PATH = ROOT / "tests" / "data" / "policy_corpus.json"
GENERATOR_PATH = ROOT / "scripts" / "make_policy_corpus.py"
REPORT_PATH = ROOT / "build" / "policy_corpus.json"

LABELS = ("secret", "pii", "benign")
LANGS = ("en", "zh", "ja", "es", "mixed")
FIELDS = ("content", "source.ref", "tags", "scope")
#: Benign kinds that are ordinary memories; every other benign kind is a look-alike.
ORDINARY_KINDS = ("preference", "project_fact", "meeting_note", "runbook")
MIN_ITEMS = {"secret": 320, "pii": 220, "benign": 520}
MIN_KINDS = {"secret": 22, "pii": 16}
MIN_LOOKALIKES = 150
REQUIRED_SECRET_KINDS = (
    "aws_access_key_id", "aws_secret_access_key", "github_classic", "github_fine_grained",
    "gitlab_pat", "openai", "anthropic", "google_api_key", "npm_token", "slack", "stripe",
    "jwt", "private_key", "basic_auth_url", "jdbc", "azure_storage", "azure_sas",
    "bearer_header", "password_assignment", "password_prose_en", "password_prose_zh",
    "password_prose_ja", "password_prose_es", "obfuscated", "twilio", "sendgrid", "telegram",
    "discord", "pypi",
)  # fmt: skip
REQUIRED_PII_KINDS = (
    "email", "phone", "credit_card", "us_ssn", "cn_resident_id", "iban", "passport",
    "date_of_birth", "street_address", "ip_address", "health", "bank_account",
    "drivers_license", "uk_nino", "medical_record_number", "full_name_with_birthdate",
    "gps_coordinates",
)  # fmt: skip

SECRET_RECALL_TARGET = 0.99
BENIGN_SECRET_FP_TARGET = 0.02
PII_RECALL_TARGET = 0.95

Item = dict[str, str]
Detector = Callable[[Iterable[tuple[str, str]]], Sequence[Any]]


@lru_cache(maxsize=1)
def corpus() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(CORPUS_PATH.read_text(encoding="utf-8"))
    return loaded


def items(label: str | None = None) -> list[Item]:
    every: list[Item] = corpus()["items"]
    return [item for item in every if label is None or item["label"] == label]


def generator() -> ModuleType:
    return load_script(GENERATOR_PATH, "make_policy_corpus")


# --- the corpus itself -------------------------------------------------------------------


def test_corpus_has_the_documented_shape() -> None:
    data = corpus()
    assert data["version"] == 1 and data["description"]
    assert set(data) == {"version", "description", "items"}
    ids = [item["id"] for item in items()]
    assert len(ids) == len(set(ids)), "ids must be unique"
    for item in items():
        assert set(item) == {"id", "label", "kind", "lang", "field", "text"}, item["id"]
        assert item["label"] in LABELS, item["id"]
        assert item["lang"] in LANGS, item["id"]
        assert item["field"] in FIELDS, item["id"]
        assert item["kind"] and item["text"].strip(), item["id"]
    texts = [(item["field"], item["text"]) for item in items()]
    assert len(texts) == len(set(texts)), "no item may repeat another"


def test_corpus_has_enough_items_and_kinds() -> None:
    counts = Counter(item["label"] for item in items())
    for label, least in MIN_ITEMS.items():
        assert counts[label] >= least, f"{label}: {counts[label]} items, want {least}"
    for label, least in MIN_KINDS.items():
        kinds = {item["kind"] for item in items(label)}
        assert len(kinds) >= least, f"{label}: {len(kinds)} kinds, want {least}"
    secret_kinds = {item["kind"] for item in items("secret")}
    assert not set(REQUIRED_SECRET_KINDS) - secret_kinds
    pii_kinds = {item["kind"] for item in items("pii")}
    assert not set(REQUIRED_PII_KINDS) - pii_kinds
    lookalikes = [item for item in items("benign") if item["kind"] not in ORDINARY_KINDS]
    assert len(lookalikes) >= MIN_LOOKALIKES


def test_corpus_mixes_languages_and_fields() -> None:
    secrets = items("secret")
    elsewhere = sum(item["field"] != "content" for item in secrets)
    assert 0.07 <= elsewhere / len(secrets) <= 0.15, "about 10% of secrets outside content"
    pii = items("pii")
    assert sum(item["lang"] == "zh" for item in pii) / len(pii) >= 0.25
    benign = items("benign")
    en = sum(item["lang"] == "en" for item in benign) / len(benign)
    zh = sum(item["lang"] == "zh" for item in benign) / len(benign)
    assert 0.5 <= en <= 0.7 and 0.3 <= zh <= 0.5, (en, zh)


def test_committed_corpus_is_what_the_generator_writes() -> None:
    made = generator().render()
    assert made == CORPUS_PATH.read_text(encoding="utf-8"), (
        "tests/data/policy_corpus.json is stale: run python scripts/make_policy_corpus.py"
    )


def test_generator_is_deterministic() -> None:
    assert generator().render() == generator().render()


# --- the measurement -----------------------------------------------------------------------


def _finding_types(detector: Detector, item: Item) -> list[str]:
    """The types the detector reports for one item (empty: not detected)."""
    findings = detector([(item["field"], item["text"])])
    return [str(getattr(f, "secret_type", None) or getattr(f, "pii_type", "?")) for f in findings]


def _rate(hits: int, total: int) -> float | None:
    return round(hits / total, 4) if total else None


def _recall_table(found: list[tuple[Item, bool]], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[bool]] = defaultdict(list)
    for item, hit in found:
        groups[item[key]].append(hit)
    return {
        name: {"items": len(hits), "detected": sum(hits), "recall": _rate(sum(hits), len(hits))}
        for name, hits in sorted(groups.items())
    }


def _recall_section(label: str, detector: Detector) -> dict[str, Any]:
    found: list[tuple[Item, bool]] = []
    types_by_kind: dict[str, Counter[str]] = defaultdict(Counter)
    for item in items(label):
        types = _finding_types(detector, item)
        found.append((item, bool(types)))
        types_by_kind[item["kind"]].update(set(types))
    detected = sum(hit for _, hit in found)
    return {
        "items": len(found),
        "detected": detected,
        "recall": _rate(detected, len(found)),
        "by_kind": _recall_table(found, "kind"),
        "by_lang": _recall_table(found, "lang"),
        "by_field": _recall_table(found, "field"),
        "by_lang_kind": {
            lang: _recall_table(
                [(item, hit) for item, hit in found if item["lang"] == lang], "kind"
            )
            for lang in sorted({item["lang"] for item, _ in found})
        },
        # What fired on each kind (items per finding type): a hit of an unrelated type
        # (a phone number inside an IBAN) counts as detected but is luck, not design.
        "finding_types_by_kind": {
            kind: dict(sorted(types.items())) for kind, types in sorted(types_by_kind.items())
        },
        "missed": [item["id"] for item, hit in found if not hit],
    }


def _fp_counts(hits: Sequence[tuple[bool, bool]]) -> dict[str, Any]:
    """False positives among benign items, from their (secret fired, PII fired) pairs."""
    secret_fp = sum(s for s, _ in hits)
    pii_fp = sum(p for _, p in hits)
    any_fp = sum(s or p for s, p in hits)
    return {
        "items": len(hits),
        "secret_fp": secret_fp,
        "secret_fp_rate": _rate(secret_fp, len(hits)),
        "pii_fp": pii_fp,
        "pii_fp_rate": _rate(pii_fp, len(hits)),
        "any_fp": any_fp,
        "any_fp_rate": _rate(any_fp, len(hits)),
    }


def _fp_table(rows: Sequence[tuple[Item, bool, bool]], key: str) -> dict[str, dict[str, Any]]:
    groups: dict[str, list[tuple[bool, bool]]] = defaultdict(list)
    for item, secret_hit, pii_hit in rows:
        groups[item[key]].append((secret_hit, pii_hit))
    return {name: _fp_counts(hits) for name, hits in sorted(groups.items())}


def _benign_section() -> dict[str, Any]:
    rows: list[tuple[Item, bool, bool]] = []
    secret_types: Counter[str] = Counter()
    pii_types: Counter[str] = Counter()
    for item in items("benign"):
        pair = [(item["field"], item["text"])]
        secret_findings = find_secrets(pair)
        pii_findings = find_pii(pair)
        secret_types.update(str(f.secret_type) for f in secret_findings)
        pii_types.update(str(f.pii_type) for f in pii_findings)
        rows.append((item, bool(secret_findings), bool(pii_findings)))
    lookalikes = [(s, p) for item, s, p in rows if item["kind"] not in ORDINARY_KINDS]
    return {
        **_fp_counts([(s, p) for _, s, p in rows]),
        "lookalikes": _fp_counts(lookalikes),
        "by_lang": _fp_table(rows, "lang"),
        "by_kind": _fp_table(rows, "kind"),
        "by_field": _fp_table(rows, "field"),
        "secret_fp_types": dict(sorted(secret_types.items())),
        "pii_fp_types": dict(sorted(pii_types.items())),
        "secret_fp_ids": [item["id"] for item, s, _ in rows if s],
        "pii_fp_ids": [item["id"] for item, _, p in rows if p],
    }


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """Every figure, computed once and written to build/policy_corpus.json."""
    figures: dict[str, Any] = {
        "corpus_version": corpus()["version"],
        "items": len(items()),
        "targets": {
            "secret_recall_min": SECRET_RECALL_TARGET,
            "benign_secret_fp_max": BENIGN_SECRET_FP_TARGET,
            "pii_recall_min": PII_RECALL_TARGET,
        },
        "secret": _recall_section("secret", find_secrets),
        "pii": _recall_section("pii", find_pii),
        "benign": _benign_section(),
    }
    REPORT_PATH.parent.mkdir(parents=True, exist_ok=True)
    REPORT_PATH.write_text(
        json.dumps(figures, ensure_ascii=False, indent=1) + "\n", encoding="utf-8"
    )
    _record_targets(figures)
    return figures


def _record_targets(figures: dict[str, Any]) -> None:
    """One reliability row per target and language. A row's violations are the items
    beyond what the target allows (0 when it is met)."""
    for label, target in (("secret", SECRET_RECALL_TARGET), ("pii", PII_RECALL_TARGET)):
        section = figures[label]
        for lang in ("all", "en", "zh"):
            row = section if lang == "all" else section["by_lang"][lang]
            misses = row["items"] - row["detected"]
            allowed = math.floor(row["items"] * (1 - target) + 1e-9)
            reliability.record(
                f"{label}-detection-{lang}",
                category="policy",
                fault=f"labelled {label} items of the policy corpus ({lang})",
                oracle=f"recall >= {target}",
                seeds=1,
                operations=row["items"],
                violations=max(0, misses - allowed),
                details={"recall": row["recall"], "missed": misses, "target": target},
            )
    for lang in ("all", "en", "zh"):
        benign = figures["benign"]
        row = benign if lang == "all" else benign["by_lang"][lang]
        allowed = math.floor(row["items"] * BENIGN_SECRET_FP_TARGET + 1e-9)
        reliability.record(
            f"benign-secret-false-positives-{lang}",
            category="policy",
            fault=f"benign memories, look-alikes included ({lang})",
            oracle=f"secret false positives <= {BENIGN_SECRET_FP_TARGET:.0%}",
            seeds=1,
            operations=row["items"],
            violations=max(0, row["secret_fp"] - allowed),
            details={"rate": row["secret_fp_rate"], "false_positives": row["secret_fp"]},
        )


def _recall_listing(section: dict[str, Any], lang: str = "all") -> str:
    """Per-kind recall, worst first (over the items in ``lang`` unless "all")."""
    table = section["by_kind"] if lang == "all" else section["by_lang_kind"][lang]
    rows = sorted(table.items(), key=lambda kv: (kv[1]["recall"], kv[0]))
    lines = [
        f"  {kind}: {row['recall']:.2f} ({row['detected']}/{row['items']})" for kind, row in rows
    ]
    scope = "" if lang == "all" else f" among {lang} items"
    return f"per-kind recall{scope} (worst first):\n" + "\n".join(lines)


def _fp_listing(section: dict[str, Any]) -> str:
    rows = sorted(section["by_kind"].items(), key=lambda kv: (-kv[1]["secret_fp_rate"], kv[0]))
    lines = [
        f"  {kind}: {row['secret_fp_rate']:.2f} ({row['secret_fp']}/{row['items']})"
        for kind, row in rows
        if row["secret_fp"]
    ]
    types = ", ".join(f"{t} x{n}" for t, n in section["secret_fp_types"].items()) or "none"
    return (
        "per-kind secret false-positive rate (worst first):\n"
        + ("\n".join(lines) or "  none")
        + f"\nsecret types reported on benign items: {types}"
    )


def test_report_is_written(report: dict[str, Any]) -> None:
    written = json.loads(REPORT_PATH.read_text(encoding="utf-8"))
    assert written == report
    assert {"secret", "pii", "benign"} <= set(written)
    # Ids only: no item's text may reach the report.
    dumped = REPORT_PATH.read_text(encoding="utf-8")
    assert not any(item["text"] in dumped for item in items("secret") if len(item["text"]) > 12)


# --- the targets -----------------------------------------------------------------------------


@pytest.mark.parametrize("lang", ["all", "en", "zh"])
def test_secret_recall_meets_target(report: dict[str, Any], lang: str) -> None:
    section = report["secret"]
    recall = section["recall"] if lang == "all" else section["by_lang"][lang]["recall"]
    assert recall >= SECRET_RECALL_TARGET, (
        f"secret recall ({lang}) is {recall:.3f}, target {SECRET_RECALL_TARGET}; "
        f"{len(section['missed'])} of {section['items']} secrets missed in all\n"
        + _recall_listing(section, lang)
    )


@pytest.mark.parametrize("lang", ["all", "en", "zh"])
def test_benign_secret_false_positives_meet_target(report: dict[str, Any], lang: str) -> None:
    section = report["benign"]
    rate = (
        section["secret_fp_rate"] if lang == "all" else section["by_lang"][lang]["secret_fp_rate"]
    )
    assert rate <= BENIGN_SECRET_FP_TARGET, (
        f"benign items flagged as secrets ({lang}): {rate:.3f}, target at most "
        f"{BENIGN_SECRET_FP_TARGET}\n" + _fp_listing(section)
    )


def test_pii_recall_meets_target(report: dict[str, Any]) -> None:
    section = report["pii"]
    assert section["recall"] >= PII_RECALL_TARGET, (
        f"PII recall is {section['recall']:.3f}, target {PII_RECALL_TARGET}; "
        f"{len(section['missed'])} of {section['items']} items missed\n" + _recall_listing(section)
    )
