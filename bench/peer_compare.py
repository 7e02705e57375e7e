"""memvault beside Mem0 in one run: quality, noisy neighbours, scale, freshness and purge.

Three systems, in this process, sharing one embedder and one local OpenSearch node (see
``peers.py`` for the wiring):

- *memvault, embedded*: the embedded store and the embedded index (local mode's default);
- *memvault, OpenSearch*: the same store, indexed into OpenSearch by its own indexer;
- *Mem0, OpenSearch*: Mem0 2.2 (``infer=False``) on its OpenSearch vector store.

``quality()``: the evaluation set (``../shared/eval``, else ``tests/data``) loaded through
each system's calls with its lifecycle applied (corrections, deletions, expiries,
candidates), then every query: recall@1/5/10 and MRR per method and language, and each
``must_not_return`` violation with the trap it fell into. Then the evaluation subjects
share their tenants with 100 and then 1,000 other subjects (10 memories each, exact
copies of the set's own texts, so the same words and vectors), and the queries run again.

``scale()``: 1,000, 10,000 and 100,000 synthetic memories (seeded; 10 subjects of one
tenant; vectors seeded random unit vectors, as in ``index_scale``, while every query is a
real embedding by the shared model, timed: ``scale_model``, by default the local stack's
e5-small-v2) written once into memvault's store and once into Mem0;
recall p50/p95/p99 per system at each scale, index sizes, and at the largest scale write →
first recalled and delete → COMPLETED with the pumps and the purge running in the
background, as the local stack runs them.
"""

from __future__ import annotations

import gc
import json
import os
import random
import statistics
import sys
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import numpy as np
from index_scale import _text, _vocabulary
from peers import (
    CachedEmbedder,
    FloorView,
    HttpView,
    Mem0System,
    MemvaultSystem,
    ModeView,
    _opensearch,
    balanced_orders,
    temp_home,
)

from memvault.embeddings.minilm import MiniLmEmbedder
from memvault_local import evaluation
from memvault_local.evaluation import EvalSet, percentile
from memvault_wire.recall import RecallRequest

ROOT = Path(__file__).resolve().parents[1]
SHARED_EVAL = ROOT.parent / "shared" / "eval" / "recall_eval.json"
EVAL = SHARED_EVAL if SHARED_EVAL.exists() else ROOT / "tests" / "data" / "recall_eval.json"
SCALES = [int(x) for x in os.environ.get("BENCH_PEER_SCALES", "1000,10000,100000").split(",")]
NEIGHBOURS = [int(x) for x in os.environ.get("BENCH_PEER_NEIGHBOURS", "100,1000").split(",")]
PER_NEIGHBOUR = 10
SUBJECTS = 10
TENANT = "bench"
QUERIES = 300
#: Timed calls per system at the largest scale, which the bars are judged at: a p95 of
#: 300 calls is their 15th slowest, and one run's ratio of two of them moved by a tenth
#: from run to run (``ratio_interval``); 1,000 calls put 50 in each tail.
QUERIES_LARGEST = int(os.environ.get("BENCH_PEER_QUERIES_LARGEST", "1000"))


def queries_at(target: int) -> int:
    return QUERIES_LARGEST if target == max(SCALES) else QUERIES


WARM = 20
FRESH = 40
#: Per subject, real memories (the evaluation set's texts with their real vectors) among
#: the synthetic ones, so that queries find something.
REAL_PER_SUBJECT = 30
_REAL: list[str] = []
SYSTEMS = ("memvault-embedded", "memvault-opensearch", "mem0-opensearch")


def _log(message: str) -> None:
    print(f"  {message}", file=sys.stderr, flush=True)


def _stats(values: list[float]) -> dict[str, float]:
    return {
        "p50": round(percentile(values, 50), 2),
        "p95": round(percentile(values, 95), 2),
        "p99": round(percentile(values, 99), 2),
        "n": len(values),
    }


def _systems(
    home: Path, url: str, cached: CachedEmbedder, tag: str, purge_launch: str = "inline"
) -> dict[str, Any]:
    memvault = MemvaultSystem(
        home / "memvault",
        cached,
        ("embedded", "opensearch"),
        opensearch_url=url,
        alias=f"peer-{tag}",
        purge_launch=purge_launch,
    )
    mem0 = Mem0System(home / "mem0", url, cached, f"peer-{tag}-mem0")
    return {"memvault": memvault, "mem0": mem0}


def _views(systems: dict[str, Any]) -> dict[str, Any]:
    return {
        "memvault-embedded": systems["memvault"].view("embedded"),
        "memvault-opensearch": systems["memvault"].view("opensearch"),
        "mem0-opensearch": systems["mem0"],
    }


