"""Mem0 on LoCoMo beside memvault: the same turns, questions and scoring, the same embedder.

Each conversation's turns are given to Mem0 2.2 (``infer=False``: each turn kept as it is,
no LLM) on its OpenSearch vector store, one Mem0 user per conversation, and every
question with evidence (``locomo.questions``) goes to ``Memory.search`` with ``top_k``
10. A question is a hit at k when one of the first k results is a gold evidence turn,
as in ``locomo.run_conversation``. The embedder is the model memvault's figures were
measured with (``peers.CachedEmbedder`` over it: Mem0 embeds passages and queries with
it through ``peers._Mem0Embedder``; the query vector is computed afresh for each
search, so its latency includes a real embedding, as memvault's does).

Mem0 is given what Mem0's API can hold of a turn: its text, and the speaker, session and
turn as metadata. It has no notion of neighbouring turns, so it ranks each turn alone.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from locomo import _percentile, hit, questions, turns
from peers import CachedEmbedder, Mem0System, temp_home


def _embedder(model: str) -> CachedEmbedder:
    if model == "minilm":
        from memvault.embeddings.minilm import MiniLmEmbedder

        return CachedEmbedder(MiniLmEmbedder())
    from memvault.embeddings.onnx import OnnxEmbedder

    return CachedEmbedder(OnnxEmbedder(model))


def _conversation(
    mem0: Mem0System, embedder: CachedEmbedder, name: str, conversation: dict[str, Any]
) -> dict[str, Any]:
    items = turns(conversation)
    client = mem0.client_for("bench", f"locomo-{name}", None, None)
    started = time.perf_counter()
    embedder.embed([t["text"] for t in items])  # in batches, as memvault's indexer does
    mem0.begin_bulk()
    ref_of: dict[str, str] = {}
    for turn in items:
        answer = client.call(
            "POST",
            f"/v1/subjects/locomo-{name}/memories",
            body={
                "kind": "episodic",
                "content": turn["text"],
                "source": {"type": "user_statement", "ref": turn["dia_id"]},
                "scope": {"session": turn["session"], "turn": str(turn["turn"])},
            },
        )
        ref_of[answer.body["memory_id"]] = turn["dia_id"]
    mem0.flush_bulk()
    loaded_s = time.perf_counter() - started
    hits5 = hits10 = 0
    latencies: list[float] = []
    asked = questions(conversation)
    for q in asked:
        # Scope pairs become Mem0 metadata filters: none here, the user alone.
        answer = client.call(
            "POST", f"/v1/subjects/locomo-{name}/recall", body={"query": q["question"], "limit": 10}
        )
        latencies.append(float(answer.headers["Server-Timing"].split("dur=")[1]))
        at5, at10 = hit(
            q, [ref_of.get(item["memory"]["memory_id"]) for item in answer.body["items"]]
        )
        hits5 += at5
        hits10 += at10
    return {
        "conversation": name,
        "turns": len(items),
        "questions": len(asked),
        "hits_at_5": hits5,
        "hits_at_10": hits10,
        "turns_per_s": round(len(items) / loaded_s, 1),
        "latencies_ms": latencies,
    }


def measure(data: Path, names: tuple[str, ...], url: str, model: str) -> list[dict[str, Any]]:
    """Mem0's rows for the named conversations, on the OpenSearch at ``url``."""
    embedder = _embedder(model)
    rows = []
    with temp_home() as raw:
        mem0 = Mem0System(Path(raw), url, embedder, f"locomo-mem0-{uuid.uuid4().hex[:6]}")
        try:
            for name in names:
                conversation = json.loads((data / f"{name}.json").read_text())
                row = _conversation(mem0, embedder, name, conversation)
                rows.append(row)
                print(
                    f"mem0 conv-{name}: {row['hits_at_10']}/{row['questions']} at 10, "
                    f"p50 {statistics.median(row['latencies_ms']):.1f} ms",
                    file=sys.stderr,
                    flush=True,
                )
        finally:
            mem0.close()
    return rows


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    asked = sum(r["questions"] for r in rows)
    latencies = [x for r in rows for x in r["latencies_ms"]]
    return {
        "questions": asked,
        "recall_any_at_5": round(sum(r["hits_at_5"] for r in rows) / asked, 4),
        "recall_any_at_10": round(sum(r["hits_at_10"] for r in rows) / asked, 4),
        "p50_ms": round(statistics.median(latencies), 1),
        "p95_ms": round(_percentile(latencies, 0.95), 1),
    }
