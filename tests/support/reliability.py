"""Reliability scenarios: each proof of a guarantee records one row, the run writes them.

A test that proves a guarantee under faults or attacks (races, crashes, replays, a hostile
caller, a fuzzer) calls :func:`record` with what it did and how many violations its oracle
found, then asserts that number is 0 — so a violation fails the run *and* shows in the
figures. At the end of the session ``tests/conftest.py`` writes every row to
``build/reliability.json``; ``scripts/reliability.py`` renders ``RELIABILITY.md`` from it
(no figure in that file is typed by hand).

Rows carry ids and counts only, never memory content.
"""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys
import threading
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
REPORT_PATH = ROOT / "build" / "reliability.json"
#: Where each pytest-xdist worker leaves its rows for the controller to merge.
PARTS_DIR = ROOT / "build" / "reliability-parts"

#: The guarantee families RELIABILITY.md groups rows by.
CATEGORIES = (
    "isolation",  # cross-tenant, cross-subject, cross-ceiling, cross-role reads or writes
    "deletion",  # resurrections after delete, forget, expiry, restore
    "durability",  # lost acknowledged writes, crashes, torn state
    "uniqueness",  # duplicate memories, versions that go backwards
    "inputs",  # answers of 500, malformed or hostile input
    "policy",  # secret and personal-data detection
)


@dataclass(frozen=True)
class Scenario:
    name: str
    category: str
    fault: str
    oracle: str
    seeds: int
    operations: int
    violations: int
    store: str = "-"
    test: str = ""
    details: dict[str, Any] = field(default_factory=dict)


_rows: list[Scenario] = []
_lock = threading.Lock()


def record(
    name: str,
    *,
    category: str,
    fault: str,
    oracle: str,
    seeds: int,
    operations: int,
    violations: int,
    store: str = "-",
    details: dict[str, Any] | None = None,
) -> None:
    """Record one scenario's outcome. Call it before asserting ``violations == 0``.

    ``name`` is stable across runs (one row per name and store; a later record of the
    same pair replaces an earlier one). ``seeds`` is how many seeds or independent runs,
    ``operations`` how many operations the oracle judged in all. ``details`` holds counts
    by kind (never content).
    """
    if category not in CATEGORIES:
        raise ValueError(f"category must be one of {CATEGORIES}, not {category!r}")
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0]
    row = Scenario(
        name=name,
        category=category,
        fault=fault,
        oracle=oracle,
        seeds=int(seeds),
        operations=int(operations),
        violations=int(violations),
        store=store,
        test=test,
        details=dict(details or {}),
    )
    with _lock:
        _rows[:] = [r for r in _rows if (r.name, r.store) != (name, store)]
        _rows.append(row)


def rows() -> list[Scenario]:
    with _lock:
        return list(_rows)


def _commit() -> str:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=10,
            check=False,
        )
        return out.stdout.strip() or "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def environment() -> dict[str, Any]:
    return {
        "python": platform.python_version(),
        "platform": f"{platform.system()} {platform.machine()}",
        "cpus": os.cpu_count(),
        "ci": os.environ.get("CI") == "true",
        "commit": _commit(),
    }


def write(exit_status: int, *, selected: int, path: Path = REPORT_PATH) -> Path | None:
    """Write this session's rows. A session that recorded nothing writes nothing, so a
    partial run (one test file) never replaces a full run's report with an empty one."""
    found = rows()
    if not found:
        return None
    path.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "written": datetime.now(UTC).isoformat(timespec="seconds"),
        "environment": environment(),
        "argv": sys.argv[1:],
        "tests_selected": selected,
        "exit_status": exit_status,
        "scenarios": [
            asdict(r) for r in sorted(found, key=lambda r: (r.category, r.name, r.store))
        ],
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(report, indent=2, ensure_ascii=False) + "\n")
    tmp.replace(path)
    return path


def clear_parts(parts: Path = PARTS_DIR) -> None:
    """Before a run: no worker's rows from an earlier run may be merged into this one."""
    for part in parts.glob("*.json"):
        part.unlink(missing_ok=True)


def write_part(worker: str, parts: Path = PARTS_DIR) -> None:
    """An xdist worker's rows, for the controller (``merge_parts``)."""
    parts.mkdir(parents=True, exist_ok=True)
    data = [asdict(r) for r in rows()]
    tmp = parts / f"{worker}.tmp"
    tmp.write_text(json.dumps(data, ensure_ascii=False) + "\n")
    tmp.replace(parts / f"{worker}.json")


def merge_parts(parts: Path = PARTS_DIR) -> int:
    """Add the rows every worker left to this process's (the controller's); how many."""
    merged = 0
    for part in sorted(parts.glob("*.json")):
        for row in json.loads(part.read_text(encoding="utf-8")):
            scenario = Scenario(**row)
            with _lock:
                _rows[:] = [
                    r for r in _rows if (r.name, r.store) != (scenario.name, scenario.store)
                ]
                _rows.append(scenario)
            merged += 1
    return merged
