"""The shape issue 31 left the code in, held: every Lambda entry point is one import from
``memvault.handlers``, and the server and local stack keep their functions short (at
most 3 over 100 lines and 15 over 60, counted from ``def`` to the last line)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FUNCTIONS = sorted(p.parent for p in (ROOT / "functions").glob("*/index.py"))


@pytest.mark.parametrize("folder", FUNCTIONS, ids=lambda p: p.name)
def test_each_function_entry_point_is_one_import_from_the_handlers(folder: Path) -> None:
    tree = ast.parse((folder / "index.py").read_text(encoding="utf-8"))
    body = [
        node
        for node in tree.body
        if not (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))
        and not (
            isinstance(node, ast.Assign)
            and [getattr(t, "id", None) for t in node.targets] == ["__all__"]
        )
    ]
    assert len(body) == 1, ast.dump(tree)
    (statement,) = body
    assert isinstance(statement, ast.ImportFrom)
    assert statement.module == f"memvault.handlers.{folder.name}"
    assert [alias.name for alias in statement.names] == ["handler"]


def _function_lengths() -> list[tuple[int, str]]:
    found = []
    for root in (ROOT / "layers", ROOT / "local"):
        for path in root.rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    assert node.end_lineno is not None
                    length = node.end_lineno - node.lineno + 1
                    found.append((length, f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"))
    return sorted(found, reverse=True)


def test_the_server_and_local_stack_keep_their_functions_short() -> None:
    lengths = _function_lengths()
    assert len(lengths) > 500  # the walk found the code
    over_100 = [f for f in lengths if f[0] > 100]
    over_60 = [f for f in lengths if f[0] > 60]
    assert len(over_100) <= 3, over_100
    assert len(over_60) <= 15, over_60