def _floors(systems: dict[str, Any]) -> dict[str, Any]:
    """Per backend, the floor under memvault's recall (``peers.FloorView``): timed in the
    same round robin as the systems, so the ratio to it is measured in one run."""
    return {
        f"floor-{backend}": FloorView(systems["memvault"], backend)
        for backend in ("embedded", "opensearch")
    }


# ----------------------------------------------------------------------------- quality


def _why(memory: dict[str, Any], query: dict[str, Any]) -> str:
    """The trap a returned ``must_not_return`` memory is."""
    lifecycle = memory["lifecycle"].split(":")[0]
    if lifecycle != "active":
        return {"superseded_by": "superseded"}.get(lifecycle, lifecycle)
    if (memory["tenant_id"], memory["subject_id"]) != (query["tenant_id"], query["subject_id"]):
        return "another subject"
    ceiling = query.get("max_sensitivity") or "internal"
    ranks = {"public": 0, "internal": 1, "pii": 2, "secret": 3}
    if ranks[memory["sensitivity"]] > ranks[ceiling]:
        return "above the caller's sensitivity ceiling"
    if memory["visibility"] and query.get("agent_role") not in memory["visibility"]:
        return "not visible to the caller's agent role"
    if query.get("scope") and any(memory["scope"].get(k) != v for k, v in query["scope"].items()):
        return "outside the asked scope"
    return "other"


def _violations(evalset: EvalSet, report: dict[str, Any]) -> dict[str, Any]:
    memories = {m["key"]: m for m in evalset.memories}
    queries = {q["qid"]: q for q in evalset.queries}
    by_reason: dict[str, int] = {}
    for qid, keys in report.get("trap_keys", {}).items():
        for key in keys:
            reason = _why(memories[key], queries[qid])
            by_reason[reason] = by_reason.get(reason, 0) + 1
    return {
        "queries": len(report.get("trap_qids", [])),
        "memories_returned": sum(by_reason.values()),
        "by_trap": dict(sorted(by_reason.items(), key=lambda kv: -kv[1])),
    }


def _returned(evalset: EvalSet, client_for: Any) -> float:
    counts = []
    for q in evalset.queries:
        client = client_for(
            q["tenant_id"], q["subject_id"], q.get("agent_role"), q.get("max_sensitivity")
        )
        body: dict[str, Any] = {"query": q["text"], "limit": 10}
        if q.get("scope"):
            body["scope"] = q["scope"]
        counts.append(
            len(
                client.call("POST", f"/v1/subjects/{q['subject_id']}/recall", body=body).body[
                    "items"
                ]
            )
        )
    return round(statistics.fmean(counts), 2)


def _score(evalset: EvalSet, name: str, view: Any, loaded: evaluation.Loaded) -> dict[str, Any]:
    modes = evaluation.MODES if name.startswith("memvault") else ("search",)
    out: dict[str, Any] = {}
    for mode in modes:
        # Mem0 has one search (semantic with a BM25 boost); it ignores ``mode``.
        report = evaluation.score(evalset, view.client_for, loaded, modes=[mode])[mode]
        report["violations"] = _violations(evalset, report)
        out[mode] = report
    return out


def _neighbours(evalset: EvalSet, count: int, start: int, rng: random.Random) -> list[Any]:
    tenants = sorted({m["tenant_id"] for m in evalset.memories})
    texts = [m["content"] for m in evalset.memories]
    out = []
    for n in range(start, count):
        tenant = tenants[n % len(tenants)]
        for i in range(PER_NEIGHBOUR):
            out.append(
                (
                    tenant,
                    f"neighbour-{n:04d}",
                    {
                        "request_id": f"nb-{n}-{i}",
                        "kind": "semantic",
                        "content": rng.choice(texts),  # an exact copy: same words, same vector
                        "source": {"type": "user_statement", "ref": f"nb:{n}/{i}"},
                        "consent": True,
                    },
                )
            )
    return out


def _quiet() -> None:
    """Per-step INFO logs (purge steps, index batches) would drown the progress lines."""
    from memvault.observability import logger

    logger.setLevel("WARNING")


