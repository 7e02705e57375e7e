"""The secret and PII scanners load their libraries on the first scan (a cold start that
never scans never loads them). Threads that make their first scans at the same moment,
as a threaded server's first requests do, must all get an answer: detect-secrets' plugin
modules import one another, and imported at once from several threads they were seen
half initialised (an ImportError, then a 500 for the request that hit it)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import sys, threading
from memvault.policy import pii, secrets

barrier = threading.Barrier(24)
errors = []

def scan(n):
    barrier.wait()
    try:
        found = secrets.find_secrets([("content", "key AKIAIOSFODNN7EXAMPLE and more")])
        assert found, "the AWS key id was not found"
        assert pii.find_pii([("content", f"call me on +44 20 7946 09{n:02d} tonight")])
    except BaseException as err:
        errors.append(f"{type(err).__name__}: {err}")

threads = [threading.Thread(target=scan, args=(n,)) for n in range(24)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(len(errors), errors[:3])
sys.exit(1 if errors else 0)
"""


def test_two_dozen_threads_making_their_first_scans_at_once_all_get_answers() -> None:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(["layers", "wire", "local", "."])}
    for _ in range(3):  # a fresh interpreter each time: the first scan is what is tested
        run = subprocess.run(
            [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True
        )
        assert run.returncode == 0, run.stdout + run.stderr[-2000:]
