"""``memvault run``'s own variables (memvault_local.options.StackOptions): read once,
bounded, and a bad value is one line naming the variable and exit 2, never a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from memvault_local.options import StackOptions


def test_the_defaults_and_the_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith("MEMVAULT_"):
            monkeypatch.delenv(name)
    default = StackOptions()
    assert (default.host, default.port, default.sweep_seconds, default.read_idle_seconds) == (
        "127.0.0.1",
        8787,
        15.0,
        20.0,
    )
    assert not default.on_dynamodb and default.embed_worker == "on"
    assert not default.show_credentials and default.log_level == "WARNING"
    monkeypatch.setenv("MEMVAULT_SWEEP_SECONDS", "3600")
    monkeypatch.setenv("MEMVAULT_EMBED_WORKER", "off")
    monkeypatch.setenv("MEMVAULT_SHOW_CREDENTIALS", "1")
    monkeypatch.setenv("MEMVAULT_DYNAMODB_ENDPOINT", "http://127.0.0.1:8000")
    told = StackOptions(port=9000)
    assert told.sweep_seconds == 3600.0 and told.embed_worker == "off"
    assert told.show_credentials and told.on_dynamodb and told.port == 9000
    monkeypatch.delenv("MEMVAULT_DYNAMODB_ENDPOINT")
    monkeypatch.setenv("MEMVAULT_BACKEND", "aws")
    assert StackOptions().on_dynamodb


def _memvault(tmp_path: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    return subprocess.run(
        [sys.executable, "-m", "memvault_local.cli", *args],
        env={**clean, "MEMVAULT_HOME": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("variable", "value", "says"),
    [
        ("MEMVAULT_SWEEP_SECONDS", "soon", "MEMVAULT_SWEEP_SECONDS: "),
        ("MEMVAULT_SWEEP_SECONDS", "0", "MEMVAULT_SWEEP_SECONDS: "),
        ("MEMVAULT_PORT", "eighty", "MEMVAULT_PORT (or --port): "),
        ("MEMVAULT_PORT", "70000", "MEMVAULT_PORT (or --port): "),
        ("MEMVAULT_BACKEND", "gcp", "MEMVAULT_BACKEND: "),
        ("MEMVAULT_EMBED_WORKER", "sometimes", "MEMVAULT_EMBED_WORKER: "),
    ],
)
def test_a_bad_value_is_one_line_and_exit_2(
    tmp_path: Path, variable: str, value: str, says: str
) -> None:
    done = _memvault(tmp_path, "run", **{variable: value})
    assert done.returncode == 2, done.stderr
    assert done.stderr.startswith(f"memvault run: {says}"), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "run.json").exists()  # refused before anything started


def test_a_bad_port_variable_does_not_break_the_other_commands(tmp_path: Path) -> None:
    done = _memvault(tmp_path, "dev-token", "--tenant", "t", MEMVAULT_PORT="eighty")
    assert done.returncode == 0, done.stderr
    assert done.stdout.count(".") == 2  # a JWT
