"""Recall latency with tracing on and off, in one run (issue 16's goal: with tracing on,
within 10% of tracing off).

The system is ``peer_scale``'s *memvault, embedded* (``peers.MemvaultSystem``): the
embedded SQLite store, the embedded index and MiniLM, in this process, with the same
synthetic memories (seeded text, seeded random unit vectors; 10 subjects of one tenant)
and the evaluation set's real memories among them so that queries return items (each
returned item is one served link of the trace). Two ``RecallService`` objects share the
store, the index and the embedder and differ only in ``Settings.tracing``: on, a recall
also records its trace and served links (handed to the store's trace writer, which
commits them on its own thread: ``memvault.storage.sqlite.deferred``); off, it records
nothing. After every call, untimed, the benchmark waits for the trace writer, so that one
call's commit never lands in the next call's time. Each query is recalled by both, back
to back, the order alternating from one query to the next, so that a noisy moment of the
shared machine and the second call's warmer caches fall on both alike. Timed around the
whole service call, the query's real MiniLM embedding included, as ``peer_scale`` times
it. No OpenSearch.
"""

from __future__ import annotations

import os
import random
import sqlite3
import statistics
import time
from pathlib import Path
from typing import Any

import numpy as np
import peer_compare as pc
from index_scale import _text, _vocabulary
from peer_compare import _log
from peers import CachedEmbedder, MemvaultSystem, temp_home

from memvault.clock import SystemClock
from memvault.embeddings.minilm import MiniLmEmbedder
from memvault.services.recall import RecallService
from memvault_local.evaluation import EvalSet
from memvault_wire.memory import MemoryWrite
from memvault_wire.recall import RecallRequest

ROOT = Path(__file__).resolve().parents[1]
SHARED_EVAL = ROOT.parent / "shared" / "eval" / "recall_eval.json"
EVAL = SHARED_EVAL if SHARED_EVAL.exists() else ROOT / "tests" / "data" / "recall_eval.json"
MEMORIES = int(os.environ.get("BENCH_TRACING_MEMORIES", "10000"))
QUERIES = int(os.environ.get("BENCH_TRACING_QUERIES", "600"))
WARM = 40
SUBJECTS = 10
TENANT = "bench"
REAL_PER_SUBJECT = 30
GOAL_RATIO = 1.10


def _stats(values: list[float]) -> dict[str, float]:
    return pc._stats(values) | {"mean": round(statistics.fmean(values), 2)}


def _load(system: MemvaultSystem, cached: CachedEmbedder, real: list[str]) -> dict[str, float]:
    rng, vectors = random.Random(17), np.random.default_rng(17)
    bodies: list[tuple[str, str, str]] = [
        (f"s-{n % SUBJECTS:02d}", f"tr-real-{n}", text) for n, text in enumerate(real)
    ]
    for n in range(len(bodies), MEMORIES):
        text = f"{_text(rng, 20)} n{n}"
        v = vectors.normal(size=384)
        cached.put(text, v / np.linalg.norm(v))
        bodies.append((f"s-{n % SUBJECTS:02d}", f"tr-{n}", text))
    memory = system.services.memory
    started = time.monotonic()
    for i, (subject, request_id, text) in enumerate(bodies[:MEMORIES]):
        body = MemoryWrite.model_validate(
            {
                "request_id": request_id,
                "kind": "semantic",
                "content": text,
                "source": {"type": "user_statement", "ref": f"bench:{request_id}"},
                "consent": True,
            }
        )
        memory.write(system.ctx(TENANT, subject), subject, body)
        if i % 5000 == 4999:
            _log(f"{i + 1:,} written")
    written = time.monotonic() - started
    started = time.monotonic()
    system.sync()
    pump = system.pumps["embedded"]
    if pump.dropped:
        raise RuntimeError(f"the indexer dropped {pump.dropped} changes")
    return {"write_s": round(written, 1), "index_s": round(time.monotonic() - started, 1)}


def _timed(
    recall: RecallService, system: MemvaultSystem, subject: str, query: str
) -> tuple[float, int, str | None]:
    started = time.perf_counter()
    result = recall.recall(
        system.ctx(TENANT, subject), subject, RecallRequest(query=query, limit=10)
    )
    took = (time.perf_counter() - started) * 1000
    system.services.stores.traces.flush()
    return took, len(result.items), result.recall_id


