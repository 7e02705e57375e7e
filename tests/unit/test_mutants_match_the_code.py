"""The hand-written mutants still apply: each snippet occurs exactly once in its file and
each killing test exists, so that moving code cannot silently retire a mutant (``make
mutants`` runs them; this only checks they can run)."""

from __future__ import annotations

import ast
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "_mutants_runner", ROOT / "scripts" / "mutants.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_mutant_applies_and_names_tests_that_exist() -> None:
    runner = _runner()
    mutants = runner.load_mutants()
    runner.check_snippets(mutants, ROOT)  # raises, naming each mutant that drifted
    missing = []
    for m in mutants:
        for node in m.kill:
            path, _, name = node.partition("::")
            function = name.split("[")[0]
            source = ROOT / path
            defined = source.is_file() and any(
                isinstance(n, ast.FunctionDef) and n.name == function
                for n in ast.walk(ast.parse(source.read_text(encoding="utf-8")))
            )
            if not defined:
                missing.append(f"{m.id}: {node}")
    assert missing == [], "mutants name tests that do not exist"
    assert len(mutants) >= 45