def quality(url: str) -> dict[str, Any]:
    _quiet()
    evalset = EvalSet.read(EVAL)
    cached = CachedEmbedder(MiniLmEmbedder())
    started = time.monotonic()
    cached.embed([m["content"] for m in evalset.memories])
    _log(f"embedded the set's {len(evalset.memories)} texts in {time.monotonic() - started:.0f} s")
    out: dict[str, Any] = {
        "eval_set": str(EVAL.relative_to(ROOT.parent)),
        "memories": len(evalset.memories),
        "queries": len(evalset.queries),
        "systems": {},
        "noisy_neighbours": {},
    }
    with temp_home() as raw:
        home = Path(raw)
        tag = f"q{uuid.uuid4().hex[:6]}"
        systems = _systems(home, url, cached, tag)
        try:
            # Load each system once (memvault's store feeds both its indexes).
            loads: dict[str, evaluation.Loaded] = {}
            for name, system in (("memvault", systems["memvault"]), ("mem0", systems["mem0"])):
                client_for = (
                    system.view("embedded").client_for if name == "memvault" else system.client_for
                )
                loads[name] = evaluation.load(evalset, client_for, wait_indexed=300)
                if name == "memvault":
                    system.sync()
                _log(
                    f"{name}: loaded in {loads[name].seconds:.1f} s, "
                    f"refused {len(loads[name].refused)}"
                )
            views = _views(systems)
            for name, view in views.items():
                loaded = loads[name.split("-")[0]]
                out["systems"][name] = _score(evalset, name, view, loaded) | {
                    "refused_at_write": loaded.refused
                }
            # Noisy neighbours: the same tenants, more subjects.
            rng = random.Random(1000)
            done = 0
            for count in NEIGHBOURS:
                writes = _neighbours(evalset, count, done, rng)
                systems["mem0"].begin_bulk()
                for tenant, subject, body in writes:
                    for name, system in systems.items():
                        client_for = (
                            system.view("embedded").client_for
                            if name == "memvault"
                            else system.client_for
                        )
                        answer = client_for(tenant, subject, None, None).call(
                            "POST", f"/v1/subjects/{subject}/memories", body=body
                        )
                        assert answer.status == 201, answer.body
                systems["mem0"].flush_bulk()
                systems["memvault"].sync()
                done = count
                _log(f"{count} neighbour subjects ({len(writes)} more memories) loaded")
                row: dict[str, Any] = {}
                for name, view in views.items():
                    loaded = loads[name.split("-")[0]]
                    mode = "hybrid" if name.startswith("memvault") else "search"
                    report = evaluation.score(evalset, view.client_for, loaded, modes=[mode])[mode]
                    row[name] = {
                        "recall_at_10": report["recall"]["all"]["@10"],
                        "alone_recall_at_10": out["systems"][name][mode]["recall"]["all"]["@10"],
                        "violations": _violations(evalset, report),
                        "items_returned_mean": _returned(evalset, view.client_for),
                    }
                out["noisy_neighbours"][str(count)] = {
                    "neighbour_memories": count * PER_NEIGHBOUR,
                    "systems": row,
                }
        finally:
            systems["memvault"].close()
            systems["mem0"].close()
            _drop(url, tag)
    return out


def _drop(url: str, tag: str) -> None:
    """Delete the indexes a run made (``peer-<tag>``; ``peer-`` alone: every run's). A
    100,000-memory index is about 1 GB on the node: one left behind shares the node's heap
    and page cache with the next run's. Each delete is tried again after a timeout, and
    any index still there is named."""
    for name in _indices(url, f"peer-{tag}"):
        for _ in range(3):
            try:
                _request(url, "DELETE", f"/{name}")
                break
            except OSError as error:  # a busy node can take longer than the timeout
                _log(f"deleting {name}: {error}; trying again")
    left = _indices(url, f"peer-{tag}")
    if left:
        _log(f"indexes left on the node: {', '.join(left)}")


def _request(url: str, method: str, path: str) -> Any:
    request = urllib.request.Request(url + path, method=method)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=60) as raw:  # noqa: S310
            return json.loads(raw.read() or b"{}")
    except urllib.error.HTTPError:
        return {}


def _indices(url: str, prefix: str) -> list[str]:
    got = _request(url, "GET", f"/_cat/indices/{prefix}*?format=json&bytes=b")
    return [row["index"] for row in got or []]


def _count(url: str, prefix: str) -> int:
    got = _request(url, "GET", f"/_cat/indices/{prefix}*?format=json")
    return sum(int(row["docs.count"]) for row in got or [])


def _index_mb(url: str, prefix: str) -> float:
    got = _request(url, "GET", f"/_cat/indices/{prefix}*?format=json&bytes=b")
    return round(sum(int(row["store.size"]) for row in got or []) / 1e6, 1)


def _rss_mb(pid: str = "self") -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return 0.0


def _opensearch_pid() -> str:
    port = os.environ.get("MEMVAULT_OPENSEARCH_PORT", "9200")
    home = os.environ.get("MEMVAULT_OPENSEARCH_HOME") or str(
        Path.home() / ".memvault" / f"opensearch-{port}"
    )
    try:
        return (Path(home) / "opensearch.pid").read_text().strip()
    except OSError:
        return "none"


