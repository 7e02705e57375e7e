"""The embedded store at the scale users reach, through the HTTP API of `memvault run`.

Two runs, each on a fresh data folder with the MiniLM embedder loaded (local mode's
default):

- *turns*: 5,882 short conversation turns (synthetic, deterministic), written by 4
  clients; the clock stops when the indexer has indexed the last of them, so the rate
  includes embedding and indexing (the peer figure: Mem0 2.2, same embedder, same
  machine kind, 33.6 turns/s).
- *scale*: 100,000 memories over 10 subjects of one tenant (about 150 characters each),
  written one at a time by one client, as an agent writes its turns, while the indexer
  embeds them beside it. Server-side time per write is the handler time the local
  gateway reports (``Server-Timing: handler``); the client's round trip is kept beside
  it. The first and last 10,000 writes are compared as a ratio. RSS is sampled
  throughout for the stack's process and its embedding workers; the data folder's size
  is read at the end; then the stack is stopped and started again on the same data,
  timed to its first healthy answer.
- *concurrent*: 10,000 more memories on a fresh folder by 4 clients at once: throughput,
  and latency under concurrency. The API runs in one Python process, so 4 requests in
  flight take turns on its interpreter lock and each one's server-side time includes
  waiting for the others (by Little's law, about 4 / throughput).

Figures are medians and percentiles, never asserted: the machine is shared and noisy.
``BENCH_MEMORIES`` and ``BENCH_TURNS`` shrink the runs for a quick look.
"""

from __future__ import annotations

import http.client
import json
import os
import random
import re
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from memvault_local.evaluation import percentile
from memvault_local.process import RunningStack, start_stack

WRITERS = 4
SCALE_WRITERS = 1
SUBJECTS = 10
TENANT = "bench"
MEMORIES = int(os.environ.get("BENCH_MEMORIES", "100000"))
CONCURRENT = int(os.environ.get("BENCH_CONCURRENT", "10000"))
TURNS = int(os.environ.get("BENCH_TURNS", "5882"))
WINDOW = min(10_000, MEMORIES // 4 or 1)
PEER_TURNS_PER_S = 33.6

_WORDS = [
    "tea",
    "coffee",
    "meeting",
    "Berlin",
    "Shanghai",
    "report",
    "deadline",
    "invoice",
    "garden",
    "piano",
    "flight",
    "hotel",
    "doctor",
    "budget",
    "review",
    "release",
    "deploy",
    "kernel",
    "window",
    "river",
    "market",
    "bicycle",
    "lunch",
    "dinner",
    "project",
    "roadmap",
    "customer",
    "contract",
    "holiday",
    "birthday",
    "camera",
    "laptop",
    "keyboard",
    "library",
]


def _text(rng: random.Random, n: int, words: int) -> str:
    body = " ".join(rng.choice(_WORDS) for _ in range(words))
    return f"Turn {n}: {body}."[:160]


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def _children(pid: int) -> list[int]:
    try:
        return [int(c) for c in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]
    except OSError:
        return []


def _folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


class Writer(threading.Thread):
    """One client on one keep-alive connection, writing its share of the memories."""

    def __init__(self, stack: RunningStack, jobs: list[tuple[int, str, str]]) -> None:
        super().__init__(daemon=True)
        self.stack, self.jobs = stack, jobs
        self.tokens = {
            s: stack.client(TENANT, s).token for s in {subject for _, subject, _ in jobs}
        }
        self.results: list[tuple[int, float, float, str]] = []  # (n, server ms, client ms, id)
        self.errors: list[str] = []

    def run(self) -> None:
        conn = http.client.HTTPConnection("127.0.0.1", self.stack.port, timeout=60)
        for n, subject, content in self.jobs:
            body = json.dumps(
                {
                    "request_id": f"b-{n}",
                    "kind": "episodic",
                    "content": content,
                    "source": {"type": "user_statement", "ref": "bench"},
                    "consent": True,
                }
            )
            started = time.perf_counter()
            try:
                conn.request(
                    "POST",
                    f"/v1/subjects/{subject}/memories",
                    body=body,
                    headers={
                        "Authorization": f"Bearer {self.tokens[subject]}",
                        "Content-Type": "application/json",
                    },
                )
                answer = conn.getresponse()
                raw = answer.read()
            except (OSError, http.client.HTTPException) as err:
                self.errors.append(type(err).__name__)
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", self.stack.port, timeout=60)
                continue
            client_ms = (time.perf_counter() - started) * 1000
            if answer.status != 201:
                self.errors.append(str(answer.status))
                continue
            timing = answer.getheader("Server-Timing") or ""
            match = re.search(r"handler;dur=([0-9.]+)", timing)
            server_ms = float(match.group(1)) if match else float("nan")
            self.results.append((n, server_ms, client_ms, json.loads(raw)["memory_id"]))
        conn.close()


def _write_all(
    stack: RunningStack, jobs: list[tuple[int, str, str]], count: int = WRITERS
) -> tuple[list[Writer], float]:
    """``count`` clients write ``jobs`` between them; the clients and the seconds taken."""
    started = time.monotonic()
    writers = [Writer(stack, jobs[i::count]) for i in range(count)]
    for w in writers:
        w.start()
    for w in writers:
        w.join()
    return writers, time.monotonic() - started


def _indexed(stack: RunningStack, subject: str, memory_id: str) -> bool:
    got = stack.client(TENANT, subject).call("GET", f"/v1/subjects/{subject}/memories/{memory_id}")
    return got.status == 200 and got.body.get("index_status") == "indexed"


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), 2),
        "p95": round(percentile(values, 95), 2),
        "p99": round(percentile(values, 99), 2),
    }


