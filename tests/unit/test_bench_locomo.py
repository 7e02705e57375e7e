"""The LoCoMo benchmark's CPU accounting (bench/locomo.py): where the cores go while a
conversation loads. The benchmark itself is run by ``make bench``, not here."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from bench.locomo import CpuMeter, _children, _cpu_per_turn

#: A child that, once told on its stdin, spends 0.4 s of CPU and then waits.
_BURN = (
    "import sys, time\nsys.stdin.readline()\nend = time.process_time() + 0.4\n"
    "while time.process_time() < end: pass\ntime.sleep(30)"
)


#: A stand-in for the stack: a process whose one child is the burner, its stdin passed on.
_STACK = "import subprocess, sys\nsubprocess.run([sys.executable, '-c', sys.argv[1]])"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc")
def test_the_meter_counts_the_stacks_children_as_embedding_and_this_process_as_client() -> None:
    stack = subprocess.Popen(
        [sys.executable, "-c", _STACK, _BURN], stdin=subprocess.PIPE, text=True
    )
    try:
        time.sleep(1.0)  # both have started, and the child waits
        meter = CpuMeter(stack.pid)
        meter.start()
        assert stack.stdin is not None
        stack.stdin.write("go\n")
        stack.stdin.flush()
        time.sleep(1.0)
        end = time.process_time() + 0.2
        while time.process_time() < end:
            pass
        per_turn = meter.per_turn_ms(2)
    finally:
        for pid in _children(stack.pid):
            os.kill(pid, signal.SIGKILL)
        stack.kill()
        stack.wait()
    assert per_turn is not None
    # Two turns: half of what each spent (the child 0.4 s, this process 0.2 s and more),
    # to the kernel's clock tick; the stand-in itself only waited.
    assert per_turn["embedding"] == pytest.approx(200, abs=15)
    assert per_turn["api"] <= 15
    assert per_turn["client"] >= 100


def test_a_meter_without_a_server_reports_nothing() -> None:
    meter = CpuMeter(None)
    meter.start()
    assert meter.per_turn_ms(10) is None


def test_the_summary_weights_each_conversation_by_its_turns() -> None:
    rows = [
        {"turns": 100, "cpu_ms_per_turn": {"api": 4.0, "embedding": 12.0, "client": 1.0}},
        {"turns": 300, "cpu_ms_per_turn": {"api": 8.0, "embedding": 16.0, "client": 2.0}},
    ]
    assert _cpu_per_turn(rows) == {"api": 7.0, "embedding": 15.0, "client": 1.75}
    assert _cpu_per_turn([*rows, {"turns": 5, "cpu_ms_per_turn": None}]) is None


def test_the_report_shows_the_batched_load_beside_the_one_write_a_turn_load() -> None:
    from bench.run import _locomo_lines

    def split(rate: float) -> dict[str, object]:
        return {
            "questions": 10,
            "recall_any_at_5": 0.7,
            "recall_any_at_10": 0.8,
            "p50_ms": 17.0,
            "p95_ms": 27.0,
            "turns_per_s": rate,
            "cpu_ms_per_turn": {"api": 3.4, "embedding": 13.1, "client": 0.4},
        }

    lines = _locomo_lines(
        {
            "model": "e5-small-v2",
            "all": split(92.4),
            "batched": {"batch": 25, "all": split(107.3)},
            "goals": {"turns_per_s_at_least": 100, "p95_ms_at_most": 30},
        },
        {},
    )
    text = "\n".join(lines)
    assert "| all | 10 | 0.7 | 0.8 | 17.0 / 27.0 | 92.4 |" in text
    assert "loaded 25 turns a request" in text
    assert "| all | 0.8 | 17.0 / 27.0 | 107.3 | 3.4 / 13.1 / 0.4 |" in text
    assert "≥ 100 turns/s" in text
