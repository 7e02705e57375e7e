"""Run the hand-written mutants of ``tests/mutation/mutants.py`` (``make mutants``).

For each mutant: copy the repository into a scratch folder (the working tree is never
touched), replace the mutant's original snippet by its replacement (refusing a snippet
that is not found exactly once), run the mutant's tests there with pytest, and restore
the file. A mutant is *killed* when every test it names fails, *survived* when none
does, *partial* when only some do (a test that no longer guards its rule), *error* when
pytest could not run the tests (collection error, unknown node id).

Before any mutant, the same tests run on the unmutated copy: they must pass, or the
results would mean nothing. Results go to ``build/mutation.json``; the exit status is 0
only when every mutant was killed (1 if any survived or was only partly killed, 2 when
the mutants or the baseline are broken).

    python scripts/mutants.py                 # every mutant
    python scripts/mutants.py --only ID ...   # some of them
    python scripts/mutants.py --list          # what they are
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
MUTANTS_FILE = ROOT / "tests" / "mutation" / "mutants.py"
DEFAULT_REPORT = ROOT / "build" / "mutation.json"
#: Not copied into the scratch folder: history, environments, caches, outputs.
SKIP = (
    ".git",
    ".venv",
    "node_modules",
    "__pycache__",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".hypothesis",
    "cdk.out",
    "build",
    "dist",
    "*.egg-info",
)
#: A pytest plugin, written into the scratch folder, that records each test's outcome.
PLUGIN = """
import json, os

_OUTCOMES = {}


def pytest_runtest_logreport(report):
    if report.failed:
        _OUTCOMES[report.nodeid] = "failed"
    elif report.when == "call" and report.nodeid not in _OUTCOMES:
        _OUTCOMES[report.nodeid] = report.outcome
    elif report.skipped and report.nodeid not in _OUTCOMES:
        _OUTCOMES[report.nodeid] = "skipped"


def pytest_sessionfinish(session, exitstatus):
    with open(os.environ["MUTANTS_OUTCOMES"], "w", encoding="utf-8") as fh:
        json.dump(_OUTCOMES, fh)
"""


class MutantsBroken(Exception):
    """The mutant list or the baseline is unusable; nothing would be meaningful."""


@dataclass
class Run:
    returncode: int
    outcomes: dict[str, str]
    seconds: float
    output_tail: str
    timed_out: bool = False


@dataclass
class Result:
    id: str
    path: str
    description: str
    status: str
    tests: dict[str, str] = field(default_factory=dict)
    seconds: float = 0.0
    output_tail: str = ""


def load_mutants() -> list[Any]:
    spec = importlib.util.spec_from_file_location("_memvault_mutants", MUTANTS_FILE)
    if spec is None or spec.loader is None:
        raise MutantsBroken(f"cannot load {MUTANTS_FILE}")
    module: ModuleType = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while defining
    spec.loader.exec_module(module)
    mutants = list(module.ALL)
    ids = [m.id for m in mutants]
    duplicates = sorted({i for i in ids if ids.count(i) > 1})
    if duplicates:
        raise MutantsBroken(f"duplicate mutant ids: {', '.join(duplicates)}")
    return mutants


def check_snippets(mutants: list[Any], root: Path) -> None:
    """Every original snippet occurs exactly once in its file, and every mutant names tests."""
    problems = []
    for m in mutants:
        target = root / m.path
        if not target.is_file():
            problems.append(f"{m.id}: no file {m.path}")
            continue
        found = target.read_text(encoding="utf-8").count(m.original)
        if found != 1:
            problems.append(f"{m.id}: original snippet found {found} times in {m.path} (need 1)")
        if m.original == m.replacement:
            problems.append(f"{m.id}: the replacement equals the original")
        if not m.kill:
            problems.append(f"{m.id}: names no test that must kill it")
    if problems:
        raise MutantsBroken("mutants do not match the code:\n  " + "\n  ".join(problems))


def copy_repo(dest: Path) -> Path:
    tree = dest / "repo"
    shutil.copytree(ROOT, tree, ignore=shutil.ignore_patterns(*SKIP), symlinks=True)
    (dest / "plugin").mkdir()
    (dest / "plugin" / "_mutants_outcomes.py").write_text(PLUGIN, encoding="utf-8")
    return tree


def environment(tree: Path, outcomes: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [
            str(tree / "layers"),
            str(tree / "wire"),
            str(tree / "clients" / "python"),
            str(tree / "local"),
            str(tree),
            str(tree.parent / "plugin"),
        ]
    )
    env["MUTANTS_OUTCOMES"] = str(outcomes)
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def check_imports_from(tree: Path) -> None:
    """The copy's code is what runs, not an installed memvault."""
    packages = ("memvault", "memvault_wire", "memvault_client", "memvault_local")
    probe = f"import {', '.join(packages)}; " + "; ".join(f"print({p}.__file__)" for p in packages)
    out = subprocess.run(  # noqa: S603 (this interpreter, fixed arguments)
        [sys.executable, "-c", probe],
        cwd=tree,
        env=environment(tree, tree / "unused.json"),
        capture_output=True,
        text=True,
        check=False,
    )
    files = out.stdout.split()
    if (
        out.returncode != 0
        or len(files) != len(packages)
        or not all(Path(f).is_relative_to(tree) for f in files)
    ):
        raise MutantsBroken(
            f"memvault does not import from the scratch copy {tree}: {out.stdout}{out.stderr}"
        )


