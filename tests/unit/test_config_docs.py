"""The generated parts of the docs match the code (``scripts/gen_config_docs.py``).

``docs/configuration.md`` has one row per field of ``Settings``; ``docs/api.md`` has every
error code and every route of the served OpenAPI document. Adding a field, an error code
or a route without ``python scripts/gen_config_docs.py --write`` fails here, and so does a
field with neither a ``description=`` nor a ``#:`` comment.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from pydantic import Field

from memvault.config import Settings
from memvault_wire.errors import ALL_ERRORS
from tests.support.scripts import load_script

ROOT = Path(__file__).resolve().parents[2]
CONFIG_PAGE = ROOT / "docs" / "configuration.md"
API_PAGE = ROOT / "docs" / "api.md"


@pytest.fixture(scope="module")
def gen() -> ModuleType:
    return load_script(ROOT / "scripts" / "gen_config_docs.py", "gen_config_docs_script")


def section(text: str, name: str) -> str:
    match = re.search(
        rf"<!-- BEGIN GENERATED: {re.escape(name)} .*?-->\n(.*?)<!-- END GENERATED: "
        rf"{re.escape(name)} -->",
        text,
        re.DOTALL,
    )
    assert match, f"no generated section {name!r}"
    return match.group(1)


def test_the_generated_sections_are_current(gen: ModuleType) -> None:
    behind = [str(p.relative_to(ROOT)) for p in gen.stale()]
    assert not behind, (
        f"{behind}: the code changed under the docs; run python scripts/gen_config_docs.py "
        "--write and commit the result"
    )


def test_every_settings_field_has_its_row_on_the_configuration_page() -> None:
    rows = section(CONFIG_PAGE.read_text(encoding="utf-8"), "settings")
    missing = [
        name
        for name in Settings.model_fields
        if f"| `{name}` | `MEMVAULT_{name.upper()}` |" not in rows
    ]
    assert not missing, f"not on docs/configuration.md: {missing}"


def test_every_settings_field_is_documented_where_it_is_declared(gen: ModuleType) -> None:
    assert gen.undocumented(Settings) == [], (
        "give each of these a description= or a #: comment in layers/memvault/config.py"
    )


def test_a_field_added_to_settings_makes_the_configuration_page_stale(gen: ModuleType) -> None:
    class Grown(Settings):
        brand_new_knob: int = Field(default=7, ge=1, description="A knob nobody documented.")

    page = CONFIG_PAGE.read_text(encoding="utf-8")
    fresh = gen.settings_section(Grown)
    assert "| `brand_new_knob` | `MEMVAULT_BRAND_NEW_KNOB` | 7 | integer, ≥ 1 |" in fresh
    assert gen.replace_section(page, "settings", fresh) != page


def test_a_field_without_a_doc_stops_the_generator(gen: ModuleType) -> None:
    class Bare(Settings):
        undocumented_knob: int = 1

    assert gen.undocumented(Bare) == ["undocumented_knob"]
    with pytest.raises(SystemExit, match="undocumented_knob"):
        gen.settings_section(Bare)


def test_a_comment_above_a_field_is_its_doc(gen: ModuleType) -> None:
    docs = gen.field_docs(Settings)
    assert docs["store"] and docs["store"].startswith("Where the source of truth lives")
    assert docs["aws_region"] == Settings.model_fields["aws_region"].description


def test_every_error_code_is_on_the_api_page_with_its_status() -> None:
    rows = section(API_PAGE.read_text(encoding="utf-8"), "errors")
    missing = [e.code for e in ALL_ERRORS if f"| `{e.code}` | {e.status} |" not in rows]
    assert not missing, f"not on docs/api.md: {missing}"


def test_every_served_route_is_on_the_api_page(gen: ModuleType) -> None:
    rows = section(API_PAGE.read_text(encoding="utf-8"), "routes")
    document = gen.openapi_document()
    routes = [f"{m.upper()} {path}" for path, ops in document["paths"].items() for m in ops]
    assert len(routes) > 20
    missing = [r for r in routes if f"| `{r}` |" not in rows]
    assert not missing, f"not on docs/api.md: {missing}"


def test_check_fails_on_a_stale_page_and_write_renews_it(
    gen: ModuleType, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    page = tmp_path / "configuration.md"
    shutil.copy(CONFIG_PAGE, page)
    text = page.read_text(encoding="utf-8")
    page.write_text(
        text.replace("| `tracing` | `MEMVAULT_TRACING` |", "| `tracing` | `MEMVAULT_TRACE` |"),
        encoding="utf-8",
    )
    monkeypatch.setattr(gen, "SECTIONS", {page: gen.SECTIONS[gen.CONFIG_PAGE]})
    assert gen.main(["--check"]) == 1
    assert gen.main(["--write"]) == 0
    assert gen.main(["--check"]) == 0
    assert page.read_text(encoding="utf-8") == text
