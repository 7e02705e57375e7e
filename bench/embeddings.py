"""Local embedder speed: MiniLM (numpy) throughput in batches and one-query latency.

Throughput embeds the 321 memory contents of ``tests/data/recall_eval.json`` in
batches of 32 (best of three passes); latency embeds short queries one at a time,
200 of them after a warm-up, and reports the median and 95th percentile.

Run alone with ``.venv/bin/python bench/embeddings.py``; ``run()`` returns the figures.
"""

from __future__ import annotations

import json
import statistics
import time
from pathlib import Path
from typing import Any

from memvault.embeddings.minilm import MiniLmEmbedder

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "tests" / "data" / "recall_eval.json"
BATCH = 32
PASSES = 3
QUERIES = 200
WARM_UP = 20


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    rank = q * (len(ordered) - 1)
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def run() -> dict[str, Any]:
    data = json.loads(EVAL.read_text(encoding="utf-8"))
    texts: list[str] = [m["content"] for m in data["memories"]]
    queries: list[str] = [q["text"] for q in data["queries"]]

    embedder = MiniLmEmbedder()
    started = time.perf_counter()
    embedder.load()
    load_s = time.perf_counter() - started

    embedder.embed(texts[:BATCH])  # warm-up
    passes = []
    for _ in range(PASSES):
        started = time.perf_counter()
        for i in range(0, len(texts), BATCH):
            embedder.embed(texts[i : i + BATCH])
        passes.append(time.perf_counter() - started)

    for query in queries[:WARM_UP]:
        embedder.embed_one(query)
    latencies_ms = []
    for i in range(QUERIES):
        query = queries[i % len(queries)]
        started = time.perf_counter()
        embedder.embed_one(query)
        latencies_ms.append((time.perf_counter() - started) * 1000)

    result: dict[str, Any] = {
        "model": embedder.model_id,
        "slug": embedder.slug,
        "load_seconds": round(load_s, 3),
        "texts": len(texts),
        "batch_size": BATCH,
        "texts_per_second": round(len(texts) / min(passes), 1),
        "texts_per_second_passes": [round(len(texts) / p, 1) for p in passes],
        "queries": QUERIES,
        "query_ms_median": round(statistics.median(latencies_ms), 2),
        "query_ms_p95": round(_percentile(latencies_ms, 0.95), 2),
    }
    print(json.dumps({"embeddings": result}, indent=2))
    return result


if __name__ == "__main__":
    run()
