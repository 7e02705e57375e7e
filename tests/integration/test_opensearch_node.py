"""The single-node OpenSearch that scripts/opensearch.sh assembles does what memvault
needs: the k-NN plugin (Lucene engine) with filtered queries, the english and cjk analyzers,
external versioning that refuses a stale write, and multi-search."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from opensearchpy import OpenSearch
from opensearchpy.exceptions import ConflictError

from tests.support.opensearch import opensearch_url


@pytest.fixture(scope="module")
def client() -> OpenSearch:
    return OpenSearch(hosts=[opensearch_url()], timeout=30)


@pytest.fixture
def index(client: OpenSearch) -> Iterator[str]:
    name = f"test-opensearch-node-{uuid.uuid4().hex[:12]}"
    yield name
    client.indices.delete(index=name, ignore_unavailable=True)


def test_knn_plugin_and_modules_are_loaded(client: OpenSearch) -> None:
    plugins = {row["component"] for row in client.cat.plugins(format="json")}
    assert "opensearch-knn" in plugins
    nodes = client.nodes.info(metric="plugins")["nodes"]
    modules = {module["name"] for node in nodes.values() for module in node["modules"]}
    assert {"lang-painless", "analysis-common", "transport-netty4"} <= modules


def test_painless_runs(client: OpenSearch) -> None:
    body = {"script": {"source": "params.x * 2", "params": {"x": 21}}}
    result = client.transport.perform_request("POST", "/_scripts/painless/_execute", body=body)
    assert result["result"] == "42"


def test_lucene_knn_answers_a_filtered_query(client: OpenSearch, index: str) -> None:
    client.indices.create(
        index=index,
        body={
            "settings": {"index.knn": True, "number_of_shards": 1},
            "mappings": {
                "properties": {
                    "tenant": {"type": "keyword"},
                    "vec": {
                        "type": "knn_vector",
                        "dimension": 3,
                        "method": {
                            "name": "hnsw",
                            "engine": "lucene",
                            "space_type": "cosinesimil",
                        },
                    },
                }
            },
        },
    )
    docs = {
        "a-near": ("a", [1.0, 0.0, 0.0]),
        "a-mid": ("a", [0.7, 0.7, 0.0]),
        "a-far": ("a", [0.0, 0.0, 1.0]),
        "b-nearest": ("b", [1.0, 0.01, 0.0]),
    }
    for doc_id, (tenant, vec) in docs.items():
        client.index(index=index, id=doc_id, body={"tenant": tenant, "vec": vec})
    client.indices.refresh(index=index)

    query = {
        "size": 2,
        "query": {
            "knn": {
                "vec": {
                    "vector": [1.0, 0.0, 0.0],
                    "k": 2,
                    "filter": {"term": {"tenant": "a"}},
                }
            }
        },
    }
    hits = client.search(index=index, body=query)["hits"]["hits"]
    assert [hit["_id"] for hit in hits] == ["a-near", "a-mid"]
    assert hits[0]["_score"] > hits[1]["_score"]


def _tokens(client: OpenSearch, analyzer: str, text: str) -> list[str]:
    result: dict[str, Any] = client.indices.analyze(body={"analyzer": analyzer, "text": text})
    return [token["token"] for token in result["tokens"]]


def test_english_and_cjk_analyzers(client: OpenSearch) -> None:
    assert _tokens(client, "english", "The runners are running") == ["runner", "run"]
    assert _tokens(client, "cjk", "東京都") == ["東京", "京都"]


def test_external_version_refuses_a_stale_write(client: OpenSearch, index: str) -> None:
    client.indices.create(index=index, body={"settings": {"number_of_shards": 1}})
    written = client.index(index=index, id="m1", body={"v": 5}, version=5, version_type="external")
    assert written["_version"] == 5
    with pytest.raises(ConflictError) as refused:
        client.index(index=index, id="m1", body={"v": 3}, version=3, version_type="external")
    assert refused.value.status_code == 409
    assert client.get(index=index, id="m1")["_source"] == {"v": 5}


def test_msearch(client: OpenSearch, index: str) -> None:
    client.indices.create(index=index, body={"settings": {"number_of_shards": 1}})
    client.index(index=index, id="1", body={"text": "alpha"}, refresh=True)
    client.index(index=index, id="2", body={"text": "beta"}, refresh=True)
    body: list[dict[str, Any]] = [
        {"index": index},
        {"query": {"match": {"text": "alpha"}}},
        {"index": index},
        {"query": {"match_all": {}}},
    ]
    responses = client.msearch(body=body)["responses"]
    assert [r["hits"]["total"]["value"] for r in responses] == [1, 2]
    assert responses[0]["hits"]["hits"][0]["_id"] == "1"