def turns() -> dict[str, Any]:
    rng = random.Random(5882)
    jobs = [(n, f"user-{n % SUBJECTS}", _text(rng, n, 12)) for n in range(TURNS)]
    with tempfile.TemporaryDirectory() as home:
        stack = start_stack(Path(home), MEMVAULT_EMBEDDING_MODEL="minilm")
        try:
            # The model loads in the background at start; wait for it as a user's first
            # recall would, so the clock measures loading rather than start-up.
            warm = stack.client(TENANT, "user-0")
            warm.call("POST", "/v1/subjects/user-0/recall", body={"query": "warm up"})
            started = time.monotonic()
            writers, written = _write_all(stack, jobs)
            results = [r for w in writers for r in w.results]
            # Each client's last write is among the last the change feed carries.
            pending = [w.results[-1] for w in writers if w.results]
            deadline = time.monotonic() + 1800
            while time.monotonic() < deadline and not all(
                _indexed(stack, f"user-{n % SUBJECTS}", mid) for n, _, _, mid in pending
            ):
                time.sleep(0.2)
            indexed = time.monotonic() - started
        finally:
            stack.interrupt()
    return {
        "turns": TURNS,
        "writers": WRITERS,
        "acknowledged": len(results),
        "errors": sum(len(w.errors) for w in writers),
        "written_in_s": round(written, 1),
        "indexed_in_s": round(indexed, 1),
        "turns_per_s_indexed": round(len(results) / indexed, 1),
        "peer_mem0_turns_per_s": PEER_TURNS_PER_S,
        "ratio_to_peer": round(len(results) / indexed / PEER_TURNS_PER_S, 2),
    }


