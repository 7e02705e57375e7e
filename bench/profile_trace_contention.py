"""Recall latency while memory writes run beside it, with the embedded store's recall
traces written inline and deferred (``memvault.storage.sqlite.deferred``).

Not a ``make bench`` section: the measurement behind docs/governance.md's "Local traces
are written off the request path". It loads 10,000 memories (10 subjects, as
``peer_scale`` does) into the embedded store and index with MiniLM, in this process, then
times 300 recalls per round in each of four cases: traces inline or deferred, with nothing
else running or with one thread writing memories (25 at a time, one transaction each) to
another subject. After each recall, untimed, it waits for the trace writer. Two rounds.

    PYTHONPATH=layers:local:. .venv/bin/python bench/profile_trace_contention.py
"""

from __future__ import annotations

import gc
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import peer_compare as pc
from peers import MemvaultSystem, NoPeer

from memvault.observability import logger
from memvault_local.evaluation import percentile
from memvault_wire.memory import MemoryWrite
from memvault_wire.recall import RecallRequest

ROUNDS, RECALLS, BATCH = 2, 300, 25


def main() -> None:
    logger.setLevel("WARNING")
    queries, cached = pc.scale_inputs()
    with tempfile.TemporaryDirectory() as raw:
        system = MemvaultSystem(Path(raw) / "memvault", cached, ("embedded",))
        pc._load_scale({"memvault": system, "mem0": NoPeer()}, cached, 0, 10_000)
        gc.collect()
        gc.freeze()
        recall = system.recalls["embedded"]
        traces = system.services.stores.traces
        deferred = traces._deferred  # type: ignore[attr-defined]  # taken away: inline
        stop = threading.Event()

        def one(i: int) -> float:
            subject = f"s-{i % pc.SUBJECTS:02d}"
            req = RecallRequest(query=queries[i % len(queries)], limit=10)
            started = time.perf_counter()
            recall.recall(system.ctx(pc.TENANT, subject), subject, req)
            took = (time.perf_counter() - started) * 1000
            traces.flush()
            return took

        def writer(tag: str) -> None:
            ctx, n = system.ctx(pc.TENANT, "s-99"), 0
            while not stop.is_set():
                for j in range(BATCH):
                    body = {
                        "request_id": f"{tag}-{n}-{j}",
                        "kind": "episodic",
                        "content": f"note {n} {j} about the garden",
                        "source": {"type": "user_statement"},
                        "consent": True,
                    }
                    system.services.memory.write(ctx, "s-99", MemoryWrite.model_validate(body))
                n += 1

        found: dict[tuple[str, str], list[float]] = {}
        for rnd in range(ROUNDS):
            for mode in ("inline", "deferred"):
                traces._deferred = deferred if mode == "deferred" else None  # type: ignore[attr-defined]
                for load in ("idle", "writes"):
                    for i in range(30):
                        one(i)
                    beside = threading.Thread(target=writer, args=(f"{rnd}{mode}",))
                    if load == "writes":
                        stop.clear()
                        beside.start()
                        time.sleep(0.5)
                    took = [one(i) for i in range(RECALLS)]
                    if load == "writes":
                        stop.set()
                        beside.join()
                    found.setdefault((mode, load), []).extend(took)
                    p50, p95 = percentile(took, 50), percentile(took, 95)
                    print(f"round {rnd} {mode} {load}: p50 {p50:.2f} p95 {p95:.2f} ms")
        for (mode, load), took in found.items():
            p50, p95, p99 = (percentile(took, q) for q in (50, 95, 99))
            print(f"{mode} {load}: p50 {p50:.2f} p95 {p95:.2f} p99 {p99:.2f} ms")
        system.close()


if __name__ == "__main__":
    main()