def _folder_mb(path: Path) -> float:
    return round(sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6, 1)


# ------------------------------------------------------------------------------- scale


def _timed_round_robin(
    views: dict[str, Any], queries: list[str], rng: random.Random, count: int
) -> tuple[dict[str, list[float]], dict[str, list[int]]]:
    """``count`` recalls per system, taken in turn (one query, every system, then the
    next), so that a noisy moment of the machine falls on all of them alike. The rounds
    take the systems in the orders of a Williams design (``balanced_orders``), so that
    what a call leaves running after its answer (OpenSearch's JVM at work) falls on the
    system after it, and each system comes after each other one as often as any."""
    took: dict[str, list[float]] = {name: [] for name in views}
    returned: dict[str, list[int]] = {name: [] for name in views}
    names = list(views)
    orders = balanced_orders(len(names))
    for n in range(count):
        subject = f"s-{rng.randrange(SUBJECTS):02d}"
        body = {"query": queries[n % len(queries)], "limit": 10}
        for at in orders[n % len(orders)]:
            name = names[at]
            answer = (
                views[name]
                .client_for(TENANT, subject, None, None)
                .call("POST", f"/v1/subjects/{subject}/recall", body=body)
            )
            if answer.status != 200:
                raise RuntimeError(f"{name}: recall answered {answer.status} {answer.body}")
            took[name].append(float(answer.headers["Server-Timing"].split("dur=")[1]))
            returned[name].append(len(answer.body["items"]))
    return took, returned


def ratio_interval(
    a: list[float], b: list[float], rounds: int = 2000, seed: int = 95
) -> list[float]:
    """The 90% interval of p95(a) / p95(b) by a paired bootstrap: ``a[i]`` and ``b[i]``
    were timed in the same round of the round robin, so the rounds are resampled, not
    the calls. p95 is the nearest rank, as ``percentile`` takes it. One run's ratio of
    two p95s over 300 calls moved by a tenth from run to run: this says how far."""
    x, y = np.asarray(a), np.asarray(b)
    n = min(len(x), len(y))
    picks = np.random.default_rng(seed).integers(0, n, size=(rounds, n))
    rank = min(n - 1, round(0.95 * (n - 1)))
    ratios = np.sort(x[:n][picks], axis=1)[:, rank] / np.sort(y[:n][picks], axis=1)[:, rank]
    low, high = np.percentile(ratios, [5, 95])
    return [round(float(low), 3), round(float(high), 3)]


def _settle(url: str) -> None:
    """Until OpenSearch has no merge running (bulk loads leave merges behind that would
    otherwise compete with the timed recalls for the same two cores)."""
    for _ in range(600):
        stats = _request(url, "GET", "/_stats/merge")
        if not stats.get("_all", {}).get("total", {}).get("merges", {}).get("current", 0):
            return
        time.sleep(1)


