"""Cold start: what each Lambda handler costs to import, and how big its assets are.

Each handler module (``functions/<name>/index.py``) is imported in a fresh interpreter
with ``python -X importtime``, five times; the median of the module's cumulative import
time is reported, with the modules that cost the most in that run (self time), so a
missed target comes with its profile. This machine's Python and CPU stand in for
Lambda's (the layer is built for arm64 and Python 3.14): compare handlers with each
other and runs with runs, not with Lambda's own figures.

Each handler is measured twice: as this machine runs it (outside Lambda, where
Powertools switches tracing off and memvault then never loads the X-Ray SDK), and with
the environment a Lambda function with active tracing has (the CDK app's setting), where
the Tracer loads the X-Ray SDK and patches the installed libraries at import.

Sizes: the runtime layer as last built by ``cdk synth`` (``build/layer/<hash>/python``,
its largest packages named) and each function's own code folder.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HANDLERS = ("api", "authorizer", "direct", "indexer", "purge", "sweeper")
RUNS = 5
GOAL_MS = 300


#: As a Lambda function with active tracing sees its environment: Powertools' Tracer then
#: loads the X-Ray SDK and patches what is installed, which it skips outside Lambda.
LAMBDA_ENV = {
    "LAMBDA_TASK_ROOT": "/var/task",  # what Powertools reads to know it is in Lambda
    "AWS_LAMBDA_FUNCTION_NAME": "memvault-cold-start",
    "AWS_REGION": "us-east-1",
}


def _import_profile(module: str, lambda_env: bool = False) -> tuple[float, list[tuple[str, float]]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(["layers", "local", "."])}
    env.pop("POWERTOOLS_TRACE_DISABLED", None)
    if lambda_env:
        env |= LAMBDA_ENV
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        cwd=ROOT,
        env=env,
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
    handlers: dict[str, Any] = {}
    for name in HANDLERS:
        module = f"functions.{name}.index"
        _import_profile(module)  # compile the bytecode once, as a built layer ships it
        runs = [_import_profile(module) for _ in range(RUNS)]
        totals = [t for t, _ in runs]
        median = statistics.median(totals)
        profile = min(runs, key=lambda r: abs(r[0] - median))[1]
        traced = [_import_profile(module, lambda_env=True) for _ in range(RUNS)]
        traced_median = statistics.median(t for t, _ in traced)
        traced_profile = min(traced, key=lambda r: abs(r[0] - traced_median))[1]
        handlers[name] = {
            "import_ms_median": round(median, 1),
            "import_ms_runs": [round(t, 1) for t in totals],
            "top_self_ms": {m: round(ms, 1) for m, ms in profile},
            # In Lambda with active tracing (the CDK app's setting): the X-Ray SDK loads.
            "lambda_traced_import_ms_median": round(traced_median, 1),
            "lambda_traced_top_self_ms": {m: round(ms, 1) for m, ms in traced_profile},
            "code_kb": round(_size_mb(ROOT / "functions" / name) * 1000, 1),
        }
    return {
        "python": sys.version.split()[0],
        "handlers": handlers,
        "layer": _layer(),
        "goals": {"import_ms_at_most": GOAL_MS},
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
