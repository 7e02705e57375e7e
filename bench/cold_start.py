"""Cold start: what each Lambda handler costs to import, and how big its assets are.

Each handler module (``functions/<name>/index.py``) is imported in a fresh interpreter
with ``python -X importtime``, five times; the median of the module's cumulative import
time is reported, with the modules that cost the most in that run (self time), so a
missed target comes with its profile. This machine's Python and CPU stand in for
Lambda's (the layer is built for arm64 and Python 3.14): compare handlers with each
other and runs with runs, not with Lambda's own figures.

Bytecode. The runtime layer ships no ``.pyc`` (``infra/layer.py`` removes the
``__pycache__`` folders pip wrote: they are for this machine's Python, not the target's),
and Lambda's ``/opt`` is read-only, so every cold start compiles each source file of the
layer and of the function it imports; the runtime's standard library and its boto3,
botocore and s3transfer come compiled. The headline figure (``import_ms_median``)
measures exactly that, whatever this shell's ``PYTHONDONTWRITEBYTECODE`` or the
``__pycache__`` folders lying in the checkout: a ``PYTHONPYCACHEPREFIX`` folder holds
bytecode for the standard library and those three packages only. The second figure
(``import_ms_median_bytecode``) is the same import with every module's bytecode at hand:
what a layer compiled for the runtime's Python would cost.

Each handler is measured as this machine runs it (outside Lambda, where Powertools
switches tracing off and memvault then never loads the X-Ray SDK), and with the
environment a Lambda function with active tracing has (the CDK app's setting), where
the Tracer loads the X-Ray SDK and patches the installed libraries at import.

First request (the API function): import, then the first write (``events/
api_write_memory.json``) and the first recall through the handler, in one fresh
interpreter on the embedded store (SQLite, the embedded index, the hashing embedder),
three times. Work deferred from import lands here, so import and first request are read
together. The composition differs from AWS's (no boto3 clients, no OpenSearch): compare
runs with runs.

Sizes: the runtime layer as last built by ``cdk synth`` (``build/layer/<hash>/python``,
its largest packages named) and each function's own code folder.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HANDLERS = ("api", "authorizer", "direct", "indexer", "purge", "sweeper")
RUNS = 5
FIRST_REQUEST_RUNS = 3
GOAL_MS = 300
#: What Lambda's Python runtime provides, compiled (``infra/layer.py`` leaves them out).
PROVIDED = ("boto3", "botocore", "s3transfer")


#: As a Lambda function with active tracing sees its environment: Powertools' Tracer then
#: loads the X-Ray SDK and patches what is installed, which it skips outside Lambda.
LAMBDA_ENV = {
    "LAMBDA_TASK_ROOT": "/var/task",  # what Powertools reads to know it is in Lambda
    "AWS_LAMBDA_FUNCTION_NAME": "memvault-cold-start",
    "AWS_REGION": "us-east-1",
}


def _env(pycache: Path, lambda_env: bool = False, write: bool = False) -> dict[str, str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(["layers", "local", "."])}
    env.pop("POWERTOOLS_TRACE_DISABLED", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    if not write:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    if lambda_env:
        env |= LAMBDA_ENV
    return env


def _import_profile(
    module: str, pycache: Path, lambda_env: bool = False
) -> tuple[float, list[tuple[str, float]]]:
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        cwd=ROOT,
        env=_env(pycache, lambda_env),
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    total = 0.0
    selves: list[tuple[str, float]] = []
    for line in out.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        self_us, cumulative_us, name = (part.strip() for part in line[12:].split("|"))
        if not self_us.isdigit():
            continue  # the header line
        selves.append((name, int(self_us) / 1000))
        if name == module:
            total = int(cumulative_us) / 1000
    selves.sort(key=lambda x: -x[1])
    return total, selves[:8]


def _warm(pycache: Path) -> None:
    """Write bytecode for everything the handlers and the first request load."""
    for name in HANDLERS:
        for lambda_env in (False, True):
            subprocess.run(
                [sys.executable, "-c", f"import functions.{name}.index"],
                cwd=ROOT,
                env=_env(pycache, lambda_env, write=True),
                capture_output=True,
                check=True,
            )
    _first_request(pycache, write=True)


def _as_shipped(full: Path, shipped: Path) -> None:
    """``full`` less the bytecode of what the layer and the functions ship as source."""
    shutil.copytree(full, shipped)
    for source in (ROOT / "layers", ROOT / "functions", ROOT / "local"):
        shutil.rmtree(_mirror(shipped, source), ignore_errors=True)
    for lib in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        site = _mirror(shipped, Path(lib))
        for entry in site.iterdir() if site.is_dir() else ():
            if entry.name.startswith(PROVIDED):
                continue
            if entry.is_dir():
                shutil.rmtree(entry)
            else:
                entry.unlink()


def _mirror(pycache: Path, source: Path) -> Path:
    """Where ``PYTHONPYCACHEPREFIX`` keeps the bytecode of what lies under ``source``."""
    source = source.absolute()
    return pycache / source.relative_to(source.anchor)


_FIRST_REQUEST = """
import json, time
t0 = time.perf_counter()
import functions.api.index as api
t1 = time.perf_counter()
from memvault.api.events import LocalLambdaContext
write = json.loads(open("events/api_write_memory.json").read())
recall = json.loads(json.dumps(write))
recall["path"] = recall["resource"] = "/v1/subjects/u-42/recall"
recall["body"] = json.dumps({"query": "which language for documents"})
t2 = time.perf_counter()
written = api.handler(write, LocalLambdaContext())
t3 = time.perf_counter()
recalled = api.handler(recall, LocalLambdaContext())
t4 = time.perf_counter()
again = api.handler(recall, LocalLambdaContext())
t5 = time.perf_counter()
assert (written["statusCode"], recalled["statusCode"]) == (201, 200), (written, recalled)
print(json.dumps({"import_ms": (t1 - t0) * 1e3, "first_write_ms": (t3 - t2) * 1e3,
                  "first_recall_ms": (t4 - t3) * 1e3, "second_recall_ms": (t5 - t4) * 1e3}))
