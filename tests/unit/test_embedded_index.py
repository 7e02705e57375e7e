"""The embedded index on its own: the hard filter inside both queries, incremental
vectors, no deleted content on disk, and a folder from the earlier log format."""

from __future__ import annotations

import base64
import dataclasses
import json
import math
import sqlite3
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memvault.search.backend import SearchFilter
from memvault.search.documents import IndexOp, op_from_images
from memvault.search.embedded import EmbeddedIndex
from tests.unit.test_index_documents import item

NOW = "2026-03-01T00:00:00Z"


def live(vector: list[float] | None = None, **over: Any) -> IndexOp:
    op = op_from_images("INSERT", item(**over), None)
    assert op is not None and op.document is not None
    return dataclasses.replace(op, document=dataclasses.replace(op.document, embedding=vector))


def deleted(**over: Any) -> IndexOp:
    op = op_from_images("MODIFY", item(status="deleted", **over), item(**over))
    assert op is not None and not op.live
    return op


def superseded(**over: Any) -> IndexOp:
    op = op_from_images("MODIFY", item(status="superseded", **over), item(**over))
    assert op is not None and not op.live
    return op


def flt(**over: Any) -> SearchFilter:
    base: dict[str, Any] = {
        "tenant_id": "acme",
        "subject_id": "u-1",
        "now": NOW,
        "max_sensitivity_rank": 3,
        "agent_role": None,
    }
    return SearchFilter(**(base | over))


def unit(seed: int, dim: int = 8) -> list[float]:
    v = np.random.default_rng(seed).normal(size=dim)
    return (v / np.linalg.norm(v)).tolist()


def on_disk(folder: Path) -> bytes:
    """Every byte the index keeps in its folder: the file, its WAL and its shared memory."""
    return b"".join(p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file())


def test_a_deleted_memory_leaves_no_content_and_no_token_on_disk(tmp_path: Path) -> None:
    index = EmbeddedIndex("t", tmp_path)
    # Enough neighbours that the full-text index has real segments around the victim.
    index.apply(
        [
            live(unit(i), memory_id=f"mem_{i}", chain_id=f"chn_{i}", content=f"tea note {i}")
            for i in range(300)
        ]
    )
    victim = {"memory_id": "mem_v", "chain_id": "chn_v"}
    index.apply([live(unit(999), content="the badge number is zq4411x", **victim)])
    assert b"zq4411x" in on_disk(tmp_path)

    index.apply([deleted(**victim)])

    assert b"zq4411x" not in on_disk(tmp_path)  # neither the body nor the FTS token
    index.close()
    reopened = EmbeddedIndex("t", tmp_path)
    held = reopened.get("acme", "chn_v")
    assert held is not None and held[1]["doc_type"] == "tombstone"
    assert reopened.search(flt(), "badge zq4411x", unit(999), 10).keyword == []
    assert len(reopened.documents("acme")) == 301


def test_a_reopened_index_serves_what_was_written_without_a_rebuild(tmp_path: Path) -> None:
    index = EmbeddedIndex("t", tmp_path)
    index.apply([live(unit(1), content="Lin drinks oolong in Berlin")])
    index.close()

    reopened = EmbeddedIndex("t", tmp_path)
    found = reopened.search(flt(), "oolong", unit(1), 5)
    assert [h.chain_id for h in found.keyword] == ["chn_1"]
    assert [h.chain_id for h in found.vector] == ["chn_1"]
    assert found.vector[0].score == pytest.approx(1.0, abs=1e-6)
    held = reopened.get("acme", "chn_1")
    assert held is not None
    assert held[1]["embedding"] == pytest.approx(unit(1), abs=1e-6)  # float32 kept


