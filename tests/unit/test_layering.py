"""The layering holds: services, routes and the indexer speak to storage ports only. Nothing
under those packages imports boto3, botocore or an AWS storage adapter. (That no module
imports a layer above its own is the import contract `make lint` checks with
``lint-imports``; see ``[tool.importlinter]`` in pyproject.toml.)"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "layers" / "memvault"
GUARDED = ("services", "api", "indexing")
FORBIDDEN = (
    "boto3",
    "botocore",
    # The DynamoDB adapters with their tables, key layout and client helpers.
    "memvault.storage.dynamodb",
    "memvault.storage.s3",
)


def imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def guarded_files() -> list[Path]:
    return sorted(p for package in GUARDED for p in (PACKAGE / package).rglob("*.py"))


def test_the_guarded_packages_exist_and_hold_code() -> None:
    assert len(guarded_files()) > 20


@pytest.mark.parametrize("path", guarded_files(), ids=lambda p: str(p.relative_to(PACKAGE)))
def test_no_service_route_or_indexer_module_touches_an_aws_adapter(path: Path) -> None:
    bad = sorted(
        name
        for name in imported_modules(path)
        if any(name == f or name.startswith(f"{f}.") for f in FORBIDDEN)
    )
    assert not bad, f"{path.relative_to(PACKAGE)} imports {bad}"
