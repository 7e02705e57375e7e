"""Where memvault's recall time goes on OpenSearch, phase by phase.

Not a ``make bench`` section: a profile to read when the OpenSearch recall target is
missed, quick to rerun. It loads ``N`` memories (default 10,000; 10 subjects of one
tenant, the same seeded texts and vectors as ``peer_scale``) through memvault's own write
path and indexer, into a home folder and an OpenSearch index that outlive the run
(``--home``, default ``$TMPDIR/memvault-os-profile/<N>``), so a second run skips the load.
The recall service is wired as ``build_services`` wires it for OpenSearch: traces on.

Then the whole recall call (``RecallRequest`` validation to answer) of three variants,
taken in turn query by query so that a noisy moment of the machine falls on each alike:
``before`` (the adapter's searches as they were: ids from ``_source``, always the HNSW
graph; the keyword search sent while the query is embedded), ``now`` (the adapter and
wiring as they are: both searches in one ``_msearch`` after the embedding, as for any node
on this machine) and ``now_overlapped`` (the same adapter with the keyword search sent
during the embedding, as for a remote node). Each call
is split into phases by wrapping its collaborators: query embedding, OpenSearch's own
``took`` per search request (the rest of ``t_search`` is HTTP, JSON and waiting),
exact-key lookup, re-validation reads, relevance floor and the trace write; ``t_*`` are
``RecallResult.timings``.

    PYTHONPATH=layers:local:bench .venv/bin/python bench/profile_opensearch_recall.py [N]
        [--url http://127.0.0.1:9200] [--queries 300] [--home DIR] [--fresh]
"""

from __future__ import annotations

import argparse
import copy
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import peer_compare as pc
from peers import CachedEmbedder, MemvaultSystem, NoPeer, bm25_query

from memvault.observability import logger
from memvault.search import opensearch as os_search
from memvault.search.backend import Hit, SearchFilter, SearchResult
from memvault.search.opensearch import OpenSearchIndex
from memvault.services.recall import RecallService
from memvault_local.evaluation import percentile
from memvault_wire.recall import RecallRequest


class _OpenSearchOnly:
    """What ``peer_compare._load_scale`` needs of a memvault system, writing through the
    OpenSearch-backed services (the store is the same embedded SQLite one)."""

    def __init__(self, system: MemvaultSystem) -> None:
        self.system = system
        self.pumps = system.pumps
        self.recalls = system.recalls

    def view(self, backend: str) -> Any:
        return self.system.view("opensearch")


def _system(home: Path, url: str, n: int, cached: CachedEmbedder, fresh: bool) -> MemvaultSystem:
    marker = home / "loaded.json"
    alias = f"profile-{n}"
    if fresh and home.exists():
        shutil.rmtree(home)
    loaded = marker.exists() and json.loads(marker.read_text()).get("memories") == n
    if not loaded and home.exists():
        shutil.rmtree(home)
    if not loaded:
        for name in pc._indices(url, alias):
            pc._request(url, "DELETE", f"/{name}")
    system = MemvaultSystem(home, cached, ("opensearch",), opensearch_url=url, alias=alias)
    if loaded:
        print(f"reusing {n:,} memories in {home} (index {alias})")
        return system
    started = time.monotonic()
    seconds = pc._load_scale({"memvault": _OpenSearchOnly(system), "mem0": NoPeer()}, cached, 0, n)
    print(f"loaded {n:,} in {time.monotonic() - started:.0f} s: {seconds}")
    marker.write_text(json.dumps({"memories": n, "load": seconds}))
    return system


def _stat(values: list[float]) -> str:
    if not values:
        return "n/a"
    return (
        f"p50 {percentile(values, 50):6.2f}  p95 {percentile(values, 95):6.2f}  "
        f"mean {statistics.fmean(values):6.2f}"
    )


class _Timer:
    """Per recall, milliseconds spent in each wrapped call (summed when called twice)."""

    def __init__(self) -> None:
        self.current: dict[str, float] = {}

    def wrap(self, owner: Any, attribute: str, label: str) -> None:
        inner: Callable[..., Any] = getattr(owner, attribute)
        timer = self

        def timed(*args: Any, **kwargs: Any) -> Any:
            t0 = time.perf_counter()
            try:
                return inner(*args, **kwargs)
            finally:
                took = (time.perf_counter() - t0) * 1000
                timer.current[label] = timer.current.get(label, 0.0) + took

        setattr(owner, attribute, timed)

    def take(self) -> dict[str, float]:
        out, self.current = self.current, {}
        return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("n", nargs="?", type=int, default=10_000)
    parser.add_argument("--url", default="http://127.0.0.1:9200")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--home", type=Path)
    parser.add_argument("--fresh", action="store_true")
    parser.add_argument("--load-only", action="store_true")
    args = parser.parse_args()
    n: int = args.n
    home: Path = args.home or Path(tempfile.gettempdir()) / "memvault-os-profile" / str(n)
    logger.setLevel("WARNING")
    queries, cached = pc.scale_inputs()
    home.parent.mkdir(parents=True, exist_ok=True)
    system = _system(home, args.url, n, cached, args.fresh)
    if args.load_only:
        system.close()
        return
    pc._settle(args.url)
    try:
        profile(system, queries, args.queries)
    finally:
        system.close()


