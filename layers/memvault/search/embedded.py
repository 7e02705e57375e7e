"""The embedded index: local mode's stand-in for OpenSearch, in process, no Java.

Durable part: one SQLite file. ``docs`` holds one row per chain with its external
version and the hard-filter columns; ``bodies`` holds the stored body (JSON, without the
vector), the vector (float32 bytes) and the document's keyword tokens. A newer version
updates the chain's rows in place; a stale one is refused (OpenSearch's external-version
rule). Tombstones stay, ids only. ``secure_delete`` zeroes what a tombstone replaces and
the write-ahead log is checkpointed and truncated after it, so no deleted content stays
on disk.

Searchable part: one ``_Subject`` per (tenant, subject), built from the file on that
subject's first query and then kept current by every write, never rebuilt:

- the filter columns as numpy arrays, so the hard filter is a handful of vector
  comparisons over the subject's rows;
- a float32 matrix of vectors for exact cosine k-NN, and a second one for the Chinese
  model's vectors of the memories that hold Chinese (``search.language``);
- postings (token -> rows, term frequencies) and document lengths for BM25 with the
  subject's own statistics: other subjects' documents neither cost a query anything
  nor move its ranking.

A removed row's slot is freed and reused; a write costs O(its tokens). Every hard filter
is applied before ranking, as the OpenSearch query does: both rankings only ever score
the rows the filter admits. A folder written by the earlier log format
(``<name>.jsonl``) is imported once.
"""

from __future__ import annotations

import base64
import json
import math
import sqlite3
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memvault.search.backend import APPLIED, STALE, Hit, OpResult, SearchFilter, SearchResult
from memvault.search.documents import IndexOp
from memvault.search.text import tokens

if TYPE_CHECKING:
    import numpy as np

#: BM25's parameters, Lucene's defaults.
K1 = 1.2
B = 0.75

_SCHEMA = (
    """CREATE TABLE IF NOT EXISTS docs (
        rid INTEGER PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        doc_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        subject_id TEXT NOT NULL,
        doc_type TEXT NOT NULL,
        memory_id TEXT NOT NULL,
        memory_version INTEGER NOT NULL,
        UNIQUE (tenant_id, doc_id)
    )""",
    "CREATE INDEX IF NOT EXISTS docs_by_subject ON docs (tenant_id, subject_id)",
    """CREATE TABLE IF NOT EXISTS bodies (
        rid INTEGER PRIMARY KEY REFERENCES docs (rid),
        body TEXT NOT NULL,
        vector BLOB,
        words TEXT
    )""",
)
#: Columns added after the first release, brought into an older file on open.
_ADDED_COLUMNS = {"bodies": {"vector_zh": "BLOB"}}


def keyword_tokens(body: dict[str, Any]) -> list[str]:
    """What BM25 matches a memory on: its content, its key and its tags."""
    return tokens(f"{body['content']} {body['key_text']} {' '.join(body['tags'])}")


class _Codes:
    """Small integer codes for repeated strings (statuses, kinds), per subject."""

    def __init__(self) -> None:
        self.codes: dict[str, int] = {}

    def of(self, value: str) -> int:
        return self.codes.setdefault(value, len(self.codes))

    def known(self, values: Sequence[str]) -> list[int]:
        return [self.codes[v] for v in values if v in self.codes]


class _Vectors:
    """One vector field of a subject's slots: a float32 matrix and which slots have a row.

    Its size is the first vector's; a vector of another size (another model's) is not
    kept, so a query of the wrong size finds nothing rather than garbage."""

    def __init__(self, dim: int | None) -> None:
        import numpy as np

        self.dim = dim
        self.matrix = np.zeros((0, dim or 0), dtype=np.float32)
        self.has = np.zeros(0, dtype=bool)

    def grow(self, old: int, cap: int) -> None:
        import numpy as np

        matrix = np.zeros((cap, self.dim or 0), dtype=np.float32)
        matrix[:old] = self.matrix
        has = np.zeros(cap, dtype=bool)
        has[:old] = self.has
        self.matrix, self.has = matrix, has

    def set(self, at: int, vector: Any, cap: int) -> None:
        if vector is not None and self.dim is None:  # the subject's first vector
            import numpy as np

            self.dim = len(vector)
            self.matrix = np.zeros((cap, self.dim), dtype=np.float32)
        fits = vector is not None and len(vector) == self.dim
        self.has[at] = fits
        if fits:
            self.matrix[at] = vector

    def clear(self, at: int) -> None:
        self.has[at] = False
        if self.dim:
            self.matrix[at] = 0.0

    def nearest(
        self, subject: _Subject, mask: np.ndarray, vector: Sequence[float], k: int
    ) -> list[Hit]:
        import numpy as np

        if self.dim != len(vector):
            return []
        sims = self.matrix @ np.asarray(vector, dtype=np.float32)
        # Reported like OpenSearch's cosinesimil score: (1 + cosine) / 2.
        return subject.top((1.0 + sims) / 2.0, mask & self.has, k)


