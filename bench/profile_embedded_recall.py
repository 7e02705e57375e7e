"""Where memvault's recall time goes on the embedded index, alone on the machine.

Not a ``make bench`` section: a profile to read when a recall target is missed. It loads
``N`` memories (default 100,000; 10 subjects, as ``peer_scale`` does, through the governed
write path) with no OpenSearch or peer in the process, then answers 300 recalls and prints
the whole call's p50/p95, ``RecallResult.timings`` (embed, search, validate), the floor
under each call (``peers.FloorView``: the query embedded and one search on the same index,
timed just before it with the same query and subject) with memvault's p95 over the
floor's, and a cProfile of 100 more, by own time.

    PYTHONPATH=layers:local:. .venv/bin/python bench/profile_embedded_recall.py [N]
"""

from __future__ import annotations

import cProfile
import io
import pstats
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))

import peer_compare as pc
from peers import FloorView, MemvaultSystem, NoPeer

from memvault.observability import logger
from memvault_local.evaluation import percentile
from memvault_wire.recall import RecallRequest


def main(n: int) -> None:
    logger.setLevel("WARNING")
    queries, cached = pc.scale_inputs()
    with tempfile.TemporaryDirectory() as raw:
        system = MemvaultSystem(Path(raw) / "memvault", cached, ("embedded",))
        started = time.time()
        pc._load_scale({"memvault": system, "mem0": NoPeer()}, cached, 0, n)
        print(f"loaded {n:,} in {time.time() - started:.0f} s")
        recall = system.recalls["embedded"]
        floor = FloorView(system, "embedded")
        floors: list[float] = []

        def one(i: int) -> tuple[float, dict[str, float], int]:
            subject = f"s-{i % pc.SUBJECTS:02d}"
            body = {"query": queries[i % len(queries)], "limit": 10}
            t0 = time.perf_counter()
            floor.client_for(pc.TENANT, subject, None, None).call(
                "POST", f"/v1/subjects/{subject}/recall", body=body
            )
            floors.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()
            req = RecallRequest(query=queries[i % len(queries)], limit=10)
            got = recall.recall(system.ctx(pc.TENANT, subject), subject, req)
            return (time.perf_counter() - t0) * 1000, got.timings, len(got.items)

        for i in range(40):
            one(i)
        floors.clear()
        whole, items, parts = [], [], {}  # type: ignore[var-annotated]
        for i in range(300):
            took, timings, count = one(i)
            whole.append(took)
            items.append(count)
            for key, value in timings.items():
                parts.setdefault(key, []).append(value)
        print(
            f"whole call p50 {percentile(whole, 50):.2f} p95 {percentile(whole, 95):.2f} ms; "
            f"items {statistics.fmean(items):.2f}"
        )
        for key, values in parts.items():
            print(f"  {key}: p50 {percentile(values, 50):.2f} p95 {percentile(values, 95):.2f} ms")
        excess = [w - f for w, f in zip(whole, floors, strict=True)]
        print(
            f"floor p50 {percentile(floors, 50):.2f} p95 {percentile(floors, 95):.2f} ms; "
            f"memvault p95 / floor p95 {percentile(whole, 95) / percentile(floors, 95):.3f}; "
            f"excess per call p50 {percentile(excess, 50):.2f} p95 {percentile(excess, 95):.2f} ms"
        )
        profile = cProfile.Profile()
        profile.enable()
        for i in range(100):
            one(i)
        profile.disable()
        out = io.StringIO()
        pstats.Stats(profile, stream=out).sort_stats("tottime").print_stats(14)
        print(out.getvalue())
        system.close()


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 100_000)
