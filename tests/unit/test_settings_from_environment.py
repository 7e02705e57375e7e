"""Every setting can be given as Lambda gives it: text in an environment variable.

A CDK template can only set strings; ``titan_dimensions`` was a ``Literal`` of ints that
pydantic does not coerce from ``"512"``, so every function that built its settings on AWS
failed at its first invocation while every test passed. Here each field is set, alone, to
the text form of its own default (JSON for the structured ones, as the stack writes
them), and the settings built from it must equal the defaults.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from memvault.config import Settings


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    return json.dumps(value if not isinstance(value, tuple) else list(value))


DEFAULTS = Settings().model_dump()


@pytest.mark.parametrize(
    "name", sorted(n for n, v in DEFAULTS.items() if v is not None), ids=lambda n: n
)
def test_each_setting_reads_back_from_its_text_form(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(f"MEMVAULT_{name.upper()}", _as_text(DEFAULTS[name]))
    assert getattr(Settings(), name) == DEFAULTS[name]


@pytest.mark.parametrize("dimensions", ["256", "512", "1024"])
def test_titan_dimensions_from_text(dimensions: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_TITAN_DIMENSIONS", dimensions)
    assert Settings().titan_dimensions == int(dimensions)


def test_titan_dimensions_outside_the_model_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_TITAN_DIMENSIONS", "300")
    with pytest.raises(ValueError, match="titan_dimensions"):
        Settings()
