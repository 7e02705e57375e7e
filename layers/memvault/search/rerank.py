"""The reranker port: a second opinion on the order of recall's best candidates.

On AWS, Amazon Bedrock's Rerank API (``bedrock-agent-runtime`` ``rerank``, with Amazon
Rerank 1.0 or Cohere Rerank 3.5) reads the query beside each candidate's text and scores
them together, which a bi-encoder's cosine cannot. It is opt-in per deployment
(``MEMVAULT_RERANK_MODEL_ARN``): the candidates' text goes to Bedrock, as a memory's text
already does to be embedded with Titan. Locally there is no reranker: no package that
can be installed here ships a verified cross-encoder.

A reranker only reorders what recall already decided to return: the hard filters, the
re-validation against the table and the relevance floor all come first. When it fails (a
timeout, throttling, a denied call) recall answers in fused order, and the log says why
by error type only (never the query or a text).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from memvault.observability import logger

#: Bedrock's bound on one document's text.
MAX_TEXT_CHARS = 32_000


class Reranker(Protocol):
    def rerank(self, query: str, texts: Sequence[str]) -> list[float] | None:
        """A relevance score per text, in the order given; ``None`` when the reranker
        could not answer (recall then keeps its own order)."""
        ...


class BedrockReranker:
    """Bedrock's Rerank API on one model; one attempt within ``timeout_s``, no retries (a
    recall waits on it)."""

    def __init__(
        self, model_arn: str, region: str, *, timeout_s: float = 2.0, client: Any = None
    ) -> None:
        self.model_arn = model_arn
        self.region = region
        self.timeout_s = timeout_s
        self._client = client

    @property
    def client(self) -> Any:
        if self._client is None:
            import boto3
            from botocore.config import Config

            self._client = boto3.client(
                "bedrock-agent-runtime",
                region_name=self.region,
                config=Config(
                    connect_timeout=self.timeout_s,
                    read_timeout=self.timeout_s,
                    retries={"total_max_attempts": 1, "mode": "standard"},
                ),
            )
        return self._client

    def rerank(self, query: str, texts: Sequence[str]) -> list[float] | None:
        if not texts:
            return []
        request = {
            "queries": [{"type": "TEXT", "textQuery": {"text": query[:MAX_TEXT_CHARS]}}],
            "sources": [
                {
                    "type": "INLINE",
                    "inlineDocumentSource": {
                        "type": "TEXT",
                        "textDocument": {"text": text[:MAX_TEXT_CHARS]},
                    },
                }
                for text in texts
            ],
            "rerankingConfiguration": {
                "type": "BEDROCK_RERANKING_MODEL",
                "bedrockRerankingConfiguration": {
                    "modelConfiguration": {"modelArn": self.model_arn},
                    "numberOfResults": len(texts),
                },
            },
        }
        try:
            answer = self.client.rerank(**request)
        except Exception as err:  # any failure: recall keeps its fused order
            code = getattr(err, "response", {}).get("Error", {}).get("Code", "")
            logger.warning(
                "rerank failed; fused order kept",
                extra={"error": type(err).__name__, "code": code, "texts": len(texts)},
            )
            return None
        scores: list[float | None] = [None] * len(texts)
        for result in answer.get("results", []):
            index = result.get("index")
            if isinstance(index, int) and 0 <= index < len(texts):
                scores[index] = float(result["relevanceScore"])
        if any(s is None for s in scores):
            logger.warning(
                "rerank answered for some texts only; fused order kept",
                extra={"texts": len(texts), "scored": sum(s is not None for s in scores)},
            )
            return None
        return [s for s in scores if s is not None]