def _load_scale(
    systems: dict[str, Any], cached: CachedEmbedder, start: int, stop: int
) -> dict[str, float]:
    rng, vectors = random.Random(start + 17), np.random.default_rng(start + 17)
    seconds: dict[str, float] = {}
    bodies = []
    for n in range(start, stop):
        text = f"{_text(rng, 20)} n{n}"
        v = vectors.normal(size=384)
        cached.put(text, v / np.linalg.norm(v))
        bodies.append(
            (
                f"s-{n % SUBJECTS:02d}",
                {
                    "request_id": f"sc-{n}",
                    "kind": "semantic",
                    "content": text,
                    "source": {"type": "user_statement", "ref": f"bench:{n}"},
                    "consent": True,
                },
            )
        )
    memvault, mem0 = systems["memvault"], systems["mem0"]
    if start == 0:
        # Real memories too (the evaluation set's texts, real vectors), so that the
        # queries find what they ask about and every system answers with items rather
        # than an empty list: random vectors alone sit below memvault's relevance floor.
        bodies[:0] = [
            (
                f"s-{n % SUBJECTS:02d}",
                {
                    "request_id": f"sc-real-{n}",
                    "kind": "semantic",
                    "content": text,
                    "source": {"type": "user_statement", "ref": f"bench:real/{n}"},
                    "consent": True,
                },
            )
            for n, text in enumerate(_REAL[: REAL_PER_SUBJECT * SUBJECTS])
        ]
        del bodies[stop - start :]
    t0 = time.monotonic()
    refused: set[int] = set()
    for i, (subject, body) in enumerate(bodies):
        answer = (
            memvault.view("embedded")
            .client_for(TENANT, subject, None, None)
            .call("POST", f"/v1/subjects/{subject}/memories", body=body)
        )
        if answer.status == 422 and answer.body["error"]["code"] == "secret_detected":
            # Twenty random words can read as a wallet's recovery phrase, which the write
            # policy refuses: that text is left out for every system alike.
            refused.add(i)
            continue
        assert answer.status == 201, answer.body
        if i % 5000 == 4999:
            _log(f"memvault: {start + i + 1:,} written")
    seconds["refused_by_write_policy"] = len(refused)
    seconds["memvault_write_s"] = round(time.monotonic() - t0, 1)
    for backend, pump in memvault.pumps.items():
        t0 = time.monotonic()
        pump.drain()
        index = memvault.recalls[backend].index
        if hasattr(index, "refresh"):
            index.refresh()
        seconds[f"memvault_index_{backend}_s"] = round(time.monotonic() - t0, 1)
        # A change the pump gave up on would leave a smaller (faster) index behind.
        if pump.dropped:
            raise RuntimeError(f"the {backend} indexer dropped {pump.dropped} changes")
    t0 = time.monotonic()
    mem0.begin_bulk()
    for i, (subject, body) in enumerate(bodies):
        if i in refused:
            continue
        mem0.client_for(TENANT, subject, None, None).call(
            "POST", f"/v1/subjects/{subject}/memories", body=body
        )
    seconds["mem0_add_s"] = round(time.monotonic() - t0, 1)
    t0 = time.monotonic()
    mem0.flush_bulk()
    seconds["mem0_bulk_index_s"] = round(time.monotonic() - t0, 1)
    return seconds


def _unrecalled(
    memvault: Any, backend: str, subject: str, written: dict[str, Any], text: str
) -> str:
    """What the table, the index and deeper recalls say of a memory that freshness never
    saw recalled: ids, states and ranks only."""
    memory_id = written["memory_id"]
    ctx = memvault.ctx(TENANT, subject)
    # Read from the table, not through ``get``: a memory this caller may not read (its
    # sensitivity above the ceiling) is what this should report, not a NotFound.
    stored = memvault.services.stores.memory.version(TENANT, subject, memory_id)
    if stored is None:
        return f"backend {backend}, subject {subject}, {memory_id}: no such version"
    doc = memvault.recalls[backend].index.get(TENANT, stored.chain_id)

    def rank(mode: str) -> str:
        got = memvault.recalls[backend].recall(
            ctx, subject, RecallRequest(query=text, limit=50, mode=mode)
        )
        ids = [i.memory.memory_id for i in got.items]
        return f"{ids.index(memory_id) + 1 if memory_id in ids else None} of {len(ids)}"

    return (
        f"backend {backend}, subject {subject}, {memory_id} version {stored.version} "
        f"status {stored.status.value} sensitivity {stored.sensitivity.value} "
        f"index_status {stored.index_status.value}; "
        f"index document: {'none' if doc is None else f'version {doc[0]}'}; "
        f"rank in a hybrid recall of 50: {rank('hybrid')}, keyword: {rank('keyword')}, "
        f"vector: {rank('vector')}; the pump dropped {memvault.pumps[backend].dropped}"
    )


def _tag() -> str:
    """Eight random letters that make a fresh text unique. Not hex digits: one time in
    500, eight digits read as a phone number (``03019469``), the write policy rightly
    stores that memory as personal data, and a recall under the benchmark's ``internal``
    ceiling never returns it."""
    return uuid.uuid4().hex[:8].translate(str.maketrans("0123456789", "ghijklmnop"))


