"""Language routing's parts on their own: which texts count as Chinese, the embedded
index's second vector field on disk, the OpenSearch mapping and query for it, and which
Chinese model the local stack picks."""

from __future__ import annotations

import dataclasses
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from memvault.search.documents import IndexOp
from memvault.search.embedded import EmbeddedIndex
from memvault.search.fusion import vector_share
from memvault.search.language import detect
from memvault.search.opensearch import mapping, vector_query
from memvault_local.local_index import CHINESE_MODEL, chinese_model_for
from tests.unit.test_embedded_index import flt, live, unit


@pytest.mark.parametrize(
    ("text", "language"),
    [
        ("我喜欢喝乌龙茶", "zh"),
        ("目标公司用 Java 17, 复习重点是 record", "zh"),
        ("王磊 handles the Chinese benchmark", "zh"),  # a Chinese name in English
        ("my cat is called 猫", "en"),  # one character alone
        ("すしが好きです", "en"),  # kana only
        ("coffee before standup", "en"),
        ("", "en"),
        ("蛋", "en"),
        ("豈更", "zh"),  # compatibility ideographs count
    ],
)
def test_a_text_is_chinese_when_it_holds_two_han_characters(text: str, language: str) -> None:
    assert detect(text) == language


def test_a_memory_gets_the_better_of_its_two_vector_shares() -> None:
    assert vector_share([0.2, 0.9]) == 0.9
    assert vector_share([0.4]) == 0.4


def chinese_op(seed: int, **over: Any) -> IndexOp:
    op = live(unit(seed), **over)
    assert op.document is not None
    doc = dataclasses.replace(op.document, embedding_zh=unit(seed + 100, dim=12))
    return dataclasses.replace(op, document=doc)


def test_the_chinese_vectors_are_kept_on_disk_and_searched_after_a_reopen(tmp_path: Path) -> None:
    index = EmbeddedIndex("t", tmp_path)
    index.apply([chinese_op(1, chain_id="c-zh"), live(unit(2), chain_id="c-en")])
    index.close()
    reopened = EmbeddedIndex("t", tmp_path)
    found = reopened.search(flt(), "", unit(1), 5, vector_zh=unit(101, dim=12))
    assert [h.chain_id for h in found.vector_zh] == ["c-zh"]
    assert found.vector_zh[0].score == pytest.approx(1.0, abs=1e-5)
    assert {h.chain_id for h in found.vector} == {"c-zh", "c-en"}
    held = reopened.get("acme", "c-zh")
    assert held is not None and held[1]["embedding_zh"] == pytest.approx(unit(101, dim=12))
    en = reopened.get("acme", "c-en")
    assert en is not None and "embedding_zh" not in en[1]


def test_a_chinese_query_of_the_wrong_size_finds_nothing() -> None:
    index = EmbeddedIndex("t")
    index.apply([chinese_op(1, chain_id="c-zh")])
    assert index.search(flt(), "", unit(1), 5, vector_zh=unit(101, dim=8)).vector_zh == []


def test_an_index_file_of_the_earlier_schema_gains_the_column(tmp_path: Path) -> None:
    """A file written before the Chinese field: its rows stay, and Chinese ones join them."""
    old = EmbeddedIndex("t", tmp_path)
    old.apply([live(unit(3), chain_id="c-old")])
    old.close()
    conn = sqlite3.connect(tmp_path / "t.sqlite3")
    conn.execute("ALTER TABLE bodies DROP COLUMN vector_zh")
    conn.commit()
    conn.close()
    index = EmbeddedIndex("t", tmp_path)
    index.apply([chinese_op(4, chain_id="c-zh")])
    found = index.search(flt(), "", unit(3), 5, vector_zh=unit(104, dim=12))
    assert found.vector[0].chain_id == "c-old"
    assert [h.chain_id for h in found.vector_zh] == ["c-zh"]


