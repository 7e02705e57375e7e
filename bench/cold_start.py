"""Cold start: what each Lambda handler costs to import as deployed, and how big its assets are.

What is measured is a twin of what the CDK app deploys (``infra.layer.build_host_twin``):
the shared layer and each function's code folder, built from the same lock with the
same packages left out, for this machine's Python and CPU, and compiled as the Lambda
build compiles them (``--invalidation-mode unchecked-hash``). Each handler module
(``index``, from its function's folder) is imported in a fresh interpreter isolated from
this checkout and its virtual environment (``python -I -S -B``; ``sys.path``: the
function's folder, the layer's ``python/``, then boto3, botocore and s3transfer compiled,
as Lambda's runtime provides them), with ``-X importtime``, five times; the median of the
module's cumulative import time is reported, with the modules that cost the most in that
run (self time), so a missed target comes with its profile. This machine's Python and CPU
stand in for Lambda's (arm64, Python 3.14): compare handlers with each other and runs
with runs, not with Lambda's own figures (``make rehearsal-arm64`` runs the arm64 build).

Bytecode. ``import_ms_median`` is the layer as it ships now: every module from its
bytecode. ``import_ms_median_source_only`` is the same tree without any (and none written),
as the layer shipped before it carried bytecode: Lambda's ``/opt`` is read-only, so every
cold start compiled each module it imported. The standard library and the runtime's
boto3 come compiled in both.

Each handler is measured as this machine runs it (outside Lambda, where Powertools
switches tracing off and memvault then never loads the X-Ray SDK), and with the
environment a Lambda function with active tracing has (``infra.layer.rehearsal_env``),
where the Tracer loads the X-Ray SDK and patches the installed libraries at import.

First request (the API function): import, then the first write (``events/
api_write_memory.json``) and the first recall through the handler, in one fresh
interpreter on the embedded store (SQLite, the embedded index, the hashing embedder),
three times, from the twin (with this environment's numpy after it: the embedded index
needs it, Lambda's DynamoDB and OpenSearch do not). Work deferred from import lands
here, so import and first request are read together.

Sizes: per function, the shared layer, its own code folder and both, unzipped, as built
for Lambda (``infra.layer.sizes``), and the layer's largest packages.
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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra import layer  # noqa: E402 - after the path above

HANDLERS = layer.HANDLERS
RUNS = 5
FIRST_REQUEST_RUNS = 3
GOAL_MS = 300


@dataclass(frozen=True)
class Trees:
    """What Lambda puts on ``sys.path``: the function's code, the layer, the runtime's."""

    tasks: dict[str, Path]
    opt: Path
    runtime: Path

    def path(self, name: str) -> list[str]:
        return [str(self.tasks[name]), str(self.opt / "python"), str(self.runtime)]


def _trees(tmp: Path) -> tuple[Trees, Trees]:
    """The twin as built (bytecode) and a copy of it without bytecode (hard links)."""
    twin = layer.build_host_twin()
    compiled = Trees({n: twin.task(n) for n in HANDLERS}, twin.opt, twin.runtime)

    def source_only(tree: Path, into: Path) -> Path:
        shutil.copytree(
            tree, into, ignore=shutil.ignore_patterns("__pycache__"), copy_function=os.link
        )
        return into

    source = Trees(
        {n: source_only(twin.task(n), tmp / "task" / n) for n in HANDLERS},
        source_only(twin.opt, tmp / "opt"),
        twin.runtime,  # the runtime's own packages come compiled
    )
    return compiled, source


def _env(name: str, lambda_env: bool) -> dict[str, str]:
    if lambda_env:
        return layer.rehearsal_env(name)
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LANG": "C.UTF-8"}


def _import_profile(
    name: str, trees: Trees, lambda_env: bool = False
) -> tuple[float, list[tuple[str, float]]]:
    code = f"import sys; sys.path[:0] = {trees.path(name)!r}; import index"
    out = subprocess.run(
        [sys.executable, "-I", "-S", "-B", "-X", "importtime", "-c", code],
        cwd=trees.tasks[name],
        env=_env(name, lambda_env),
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    total = 0.0
    selves: list[tuple[str, float]] = []
    for line in out.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        self_us, cumulative_us, module = (part.strip() for part in line[12:].split("|"))
        if not self_us.isdigit():
            continue  # the header line
        selves.append((module, int(self_us) / 1000))
        if module == "index":
            total = int(cumulative_us) / 1000
    selves.sort(key=lambda x: -x[1])
    return total, selves[:8]


def _median_profile(
    name: str, trees: Trees, lambda_env: bool = False
) -> tuple[float, list[float], list[tuple[str, float]]]:
    runs = [_import_profile(name, trees, lambda_env) for _ in range(RUNS)]
    totals = [t for t, _ in runs]
    median = statistics.median(totals)
    profile = min(runs, key=lambda r: abs(r[0] - median))[1]
    return median, totals, profile


_FIRST_REQUEST = """
import json, sys, time
sys.path[:0] = PATH
t0 = time.perf_counter()
import index as api
t1 = time.perf_counter()
from memvault.api.events import LocalLambdaContext
write = json.loads(open(EVENT).read())
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


