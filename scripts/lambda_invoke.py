"""Import one Lambda handler as Lambda's Python runtime would, and invoke it once.

Run by the interpreter under test, isolated from any installed package (``python -I -S``),
with the folders Lambda would give it: the function's code (``/var/task``), the layer
(``/opt/python``) and what the runtime provides (boto3, botocore, s3transfer), in that
order on ``sys.path``. Standard library only: it runs under the host's Python for the host
twin (tests/infrastructure/test_layer.py) and under Debian's arm64 python3.14 in qemu for
``make rehearsal-arm64`` (scripts/rehearsal_arm64.py).

Writes one JSON object to ``--out``: the import's and each invocation's milliseconds,
what the handler returned (or the error it raised), a probe's result (``--probe``: code
run afterwards in the same interpreter), and the top-level packages loaded from the
three folders, so a caller can check what a function never loads.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback
from typing import Any


class Context:
    """The parts of Lambda's context object the handlers read."""

    function_name = "memvault-rehearsal"
    function_version = "$LATEST"
    invoked_function_arn = "arn:aws:lambda:us-east-1:123456789012:function:memvault-rehearsal"
    memory_limit_in_mb = 512
    aws_request_id = "00000000-0000-0000-0000-000000000000"
    log_group_name = "/aws/lambda/memvault-rehearsal"
    log_stream_name = "rehearsal"

    @staticmethod
    def get_remaining_time_in_millis() -> int:
        return 30_000


def _summary(value: Any) -> Any:
    text = json.dumps(value, default=str)
    return value if len(text) <= 2000 else text[:2000] + "..."


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--task", required=True, help="the function's code (/var/task)")
    parser.add_argument("--opt", required=True, help="the layer's root (/opt)")
    parser.add_argument("--runtime", required=True, help="boto3 and botocore (the runtime's)")
    parser.add_argument(
        "--event", action="append", default=[], help="an event, as JSON (repeat: in turn)"
    )
    parser.add_argument(
        "--probe", help="Python run after the invocations; its ``result`` is reported"
    )
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    roots = [args.task, os.path.join(args.opt, "python"), args.runtime]
    sys.path[:0] = [os.path.abspath(p) for p in roots]
    os.chdir(args.task)
    report: dict[str, Any] = {"python": sys.version.split()[0], "machine": os.uname().machine}

    started = time.perf_counter()
    import index  # type: ignore[import-not-found]  # the handler, as Lambda imports it

    report["import_ms"] = round((time.perf_counter() - started) * 1000, 1)
    report["invocations"] = []
    for event in args.event:
        started = time.perf_counter()
        outcome: dict[str, Any] = {}
        try:
            outcome["returned"] = _summary(index.handler(json.loads(event), Context()))
        except Exception as err:  # the error shape Lambda would report
            outcome["raised"] = {"type": type(err).__name__, "message": str(err)[:500]}
            outcome["traceback_tail"] = traceback.format_exc().splitlines()[-6:]
        outcome["ms"] = round((time.perf_counter() - started) * 1000, 1)
        report["invocations"].append(outcome)

    if args.probe:
        scope: dict[str, Any] = {}
        started = time.perf_counter()
        try:
            exec(args.probe, scope)  # noqa: S102 - the caller's own check
            report["probe"] = {"returned": _summary(scope.get("result"))}
        except Exception as err:
            report["probe"] = {"raised": {"type": type(err).__name__, "message": str(err)[:500]}}
        report["probe"]["ms"] = round((time.perf_counter() - started) * 1000, 1)

    folders = tuple(os.path.abspath(p) + os.sep for p in roots)
    loaded = set()
    for name, module in list(sys.modules.items()):
        paths = [getattr(module, "__file__", None) or "", *getattr(module, "__path__", [])]
        if any(str(path).startswith(folders) for path in paths):
            loaded.add(name.split(".")[0])
    report["loaded"] = sorted(loaded)
    with open(args.out, "w") as f:
        json.dump(report, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
