"""The embedded index at 1,000, 10,000 and 100,000 memories over 10 subjects of one tenant.

Documents are synthetic and seeded: about 20 words each, drawn with Zipf weights from
5,000 English words (whole words of MiniLM's own vocabulary, so a query embeds as a real
one of its length would) and 40 Chinese words, so that a few words occur in most of
a subject's memories (the hard case for BM25: long posting lists). Vectors are seeded
random unit vectors of MiniLM's 384 dimensions: what the index does with a vector costs
the same whatever it means, and embedding 100,000 texts with MiniLM would take this
machine about half an hour. Each query is a real query: its text is embedded by MiniLM
(timed) and then searched with keyword and vector together, as recall asks.

Reported per scale: insert rate (batches of 200, as the outbox pump applies them); search
p50/p95/p99 alone and with the query's embedding ("embedding included"); a tombstone's
cost; the first query of a subject after the file is reopened (that subject loads);
RSS growth and file size. At 100,000, *noisy neighbours*: the same queries against one
subject alone in its own index, and against the full index plus 1,000 more subjects —
the share of queries whose top 10 is the same.

Figures are medians and percentiles, never asserted: the machine is shared and noisy.
``BENCH_INDEX_SCALES`` (comma-separated) picks the scales for a quick look.
"""

from __future__ import annotations

import dataclasses
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from memvault.search.backend import SearchFilter
from memvault.search.documents import IndexOp, op_from_images
from memvault.search.embedded import EmbeddedIndex
from memvault_local.evaluation import percentile

SUBJECTS = 10
TENANT = "bench"
DIM = 384
QUERIES = 300
BATCH = 200
SCALES = [int(x) for x in os.environ.get("BENCH_INDEX_SCALES", "1000,10000,100000").split(",")]
NOW = "2026-03-01T00:00:00Z"

_CHINESE = [
    *("咖啡", "会议", "北京", "上海", "报告", "截止", "发票", "花园", "钢琴", "航班"),
    *("酒店", "医生", "预算", "评审", "发布", "部署", "内核", "窗口", "河流", "市场"),
    *("自行车", "午饭", "晚饭", "项目", "路线图", "客户", "合同", "假期", "生日", "相机"),
    *("电脑", "键盘", "图书馆", "绿茶", "乌龙茶", "周末", "早上", "习惯", "偏好", "家人"),
]
_VOCABULARY: list[str] = []
_WEIGHTS: list[float] = []


def _vocabulary(embedder: Any) -> None:
    """5,000 whole English words of the tokenizer's vocabulary, in a seeded order that
    decides their Zipf rank, then the Chinese words at a flat weight."""
    words = sorted(
        w for w in embedder.tokenizer_vocabulary() if w.isascii() and w.isalpha() and len(w) > 2
    )
    random.Random(5000).shuffle(words)
    english = words[:5000]
    _VOCABULARY[:] = english + _CHINESE
    _WEIGHTS[:] = [1.0 / (i + 1) for i in range(len(english))] + [0.02] * len(_CHINESE)


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choices(_VOCABULARY, _WEIGHTS, k=words))


def _unit(rng: np.random.Generator) -> list[float]:
    v = rng.normal(size=DIM)
    out: list[float] = (v / np.linalg.norm(v)).tolist()
    return out


def _item(n: int, subject: str, content: str) -> dict[str, Any]:
    return {
        "type": "memory",
        "memory_id": f"mem_{n}",
        "chain_id": f"chn_{n}",
        "tenant_id": TENANT,
        "subject_id": subject,
        "kind": "semantic",
        "status": "active",
        "content": content,
        "tags": [],
        "scope": {},
        "sensitivity": "internal",
        "visibility": [],
        "source_type": "user_statement",
        "version": 1,
        "valid_from": "2026-01-01T00:00:00Z",
        "expires_at": "2027-01-01T00:00:00Z",
        "created_at": "2026-01-01T00:00:00Z",
        "content_hash": f"h{n}",
    }


def _ops(start: int, count: int, subjects: list[str], seed: int) -> list[IndexOp]:
    rng, vectors = random.Random(seed), np.random.default_rng(seed)
    ops = []
    for n in range(start, start + count):
        op = op_from_images("INSERT", _item(n, subjects[n % len(subjects)], _text(rng, 20)), None)
        assert op is not None and op.document is not None
        document = dataclasses.replace(op.document, embedding=_unit(vectors))
        ops.append(dataclasses.replace(op, document=document))
    return ops


def _deleted(op: IndexOp) -> IndexOp:
    image = _item(0, op.subject_id, "")
    image |= {"memory_id": op.memory_id, "chain_id": op.chain_id, "status": "deleted"}
    gone = op_from_images("MODIFY", image, image | {"status": "active"})
    assert gone is not None
    return gone


def _filter(subject: str) -> SearchFilter:
    return SearchFilter(
        tenant_id=TENANT,
        subject_id=subject,
        now=NOW,
        max_sensitivity_rank=1,
        agent_role=None,
    )


def _rss_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _stats(values: list[float]) -> dict[str, float]:
    return {p: round(percentile(values, q), 2) for p, q in (("p50", 50), ("p95", 95), ("p99", 99))}