def test_a_folder_of_the_earlier_log_format_is_imported_once(tmp_path: Path) -> None:
    """The earlier index was an append-only JSON log; its newest line per chain is
    imported (vectors as base64 float64 or as JSON numbers), and the log is removed."""
    body = live(content="tea in Berlin").body()
    body.pop("embedding")
    lines = [
        {"tenant_id": "acme", "id": "chn_1", "version": 20, "body": body | {"content": "old"}},
        {
            "tenant_id": "acme",
            "id": "chn_1",
            "version": 26,
            "body": body,
            "vector": base64.b64encode(np.asarray(unit(3), "<f8").tobytes()).decode(),
        },
        {
            "tenant_id": "acme",
            "id": "chn_2",
            "version": 26,
            "body": body | {"chain_id": "chn_2", "embedding": unit(4)},
        },
    ]
    log = tmp_path / "t.jsonl"
    log.write_text("\n".join(json.dumps(x) for x in lines) + "\n{torn", encoding="utf-8")

    index = EmbeddedIndex("t", tmp_path)

    assert not log.exists()
    docs = index.documents("acme")
    assert {k: v[0] for k, v in docs.items()} == {"chn_1": 26, "chn_2": 26}
    assert docs["chn_1"][1]["content"] == "tea in Berlin"
    assert docs["chn_1"][1]["embedding"] == pytest.approx(unit(3), abs=1e-6)
    assert [h.chain_id for h in index.search(flt(), "", unit(4), 1).vector] == ["chn_2"]


def test_writes_and_removals_keep_a_loaded_subject_exact() -> None:
    """Once a subject's matrix is loaded, each write updates it in place and a removal
    moves the last row into the hole; every score stays the exact cosine of its vector."""
    index = EmbeddedIndex("t")
    ops = [live(unit(i), memory_id=f"mem_{i}", chain_id=f"chn_{i}") for i in range(40)]
    index.apply(ops[:20])
    query = unit(1000)
    index.search(flt(), "", query, 5)  # loads the subject's matrix
    index.apply(ops[20:])
    index.apply([deleted(memory_id=f"mem_{i}", chain_id=f"chn_{i}") for i in (0, 39)])
    # A correction of chn_7, delivered in two batches: version 3 superseded (its row
    # leaves the matrix), then version 4, a new memory id on the same chain, comes back.
    index.apply([superseded(memory_id="mem_7", chain_id="chn_7")])
    index.apply([live(unit(500), memory_id="mem_7b", chain_id="chn_7", version=4)])

    hits = index.search(flt(), "", query, 100).vector

    vectors = {f"chn_{i}": unit(i) for i in range(40) if i not in (0, 7, 39)}
    vectors["chn_7"] = unit(500)
    expected = {c: (1 + float(np.dot(v, query))) / 2 for c, v in vectors.items()}
    assert {h.chain_id: h.score for h in hits} == pytest.approx(expected, abs=1e-5)
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


class DiskFullOnBody:
    """The index's connection, out of disk space on the ``nth`` document body written."""

    def __init__(self, conn: sqlite3.Connection, nth: int) -> None:
        self.conn = conn
        self.left = nth

    def execute(self, sql: str, *args: Any) -> sqlite3.Cursor:
        if sql.startswith("INSERT OR REPLACE INTO bodies"):
            self.left -= 1
            if self.left == 0:
                raise sqlite3.OperationalError("database or disk is full")
        return self.conn.execute(sql, *args)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.conn, name)


def test_a_failed_batch_leaves_neither_rows_nor_vectors() -> None:
    index = EmbeddedIndex("t")
    index.apply([live(unit(1), memory_id="mem_0", chain_id="chn_0")])
    index.search(flt(), "", unit(1), 5)  # the matrix is loaded
    good = live(unit(2), memory_id="mem_1", chain_id="chn_1", content="Lin likes tea")
    also = live(unit(3), memory_id="mem_2", chain_id="chn_2", content="Lin likes green tea")
    # The disk fills half way through the batch: the first document is written whole
    # (row, body, vector in the loaded matrix), the second one's row only.
    real = index._conn
    index._conn = DiskFullOnBody(real, 2)  # type: ignore[assignment]
    try:
        with pytest.raises(sqlite3.OperationalError, match="disk is full"):
            index.apply([good, also])
    finally:
        index._conn = real

    assert index.get("acme", "chn_1") is None and index.get("acme", "chn_2") is None
    found = index.search(flt(), "tea", unit(2), 5)
    assert found.keyword == [] and [h.chain_id for h in found.vector] == ["chn_0"]
    assert set(index.documents("acme")) == {"chn_0"}