def _freshness_and_purge(systems: dict[str, Any]) -> dict[str, Any]:
    """Write → first recalled, and delete → COMPLETED, with the pumps in the background."""
    memvault = systems["memvault"]
    memvault.start_pumps()
    rng = random.Random(99)
    out: dict[str, Any] = {}
    try:
        for backend in memvault.recalls:
            view = memvault.view(backend)
            appear: list[float] = []
            for n in range(FRESH):
                subject = f"s-{n % SUBJECTS:02d}"
                client = view.client_for(TENANT, subject, None, None)
                colour = rng.choice(["red", "blue"])
                text = f"Fresh fact {n} {backend}: the {colour} pipeline {_tag()}"
                written = client.call(
                    "POST",
                    f"/v1/subjects/{subject}/memories",
                    body={
                        "request_id": f"fresh-{backend}-{n}",
                        "kind": "episodic",
                        "content": text,
                        "source": {"type": "user_statement", "ref": "bench"},
                        "consent": True,
                    },
                )
                t0 = time.perf_counter()
                while True:
                    found = client.call(
                        "POST", f"/v1/subjects/{subject}/recall", body={"query": text, "limit": 3}
                    )
                    if any(
                        i["memory"]["memory_id"] == written.body["memory_id"]
                        for i in found.body["items"]
                    ):
                        break
                    if time.perf_counter() - t0 > 30:
                        raise RuntimeError(
                            f"a written memory was not recalled within 30 s: "
                            f"{_unrecalled(memvault, backend, subject, written.body, text)}"
                        )
                    time.sleep(0.01)
                appear.append((time.perf_counter() - t0) * 1000)
            out[f"memvault-{backend}"] = {"write_to_first_recall_ms": _stats(appear)}
        # Deletes: the purge runs in the background (as a Step Functions execution would)
        # and reaches every copy; polled until COMPLETED.
        # Each backend's deletions purge that backend's index (the job waits for its
        # copy there), so each is timed on its own.
        for backend, memories in memvault.memories.items():
            completed: list[float] = []
            for n in range(FRESH):
                subject = f"s-{n % SUBJECTS:02d}"
                ctx = memvault.ctx(TENANT, subject)
                victim = memories.list_memories(ctx, subject, limit=1).items[0].memory_id
                t0 = time.perf_counter()
                job = memories.delete(ctx, subject, victim)
                while job.status.value != "COMPLETED":
                    if time.perf_counter() - t0 > 60:
                        raise RuntimeError(f"deletion stayed {job.status.value} for 60 s")
                    time.sleep(0.01)
                    job = memories.deletion_status(ctx, job.deletion_id)
                completed.append((time.perf_counter() - t0) * 1000)
            out[f"memvault-{backend}"]["delete_to_completed_ms"] = _stats(completed)
            out[f"memvault-{backend}"]["delete_copies"] = {
                c.name: c.status.value for c in job.copies
            }
    finally:
        memvault.stop_pumps()
    # Mem0: add → first found by search (its index refreshes every second by default).
    mem0 = systems["mem0"]
    appear = []
    for n in range(FRESH):
        subject = f"s-{n % SUBJECTS:02d}"
        client = mem0.client_for(TENANT, subject, None, None)
        text = f"Fresh fact {n} mem0: the pipeline {_tag()}"
        written = client.call(
            "POST",
            f"/v1/subjects/{subject}/memories",
            body={
                "kind": "episodic",
                "content": text,
                "source": {"type": "user_statement", "ref": "bench"},
            },
        )
        t0 = time.perf_counter()
        while True:
            found = client.call(
                "POST", f"/v1/subjects/{subject}/recall", body={"query": text, "limit": 3}
            )
            if any(
                i["memory"]["memory_id"] == written.body["memory_id"] for i in found.body["items"]
            ):
                break
            if time.perf_counter() - t0 > 30:
                raise RuntimeError("a Mem0 memory was not found within 30 s")
            time.sleep(0.01)
        appear.append((time.perf_counter() - t0) * 1000)
    out["mem0-opensearch"] = {"write_to_first_recall_ms": _stats(appear)}
    return out


#: Per backend, the systems of its own round robin (see ``_measure_scale``).
ALONE: dict[str, tuple[str, ...]] = {
    "embedded": ("memvault-embedded", "floor-embedded"),
    "opensearch": (
        "memvault-opensearch",
        "memvault-opensearch-vector",
        "floor-opensearch",
        "mem0-opensearch",
    ),
}


def _alone_row(backend: str, took: dict[str, list[float]]) -> dict[str, Any]:
    """One backend's round robin: each system's times, memvault's p95 over its floor's (and
    over Mem0's, on OpenSearch), and each ratio's 90% interval."""
    memvault = f"memvault-{backend}"
    peers = [f"floor-{backend}"] + (["mem0-opensearch"] if "mem0-opensearch" in took else [])
    ms = {name: _stats(t) for name, t in took.items()}
    return {
        "ms": ms,
        "p95_ratio": {peer: round(ms[memvault]["p95"] / ms[peer]["p95"], 3) for peer in peers},
        "p95_ratio_interval": {peer: ratio_interval(took[memvault], took[peer]) for peer in peers},
    }