def _load(index: EmbeddedIndex, ops: list[IndexOp]) -> float:
    started = time.perf_counter()
    for i in range(0, len(ops), BATCH):
        index.apply(ops[i : i + BATCH])
    return time.perf_counter() - started


def _queries(seed: int) -> list[tuple[str, str]]:
    rng = random.Random(seed)
    subjects = [f"user-{i}" for i in range(SUBJECTS)]
    return [(subjects[i % SUBJECTS], _text(rng, rng.randint(2, 6))) for i in range(QUERIES)]


def _one_scale(total: int, embedder: Any, folder: Path) -> dict[str, Any]:
    subjects = [f"user-{i}" for i in range(SUBJECTS)]
    ops = _ops(0, total, subjects, seed=total)
    index = EmbeddedIndex(f"scale-{total}", folder)
    load_s = _load(index, ops)
    del ops
    index.close()
    file_mb = sum(p.stat().st_size for p in folder.iterdir() if p.is_file()) / 1e6

    # Reopened: each subject's first query loads it from the file.
    rss_before = _rss_mb()
    index = EmbeddedIndex(f"scale-{total}", folder)
    first: list[float] = []
    for subject in subjects:
        started = time.perf_counter()
        index.search(_filter(subject), "word1", None, 40)
        first.append((time.perf_counter() - started) * 1000)
    rss_loaded = _rss_mb()

    search, embed, total_ms, keyword_only, hits = [], [], [], [], []
    for subject, text in _queries(seed=7):
        started = time.perf_counter()
        vector = embedder.embed_one(text)
        embedded = time.perf_counter()
        found = index.search(_filter(subject), text, vector, 40)
        done = time.perf_counter()
        index.search(_filter(subject), text, None, 40)
        keyword_only.append((time.perf_counter() - done) * 1000)
        embed.append((embedded - started) * 1000)
        search.append((done - embedded) * 1000)
        total_ms.append((done - started) * 1000)
        hits.append(len(found.keyword) + len(found.vector))

    tombstone = []
    for op in _ops(0, min(100, total), subjects, seed=total):
        started = time.perf_counter()
        index.apply([_deleted(op)])
        tombstone.append((time.perf_counter() - started) * 1000)
    index.close()
    return {
        "memories": total,
        "subjects": SUBJECTS,
        "insert_per_s": round(total / load_s),
        "file_mb": round(file_mb, 1),
        "loaded_rss_mb": round(rss_loaded - rss_before, 1),
        "subject_first_query_ms": _stats(first),
        "search_ms": _stats(search),
        "keyword_only_ms": _stats(keyword_only),
        "query_embedding_ms": _stats(embed),
        "search_with_embedding_ms": _stats(total_ms),
        "hits_per_query_median": percentile([float(h) for h in hits], 50),
        "tombstone_ms": _stats(tombstone),
    }


def _neighbours(embedder: Any, folder: Path) -> dict[str, Any]:
    """One subject's queries alone, then beside 10 and 1,010 subjects: same top 10?"""
    alone = EmbeddedIndex("alone", folder)
    crowded = EmbeddedIndex("crowded", folder)
    subjects = [f"user-{i}" for i in range(SUBJECTS)]
    own = [op for op in _ops(0, 10_000 * SUBJECTS, subjects, seed=41) if op.subject_id == "user-0"]
    _load(alone, own)
    _load(crowded, _ops(0, 10_000 * SUBJECTS, subjects, seed=41))
    others = [f"other-{i}" for i in range(1000)]
    _load(crowded, _ops(10_000 * SUBJECTS, 20 * len(others), others, seed=42))
    same = 0
    queries = [text for _, text in _queries(seed=9)][:30]
    for text in queries:
        vector = embedder.embed_one(text)
        a = alone.search(_filter("user-0"), text, vector, 10)
        b = crowded.search(_filter("user-0"), text, vector, 10)
        same += [h.chain_id for h in a.keyword] == [h.chain_id for h in b.keyword] and [
            h.chain_id for h in a.vector
        ] == [h.chain_id for h in b.vector]
    alone.close()
    crowded.close()
    return {
        "subject_memories": len(own),
        "neighbour_subjects": SUBJECTS - 1 + len(others),
        "neighbour_memories": 10_000 * SUBJECTS - len(own) + 20 * len(others),
        "queries": len(queries),
        "same_top10_share": round(same / max(len(queries), 1), 3),
    }


def run() -> dict[str, Any]:
    from memvault.embeddings.minilm import MiniLmEmbedder

    embedder = MiniLmEmbedder()
    embedder.embed_one("warm up")
    _vocabulary(embedder)
    out: dict[str, Any] = {"scales": []}
    with tempfile.TemporaryDirectory() as home:
        for total in SCALES:
            folder = Path(home) / str(total)
            folder.mkdir()
            print(f"   index at {total:,} memories", file=sys.stderr, flush=True)
            out["scales"].append(_one_scale(total, embedder, folder))
        if 100_000 in SCALES:
            folder = Path(home) / "neighbours"
            folder.mkdir()
            print("   noisy neighbours", file=sys.stderr, flush=True)
            out["noisy_neighbours"] = _neighbours(embedder, folder)
    out["goals"] = {"search_with_embedding_p95_ms_at_100000": 30}
    return out


if __name__ == "__main__":
    print(json.dumps(run(), indent=2, ensure_ascii=False))