"""


def _first_request(pycache: Path, write: bool = False) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as data:
        env = _env(pycache, write=write) | {
            "MEMVAULT_STORE": "sqlite",
            "MEMVAULT_DATA_DIR": data,
            "MEMVAULT_SEARCH_BACKEND": "embedded",
            "MEMVAULT_EMBEDDING_MODEL": "hashing",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "POWERTOOLS_METRICS_DISABLED": "true",
        }
        out = subprocess.run(
            [sys.executable, "-c", _FIRST_REQUEST],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    figures: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return figures


def _first_request_medians(pycache: Path) -> dict[str, float]:
    runs = [_first_request(pycache) for _ in range(FIRST_REQUEST_RUNS)]
    medians = {k: round(statistics.median(r[k] for r in runs), 1) for k in runs[0]}
    medians["import_and_first_write_and_recall_ms"] = round(
        medians["import_ms"] + medians["first_write_ms"] + medians["first_recall_ms"], 1
    )
    return medians


def _size_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def _layer() -> dict[str, Any]:
    built = sorted(
        (p for p in (ROOT / "build" / "layer").glob("*/python") if p.is_dir()),
        key=lambda p: p.stat().st_mtime,
    )
    if not built:
        return {"built": False}
    site = built[-1]
    packages = sorted(
        ((p.name, round(_size_mb(p), 1)) for p in site.iterdir() if p.is_dir()),
        key=lambda x: -x[1],
    )
    return {
        "built": True,
        "hash": site.parent.name,
        "total_mb": round(_size_mb(site), 1),
        "largest_mb": dict(packages[:8]),
    }


def run() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        full, shipped = Path(tmp) / "bytecode", Path(tmp) / "as-shipped"
        _warm(full)
        _as_shipped(full, shipped)
        return _measure(full, shipped)


def _median_profile(
    module: str, pycache: Path, lambda_env: bool = False
) -> tuple[float, list[float], list[tuple[str, float]]]:
    runs = [_import_profile(module, pycache, lambda_env) for _ in range(RUNS)]
    totals = [t for t, _ in runs]
    median = statistics.median(totals)
    profile = min(runs, key=lambda r: abs(r[0] - median))[1]
    return median, totals, profile


def _measure(full: Path, shipped: Path) -> dict[str, Any]:
    handlers: dict[str, Any] = {}
    for name in HANDLERS:
        module = f"functions.{name}.index"
        median, totals, profile = _median_profile(module, shipped)
        compiled, compiled_totals, compiled_profile = _median_profile(module, full)
        traced, _, traced_profile = _median_profile(module, shipped, lambda_env=True)
        handlers[name] = {
            # As the layer ships: its packages and the function compile at import.
            "import_ms_median": round(median, 1),
            "import_ms_runs": [round(t, 1) for t in totals],
            "top_self_ms": {m: round(ms, 1) for m, ms in profile},
            # With bytecode for every module (a layer compiled for the runtime's Python).
            "import_ms_median_bytecode": round(compiled, 1),
            "import_ms_runs_bytecode": [round(t, 1) for t in compiled_totals],
            "top_self_ms_bytecode": {m: round(ms, 1) for m, ms in compiled_profile},
            # In Lambda with active tracing (the CDK app's setting): the X-Ray SDK loads.
            "lambda_traced_import_ms_median": round(traced, 1),
            "lambda_traced_top_self_ms": {m: round(ms, 1) for m, ms in traced_profile},
            "code_kb": round(_size_mb(ROOT / "functions" / name) * 1000, 1),
        }
    return {
        "python": sys.version.split()[0],
        "bytecode": "import_ms_median: as the layer ships, its packages and the function "
        "compiled at import (stdlib, boto3, botocore, s3transfer from bytecode); "
        "import_ms_median_bytecode: every module from bytecode",
        "handlers": handlers,
        "api_first_request": {
            "as_shipped": _first_request_medians(shipped),
            "bytecode": _first_request_medians(full),
        },
        "layer": _layer(),
        "goals": {"import_ms_at_most": GOAL_MS},
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