def _measure_scale(
    out: dict[str, Any],
    systems: dict[str, Any],
    views: dict[str, Any],
    cached: CachedEmbedder,
    queries: list[str],
    home: Path,
    url: str,
    tag: str,
    done: int,
    target: int,
) -> int:
    """Load up to ``target`` memories, then time every system; appends a row to ``out``."""
    load = _load_scale(systems, cached, done, target)
    counts = {
        "memvault_opensearch": _count(url, f"peer-{tag}--"),
        "mem0_opensearch": _count(url, f"peer-{tag}-mem0"),
    }
    _settle(url)
    row: dict[str, Any] = {"memories": target, "load": load, "indexed": counts}
    # The load leaves millions of objects behind (all three systems' clients, the vector
    # cache): frozen out of the cycle collector, a full collection's pause (tens of ms)
    # stops landing in whichever system happens to be timed then.
    gc.collect()
    gc.freeze()
    _timed_round_robin(views, queries, random.Random(1), WARM)  # subjects load
    took, returned = _timed_round_robin(views, queries, random.Random(target), queries_at(target))
    e2e = took.pop("memvault-embedded-over-http")
    returned.pop("memvault-embedded-over-http")
    # A deployment runs one backend, never both: the embedded index is the local default,
    # where no OpenSearch runs, and an OpenSearch deployment has no embedded index beside
    # it. In the round robin above the two backends' calls are interleaved on the same two
    # cores (the embedded index's exact scan and OpenSearch's JVM each leave work and cold
    # caches behind for the call after them). Each backend is timed again in a round robin
    # of its own after it (its systems and its floor, the same queries): the bounds are
    # judged there, and the mixed round robin's figures are reported beside them.
    row["alone"] = {}
    for backend, names in ALONE.items():
        alone, _ = _timed_round_robin(
            {name: views[name] for name in names if name in views},
            queries,
            random.Random(target),
            queries_at(target),
        )
        row["alone"][backend] = _alone_row(backend, alone)
        _log(f"{target:,} {backend} alone: {row['alone'][backend]['p95_ratio']}")
    row["mem0_concurrent_ms"] = _mem0_concurrent(views, queries, url, tag, target)
    row["recall_ms"] = {name: _stats(t) for name, t in took.items()}
    row["recall_end_to_end_ms"] = {"memvault-embedded": _stats(e2e)}
    row["recall_samples_ms"] = {n: [round(x, 2) for x in t] for n, t in took.items()}
    row["items_returned_mean"] = {
        name: round(statistics.fmean(r), 2) for name, r in returned.items()
    }
    for name, st in row["recall_ms"].items():
        _log(f"{target:,} {name}: p50 {st['p50']} p95 {st['p95']} ms")
    mem0_p95 = row["recall_ms"]["mem0-opensearch"]["p95"]
    row["p95_ratio_to_mem0"] = {
        name: round(r["p95"] / mem0_p95, 3)
        for name, r in row["recall_ms"].items()
        if not name.startswith("floor-")
    }
    # The bound: memvault's recall p95 at most 1.25x the floor's on its index.
    row["p95_ratio_to_floor"] = {
        f"memvault-{backend}": round(
            row["recall_ms"][f"memvault-{backend}"]["p95"]
            / row["recall_ms"][f"floor-{backend}"]["p95"],
            3,
        )
        for backend in ("embedded", "opensearch")
        if f"floor-{backend}" in row["recall_ms"]
    }
    _log(f"{target:,} p95 / floor: {row['p95_ratio_to_floor']}")
    row["p95_ratio_interval"] = {
        f"{a}/{b}": ratio_interval(took[a], took[b])
        for a, b in (
            ("memvault-opensearch", "mem0-opensearch"),
            ("memvault-opensearch", "floor-opensearch"),
            ("memvault-embedded", "floor-embedded"),
        )
        if a in took and b in took
    }
    _log(f"{target:,} p95 ratio, 90% intervals: {row['p95_ratio_interval']}")
    row["sizes_mb"] = {
        "memvault_store": _folder_mb(home / "memvault" / "data"),
        "memvault_embedded_index": _folder_mb(home / "memvault" / "index"),
        "memvault_opensearch_index": _index_mb(url, f"peer-{tag}--"),
        "mem0_opensearch_index": _index_mb(url, f"peer-{tag}-mem0"),
        "mem0_history_db": round((home / "mem0" / "mem0-history.db").stat().st_size / 1e6, 1)
        if (home / "mem0" / "mem0-history.db").exists()
        else 0.0,
    }
    row["rss_mb"] = {
        # This process holds all three clients, memvault's loaded index and the
        # harness's vector cache (float32, 1.5 kB a memory).
        "bench_process": _rss_mb(),
        "opensearch_node": _rss_mb(_opensearch_pid()),
    }
    out["scales"].append(row)
    return target


