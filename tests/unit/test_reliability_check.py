"""The reliability check (``scripts/reliability.py --check``), which ``make test`` runs after
pytest: a violation fails it, unless its row is marked as an open issue's known gap; a
marked row that meets its target fails too, so the mark cannot outlive the gap."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType
from typing import Any

from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]


def _script() -> ModuleType:
    return load_script(ROOT / "scripts" / "reliability.py", "reliability_script")


def _row(name: str, violations: int, **details: Any) -> dict[str, Any]:
    return {"name": name, "store": "-", "category": "policy", "violations": violations,
            "details": details}  # fmt: skip


def test_a_violation_fails_the_check() -> None:
    found = _script().failures({"scenarios": [_row("a", 2), _row("b", 0)]}, None)
    assert found == ["a (-): 2 violation(s)"]


def test_a_known_gap_is_reported_not_failed() -> None:
    assert _script().failures({"scenarios": [_row("gap", 3, open_issue=29)]}, None) == []


def test_a_known_gap_that_meets_its_target_fails() -> None:
    found = _script().failures({"scenarios": [_row("gap", 0, open_issue=29)]}, None)
    assert len(found) == 1 and "remove the mark" in found[0]
