"""Amazon Titan Text Embeddings V2 on Amazon Bedrock: the embedder on AWS.

Titan V2 embeds one text per ``InvokeModel`` call; a batch runs its calls on a small
thread pool. Vectors come back normalised by the service (``normalize: true``) and are
normalised again here, so the unit-length contract holds whatever the service returns.
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from memvault.embeddings.base import EmbeddingUnavailable, check_slug

DEFAULT_MODEL_ID = "amazon.titan-embed-text-v2:0"
#: Titan V2 takes at most 50,000 characters (and 8,192 tokens) of input.
MAX_CHARS = 50_000
TITAN_DIMENSIONS = (256, 512, 1024)
#: Bedrock error codes after which the same request may well succeed.
RETRYABLE_CODES = frozenset(
    {
        "ThrottlingException",
        "ServiceUnavailableException",
        "ModelNotReadyException",
        "ModelTimeoutException",
        "InternalServerException",
        "TooManyRequestsException",
    }
)


def bedrock_runtime_client(region: str) -> Any:
    """A ``bedrock-runtime`` client with adaptive retries and bounded timeouts."""
    import boto3  # only the AWS embedder needs it
    from botocore.config import Config

    config = Config(
        retries={"max_attempts": 4, "mode": "adaptive"},
        connect_timeout=5,
        read_timeout=30,
        max_pool_connections=16,
    )
    return boto3.client("bedrock-runtime", region_name=region, config=config)


class TitanEmbedder:
    """Titan Text Embeddings V2 (256, 512 or 1024 dimensions) through Bedrock.

    ``client`` is a ``bedrock-runtime`` client (made on first use from ``region`` when
    not given). Failures raise ``EmbeddingUnavailable`` naming Bedrock's error code.
    """

    model_version: str = "v2"

    def __init__(
        self,
        *,
        model_id: str = DEFAULT_MODEL_ID,
        dimensions: int = 512,
        region: str = "us-east-1",
        client: Any = None,
        max_workers: int = 8,
    ) -> None:
        if dimensions not in TITAN_DIMENSIONS:
            raise ValueError(f"Titan V2 dimensions must be one of {TITAN_DIMENSIONS}")
        self.model_id = model_id
        self.dimensions = dimensions
        self.region = region
        self._client = client
        self._max_workers = max(1, max_workers)

    @property
    def slug(self) -> str:
        return check_slug(f"titan-v2-{self.dimensions}")

    @property
    def client(self) -> Any:
        if self._client is None:
            self._client = bedrock_runtime_client(self.region)
        return self._client

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts; use embed_one for one text")
        if len(texts) <= 1:
            return [self.embed_one(text) for text in texts]
        client = self.client  # made once, before the threads share it
        workers = min(self._max_workers, len(texts))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="titan") as pool:
            return list(pool.map(lambda text: self._invoke(client, text), texts))

    def embed_one(self, text: str) -> list[float]:
        return self._invoke(self.client, text)

    def embed_query(self, text: str) -> list[float]:
        return self.embed_one(text)  # Titan V2 embeds a query as any text

    def _invoke(self, client: Any, text: str) -> list[float]:
        from botocore.exceptions import BotoCoreError, ClientError

        if not text.strip():
            raise ValueError("Titan cannot embed an empty text")
        body = json.dumps(
            {"inputText": text[:MAX_CHARS], "dimensions": self.dimensions, "normalize": True}
        )
        try:
            response = client.invoke_model(
                modelId=self.model_id,
                body=body,
                contentType="application/json",
                accept="application/json",
            )
            payload = json.loads(response["body"].read())
        except ClientError as exc:
            code = str(exc.response.get("Error", {}).get("Code", "ClientError"))
            raise EmbeddingUnavailable(
                f"Bedrock {self.model_id} failed: {code}",
                model_id=self.model_id,
                code=code,
                retryable=code in RETRYABLE_CODES,
            ) from exc
        except BotoCoreError as exc:
            raise EmbeddingUnavailable(
                f"Bedrock {self.model_id} unreachable: {type(exc).__name__}",
                model_id=self.model_id,
                code=type(exc).__name__,
                retryable=True,
            ) from exc
        except (ValueError, KeyError, TypeError) as exc:
            raise EmbeddingUnavailable(
                f"Bedrock {self.model_id} answered an unreadable body", model_id=self.model_id
            ) from exc
        return self._vector(payload)

    def _vector(self, payload: Any) -> list[float]:
        embedding = payload.get("embedding") if isinstance(payload, dict) else None
        if not isinstance(embedding, list) or len(embedding) != self.dimensions:
            raise EmbeddingUnavailable(
                f"Bedrock {self.model_id} answered no {self.dimensions}-dimension embedding",
                model_id=self.model_id,
            )
        vector = [float(x) for x in embedding]
        norm = math.sqrt(math.fsum(x * x for x in vector))
        if not math.isfinite(norm) or norm == 0.0:
            raise EmbeddingUnavailable(
                f"Bedrock {self.model_id} answered a degenerate embedding", model_id=self.model_id
            )
        return [x / norm for x in vector]