def _mem0_concurrent(
    views: dict[str, Any], queries: list[str], url: str, tag: str, target: int
) -> dict[str, Any]:
    """Mem0 given the index setting memvault makes its own indexes with (concurrent segment
    search, ``search.opensearch.CONCURRENT_SEARCH``), timed in a round robin of its own
    with memvault on OpenSearch, then set back. Mem0 makes its index without it; this
    says how much of the gap between them is that one setting."""
    names = _indices(url, f"peer-{tag}-mem0")

    def mode(value: str) -> None:
        for name in names:
            _opensearch(
                url,
                "PUT",
                f"/{name}/_settings",
                {"index.search.concurrent_segment_search.mode": value},
            )

    mode("all")
    try:
        pair = {name: views[name] for name in ("memvault-opensearch", "mem0-opensearch")}
        took, _ = _timed_round_robin(pair, queries, random.Random(target + 1), queries_at(target))
    finally:
        mode("auto")
    out: dict[str, Any] = {name: _stats(t) for name, t in took.items()}
    out["p95_ratio"] = round(out["memvault-opensearch"]["p95"] / out["mem0-opensearch"]["p95"], 3)
    _log(f"{target:,} with Mem0's index searching segments side by side: {out['p95_ratio']}")
    return out


def scale_model() -> Any:
    """The embedder all three systems share at scale: ``BENCH_PEER_EMBEDDER``, by default
    the local stack's own English model (e5-small-v2, int8 ONNX, one thread), else
    ``minilm`` (all-MiniLM-L6-v2 on numpy, the model of the runs before 2026-12-06)."""
    name = os.environ.get("BENCH_PEER_EMBEDDER", "e5-small-v2")
    if name == "minilm":
        return MiniLmEmbedder()
    from memvault.embeddings.onnx import OnnxEmbedder

    model = OnnxEmbedder(name, threads=1)
    model.load()
    return model


def scale_inputs() -> tuple[list[str], CachedEmbedder]:
    """The queries and the embedder (the real memories' vectors cached) of a scale load:
    what ``scale`` and the recall profiles start from. The synthetic texts draw their
    words from MiniLM's vocabulary whichever model embeds the queries (their vectors are
    random), so that every run writes the same texts."""
    evalset = EvalSet.read(EVAL)
    _vocabulary(MiniLmEmbedder())
    cached = CachedEmbedder(scale_model())
    _REAL[:] = [m["content"] for m in evalset.memories][: REAL_PER_SUBJECT * SUBJECTS]
    cached.embed(_REAL)
    return [q["text"] for q in evalset.queries], cached


def scale(url: str) -> dict[str, Any]:
    _quiet()
    queries, cached = scale_inputs()
    out: dict[str, Any] = {
        "embedder": {"setting": cached.setting, "model_id": cached.model_id},
        "real_memories_per_subject": REAL_PER_SUBJECT,
        "subjects": SUBJECTS,
        "queries_per_scale": QUERIES,
        "queries_at_largest_scale": QUERIES_LARGEST,
        "scales": [],
    }
    stale = _indices(url, "peer-")
    if stale:
        # Left by a run that was stopped before its clean-up: they would share the node.
        _log(f"deleting {len(stale)} indexes earlier runs left: {', '.join(stale)}")
        _drop(url, "")
    with temp_home() as raw:
        home = Path(raw)
        tag = f"s{uuid.uuid4().hex[:6]}"
        # The purge in the background, as the local stack (and Step Functions) runs it:
        # a delete answers at once and its job reaches COMPLETED by itself.
        systems = _systems(home, url, cached, tag, purge_launch="background")
        views = _views(systems) | _floors(systems)
        # Like for like with Mem0's one k-NN query: memvault's recall in vector mode.
        views["memvault-opensearch-vector"] = ModeView(views["memvault-opensearch"], "vector")
        http = HttpView(systems["memvault"])
        # End to end: the local stack's HTTP front on loopback, token check included.
        views["memvault-embedded-over-http"] = http
        done = 0
        try:
            for target in SCALES:
                _log(f"loading {done:,} → {target:,}")
                try:
                    done = _measure_scale(
                        out, systems, views, cached, queries, home, url, tag, done, target
                    )
                except Exception as error:  # keep the scales measured so far
                    out["error"] = f"at {target:,}: {type(error).__name__}: {error}"
                    _log(out["error"])
                    break
            try:
                out["freshness_and_purge"] = _freshness_and_purge(systems) | {"memories": done}
            except Exception as error:
                out["freshness_error"] = f"{type(error).__name__}: {error}"
                _log(out["freshness_error"])
        finally:
            http.close()
            systems["memvault"].close()
            systems["mem0"].close()
            _drop(url, tag)
    return out


def run_quality(url: str) -> dict[str, Any]:
    return quality(url)


def run_scale(url: str) -> dict[str, Any]:
    return scale(url)