class _Subject:
    """One subject's searchable memories, in slots that removals free and writes reuse."""

    def __init__(self, dim: int | None, dim_zh: int | None = None) -> None:
        import numpy as np

        self.vectors = _Vectors(dim)
        self.vectors_zh = _Vectors(dim_zh)
        self.cap = 0
        self.slot: dict[int, int] = {}  # docs.rid -> slot
        self.free: list[int] = []
        self.hits: list[tuple[str, str, int] | None] = []
        self.visibility: list[frozenset[str]] = []
        self.tags: list[frozenset[str]] = []
        self.scope: list[frozenset[str]] = []
        self.words: list[dict[str, int]] = []
        self.statuses, self.kinds = _Codes(), _Codes()
        self.used = np.zeros(0, dtype=bool)
        self.status = np.zeros(0, dtype=np.int16)
        self.kind = np.zeros(0, dtype=np.int16)
        self.rank = np.zeros(0, dtype=np.int8)
        self.visible_to_all = np.zeros(0, dtype=bool)
        self.expires = np.zeros(0, dtype="U40")
        self.length = np.zeros(0, dtype=np.float32)
        self.postings: dict[str, tuple[list[int], list[int]]] = {}
        self._arrays: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self.count = 0

    def _grow(self) -> None:
        import numpy as np

        cap = max(16, 2 * self.cap)

        def grown(a: np.ndarray) -> np.ndarray:
            out = np.zeros((cap, *a.shape[1:]), dtype=a.dtype)
            out[: self.cap] = a
            return out

        for name in ("used", "status", "kind", "rank", "visible_to_all", "expires", "length"):
            setattr(self, name, grown(getattr(self, name)))
        self.vectors.grow(self.cap, cap)
        self.vectors_zh.grow(self.cap, cap)
        extra = cap - self.cap
        self.hits += [None] * extra
        self.visibility += [frozenset()] * extra
        self.tags += [frozenset()] * extra
        self.scope += [frozenset()] * extra
        self.words += [{}] * extra
        self.free.extend(range(cap - 1, self.cap - 1, -1))
        self.cap = cap

    def put(
        self, rid: int, body: dict[str, Any], vector: Any, words: list[str], vector_zh: Any = None
    ) -> None:
        self.drop(rid)
        if not self.free:
            self._grow()
        at = self.free.pop()
        self.slot[rid] = at
        self.used[at] = True
        self.hits[at] = (body["chain_id"], body["memory_id"], int(body["memory_version"]))
        self.status[at] = self.statuses.of(body["status"])
        self.kind[at] = self.kinds.of(body["kind"])
        self.rank[at] = int(body["sensitivity_rank"])
        self.visible_to_all[at] = bool(body["visible_to_all"])
        self.expires[at] = body["expires_at"]
        self.visibility[at] = frozenset(body["visibility"])
        self.tags[at] = frozenset(body["tags"])
        self.scope[at] = frozenset(body["scope"])
        self.vectors.set(at, vector, self.cap)
        self.vectors_zh.set(at, vector_zh, self.cap)
        counts: dict[str, int] = {}
        for w in words:
            counts[w] = counts.get(w, 0) + 1
        self.words[at] = counts
        for w, tf in counts.items():
            rows, tfs = self.postings.setdefault(w, ([], []))
            rows.append(at)
            tfs.append(tf)
            self._arrays.pop(w, None)
        self.length[at] = len(words)
        self.count += 1

    def drop(self, rid: int) -> None:
        at = self.slot.pop(rid, None)
        if at is None:
            return
        for w in self.words[at]:
            rows, tfs = self.postings[w]
            i = rows.index(at)
            rows[i], tfs[i] = rows[-1], tfs[-1]
            rows.pop()
            tfs.pop()
            if not rows:
                del self.postings[w]
            self._arrays.pop(w, None)
        self.count -= 1
        self.used[at] = False
        self.vectors.clear(at)
        self.vectors_zh.clear(at)
        self.hits[at] = None
        self.words[at] = {}
        self.visibility[at] = self.tags[at] = self.scope[at] = frozenset()
        self.expires[at] = ""
        self.length[at] = 0
        self.free.append(at)

    # ----------------------------------------------------------------- queries

    def admitted(self, flt: SearchFilter) -> np.ndarray:
        """The slots the hard filter admits (``SearchFilter.admits``, vectorized)."""
        import numpy as np

        mask = self.used & np.isin(self.status, self.statuses.known(flt.statuses))
        mask &= self.expires > flt.now
        mask &= self.rank <= flt.max_sensitivity_rank
        if flt.kinds:
            mask &= np.isin(self.kind, self.kinds.known(flt.kinds))
        # A visibility list restricts agents only (``AccessContext.may_read``).
        if flt.agent_role is not None:
            for at in np.flatnonzero(mask & ~self.visible_to_all).tolist():
                if flt.agent_role not in self.visibility[at]:
                    mask[at] = False
        wanted_tags, wanted_scope = frozenset(flt.tags), frozenset(flt.scope_pairs())
        if wanted_tags or wanted_scope:
            for at in np.flatnonzero(mask).tolist():
                if not (wanted_tags <= self.tags[at] and wanted_scope <= self.scope[at]):
                    mask[at] = False
        return mask

    def _posting(self, word: str) -> tuple[np.ndarray, np.ndarray] | None:
        import numpy as np

        held = self._arrays.get(word)
        if held is None:
            raw = self.postings.get(word)
            if raw is None:
                return None
            held = (np.asarray(raw[0], dtype=np.int64), np.asarray(raw[1], dtype=np.float32))
            self._arrays[word] = held
        return held

    def bm25(self, words: Sequence[str], mask: np.ndarray) -> np.ndarray:
        """BM25 of every slot ``mask`` admits (0 elsewhere, and where no query word occurs).

        The statistics (how many documents, their mean length, how many hold a word) are
        counted over the admitted slots alone: a memory the reader may not see, or that
        the request's filters leave out, changes no weight, or an agent could learn from
        its scores whether a hidden memory holds a word."""
        import numpy as np

        scores = np.zeros(self.cap, dtype=np.float32)
        count = int(np.count_nonzero(mask))
        if not count:
            return scores
        avg = max(float(self.length[mask].sum()) / count, 1e-9)
        norm = K1 * (1 - B + B * self.length / avg)
        for word in dict.fromkeys(words):
            posting = self._posting(word)
            if posting is None:
                continue
            rows, tf = posting
            seen = mask[rows]
            df = int(np.count_nonzero(seen))
            if not df:
                continue
            rows, tf = rows[seen], tf[seen]
            idf = math.log(1 + (count - df + 0.5) / (df + 0.5))
            scores[rows] += idf * tf * (K1 + 1) / (tf + norm[rows])
        return scores

    def top(self, scores: np.ndarray, eligible: np.ndarray, k: int) -> list[Hit]:
        import numpy as np

        slots = np.flatnonzero(eligible)
        if not len(slots):
            return []
        ranked = slots[np.lexsort((slots, -scores[slots]))]
        chosen = ranked[:k].tolist()
        if len(ranked) > k and scores[ranked[k]] == scores[ranked[k - 1]]:
            # Equal scores at the cut: which of them make it is decided by chain id, not
            # by slot (a slot is reused after a delete the caller may not see).
            cut = scores[ranked[k - 1]]
            above = ranked[scores[ranked] > cut].tolist()
            tied = sorted(ranked[scores[ranked] == cut].tolist(), key=self._chain_of)
            chosen = above + tied[: k - len(above)]
        out = []
        for at in chosen:
            hit = self.hits[at]
            assert hit is not None
            chain_id, memory_id, version = hit
            out.append(Hit(chain_id, memory_id, version, float(scores[at])))
        return out

    def _chain_of(self, at: int) -> str:
        hit = self.hits[at]
        return "" if hit is None else hit[0]