def test_the_opensearch_mapping_has_a_chinese_field_only_when_asked() -> None:
    plain = mapping(384, "m", "1")["mappings"]["properties"]
    assert "embedding_zh" not in plain
    routed = mapping(384, "m", "1", dimensions_zh=512)["mappings"]["properties"]
    assert routed["embedding_zh"]["type"] == "knn_vector"
    assert routed["embedding_zh"]["dimension"] == 512
    assert routed["embedding"]["dimension"] == 384


def test_a_chinese_vector_query_keeps_every_hard_filter() -> None:
    english = vector_query(flt(), [0.1] * 4, 5, exact=True)
    chinese = vector_query(flt(), [0.1] * 4, 5, exact=True, field="embedding_zh")
    filters = english["query"]["script_score"]["query"]["bool"]["filter"]
    zh_filters = chinese["query"]["script_score"]["query"]["bool"]["filter"]
    assert zh_filters == [*filters, {"exists": {"field": "embedding_zh"}}]
    assert chinese["query"]["script_score"]["script"]["params"]["field"] == "embedding_zh"
    graph = vector_query(flt(), [0.1] * 4, 5, field="embedding_zh")["query"]["knn"]
    assert graph["embedding_zh"]["filter"] == {"bool": {"filter": filters}}


def test_the_local_stack_routes_beside_an_english_model_when_the_chinese_one_is_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MEMVAULT_MODEL_DIR", str(tmp_path))
    assert chinese_model_for("e5-small-v2") == "none"  # not installed
    folder = tmp_path / CHINESE_MODEL
    folder.mkdir()
    (folder / "bge-small-zh-v1.5-q.onnx").write_bytes(b"x")
    assert chinese_model_for("e5-small-v2") == "none"  # half installed
    (folder / "bge-small-zh-v1.5-q-tokenizer.json").write_text("{}")
    assert chinese_model_for("e5-small-v2") == CHINESE_MODEL
    assert chinese_model_for("bge-small-en-v1.5") == CHINESE_MODEL
    for model in ("minilm", "hashing", "titan-v2", "bge-small-zh-v1.5"):
        assert chinese_model_for(model) == "none"


def test_a_named_language_is_stored_and_an_unnamed_one_leaves_the_item_as_it_was() -> None:
    from memvault.search.documents import op_from_item
    from memvault.storage.codecs.memory import memory_from_item, memory_to_item
    from tests.unit.test_index_documents import item

    at = "2026-01-01T00:00:00.000000Z"
    full = {
        "memory_id": "mem_" + "1" * 32,
        "consent": True,
        "index_status": "indexed",
        "created_by": "agent-1",
        "valid_from": at,
        "created_at": at,
        "updated_at": at,
        "expires_at": "2026-06-01T00:00:00.000000Z",
    }
    plain = memory_from_item(item(**full))
    assert plain.language == "auto"
    assert "language" not in memory_to_item(plain)
    named = plain.model_copy(update={"language": "zh"})
    stored = memory_to_item(named)
    assert stored["language"] == "zh"
    assert memory_from_item(stored).language == "zh"
    op = op_from_item(stored)
    assert op is not None and op.document is not None
    assert op.document.language == "zh"
    assert "language" not in op.document.body()  # decides the models, not indexed


def test_a_retry_from_before_the_language_field_still_matches() -> None:
    from tests.support.harness import a_write

    assert "language" not in a_write().fingerprint_payload()
    assert a_write(language="zh").fingerprint_payload()["language"] == "zh"


@pytest.mark.parametrize("model", ["titan-v2", "minilm", "hashing", "bge-small-zh-v1.5"])
def test_the_chinese_model_goes_only_beside_a_local_english_one(model: str) -> None:
    from pydantic import ValidationError

    from memvault.config import Settings

    with pytest.raises(ValidationError, match="MEMVAULT_EMBEDDING_MODEL_ZH=none"):
        Settings(embedding_model=model, embedding_model_zh="bge-small-zh-v1.5")
    assert Settings(embedding_model="e5-small-v2", embedding_model_zh="bge-small-zh-v1.5")
