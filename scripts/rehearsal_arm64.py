"""``make rehearsal-arm64``: every handler, as deployed, on arm64 CPython 3.14, no AWS.

What Lambda would run, run here under emulation: Debian's arm64 python3.14 with an arm64
sysroot of its libraries, under bookworm's qemu-aarch64-static (both unpacked by
scripts/python314.sh, nothing installed), imports each function's ``index`` from the
asset the CDK app deploys (the function's code folder, the shared layer as ``/opt``) with
boto3, botocore and s3transfer beside them as the runtime provides them (the lock's
versions, pure wheels, compiled), then invokes it with the events infra.layer names
(``rehearsal_events``: each needs no AWS, or is refused by it at once) and, for api and
direct, runs the probe that loads what only they ship (libphonenumber, bpe-openai's
native tables). Each must end as ``REHEARSAL_OUTCOMES`` says, import nothing the layer
leaves out, and (but api and direct) never load what only api and direct carry.

Slow: qemu emulates every instruction (about 30 to 60 times slower than native), so the
times are for comparing runs of this rehearsal, not Lambda's. Writes
build/rehearsal-arm64.json; exits non-zero on any problem.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from infra import layer  # noqa: E402 - after the path above


def main() -> int:
    started = time.monotonic()
    opt = layer.build()
    tasks = {name: layer.build_function(name) for name in layer.HANDLERS}
    python = layer.python314("arm64")
    runtime = layer.build_provided(layer.lambda_platform())
    events, probes = layer.rehearsal_events(), layer.rehearsal_probes()
    prepared = time.monotonic() - started
    reports: dict[str, Any] = {}
    failed = False
    print(f"{'function':<11} {'import ms':>10} {'invocations':<50} {'wall s':>7}  problems")
    for name in layer.HANDLERS:
        began = time.monotonic()
        report = layer.invoke(
            [python],
            name,
            opt=opt,
            task=tasks[name],
            runtime=runtime,
            events=events[name],
            probe=probes.get(name),
        )
        report["wall_s"] = round(time.monotonic() - began, 1)
        report["problems"] = layer.rehearsal_problems(name, report)
        failed |= bool(report["problems"])
        reports[name] = report
        shown = ", ".join(f"{layer.outcome(i)} {i['ms']:.0f}ms" for i in report["invocations"])
        print(
            f"{name:<11} {report['import_ms']:>10.0f} {shown:<50} {report['wall_s']:>7}  "
            f"{'; '.join(report['problems']) or 'none'}",
            flush=True,
        )
    total = time.monotonic() - started
    summary = {
        "python": next(iter(reports.values()))["python"],
        "machine": next(iter(reports.values()))["machine"],
        "prepare_s": round(prepared, 1),
        "total_s": round(total, 1),
        "functions": reports,
    }
    out = ROOT / "build" / "rehearsal-arm64.json"
    out.write_text(json.dumps(summary, indent=2))
    print(
        f"arm64 rehearsal: {summary['machine']} CPython {summary['python']} under qemu; "
        f"{total:.0f} s in all ({prepared:.0f} s preparing); {out.relative_to(ROOT)}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