class EmbeddedIndex:
    remote = False  # in this process: both searches take well under a millisecond

    def __init__(self, name: str, folder: str | Path | None = None) -> None:
        self.name = name
        self._lock = threading.RLock()
        self._subjects: dict[tuple[str, str], _Subject] = {}
        self._path: Path | None = None
        if folder is not None:
            Path(folder).mkdir(parents=True, exist_ok=True)
            self._path = Path(folder) / f"{name}.sqlite3"
        self._conn = sqlite3.connect(
            str(self._path) if self._path else ":memory:",
            check_same_thread=False,
            isolation_level=None,
        )
        for pragma in ("journal_mode = WAL", "synchronous = FULL", "secure_delete = ON"):
            self._conn.execute(f"PRAGMA {pragma}")
        with self._tx():
            for statement in _SCHEMA:
                self._conn.execute(statement)
            for table, columns in _ADDED_COLUMNS.items():
                held = {row[1] for row in self._conn.execute(f"PRAGMA table_info({table})")}
                for column, kind in columns.items():
                    if column not in held:
                        self._conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {kind}")
        if folder is not None:
            self._import_log(Path(folder) / f"{name}.jsonl")

    @contextmanager
    def _tx(self) -> Iterator[None]:
        with self._lock:
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                yield
            except BaseException:
                self._conn.execute("ROLLBACK")
                self._subjects.clear()  # the searchable part reloads from the file
                raise
            self._conn.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    # ----------------------------------------------------------------- persistence

    def _import_log(self, log: Path) -> None:
        """Bring in a folder written by the earlier append-only log, then remove the log."""
        if not log.exists():
            return
        latest: dict[tuple[str, str], tuple[int, dict[str, Any]]] = {}
        with log.open(encoding="utf-8") as fh:
            for line in fh:
                try:
                    entry = json.loads(line)
                except json.JSONDecodeError:
                    continue  # a torn last line from a crash: that write never returned
                body = entry["body"]
                if "vector" in entry:
                    body["embedding"] = _unpack(entry["vector"])
                latest[(entry["tenant_id"], entry["id"])] = (entry["version"], body)
        with self._tx():
            for (tenant_id, doc_id), (version, body) in latest.items():
                if self._held(tenant_id, doc_id) is None:
                    self._put(tenant_id, doc_id, version, body)
        log.unlink()
        self._truncate_wal()

    def reset(self) -> None:
        """Forget everything (the local stack does this when its table starts empty)."""
        with self._tx():
            self._conn.execute("DELETE FROM bodies")
            self._conn.execute("DELETE FROM docs")
            self._subjects.clear()
        self._truncate_wal()

    def _truncate_wal(self) -> None:
        if self._path is not None:
            with self._lock:
                self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")

    # ---------------------------------------------------------------------- writes

    def ensure(self) -> None:
        return None

    def _held(self, tenant_id: str, doc_id: str) -> tuple[int, int] | None:
        """(row id, external version) of a chain's row."""
        row = self._conn.execute(
            "SELECT rid, version FROM docs WHERE tenant_id = ? AND doc_id = ?",
            (tenant_id, doc_id),
        ).fetchone()
        return None if row is None else (int(row[0]), int(row[1]))

    def _put(self, tenant_id: str, doc_id: str, version: int, body: dict[str, Any]) -> None:
        import numpy as np

        memory = body.get("doc_type") == "memory"
        embedding = body.get("embedding") if memory else None
        vector = None if embedding is None else np.asarray(embedding, dtype="<f4")
        embedding_zh = body.get("embedding_zh") if memory else None
        vector_zh = None if embedding_zh is None else np.asarray(embedding_zh, dtype="<f4")
        words = keyword_tokens(body) if memory else []
        stored = {k: v for k, v in body.items() if k not in ("embedding", "embedding_zh")}
        (rid,) = self._conn.execute(
            """INSERT INTO docs (tenant_id, doc_id, version, subject_id, doc_type, memory_id,
                   memory_version) VALUES (?, ?, ?, ?, ?, ?, ?)
               ON CONFLICT (tenant_id, doc_id) DO UPDATE SET
                   version = excluded.version, subject_id = excluded.subject_id,
                   doc_type = excluded.doc_type, memory_id = excluded.memory_id,
                   memory_version = excluded.memory_version
               RETURNING rid""",
            (
                tenant_id,
                doc_id,
                version,
                body["subject_id"],
                "memory" if memory else "tombstone",
                body["memory_id"],
                int(body["memory_version"]),
            ),
        ).fetchone()
        self._conn.execute(
            """INSERT OR REPLACE INTO bodies (rid, body, vector, words, vector_zh)
               VALUES (?, ?, ?, ?, ?)""",
            (
                rid,
                json.dumps(stored, ensure_ascii=False),
                None if vector is None else vector.tobytes(),
                " ".join(words) if memory else None,
                None if vector_zh is None else vector_zh.tobytes(),
            ),
        )
        subject = self._subjects.get((tenant_id, body["subject_id"]))
        if subject is not None:
            if memory:
                subject.put(rid, body, vector, words, vector_zh)
            else:
                subject.drop(rid)

    def apply(self, ops: Sequence[IndexOp]) -> list[OpResult]:
        results: list[OpResult] = []
        removed = False
        with self._tx():
            for op in ops:
                held = self._held(op.tenant_id, op.doc_id)
                if held is not None and held[1] >= op.version:
                    results.append(OpResult(op, STALE))
                    continue
                self._put(op.tenant_id, op.doc_id, op.version, op.body())
                results.append(OpResult(op, APPLIED))
                removed = removed or not op.live
        if removed:
            self._truncate_wal()  # no WAL frame may keep what the tombstone removed
        return results

    # ----------------------------------------------------------------------- reads

    def _subject(self, tenant_id: str, subject_id: str) -> _Subject:
        import numpy as np

        key = (tenant_id, subject_id)
        subject = self._subjects.get(key)
        if subject is not None:
            return subject
        rows = self._conn.execute(
            """SELECT d.rid, b.body, b.vector, b.words, b.vector_zh
               FROM docs d JOIN bodies b ON b.rid = d.rid
               WHERE d.tenant_id = ? AND d.subject_id = ? AND d.doc_type = 'memory'
               ORDER BY d.rid""",
            (tenant_id, subject_id),
        ).fetchall()
        dim = next((len(r[2]) // 4 for r in rows if r[2] is not None), None)
        dim_zh = next((len(r[4]) // 4 for r in rows if r[4] is not None), None)
        subject = _Subject(dim, dim_zh)
        for rid, body, blob, words, blob_zh in rows:
            vector = None if blob is None else np.frombuffer(blob, dtype="<f4")
            vector_zh = None if blob_zh is None else np.frombuffer(blob_zh, dtype="<f4")
            subject.put(rid, json.loads(body), vector, (words or "").split(), vector_zh)
        self._subjects[key] = subject
        return subject

    def search(
        self,
        flt: SearchFilter,
        text: str,
        vector: Sequence[float] | None,
        k: int,
        *,
        vector_zh: Sequence[float] | None = None,
    ) -> SearchResult:
        started = time.perf_counter()
        keyword: list[Hit] = []
        vector_hits: list[Hit] = []
        zh_hits: list[Hit] = []
        words = tokens(text)
        with self._lock:
            subject = self._subject(flt.tenant_id, flt.subject_id)
            if subject.count:
                mask = subject.admitted(flt)
                if words:
                    scores = subject.bm25(words, mask)
                    keyword = subject.top(scores, scores > 0, k)
                if vector is not None:
                    vector_hits = subject.vectors.nearest(subject, mask, vector, k)
                if vector_zh is not None:
                    zh_hits = subject.vectors_zh.nearest(subject, mask, vector_zh, k)
        return SearchResult(
            keyword=keyword,
            vector=vector_hits,
            took_ms=(time.perf_counter() - started) * 1000,
            vector_zh=zh_hits,
        )

    def _document(
        self, version: int, body: str, blob: bytes | None, blob_zh: bytes | None = None
    ) -> tuple[int, dict[str, Any]]:
        import numpy as np

        doc: dict[str, Any] = json.loads(body)
        if doc.get("doc_type") == "memory":
            doc["embedding"] = None if blob is None else np.frombuffer(blob, "<f4").tolist()
            if blob_zh is not None:
                doc["embedding_zh"] = np.frombuffer(blob_zh, "<f4").tolist()
        return int(version), doc

    def get(self, tenant_id: str, chain_id: str) -> tuple[int, dict[str, Any]] | None:
        with self._lock:
            row = self._conn.execute(
                """SELECT d.version, b.body, b.vector, b.vector_zh
                   FROM docs d JOIN bodies b ON b.rid = d.rid
                   WHERE d.tenant_id = ? AND d.doc_id = ?""",
                (tenant_id, chain_id),
            ).fetchone()
        return None if row is None else self._document(*row)

    def documents(self, tenant_id: str) -> dict[str, tuple[int, dict[str, Any]]]:
        with self._lock:
            rows = self._conn.execute(
                """SELECT d.doc_id, d.version, b.body, b.vector, b.vector_zh
                   FROM docs d JOIN bodies b ON b.rid = d.rid WHERE d.tenant_id = ?""",
                (tenant_id,),
            ).fetchall()
        return {doc_id: self._document(v, b, blob, zh) for doc_id, v, b, blob, zh in rows}

    def refresh(self) -> None:
        return None


def _unpack(text: str) -> list[float]:
    """A vector as the earlier log wrote it: base64 of its float64 bytes."""
    import numpy as np

    values: list[float] = np.frombuffer(base64.b64decode(text), dtype="<f8").tolist()
    return values