def _first_request(trees: Trees) -> dict[str, float]:
    # numpy (the embedded index) from this environment, after everything the twin holds.
    path = [*trees.path("api"), sysconfig.get_paths()["purelib"]]
    code = _FIRST_REQUEST.replace("PATH", repr(path)).replace(
        "EVENT", repr(str(ROOT / "events" / "api_write_memory.json"))
    )
    with tempfile.TemporaryDirectory() as data:
        env = _env("api", False) | {
            "MEMVAULT_STORE": "sqlite",
            "MEMVAULT_DATA_DIR": data,
            "MEMVAULT_SEARCH_BACKEND": "embedded",
            "MEMVAULT_EMBEDDING_MODEL": "hashing",
            "POWERTOOLS_LOG_LEVEL": "WARNING",
            "POWERTOOLS_METRICS_DISABLED": "true",
        }
        out = subprocess.run(
            [sys.executable, "-I", "-S", "-B", "-c", code],
            cwd=trees.tasks["api"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    figures: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    return figures


def _first_request_medians(trees: Trees) -> dict[str, float]:
    runs = [_first_request(trees) for _ in range(FIRST_REQUEST_RUNS)]
    medians = {k: round(statistics.median(r[k] for r in runs), 1) for k in runs[0]}
    medians["import_and_first_write_and_recall_ms"] = round(
        medians["import_ms"] + medians["first_write_ms"] + medians["first_recall_ms"], 1
    )
    return medians


def _size_mb(path: Path) -> float:
    return layer.tree_bytes(path) / 1e6


def _layer() -> dict[str, Any]:
    site = layer.build() / "python"
    packages = sorted(
        ((p.name, round(_size_mb(p), 1)) for p in site.iterdir() if p.is_dir()),
        key=lambda x: -x[1],
    )
    return {
        "built": True,
        "hash": site.parent.name,
        "total_mb": round(_size_mb(site), 1),
        "largest_mb": dict(packages[:8]),
        "per_function_mb": layer.sizes(),
    }


def run() -> dict[str, Any]:
    (ROOT / "build").mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory(dir=ROOT / "build") as tmp:
        compiled, source = _trees(Path(tmp))
        return _measure(compiled, source)


def _measure(compiled: Trees, source: Trees) -> dict[str, Any]:
    handlers: dict[str, Any] = {}
    for name in HANDLERS:
        median, totals, profile = _median_profile(name, compiled)
        plain, plain_totals, plain_profile = _median_profile(name, source)
        traced, _, traced_profile = _median_profile(name, compiled, lambda_env=True)
        traced_plain, _, _ = _median_profile(name, source, lambda_env=True)
        handlers[name] = {
            # As the layer ships: every module from its bytecode.
            "import_ms_median": round(median, 1),
            "import_ms_runs": [round(t, 1) for t in totals],
            "top_self_ms": {m: round(ms, 1) for m, ms in profile},
            # Without bytecode: as the layer shipped before (each module compiled at import).
            "import_ms_median_source_only": round(plain, 1),
            "import_ms_runs_source_only": [round(t, 1) for t in plain_totals],
            "top_self_ms_source_only": {m: round(ms, 1) for m, ms in plain_profile},
            # In Lambda with active tracing (the CDK app's setting): the X-Ray SDK loads.
            "lambda_traced_import_ms_median": round(traced, 1),
            "lambda_traced_import_ms_median_source_only": round(traced_plain, 1),
            "lambda_traced_top_self_ms": {m: round(ms, 1) for m, ms in traced_profile},
            "code_kb": round(_size_mb(compiled.tasks[name]) * 1000, 1),
        }
    return {
        "python": sys.version.split()[0],
        "bytecode": "import_ms_median: the host twin of the deployed layer and function, "
        "every module from bytecode (as shipped); import_ms_median_source_only: the same "
        "tree without bytecode (as the layer shipped before); the standard library and "
        "boto3, botocore, s3transfer from bytecode in both",
        "handlers": handlers,
        "api_first_request": {
            "as_shipped": _first_request_medians(compiled),
            "source_only": _first_request_medians(source),
        },
        "layer": _layer(),
        "goals": {"import_ms_at_most": GOAL_MS},
    }


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