def scale() -> dict[str, Any]:
    rng = random.Random(100_000)
    jobs = [(n, f"user-{n % SUBJECTS}", _text(rng, n, 24)) for n in range(MEMORIES)]
    with tempfile.TemporaryDirectory() as home:
        stack = start_stack(Path(home), MEMVAULT_EMBEDDING_MODEL="minilm")
        pid = stack.process.pid
        rss: list[float] = []
        workers_rss: list[float] = []
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(1.0):
                rss.append(_rss_mb(pid))
                workers_rss.append(sum(_rss_mb(c) for c in _children(pid)))

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            writers, elapsed = _write_all(stack, jobs, SCALE_WRITERS)
        finally:
            stop.set()
            sampler.join()
        results = sorted(r for w in writers for r in w.results)
        data = Path(home) / "data"
        size_mb = _folder_mb(data)
        db_mb = sum(p.stat().st_size for p in data.glob("memvault.db*") if p.is_file()) / 1e6
        stack.interrupt(timeout=120)
        # A restart on the data just written: time to the first healthy answer.
        restarted = time.monotonic()
        again = start_stack(Path(home), MEMVAULT_EMBEDDING_MODEL="minilm")
        healthy_s = None
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                if again.client().call("GET", "/v1/health").status == 200:
                    healthy_s = round(time.monotonic() - restarted, 2)
                    break
                time.sleep(0.05)
            listed = again.client(TENANT, "user-3").call(
                "GET", "/v1/subjects/user-3/memories", query={"limit": 5}
            )
            readable_after_restart = listed.status == 200 and len(listed.body["items"]) == 5
            # Recall waits for the embedded index to load its log (in the background).
            recalled = again.client(TENANT, "user-3").call(
                "POST", "/v1/subjects/user-3/recall", body={"query": "tea in Berlin"}
            )
            first_recall_s = round(time.monotonic() - restarted, 2)
            recall_after_restart = recalled.status == 200 and bool(recalled.body["items"])
        finally:
            again.interrupt(timeout=120)
    server = [r[1] for r in results]
    client = [r[2] for r in results]
    first = [r[1] for r in results[:WINDOW]]
    last = [r[1] for r in results[-WINDOW:]]
    return {
        "memories": MEMORIES,
        "subjects": SUBJECTS,
        "writers": SCALE_WRITERS,
        "acknowledged": len(results),
        "errors": sum(len(w.errors) for w in writers),
        "writes_per_s": round(len(results) / elapsed, 1),
        "server_write_ms": _stats(server),
        "client_write_ms": _stats(client),
        f"first_{WINDOW}_server_ms": _stats(first),
        f"last_{WINDOW}_server_ms": _stats(last),
        "last_to_first_p50_ratio": round(percentile(last, 50) / percentile(first, 50), 2),
        "last_to_first_p95_ratio": round(percentile(last, 95) / percentile(first, 95), 2),
        "rss_mb": {"max": round(max(rss or [0.0]), 1), "end": round((rss or [0.0])[-1], 1)},
        "workers_rss_mb_max": round(max(workers_rss or [0.0]), 1),
        "total_rss_mb_max": round(
            max((a + b for a, b in zip(rss, workers_rss, strict=False)), default=0.0), 1
        ),
        "data_folder_mb": round(size_mb, 1),
        "database_mb": round(db_mb, 1),
        "restart_healthy_s": healthy_s,
        "readable_after_restart": readable_after_restart,
        "restart_first_recall_s": first_recall_s,
        "recall_after_restart": recall_after_restart,
        "goals": {
            "server_write_p50_ms": 5,
            "server_write_p95_ms": 15,
            "last_to_first_ratio_at_most": 1.2,
            "rss_mb_at_most": 1536,
            "restart_healthy_s_at_most": 5,
            "turns_per_s_at_least": 66,
        },
    }


def concurrent() -> dict[str, Any]:
    rng = random.Random(10_000)
    jobs = [(n, f"user-{n % SUBJECTS}", _text(rng, n, 24)) for n in range(CONCURRENT)]
    with tempfile.TemporaryDirectory() as home:
        stack = start_stack(Path(home), MEMVAULT_EMBEDDING_MODEL="minilm")
        try:
            writers, elapsed = _write_all(stack, jobs, WRITERS)
        finally:
            stack.interrupt(timeout=120)
    results = [r for w in writers for r in w.results]
    return {
        "memories": CONCURRENT,
        "writers": WRITERS,
        "acknowledged": len(results),
        "errors": sum(len(w.errors) for w in writers),
        "writes_per_s": round(len(results) / elapsed, 1),
        "server_write_ms": _stats([r[1] for r in results]),
        "client_write_ms": _stats([r[2] for r in results]),
    }


def run() -> dict[str, Any]:
    return {"turns": turns(), "scale": scale(), "concurrent": concurrent()}


if __name__ == "__main__":
    print(json.dumps(run(), indent=2))
