"""Secret detection measured on two corpora: the part it was tuned on, and a held-out part
written independently that it was never tuned on (``tests/support/secret_corpus.py``).

Every item is scanned as the service stores it, in the field it names: a memory's
content, tags, scope and source reference; a session message or summary; a run's step,
state, budget and pending approvals (structured values, names and values together); an
operation's result reference; an artifact's name. The targets, per part and language:
recall at least 0.99 on the tuning part and 0.97 on the held-out part, false positives at
most 2% on benign text that looks like a secret. The figures go to
``build/secret_corpus.json`` (ids only, never the text) and to the reliability report.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from functools import cache
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from memvault.policy.secrets import find_secrets
from tests.support import reliability
from tests.support import secret_corpus as corpus
from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
GENERATOR_PATH = ROOT / "scripts" / "make_secret_corpus.py"
REPORT_PATH = ROOT / "build" / "secret_corpus.json"
PROMPT_PATH = ROOT / "tests" / "data" / "secret_corpus_heldout.prompt.md"

RECALL_TARGET = {
    "tuning": 0.99,
    "seen": 0.99,
    "tuning_b": 0.99,
    "tuning_c": 0.99,
    "tuning_d": 0.99,
    "tuning_e": 0.99,
    "tuning_f": 0.99,
    "tuning_g": 0.99,
    "seen_b": 0.99,
    "seen_c": 0.99,
    "seen_d": 0.99,
    "heldout": 0.97,
    "heldout_e": 0.97,
    "heldout_f": 0.97,
    "heldout_g": 0.97,
}
FALSE_POSITIVE_TARGET = 0.02
MIN_ITEMS = {"secret": 300, "benign": 200}
#: The held-out parts, each written apart from the detector (tests/data/
#: secret_corpus_heldout.prompt.md) by a helper that saw neither the detector nor the
#: tuning parts, and measured by figures only, never read.
#:
#: ``heldout``: on the detector tuned on ``tuning`` and ``seen``, recall 0.952 and false
#: positives 3.1%; after a round tuned on ``tuning_b``, 0.962 and 1.9%; after ``tuning_c``,
#: 0.966 and 1.9%; after ``tuning_d``, 0.969 and 2.0%; after ``tuning_e``, 0.976 (en 0.969,
#: zh 0.984) and 2.0% (en 2.2%, zh 1.7%); the same after ``tuning_f``. The detector
#: before these rounds scored 0.894 and 5.0% on it.
#:
#: ``heldout_b``: written for the ``tuning_c`` round and first measured after it: recall
#: 0.950 and 2.0%; after ``tuning_d``, 0.957; after ``tuning_e``, 0.962 (en 0.955, zh 0.970)
#: and 2.0% (en 3.1%, zh 0.7%); after ``tuning_f``, 0.966 (en 0.959, zh 0.975) and 1.6%
#: (en 2.5%, zh 0.7%).
#:
#: ``heldout_c``: written for the ``tuning_d`` round, first measured after it: 0.967 (en
#: 0.969, zh 0.964) and 1.2% (en 2.2%, zh 0%); the same after ``tuning_e`` and ``tuning_f``.
#:
#: ``heldout_d``: written for the ``tuning_e`` round, first measured after it: recall 0.978
#: (en 0.971, zh 0.985), false positives 2.4% (en 3.9%, zh 0.8%); after ``tuning_f``, 0.987
#: (en 0.984, zh 0.990), false positives the same.
#:
#: ``heldout_e``: written for the ``tuning_f`` round, first measured before it: recall 0.981
#: (en 0.981, zh 0.982), false positives 1.3% (en 1.6%, zh 0.9%); after it, 0.984 (en 0.981,
#: zh 0.988) and 0.8% (en 1.6%, zh 0%): every row at target.
#:
#: After the ``tuning_g`` round (written by another helper, tuned on by a third; every
#: held-out part measured once, after it): recall ``heldout`` 0.978 (en 0.974, zh 0.984),
#: ``heldout_b`` 0.975 (en 0.975, zh 0.975), ``heldout_c`` 0.981 (en 0.981, zh 0.982),
#: ``heldout_d`` 0.987 (en 0.984, zh 0.990), ``heldout_e`` 0.992 (en 0.991, zh 0.994): every
#: recall row at target. False positives 1.2% (en 1.5%), 1.6% (en 2.5%), 1.2% (en 2.2%),
#: 2.0% (en 3.1%), 0.4% (en 0.8%): English rows of ``heldout_b``, ``c`` and ``d`` above 2%.
#:
#: Then the English false positives of ``heldout_b``, ``heldout_c`` and ``heldout_d`` were
#: read: those parts became tuning material (``seen_b``, ``seen_c``, ``seen_d``, filled with
#: their first names' seeds), and two fresh parts, ``heldout_f`` and ``heldout_g``, were
#: written by two more helpers for the next round (``seen_b``-``d``, tuned on by three
#: helpers in turn, the third also on a hostile probe's findings). Every held-out part,
#: measured once after it: recall ``heldout`` 0.981 (en 0.974, zh 0.989), ``heldout_e``
#: 0.995 (en 0.995, zh 0.994), ``heldout_f`` 0.990 (en 0.986, zh 0.995), ``heldout_g`` 0.986
#: (en 0.992, zh 0.979); false positives 0.8% (en 0.7%, zh 0.8%), 0.8% (en 0.8%, zh 0.9%),
#: 0.7% (en 0.7%, zh 0.8%), 0.9% (en 1.6%, zh 0%): every row at target. (``heldout_f`` and
#: ``heldout_g`` lost 8 and 9 benign items the same as another part's when they were added;
#: the figures are after that.)
#:
#: (``seen`` is an earlier held-out part, 0.889 and 5.0% when first measured; its misses
#: were read, so it became tuning material.) Items the same as items of another part were
#: dropped. The rows below target are expected to fail (strict: one that passes fails the
#: run, so its mark goes with the improvement), and the reliability check reports them as
#: the open gap of issue 29. The detector must not be tuned on a held-out part: once its
#: misses are read, it joins the tuning parts and a newly written part takes its place.
HELDOUT_OPEN_ISSUE: int | None = None
HELDOUT_BELOW_TARGET: dict[str, set[tuple[str, str]]] = {}


def _below(part: str, what: str, lang: str) -> bool:
    return bool(HELDOUT_OPEN_ISSUE) and (what, lang) in HELDOUT_BELOW_TARGET.get(part, set())


def _cases(what: str, langs: tuple[str, ...]) -> list[Any]:
    """(part, lang) for every part and language; a held-out row below target is marked."""
    mark = pytest.mark.xfail(
        strict=True, reason="held-out part below target (issue 29 stays open); see above"
    )
    return [
        pytest.param(part, lang, marks=mark) if _below(part, what, lang) else (part, lang)
        for part in sorted(corpus.PARTS)
        for lang in langs
    ]


MIN_CHINESE = 0.3
MIN_STRUCTURED = 0.1


def generator() -> ModuleType:
    return load_script(GENERATOR_PATH, "make_secret_corpus")


@cache
def items(part: str) -> list[dict[str, Any]]:
    return corpus.load(part)


def _need(part: str) -> None:
    if not corpus.exists(part):
        pytest.skip(
            f"{corpus.PARTS[part].relative_to(ROOT)} is not there yet: a helper that has not "
            f"seen the detector writes it from {PROMPT_PATH.relative_to(ROOT)}"
        )


# --- the corpora ---------------------------------------------------------------------------


def test_the_tuning_part_is_what_its_generator_writes() -> None:
    assert generator().render() == corpus.PARTS["tuning"].read_text(encoding="utf-8"), (
        "tests/data/secret_corpus_tuning.json is stale: run python scripts/make_secret_corpus.py"
    )


@pytest.mark.parametrize("part", sorted(corpus.PARTS))
def test_each_part_has_the_documented_shape(part: str) -> None:
    _need(part)
    head = corpus.header(part)
    assert head["version"] == 1 and head["part"] == part and head["description"]
    raw = json.loads(corpus.PARTS[part].read_text(encoding="utf-8"))["items"]
    ids = [item["id"] for item in raw]
    assert len(ids) == len(set(ids)), "ids must be unique"
    for item in raw:
        body = "value" if item["field"] in corpus.VALUE_FIELDS else "text"
        assert set(item) == {"id", "label", "kind", "lang", "field", body}, item["id"]
        assert item["label"] in corpus.LABELS and item["lang"] in corpus.LANGS, item["id"]
        assert item["field"] in corpus.FIELDS and item["kind"], item["id"]
    for item in items(part):
        for _, text in corpus.rendered(item):
            assert "{{rand:" not in text and "{{enc:" not in text, item["id"]


@pytest.mark.parametrize("part", sorted(corpus.PARTS))
def test_each_part_covers_both_languages_and_structured_fields(part: str) -> None:
    _need(part)
    every = items(part)
    labels = Counter(item["label"] for item in every)
    for label, least in MIN_ITEMS.items():
        assert labels[label] >= least, f"{part}: {labels[label]} {label} items, want {least}"
    for label in corpus.LABELS:
        mine = [item for item in every if item["label"] == label]
        zh = sum(item["lang"] == "zh" for item in mine) / len(mine)
        assert zh >= MIN_CHINESE, f"{part}: {zh:.0%} of {label} items in Chinese"
    secrets = [item for item in every if item["label"] == "secret"]
    structured = sum(item["field"] in corpus.VALUE_FIELDS for item in secrets) / len(secrets)
    assert structured >= MIN_STRUCTURED, f"{part}: {structured:.0%} of secrets structured"


@pytest.mark.parametrize("held_out", [p for p in sorted(corpus.PARTS) if p.startswith("heldout")])
def test_a_held_out_part_shares_no_item_with_another_part(held_out: str) -> None:
    _need(held_out)
    seen = {
        json.dumps(item.get("text", item.get("value")))
        for part in corpus.PARTS
        if part != held_out and corpus.exists(part)
        for item in items(part)
    }
    shared = [i["id"] for i in items(held_out) if json.dumps(i.get("text", i.get("value"))) in seen]
    assert not shared


# --- the measurement -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    """Every part measured once; written to build/secret_corpus.json."""
    figures: dict[str, Any] = {
        "targets": {"recall_min": RECALL_TARGET, "false_positives_max": FALSE_POSITIVE_TARGET}
    }
    for part in corpus.PARTS:
        if corpus.exists(part):
            figures[part] = corpus.measure(items(part), find_secrets)
            _record(part, figures[part])
    REPORT_PATH.parent.mkdir(parents=True, exist_ok=True)
    REPORT_PATH.write_text(json.dumps(figures, ensure_ascii=False, indent=1) + "\n")
    return figures


def _record(part: str, figures: dict[str, Any]) -> None:
    """One reliability row per target, part and language; a row's violations are the items
    beyond what its target allows. While the held-out part is marked below target, its rows
    carry the open issue, so the reliability check reports them as a known gap (and fails
    once they meet the target with the mark still there)."""
    target = RECALL_TARGET[part]

    def gap(what: str, lang: str) -> dict[str, Any]:
        return {"open_issue": HELDOUT_OPEN_ISSUE} if _below(part, what, lang) else {}

    secret, benign = figures["secret"], figures["benign"]
    for lang in ("all", "en", "zh", "structured"):
        if lang == "all":
            row = {"items": secret["items"], "hits": secret["detected"], "rate": secret["recall"]}
        elif lang == "structured":
            structured = secret["structured"]
            row = {"items": structured["items"], "hits": structured["detected"]}
            row["rate"] = structured["recall"]
        else:
            row = secret["by_lang"][lang]
        misses = row["items"] - row["hits"]
        allowed = math.floor(row["items"] * (1 - target) + 1e-9)
        reliability.record(
            f"secret-corpus-{part}-recall-{lang}",
            category="policy",
            fault=f"labelled secrets of the {part} corpus ({lang}), in every stored field",
            oracle=f"recall >= {target}",
            seeds=1,
            operations=row["items"],
            violations=max(0, misses - allowed),
            details={
                "recall": row["rate"],
                "missed": misses,
                "target": target,
                **gap("recall", lang),
            },
        )
    for lang in ("all", "en", "zh"):
        row = (
            {"items": benign["items"], "hits": benign["false_positives"], "rate": benign["rate"]}
            if lang == "all"
            else benign["by_lang"][lang]
        )
        allowed = math.floor(row["items"] * FALSE_POSITIVE_TARGET + 1e-9)
        reliability.record(
            f"secret-corpus-{part}-false-positives-{lang}",
            category="policy",
            fault=f"benign look-alikes of the {part} corpus ({lang}): docs, placeholders, ids",
            oracle=f"secret false positives <= {FALSE_POSITIVE_TARGET:.0%}",
            seeds=1,
            operations=row["items"],
            violations=max(0, row["hits"] - allowed),
            details={
                "rate": row["rate"],
                "false_positives": row["hits"],
                **gap("false_positives", lang),
            },
        )


def _listing(section: dict[str, Any], key: str) -> str:
    rows = sorted(section["by_kind"].items(), key=lambda kv: (kv[1]["rate"], kv[0]))
    if key == "flagged":
        rows.reverse()
    return "\n".join(f"  {kind}: {r['rate']:.2f} ({r['hits']}/{r['items']})" for kind, r in rows)


def test_the_report_holds_ids_only(report: dict[str, Any]) -> None:
    written = REPORT_PATH.read_text(encoding="utf-8")
    assert json.loads(written) == report
    for part in corpus.PARTS:
        if part in report:
            texts = [i["text"] for i in items(part) if "text" in i and len(i["text"]) > 16]
            assert not any(text in written for text in texts)


@pytest.mark.parametrize(("part", "lang"), _cases("recall", ("all", "en", "zh", "structured")))
def test_secret_recall_meets_its_target(report: dict[str, Any], part: str, lang: str) -> None:
    _need(part)
    section = report[part]["secret"]
    if lang == "all":
        recall = section["recall"]
    elif lang == "structured":
        recall = section["structured"]["recall"]
    else:
        recall = section["by_lang"][lang]["rate"]
    assert recall >= RECALL_TARGET[part], (
        f"{part} secret recall ({lang}) is {recall:.3f}, target {RECALL_TARGET[part]}; missed "
        f"{section['missed']}\nper kind, worst first:\n" + _listing(section, "missed")
    )


@pytest.mark.parametrize(("part", "lang"), _cases("false_positives", ("all", "en", "zh")))
def test_benign_false_positives_meet_the_target(
    report: dict[str, Any], part: str, lang: str
) -> None:
    _need(part)
    section = report[part]["benign"]
    rate = section["rate"] if lang == "all" else section["by_lang"][lang]["rate"]
    assert rate <= FALSE_POSITIVE_TARGET, (
        f"{part} benign items flagged ({lang}): {rate:.3f}, target at most "
        f"{FALSE_POSITIVE_TARGET}; flagged {section['flagged']}\nper kind, worst first:\n"
        + _listing(section, "flagged")
    )
