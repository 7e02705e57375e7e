"""Secret detection on the corpus parts, and its cost, for this tree or an older revision.

    python scripts/secret_detection_report.py                 # every part, this tree
    python scripts/secret_detection_report.py --rev HEAD      # the detector as committed
    python scripts/secret_detection_report.py --speed         # median microseconds a call

``--rev`` extracts ``layers/memvault`` at that revision into a temporary directory and
measures it on the corpus as it is now (a run's state is rendered the way that revision's
services rendered it), so a change can be compared on the held-out part before and after
without tuning on it. Figures only: ids of misses and false positives, never the text.
The tests (``tests/unit/test_secret_corpus.py``) hold the targets; this script reports.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from io import BytesIO
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
TEXT_BYTES = 2048


def _measure(parts: list[str], speed: bool) -> dict[str, Any]:
    sys.path.insert(0, str(ROOT))
    from tests.support import secret_corpus

    from memvault.policy import secrets

    structured = getattr(secrets, "structured_fields", None) or secrets.text_fields
    out: dict[str, Any] = {}
    for part in parts:
        if not secret_corpus.exists(part):
            out[part] = "missing"
            continue
        items = secret_corpus.load(part)
        report = secret_corpus.measure(
            items, secrets.find_secrets, render=lambda item: _render(item, structured)
        )
        out[part] = report
    if speed:
        out["speed"] = _speed(secrets.find_secrets)
    return out


def _render(item: dict[str, Any], structured: Any) -> list[tuple[str, str]]:
    from tests.support import secret_corpus

    if item["field"] in ("run.state", "run.budget", "run.pending_approvals"):
        found: list[tuple[str, str]] = structured(item.get("value"), item["field"][4:])
        return found
    return secret_corpus.rendered(item)


def _texts(kind: str) -> list[str]:
    """Forty texts of 2 KB: ``prose`` of the policy corpus's ordinary memories (what most
    writes are), or ``look-alikes`` of the tuning part's benign items (documentation,
    placeholders, ids: the densest in credential words a benign text gets). A text with a
    credential stops being scanned at its first finding, so benign texts cost the most."""
    from tests.support import secret_corpus

    if kind == "prose":
        data = json.loads((ROOT / "tests" / "data" / "policy_corpus.json").read_text())
        ordinary = ("preference", "project_fact", "meeting_note", "runbook")
        sentences = [i["text"] for i in data["items"] if i["kind"] in ordinary]
    else:
        sentences = [
            item["text"]
            for item in secret_corpus.load("tuning")
            if item["label"] == "benign" and "text" in item
        ]
    texts = []
    for start in range(40):
        parts, size, i = [], 0, start
        while size < TEXT_BYTES:
            sentence = sentences[(i * 7) % len(sentences)]
            parts.append(sentence)
            size += len(sentence.encode()) + 1
            i += 1
        texts.append("\n".join(parts).encode()[:TEXT_BYTES].decode(errors="ignore"))
    return texts


def _speed(find_secrets: Any) -> dict[str, dict[str, float]]:
    """CPU time a call (``time.process_time``: the machine may be shared), per text kind."""
    out = {}
    for kind in ("prose", "look-alikes"):
        texts = _texts(kind)
        for text in texts:
            find_secrets([("content", text)])  # warm: imports, plugin settings, regex caches
        timings = []
        for _ in range(5):
            for text in texts:
                start = time.process_time()
                find_secrets([("content", text)])
                timings.append((time.process_time() - start) * 1e6)
        timings.sort()
        out[kind] = {
            "calls": len(timings),
            "median_us": round(statistics.median(timings), 1),
            "p90_us": round(timings[int(len(timings) * 0.9)], 1),
        }
    return out


def _at_revision(rev: str, argv: list[str]) -> dict[str, Any]:
    # The wire models (errors among them) left layers/ for wire/; older revisions hold
    # layers/memvault only.
    packages = [
        path
        for path in ("layers/memvault", "wire/memvault_wire")
        if subprocess.run(  # noqa: S603 (git, with a revision the caller names)
            ["git", "cat-file", "-e", f"{rev}:{path}"],  # noqa: S607
            cwd=ROOT,
            capture_output=True,
            check=False,
        ).returncode
        == 0
    ]
    archive = subprocess.run(  # noqa: S603 (git, with a revision the caller names)
        ["git", "archive", "--format=tar", rev, *packages],  # noqa: S607
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    with tempfile.TemporaryDirectory() as tmp:
        with tarfile.open(fileobj=BytesIO(archive)) as tar:
            tar.extractall(tmp, filter="data")
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([f"{tmp}/layers", f"{tmp}/wire", str(ROOT)]),
        }
        run = subprocess.run(  # noqa: S603 (this script, with the caller's own arguments)
            [sys.executable, __file__, "--json", *argv],
            cwd=tmp,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
    loaded: dict[str, Any] = json.loads(run.stdout)
    return loaded


def _parts() -> list[str]:
    """The corpus parts, tuning parts first (``tests/support/secret_corpus.py``)."""
    sys.path.insert(0, str(ROOT))
    from tests.support import secret_corpus

    return sorted(secret_corpus.PARTS, key=lambda part: (part.startswith("heldout"), part))


def _summary(name: str, figures: dict[str, Any]) -> list[str]:
    lines = [f"== {name}"]
    for part in _parts():
        report = figures.get(part)
        if report is None:
            continue
        if report == "missing":
            lines.append(f"{part}: not there yet")
            continue
        secret, benign = report["secret"], report["benign"]
        langs = ", ".join(
            f"{lang} {row['rate']:.3f} ({row['hits']}/{row['items']})"
            for lang, row in secret["by_lang"].items()
        )
        structured = secret["structured"]
        lines.append(
            f"{part}: recall {secret['recall']:.3f} ({secret['detected']}/{secret['items']}; "
            f"{langs}; run state {structured['recall']:.3f} of {structured['items']}), "
            f"false positives {benign['rate']:.3f} ({benign['false_positives']}/"
            f"{benign['items']}; "
            + ", ".join(
                f"{lang} {row['rate']:.3f} ({row['hits']}/{row['items']})"
                for lang, row in benign["by_lang"].items()
            )
            + ")"
        )
        lines.append(f"  missed: {secret['missed']}")
        lines.append(f"  flagged: {benign['flagged']}")
    for kind, speed in figures.get("speed", {}).items():
        lines.append(
            f"speed ({kind}, {TEXT_BYTES}-byte texts): median {speed['median_us']} us, p90 "
            f"{speed['p90_us']} us of CPU a call ({speed['calls']} calls)"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--part", choices=[*_parts(), "all"], default="all")
    parser.add_argument("--rev", help="measure the detector of this git revision")
    parser.add_argument("--speed", action="store_true", help="also time calls on 2 KB texts")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON")
    args = parser.parse_args(argv)
    parts = _parts() if args.part == "all" else [args.part]
    if args.rev:
        passed = ["--part", args.part, *(["--speed"] if args.speed else [])]
        figures = _at_revision(args.rev, passed)
        name = f"detector at {args.rev}"
    else:
        figures = _measure(parts, args.speed)
        name = "detector in this tree"
    if args.json:
        print(json.dumps(figures))
    else:
        print("\n".join(_summary(name, figures)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
