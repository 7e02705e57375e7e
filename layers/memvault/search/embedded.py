"""The embedded index: local mode's stand-in for OpenSearch, in process, no Java.

Exact cosine k-NN (numpy) and BM25 (bm25s) over the documents of one subject: the hard
filter selects the subject's admissible documents first, and only those are ranked, as
the OpenSearch query does. Writes follow OpenSearch's external-version rule (a write
whose version is not above the stored one is refused as stale), and tombstones are kept.

With a folder, every applied write is appended to ``<folder>/<name>.jsonl`` and the index
is rebuilt from that log when it opens, so a restarted local stack keeps its index. A
tombstone rewrites the log with current states only, so no deleted content stays on disk.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from memvault.search.backend import APPLIED, STALE, Hit, OpResult, SearchFilter, SearchResult
from memvault.search.documents import IndexOp
from memvault.search.text import tokens


class _SubjectView:
    """Ranking structures for one subject's documents, rebuilt when any of them changes."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        import bm25s
        import numpy as np

        self.docs = docs
        self.bm25 = None
        corpus = [tokens(f"{d['content']} {d['key_text']} {' '.join(d['tags'])}") for d in docs]
        if any(corpus):
            self.bm25 = bm25s.BM25()
            self.bm25.index([c or ["\x00"] for c in corpus], show_progress=False)
        with_vectors = [d.get("embedding") is not None for d in docs]
        dim = next((len(d["embedding"]) for d in docs if d.get("embedding") is not None), 0)
        self.matrix = np.zeros((len(docs), dim), dtype=np.float32)
        for i, d in enumerate(docs):
            if with_vectors[i]:
                self.matrix[i] = d["embedding"]


