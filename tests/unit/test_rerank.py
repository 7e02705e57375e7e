"""The reranker port: Bedrock's Rerank API on its real request and response shapes
(botocore's Stubber checks every request against the service model), and what recall does
with a reranker's answer, or without one."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator, Sequence
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from memvault.config import Settings
from memvault.embeddings.hashing import HashingEmbedder
from memvault.search.rerank import BedrockReranker
from memvault.wiring import reranker_from_settings
from memvault_wire.recall import RecallRequest
from tests.support.harness import a_write, ctx
from tests.support.recall import RecallRig, make_rig

MODEL = "arn:aws:bedrock:us-west-2::foundation-model/amazon.rerank-v1:0"


def _client() -> Any:
    return boto3.client("bedrock-agent-runtime", region_name="us-west-2")


def _request(query: str, texts: Sequence[str]) -> dict[str, Any]:
    return {
        "queries": [{"type": "TEXT", "textQuery": {"text": query}}],
        "sources": [
            {
                "type": "INLINE",
                "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": t}},
            }
            for t in texts
        ],
        "rerankingConfiguration": {
            "type": "BEDROCK_RERANKING_MODEL",
            "bedrockRerankingConfiguration": {
                "modelConfiguration": {"modelArn": MODEL},
                "numberOfResults": len(texts),
            },
        },
    }


def test_bedrock_gets_the_query_and_texts_and_its_scores_come_back_in_text_order() -> None:
    client = _client()
    texts = ["tea in the afternoon", "flight on Friday", "dark editor theme"]
    with Stubber(client) as stub:
        stub.add_response(
            "rerank",
            {
                "results": [
                    {"index": 2, "relevanceScore": 0.91},
                    {"index": 0, "relevanceScore": 0.40},
                    {"index": 1, "relevanceScore": 0.02},
                ]
            },
            _request("which theme?", texts),
        )
        scores = BedrockReranker(MODEL, "us-west-2", client=client).rerank("which theme?", texts)
        stub.assert_no_pending_responses()
    assert scores == [0.40, 0.02, 0.91]


@pytest.mark.parametrize("code", ["ThrottlingException", "AccessDeniedException"])
def test_a_failed_call_answers_none_and_logs_no_text(
    code: str, caplog: pytest.LogCaptureFixture
) -> None:
    client = _client()
    with Stubber(client) as stub, caplog.at_level(logging.WARNING):
        stub.add_client_error("rerank", service_error_code=code, http_status_code=429)
        scores = BedrockReranker(MODEL, "us-west-2", client=client).rerank("secret query", ["a"])
    assert scores is None
    (record,) = [r for r in caplog.records if r.getMessage().startswith("rerank failed")]
    assert record.__dict__["code"] == code and record.__dict__["texts"] == 1
    assert all("secret query" not in str(v) for v in record.__dict__.values())


def test_an_answer_missing_a_text_is_not_half_used() -> None:
    client = _client()
    with Stubber(client) as stub:
        stub.add_response("rerank", {"results": [{"index": 0, "relevanceScore": 0.5}]})
        scores = BedrockReranker(MODEL, "us-west-2", client=client).rerank("q", ["a", "b"])
    assert scores is None


def test_one_attempt_within_the_timeout() -> None:
    reranker = reranker_from_settings(
        Settings(rerank_model_arn=MODEL, aws_region="us-west-2", rerank_timeout_s=1.5)
    )
    assert isinstance(reranker, BedrockReranker)
    config = reranker.client.meta.config
    assert (config.read_timeout, config.connect_timeout) == (1.5, 1.5)
    assert config.retries["total_max_attempts"] == 1
    assert reranker_from_settings(Settings()) is None


# ----------------------------------------------------------------- what recall does


class Reverses:
    """A reranker that prefers the texts recall ranked last (so any effect shows)."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.asked: list[list[str]] = []

    def rerank(self, query: str, texts: Sequence[str]) -> list[float] | None:
        self.asked.append(list(texts))
        return None if self.fail else [float(i) for i in range(len(texts))]


@pytest.fixture
def rig() -> Iterator[RecallRig]:
    with mock_aws():
        yield make_rig("embedded", HashingEmbedder(), recall_relevance_floor=0.1)


def _write(rig: RecallRig, content: str, key: str | None = None) -> None:
    rig.services.memory.write(
        ctx(),
        "u-1",
        a_write(
            request_id=uuid.uuid4().hex,
            content=content,
            canonical_key=key,
            scope={},
            tags=[],
        ),
    )


def _contents(rig: RecallRig, query: str, mode: str = "hybrid") -> list[str]:
    answer = rig.services.recall.recall(ctx(), "u-1", RecallRequest(query=query, mode=mode))
    return [item.memory.content for item in answer.items]


def test_recall_answers_in_the_rerankers_order_with_its_scores(rig: RecallRig) -> None:
    for text in ("green tea every afternoon", "green tea with lemon", "green tea, no sugar"):
        _write(rig, text)
    rig.sync()
    fused = _contents(rig, "green tea")
    rig.services.recall.reranker = Reverses()
    answer = rig.services.recall.recall(ctx(), "u-1", RecallRequest(query="green tea"))
    assert [i.memory.content for i in answer.items] == list(reversed(fused))
    assert [i.why.rerank_score for i in answer.items] == [2.0, 1.0, 0.0]


def test_a_failed_rerank_keeps_the_fused_order(rig: RecallRig) -> None:
    for text in ("green tea every afternoon", "green tea with lemon"):
        _write(rig, text)
    rig.sync()
    fused = _contents(rig, "green tea")
    reranker = Reverses(fail=True)
    rig.services.recall.reranker = reranker
    assert _contents(rig, "green tea") == fused and reranker.asked


def test_a_named_canonical_key_stays_first_and_keyword_mode_is_not_reranked(
    rig: RecallRig,
) -> None:
    _write(rig, "green tea every afternoon", key="afternoon-drink")
    for text in ("green tea with lemon", "green tea, no sugar"):
        _write(rig, text)
    rig.sync()
    reranker = Reverses()
    rig.services.recall.reranker = reranker
    assert _contents(rig, "green tea afternoon-drink")[0] == "green tea every afternoon"
    asked = len(reranker.asked)
    _contents(rig, "green tea", mode="keyword")
    assert len(reranker.asked) == asked