def run_tests(tree: Path, nodes: list[str], timeout: float) -> Run:
    outcomes_file = tree.parent / "outcomes.json"
    outcomes_file.unlink(missing_ok=True)
    command = [
        sys.executable,
        "-m",
        "pytest",
        *nodes,
        "-q",
        "-p",
        "no:cacheprovider",
        "-p",
        "_mutants_outcomes",
        "--tb=line",
    ]
    started = time.monotonic()
    try:
        out = subprocess.run(  # noqa: S603 (this interpreter running pytest)
            command,
            cwd=tree,
            env=environment(tree, outcomes_file),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        returncode, output, timed_out = out.returncode, out.stdout + out.stderr, False
    except subprocess.TimeoutExpired as err:
        raw = (err.stdout or b"") + (err.stderr or b"")
        output = raw.decode(errors="replace") if isinstance(raw, bytes) else str(raw)
        returncode, timed_out = -1, True
    seconds = time.monotonic() - started
    outcomes: dict[str, str] = {}
    if outcomes_file.exists():
        outcomes = json.loads(outcomes_file.read_text(encoding="utf-8"))
    # Only pytest's own lines: the services log one JSON line per operation.
    lines = [ln for ln in output.splitlines() if not ln.startswith('{"level"')]
    return Run(returncode, outcomes, seconds, "\n".join(lines[-25:]), timed_out)


def judge(nodes: list[str], run: Run) -> tuple[str, dict[str, str]]:
    per_test = {n: run.outcomes.get(n, "not run") for n in nodes}
    if run.timed_out:
        return "timeout", per_test
    failed = [n for n, o in per_test.items() if o == "failed"]
    if run.returncode not in (0, 1) or any(o == "not run" for o in per_test.values()):
        return "error", per_test
    if len(failed) == len(nodes):
        return "killed", per_test
    return ("partial" if failed else "survived"), per_test


def mutate(tree: Path, m: Any, nodes: list[str], timeout: float) -> Result:
    target = tree / m.path
    pristine = target.read_text(encoding="utf-8")
    try:
        if pristine.count(m.original) != 1:
            raise MutantsBroken(f"{m.id}: original snippet not found exactly once in {m.path}")
        target.write_text(pristine.replace(m.original, m.replacement, 1), encoding="utf-8")
        run = run_tests(tree, nodes, timeout)
    finally:
        target.write_text(pristine, encoding="utf-8")
    status, per_test = judge(nodes, run)
    return Result(
        m.id, m.path, m.description, status, per_test, round(run.seconds, 1), run.output_tail
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="ID", help="run these mutants only")
    parser.add_argument("--list", action="store_true", help="list the mutants and exit")
    parser.add_argument("--report", type=Path, default=DEFAULT_REPORT, help="JSON results")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per pytest run")
    args = parser.parse_args(argv)

    try:
        mutants = load_mutants()
        check_snippets(mutants, ROOT)
    except MutantsBroken as err:
        print(f"mutants: {err}", file=sys.stderr)
        return 2
    if args.list:
        for m in mutants:
            print(f"{m.id:48} {m.path}\n    {m.description}")
        return 0
    if args.only:
        unknown = sorted(set(args.only) - {m.id for m in mutants})
        if unknown:
            print(f"mutants: unknown id(s): {', '.join(unknown)}", file=sys.stderr)
            return 2
        mutants = [m for m in mutants if m.id in args.only]

    results: list[Result] = []
    report: dict[str, Any] = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "mutants_file": str(MUTANTS_FILE.relative_to(ROOT)),
    }
    with tempfile.TemporaryDirectory(prefix="memvault-mutants-") as scratch:
        tree = copy_repo(Path(scratch))
        try:
            check_imports_from(tree)
        except MutantsBroken as err:
            print(f"mutants: {err}", file=sys.stderr)
            return 2
        every_node = list(dict.fromkeys(n for m in mutants for n in m.kill))
        print(f"baseline: {len(every_node)} test(s) on the unmutated copy ...", flush=True)
        baseline = run_tests(tree, every_node, args.timeout)
        bad = {n: baseline.outcomes.get(n, "not run") for n in every_node}
        bad = {n: o for n, o in bad.items() if o != "passed"}
        report["baseline"] = {
            "returncode": baseline.returncode,
            "seconds": round(baseline.seconds, 1),
            "not_passing": bad,
        }
        if baseline.returncode != 0 or bad:
            print(baseline.output_tail, file=sys.stderr)
            print(
                f"mutants: the baseline does not pass: {bad or baseline.returncode}",
                file=sys.stderr,
            )
            _write(args.report, report, results)
            return 2
        for m in mutants:
            print(f"{m.id} ...", end=" ", flush=True)
            try:
                result = mutate(tree, m, list(m.kill), args.timeout)
            except MutantsBroken as err:
                print(f"mutants: {err}", file=sys.stderr)
                return 2
            results.append(result)
            print(f"{result.status} ({result.seconds}s)", flush=True)
            if result.status not in ("killed", "timeout"):
                for node, outcome in result.tests.items():
                    print(f"    {outcome:8} {node}")
    summary = _write(args.report, report, results)
    print(
        ", ".join(f"{n} {k}" for k, n in summary.items() if n)
        + f"; results in {_shown(args.report)}"
    )
    return 0 if summary["survived"] == summary["partial"] == summary["error"] == 0 else 1


def _shown(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def _write(path: Path, report: dict[str, Any], results: list[Result]) -> dict[str, int]:
    summary = {
        status: sum(r.status == status for r in results)
        for status in ("killed", "timeout", "survived", "partial", "error")
    }
    report["summary"] = summary
    report["mutants"] = [r.__dict__ for r in results]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    return summary


if __name__ == "__main__":
    sys.exit(main())