class _Before(OpenSearchIndex):
    """The adapter as it searched before this profile: ids from ``_source``, and always
    the HNSW graph (kept here to compare beside the current one in the same run)."""

    def search(
        self, flt: SearchFilter, text: str, vector: Sequence[float] | None, k: int
    ) -> SearchResult:
        started = time.perf_counter()
        header = {"index": self.alias, "routing": flt.tenant_id}
        body: list[dict[str, Any]] = []
        labels: list[str] = []
        if text.strip():
            body += [header, _old(bm25_query(flt, text, k))]
            labels.append("keyword")
        if vector is not None:
            body += [header, _old(os_search.vector_query(flt, vector, k))]
            labels.append("vector")
        lists: dict[str, list[Hit]] = {"keyword": [], "vector": []}
        out = self.client.msearch(body=body)
        for label, response in zip(labels, out["responses"], strict=True):
            lists[label] = [
                Hit(
                    h["_source"]["chain_id"],
                    h["_source"]["memory_id"],
                    int(h["_source"]["memory_version"]),
                    float(h["_score"]),
                )
                for h in response["hits"]["hits"]
            ]
        return SearchResult(
            lists["keyword"], lists["vector"], (time.perf_counter() - started) * 1000
        )


def _old(body: dict[str, Any]) -> dict[str, Any]:
    """A current query body returning its ids as before: from ``_source``."""
    out = {k: v for k, v in body.items() if k not in ("stored_fields", "docvalue_fields")}
    return out | {"_source": ["chain_id", "memory_id", "memory_version"]}


def _variants_of(system: MemvaultSystem) -> dict[str, RecallService]:
    recall = system.recalls["opensearch"]
    index: Any = recall.index
    before = _Before(
        index.client,
        index.alias,
        model_slug=recall.embedder.slug,
        model_id=recall.embedder.model_id,
        model_version=recall.embedder.model_version,
        dimensions=recall.embedder.dimensions,
    )
    # The wiring sends both searches after the embedding to a node on this machine; the
    # same adapter overlapping the keyword search with the embedding, to compare.
    overlapped = copy.copy(index)
    overlapped.remote = True

    def service(idx: Any) -> RecallService:
        return RecallService(
            recall.repo,
            idx,
            recall.embedder,
            recall.settings,
            recall.clock,
            traces=recall.traces,
            ids=recall.ids,
        )

    return {"before": service(before), "now": recall, "now_overlapped": service(overlapped)}


def profile(system: MemvaultSystem, queries: list[str], count: int) -> None:
    variants = _variants_of(system)
    recall = variants["now"]
    client = recall.index.client  # type: ignore[union-attr]
    timer = _Timer()
    # Server-side ``took`` of every search request a recall makes, summed per label.
    tooks: dict[str, float] = {}
    raw_msearch = client.msearch

    def msearch(*args: Any, **kwargs: Any) -> Any:
        out = raw_msearch(*args, **kwargs)
        text = json.dumps(kwargs.get("body"))
        label = "os_took_vector" if "embedding" in text else "os_took_keyword"
        took = max((r.get("took", 0) for r in out["responses"]), default=0)
        tooks[label] = tooks.get(label, 0.0) + float(took)
        return out

    client.msearch = msearch
    for service in variants.values():
        timer.wrap(service, "_record", "trace")
        timer.wrap(service, "_relevant", "relevance")
    timer.wrap(recall.embedder, "embed", "embed")
    timer.wrap(recall.repo, "pointers", "exact_key")
    timer.wrap(recall.repo, "revalidation", "revalidate_read")

    def one(name: str, i: int) -> tuple[float, dict[str, float], list[str]]:
        subject = f"s-{i % pc.SUBJECTS:02d}"
        t0 = time.perf_counter()
        req = RecallRequest.model_validate({"query": queries[i % len(queries)], "limit": 10})
        got = variants[name].recall(system.ctx(pc.TENANT, subject), subject, req)
        whole = (time.perf_counter() - t0) * 1000
        phases = timer.take() | {"t_" + k: v for k, v in got.timings.items()} | tooks
        tooks.clear()
        return whole, phases, [i.memory.memory_id for i in got.items]

    names = list(variants)
    for i in range(30):
        for name in names:
            one(name, i)
    rng = random.Random(7)
    whole: dict[str, list[float]] = {name: [] for name in names}
    parts: dict[str, dict[str, list[float]]] = {name: {} for name in names}
    same = 0
    for i in range(count):
        rng.shuffle(names)
        answers = {}
        for name in names:
            took, phases, answers[name] = one(name, i)
            whole[name].append(took)
            for key, value in phases.items():
                parts[name].setdefault(key, []).append(value)
        same += answers["before"] == answers["now"]
    print(f"\n{count} recalls per variant, taken in turn; same answer before/now: {same}")
    for name in sorted(whole):
        print(f"{name}: whole call {_stat(whole[name])}")
        for key in sorted(parts[name]):
            print(f"  {key:22s} {_stat(parts[name][key])}")


if __name__ == "__main__":
    main()