def test_other_subjects_documents_never_reach_a_query() -> None:
    index = EmbeddedIndex("t")
    index.apply(
        [
            live(unit(1), subject_id="u-2", memory_id="m2", chain_id="c2", content="green tea"),
            live(unit(1), tenant_id="zeta", memory_id="m3", chain_id="c3", content="green tea"),
        ]
    )
    found = index.search(flt(), "green tea", unit(1), 10)
    assert found.keyword == [] and found.vector == []
    other = index.search(flt(subject_id="u-2"), "green tea", unit(1), 10)
    assert [h.chain_id for h in other.keyword] == ["c2"] == [h.chain_id for h in other.vector]


# ---------------------------------------------------------------- filter agreement

_ROLES = ("planner", "coder")
_doc = st.fixed_dictionaries(
    {
        "tenant_id": st.sampled_from(("acme", "zeta")),
        "subject_id": st.sampled_from(("u-1", "u-2")),
        "status": st.sampled_from(("active", "candidate")),
        "kind": st.sampled_from(("semantic", "episodic", "procedural")),
        "sensitivity": st.sampled_from(("public", "internal", "pii")),
        "visibility": st.lists(st.sampled_from(_ROLES), max_size=2, unique=True),
        "tags": st.lists(st.sampled_from(("deploy", "tea", "茶")), max_size=2, unique=True),
        "scope": st.dictionaries(st.sampled_from(("ws", "team")), st.sampled_from(("a", "b"))),
        "expires_at": st.sampled_from(("2026-02-01T00:00:00Z", "2026-09-01T00:00:00Z")),
        "with_vector": st.booleans(),
    }
)
_filter = st.fixed_dictionaries(
    {
        "max_sensitivity_rank": st.integers(0, 2),
        "agent_role": st.one_of(st.none(), st.sampled_from(_ROLES)),
        "kinds": st.lists(st.sampled_from(("semantic", "episodic")), max_size=2, unique=True),
        "tags": st.lists(st.sampled_from(("deploy", "茶")), max_size=1),
        "scope": st.dictionaries(st.sampled_from(("ws",)), st.sampled_from(("a", "b"))),
        "statuses": st.sampled_from((("active",), ("active", "candidate"))),
    }
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(docs=st.lists(_doc, min_size=1, max_size=25), wanted=_filter)
def test_both_queries_admit_exactly_what_the_filter_admits(
    docs: list[dict[str, Any]], wanted: dict[str, Any]
) -> None:
    """The SQL filter of the keyword and vector queries against ``SearchFilter.admits``,
    the filter's reference form: with k above the corpus, the keyword query returns every
    admitted document holding a query word and the vector query every admitted document
    with a vector, and nothing else."""
    index = EmbeddedIndex("t")
    ops = []
    for i, d in enumerate(docs):
        with_vector = d.pop("with_vector")
        ops.append(
            live(
                unit(i) if with_vector else None,
                memory_id=f"m{i}",
                chain_id=f"c{i}",
                content=f"Lin 喜欢 green tea {i}",
                **d,
            )
        )
    index.apply(ops)
    f = flt(
        kinds=tuple(wanted["kinds"]),
        tags=tuple(wanted["tags"]),
        **{k: wanted[k] for k in ("max_sensitivity_rank", "agent_role", "scope", "statuses")},
    )
    admitted = {op.chain_id for op in ops if f.admits(op.body())}
    with_vectors = {op.chain_id for op in ops if op.document and op.document.embedding}

    found = index.search(f, "喜欢 tea", unit(77), 100)

    assert {h.chain_id for h in found.keyword} == admitted
    assert {h.chain_id for h in found.vector} == admitted & with_vectors
    assert all(math.isfinite(h.score) and h.score > 0 for h in found.keyword)