def _trace_rows(system: MemvaultSystem) -> dict[str, int]:
    system.services.stores.traces.flush()
    database = system.services.stores.database
    conn = sqlite3.connect(database.path)
    try:
        rows = dict(
            conn.execute(
                "SELECT substr(sk, 1, instr(sk, '#') - 1), count(*) FROM trace_items GROUP BY 1"
            ).fetchall()
        )
    finally:
        conn.close()
    return {str(k): int(v) for k, v in rows.items()}


def run() -> dict[str, Any]:
    for name in ("memvault", "opensearch", "urllib3"):
        import logging

        logging.getLogger(name).setLevel(logging.WARNING)
    evalset = EvalSet.read(EVAL)
    queries = [q["text"] for q in evalset.queries]
    model = MiniLmEmbedder()
    _vocabulary(model)
    cached = CachedEmbedder(model)
    real = [m["content"] for m in evalset.memories][: REAL_PER_SUBJECT * SUBJECTS]
    cached.embed(real)
    out: dict[str, Any] = {
        "memories": MEMORIES,
        "subjects": SUBJECTS,
        "real_memories": len(real),
        "queries": QUERIES,
        "embedder": f"{model.model_id}@{model.model_version} (MiniLM on numpy)",
        "store": "embedded (SQLite, WAL, synchronous=NORMAL)",
        "index": "embedded",
        "goal_ratio_at_most": GOAL_RATIO,
    }
    with temp_home() as raw:
        system = MemvaultSystem(Path(raw), cached, ("embedded",))
        try:
            on = system.services.recall
            assert on.traces is not None and on.settings.tracing, "tracing is not on"
            settings_off = on.settings.model_copy(update={"tracing": False})
            off = RecallService(
                on.repo, on.index, on.embedder, settings_off, SystemClock(), traces=on.traces
            )
            out["load"] = _load(system, cached, real)
            _log(f"{MEMORIES:,} memories loaded: {out['load']}")
            services = {"on": on, "off": off}
            rng = random.Random(1)
            for n in range(WARM):  # every subject's index loaded, caches warm
                subject = f"s-{n % SUBJECTS:02d}"
                for recall in services.values():
                    _timed(recall, system, subject, queries[rng.randrange(len(queries))])
            before = _trace_rows(system)
            took: dict[str, list[float]] = {"on": [], "off": []}
            items: dict[str, list[int]] = {"on": [], "off": []}
            ids: dict[str, list[str | None]] = {"on": [], "off": []}
            rng = random.Random(MEMORIES)
            started = time.monotonic()
            for n in range(QUERIES):
                subject = f"s-{rng.randrange(SUBJECTS):02d}"
                query = queries[n % len(queries)]
                order = ("on", "off") if n % 2 == 0 else ("off", "on")
                for name in order:
                    ms, count, recall_id = _timed(services[name], system, subject, query)
                    took[name].append(ms)
                    items[name].append(count)
                    ids[name].append(recall_id)
            out["timed_s"] = round(time.monotonic() - started, 1)
            after = _trace_rows(system)
        finally:
            system.close()
    if any(i is None for i in ids["on"]) or any(i is not None for i in ids["off"]):
        raise RuntimeError("tracing on answered no recall_id, or tracing off answered one")
    on_ms, off_ms = _stats(took["on"]), _stats(took["off"])
    out["recall_ms"] = {"tracing_on": on_ms, "tracing_off": off_ms}
    out["ratio_on_to_off"] = {
        "p50": round(on_ms["p50"] / off_ms["p50"], 3),
        "p95": round(on_ms["p95"] / off_ms["p95"], 3),
        "mean": round(on_ms["mean"] / off_ms["mean"], 3),
    }
    # Per query, the two calls side by side: the median of their differences.
    diffs = [a - b for a, b in zip(took["on"], took["off"], strict=True)]
    out["paired_difference_ms"] = {
        "median": round(statistics.median(diffs), 2),
        "mean": round(statistics.fmean(diffs), 2),
    }
    out["items_returned_mean"] = {k: round(statistics.fmean(v), 2) for k, v in items.items()}
    out["trace_rows_written"] = {k: after.get(k, 0) - before.get(k, 0) for k in after}
    out["within_goal"] = max(out["ratio_on_to_off"]["p50"], out["ratio_on_to_off"]["p95"]) <= (
        GOAL_RATIO
    )
    _log(
        f"tracing on p50/p95 {on_ms['p50']}/{on_ms['p95']} ms, off {off_ms['p50']}/"
        f"{off_ms['p95']} ms, ratio {out['ratio_on_to_off']}"
    )
    return out


if __name__ == "__main__":
    import json

    print(json.dumps(run(), indent=2))