class EmbeddedIndex:
    def __init__(self, name: str, folder: str | Path | None = None) -> None:
        self.name = name
        self._lock = threading.RLock()
        self._docs: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
        self._views: dict[tuple[str, str], _SubjectView] = {}
        self._by_subject: dict[tuple[str, str], set[str]] = {}
        self._log: Path | None = None
        #: Set once the log is replayed; every read and write waits for it, so that a
        #: large index loads in the background while the store already serves.
        self._ready = threading.Event()
        if folder is not None:
            Path(folder).mkdir(parents=True, exist_ok=True)
            self._log = Path(folder) / f"{name}.jsonl"
            if self._log.exists():
                threading.Thread(target=self._load, name=f"load-{name}", daemon=True).start()
                return
        self._ready.set()

    def _load(self) -> None:
        try:
            with self._lock:
                self._replay()
        finally:
            self._ready.set()

    @contextmanager
    def _locked(self) -> Iterator[None]:
        self._ready.wait()
        with self._lock:
            yield

    def loaded(self) -> bool:
        return self._ready.is_set()

    # ----------------------------------------------------------------- persistence

    def _replay(self) -> None:
        assert self._log is not None
        if not self._log.exists():
            return
        with self._log.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line from a crash: that write never returned
                body = entry["body"]
                if "vector" in entry:
                    body["embedding"] = _unpack(entry["vector"])
                self._store(entry["tenant_id"], entry["id"], entry["version"], body)

    def reset(self) -> None:
        """Forget everything (the local stack does this when its table starts empty)."""
        with self._locked():
            self._docs.clear()
            self._views.clear()
            self._by_subject.clear()
            if self._log is not None and self._log.exists():
                self._log.unlink()

    # ---------------------------------------------------------------------- writes

    def ensure(self) -> None:
        return None

    def _store(self, tenant_id: str, doc_id: str, version: int, body: dict[str, Any]) -> None:
        self._docs[(tenant_id, doc_id)] = (version, body)
        subject = (tenant_id, body["subject_id"])
        self._by_subject.setdefault(subject, set()).add(doc_id)
        self._views.pop(subject, None)

    def apply(self, ops: Sequence[IndexOp]) -> list[OpResult]:
        results: list[OpResult] = []
        lines: list[str] = []
        with self._locked():
            for op in ops:
                held = self._docs.get((op.tenant_id, op.doc_id))
                if held is not None and held[0] >= op.version:
                    results.append(OpResult(op, STALE))
                    continue
                body = op.body()
                self._store(op.tenant_id, op.doc_id, op.version, body)
                lines.append(_line(op.tenant_id, op.doc_id, op.version, body))
                results.append(OpResult(op, APPLIED))
            if self._log is not None and lines:
                if any(r.outcome == APPLIED and not r.op.live for r in results):
                    self._compact()  # a tombstone: no older line may keep the content
                else:
                    with self._log.open("a", encoding="utf-8") as fh:
                        fh.write("\n".join(lines) + "\n")
        return results

    def _compact(self) -> None:
        """Rewrite the log with only the current state of each document (atomically), so
        that the content of a deleted or superseded memory stays in no line on disk."""
        assert self._log is not None
        staging = self._log.with_suffix(".jsonl.tmp")
        with staging.open("w", encoding="utf-8") as fh:
            for (tenant_id, doc_id), (version, body) in self._docs.items():
                fh.write(_line(tenant_id, doc_id, version, body) + "\n")
        staging.replace(self._log)

    # ----------------------------------------------------------------------- reads

    def _view(self, tenant_id: str, subject_id: str) -> _SubjectView:
        subject = (tenant_id, subject_id)
        view = self._views.get(subject)
        if view is None:
            ids = sorted(self._by_subject.get(subject, ()))
            docs = [self._docs[(tenant_id, i)][1] for i in ids]
            view = _SubjectView([d for d in docs if d.get("doc_type") == "memory"])
            self._views[subject] = view
        return view

    def search(
        self, flt: SearchFilter, text: str, vector: Sequence[float] | None, k: int
    ) -> SearchResult:
        import numpy as np

        started = time.perf_counter()
        with self._locked():
            view = self._view(flt.tenant_id, flt.subject_id)
        admitted = np.array([flt.admits(d) for d in view.docs], dtype=bool)
        keyword: list[Hit] = []
        vector_hits: list[Hit] = []
        if admitted.any():
            query_tokens = tokens(text)
            if view.bm25 is not None and query_tokens:
                scores = np.asarray(view.bm25.get_scores(query_tokens), dtype=np.float64)
                keyword = _top(view.docs, np.where(admitted & (scores > 0), scores, -1.0), k)
            if vector is not None and view.matrix.shape[1] == len(vector):
                sims = view.matrix @ np.asarray(vector, dtype=np.float32)
                has_vector = np.array([d.get("embedding") is not None for d in view.docs])
                # Reported like OpenSearch's cosinesimil score: (1 + cosine) / 2.
                scored = np.where(admitted & has_vector, (1.0 + sims) / 2.0, -1.0)
                vector_hits = _top(view.docs, scored, k)
        return SearchResult(
            keyword=keyword, vector=vector_hits, took_ms=(time.perf_counter() - started) * 1000
        )

    def get(self, tenant_id: str, chain_id: str) -> tuple[int, dict[str, Any]] | None:
        with self._locked():
            return self._docs.get((tenant_id, chain_id))

    def documents(self, tenant_id: str) -> dict[str, tuple[int, dict[str, Any]]]:
        with self._locked():
            return {i: v for (t, i), v in self._docs.items() if t == tenant_id}

    def refresh(self) -> None:
        return None


def _line(tenant_id: str, doc_id: str, version: int, body: dict[str, Any]) -> str:
    """One log line. The embedding goes as base64 of its float64 bytes (``vector``): exact,
    and a tenth of the cost of writing 384 floats as JSON text. Lines written before this
    keep the embedding inside ``body``; ``_replay`` reads both."""
    entry: dict[str, Any] = {"tenant_id": tenant_id, "id": doc_id, "version": version}
    embedding = body.get("embedding")
    if embedding is not None:
        entry["body"] = {k: v for k, v in body.items() if k != "embedding"}
        entry["vector"] = _pack(embedding)
    else:
        entry["body"] = body
    return json.dumps(entry, ensure_ascii=False)


def _pack(vector: Sequence[float]) -> str:
    import numpy as np

    return base64.b64encode(np.asarray(vector, dtype="<f8").tobytes()).decode("ascii")


def _unpack(text: str) -> list[float]:
    import numpy as np

    values: list[float] = np.frombuffer(base64.b64decode(text), dtype="<f8").tolist()
    return values


def _top(docs: list[dict[str, Any]], scores: Any, k: int) -> list[Hit]:
    import numpy as np

    order = np.argsort(-scores, kind="stable")[:k]
    return [
        Hit(
            chain_id=docs[i]["chain_id"],
            memory_id=docs[i]["memory_id"],
            memory_version=int(docs[i]["memory_version"]),
            score=float(scores[i]),
        )
        for i in order
        if scores[i] >= 0
    ]
