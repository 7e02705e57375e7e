"""``memvault reindex``: a new index for another embedding model, built from the table."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from moto import mock_aws

from memvault.config import Settings
from memvault.embeddings.hashing import HashingEmbedder
from memvault.search.opensearch import OpenSearchIndex
from memvault.wiring import table_names
from memvault_local.admin import AdminError, reindex
from memvault_wire.memory import MemoryPatch
from tests.support.harness import a_write, ctx
from tests.support.opensearch import opensearch_url
from tests.support.recall import RecallRig, drop_opensearch_index, make_rig


@pytest.fixture
def rig() -> Iterator[RecallRig]:
    with mock_aws():
        built = make_rig("opensearch", HashingEmbedder(), opensearch_url=opensearch_url())
        try:
            yield built
        finally:
            drop_opensearch_index(built.index)


def test_reindex_builds_the_new_models_index_and_switches_only_when_asked(rig: RecallRig) -> None:
    memory = rig.services.memory
    kept = memory.write(ctx(), "u-1", a_write(request_id="a", canonical_key="k-1")).memory
    fixed = memory.correct(
        ctx(), "u-1", kept.memory_id, MemoryPatch(expected_version=1, content="Prefers Go")
    )
    gone = memory.write(ctx(), "u-1", a_write(request_id="b", canonical_key="k-2")).memory
    memory.delete(ctx(), "u-1", gone.memory_id)
    rig.sync()
    assert isinstance(rig.index, OpenSearchIndex)
    settings = Settings(
        table_prefix="rc-",
        search_backend="opensearch",
        search_endpoint=opensearch_url(),
        search_auth="none",
        search_alias=rig.index.alias,
    )
    out = io.StringIO()

    assert (
        reindex(
            settings,
            "minilm",
            tenant_id="acme",
            switch=False,
            eval_path=None,
            out=out,
            client=rig.client,
        )
        == 0
    )
    new_name = f"{rig.index.alias}--minilm-l6-v2-53aa51172d14"
    assert rig.index.alias_target() == [rig.index.name]  # not switched yet
    rebuilt = OpenSearchIndex(
        rig.index.client,
        rig.index.alias,
        model_slug="minilm-l6-v2-53aa51172d14",
        model_id="m",
        model_version="v",
        dimensions=384,
    )
    assert rebuilt.name == new_name
    docs = rebuilt.documents("acme")
    assert docs[fixed.chain_id][1]["memory_id"] == fixed.memory_id
    assert docs[fixed.chain_id][1]["model_id"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert docs[gone.chain_id][1]["doc_type"] == "tombstone"
    assert set(docs) == {fixed.chain_id, gone.chain_id}
    # Every item of the tenant is scanned; one document per chain is written (the
    # corrected chain's current version, the deleted chain's tombstone), nothing else.
    scanned = len(
        rig.client.scan(
            TableName=table_names(settings)["memory"],
            FilterExpression="begins_with(pk, :p)",
            ExpressionAttributeValues={":p": {"S": "acme#"}},
        )["Items"]
    )
    assert f"{scanned} items scanned, 2 documents written, 0 already current, 0 failed\n" in (
        out.getvalue()
    )

    assert (
        reindex(
            settings,
            "minilm",
            tenant_id="acme",
            switch=True,
            eval_path=None,
            out=out,
            client=rig.client,
        )
        == 0
    )
    assert rig.index.alias_target() == [new_name]
    # The second run finds every document current at its external version.
    assert f"{scanned} items scanned, 0 documents written, 2 already current, 0 failed\n" in (
        out.getvalue()
    )
    assert "to roll back" in out.getvalue()


def test_reindex_needs_opensearch() -> None:
    with pytest.raises(AdminError, match="MEMVAULT_SEARCH_ENDPOINT"):
        reindex(
            Settings(search_backend="embedded"),
            "hashing",
            tenant_id=None,
            switch=False,
            eval_path=None,
            out=io.StringIO(),
            client=object(),
        )
