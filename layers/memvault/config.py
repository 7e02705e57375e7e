"""Configuration: one pydantic settings model, validated once at start.

Every knob is an environment variable ``MEMVAULT_<NAME>``; nothing else in the code
reads the environment.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

DAY = 86_400


class TenantPolicy(BaseModel):
    """Per-tenant overrides of the deployment's defaults."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    session_idle_seconds: int | None = Field(default=None, ge=60, le=7 * DAY)
    session_max_seconds: int | None = Field(default=None, ge=60, le=30 * DAY)
    artifact_max_bytes: int | None = Field(default=None, ge=1)
    artifact_media_types: tuple[str, ...] | None = None


class TenantIssuer(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    issuer: str
    jwks_url: str
    audience: str = "memvault"


#: The local English models that read Chinese through word pieces only: the Chinese model
#: (``embedding_model_zh``) goes beside one of them and no other.
ENGLISH_ONLY_MODELS = ("e5-small-v2", "bge-small-en-v1.5")


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMVAULT_", extra="ignore", frozen=True)

    #: Table names are ``<table_prefix><name>`` (``memvault-memory`` by default).
    table_prefix: str = Field(default="memvault-", pattern=r"^[A-Za-z0-9_.-]{0,200}$")
    aws_region: str = Field(
        default="us-east-1",
        description="The AWS region of every client (DynamoDB, S3, KMS, STS, Step Functions, "
        "Bedrock).",
    )
    #: Where the source of truth lives: ``dynamodb`` (the tables a CDK deployment made;
    #: what AWS runs) or ``sqlite`` (local mode: one file under ``data_dir``).
    store: Literal["dynamodb", "sqlite"] = "dynamodb"
    #: Local mode's data folder: the database file, encrypted objects, the index.
    data_dir: str | None = None
    #: The embedded store's durability: ``normal`` keeps every acknowledged write through a
    #: crash of the process; ``full`` also through a power cut (an fsync per commit).
    sqlite_synchronous: Literal["normal", "full"] = "normal"
    #: Local mode: the local server's address; it serves signed object URLs at ``/_objects/``.
    local_url: str = "http://127.0.0.1:8787"
    #: Another DynamoDB-compatible endpoint (the local stack, DynamoDB Local); unset on AWS.
    dynamodb_endpoint: str | None = None

    #: Expiry applied when a write names no ``ttl_seconds``.
    default_ttl_seconds: int = Field(default=90 * DAY, ge=1)
    #: Upper bound on any memory's lifetime; the API contract allows at most 365 days.
    max_ttl_seconds: int = Field(default=365 * DAY, ge=1, le=365 * DAY)
    #: How long a request id is remembered; must outlast any client's retry window.
    idempotency_ttl_seconds: int = Field(default=7 * DAY, ge=3600)
    #: Retention of audit events (the deletion log is kept without expiry).
    audit_retention_days: int = Field(default=400, ge=1)
    #: Recall traces, served links and feedback (ids only): kept this long, then expired.
    trace_retention_days: int = Field(default=30, ge=1, le=400)
    #: Whether every recall writes its trace (one batched write after the answer is built).
    tracing: bool = True
    #: Salt of the query hash a recall trace keeps (equal queries hash equal within a
    #: tenant); unset, traces keep no query hash at all.
    trace_query_salt: str | None = None
    #: Longest version chain kept for one fact (the chain item lists every version id).
    max_versions_per_chain: int = Field(default=1000, ge=2, le=5000)

    #: Token verification (RS256): the issuer's JWKS address, expected issuer and audience.
    jwks_url: str | None = None
    jwt_issuer: str | None = Field(
        default=None, description="The `iss` a token must carry; unset, the issuer is not checked."
    )
    jwt_audience: str = Field(default="memvault", description="The `aud` a token must carry.")
    #: Clock skew tolerated on ``exp``/``nbf``/``iat``; bounded so that expiry stays real.
    jwt_leeway_seconds: int = Field(default=60, ge=0, le=300)
    #: The longest token lifetime (``exp - iat``) accepted: a token minted to live for
    #: years is a standing credential, and is refused however valid its signature.
    jwt_max_lifetime_seconds: int = Field(default=86_400, ge=60, le=30 * 86_400)
    #: How long fetched signing keys are kept before the JWKS is read again.
    jwks_cache_seconds: int = Field(default=300, ge=0, le=86_400)
    #: Pool deployments: each tenant's token issuer, as JSON
    #: ``{"acme": {"issuer": ..., "jwks_url": ..., "audience": ...}}``.
    tenant_issuers: dict[str, TenantIssuer] = Field(default_factory=dict)
    #: Pool deployments: the API Gateway usage-plan key of each tenant (authorizer only).
    usage_keys: dict[str, str] = Field(default_factory=dict)
    #: Pool deployments: the role assumed, tagged with the caller's tenant, for data access.
    tenant_role_arn: str | None = None
    #: Silo deployments: the one tenant this stack serves (direct invocation may omit a token).
    silo_tenant_id: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]*$")
    #: Largest request body accepted, in bytes (413 ``payload_too_large`` beyond).
    max_body_bytes: int = Field(default=64 * 1024, ge=1024, le=6 * 1024 * 1024)

    #: Session memory: idle expiry (renewed by the subject's own activity) and absolute cap.
    session_idle_seconds: int = Field(default=30 * 60, ge=60, le=7 * DAY)
    session_max_seconds: int = Field(
        default=DAY,
        ge=60,
        le=30 * DAY,
        description="A session's absolute lifetime, set at its creation; nothing extends it.",
    )
    #: Most recent messages a session read returns.
    session_recent_messages: int = Field(default=50, ge=1, le=500)
    #: Largest checkpoint kept inline; larger payloads go to the artifact store by reference.
    checkpoint_max_bytes: int = Field(default=32 * 1024, ge=1024, le=350 * 1024)
    #: How long a finished run's state is kept.
    run_retention_days: int = Field(default=90, ge=1)
    #: Artifacts: the bucket, each tenant's key (``<prefix><tenant>``), limits, lifetimes.
    artifacts_bucket: str = "memvault-artifacts"
    tenant_key_alias_prefix: str = Field(
        default="alias/memvault/",
        description="Each tenant's KMS key is the alias `<tenant_key_alias_prefix><tenant>`.",
    )
    artifact_max_bytes: int = Field(
        default=50 * 1024 * 1024,
        ge=1,
        description="Largest artifact an upload may declare (413 beyond); per tenant in "
        "`tenant_policies`.",
    )
    artifact_media_types: tuple[str, ...] = Field(
        default=(
            "text/plain",
            "text/markdown",
            "application/json",
            "application/pdf",
            "text/csv",
            "image/png",
            "image/jpeg",
        ),
        description="The media types an artifact may declare (415 otherwise); per tenant in "
        "`tenant_policies`.",
    )
    #: Presigned upload URLs live this long; downloads at most 5 minutes.
    upload_url_seconds: int = Field(default=900, ge=60, le=3600)
    download_url_seconds: int = Field(
        default=300,
        ge=10,
        le=300,
        description="How long a download URL lives; it is signed after the caller is checked.",
    )
    #: Staged uploads never committed are swept after this long.
    staged_upload_seconds: int = Field(default=86_400, ge=600)
    #: Recall's search index: ``opensearch`` (``search_endpoint``; SigV4 unless
    #: ``search_auth`` is ``none``) or ``embedded`` (local mode: exact k-NN plus BM25 in
    #: process, persisted under ``index_dir``).
    search_backend: Literal["opensearch", "embedded"] = "opensearch"
    search_endpoint: str | None = Field(
        default=None, description="The OpenSearch endpoint (`search_backend` `opensearch`)."
    )
    search_auth: Literal["sigv4", "none"] = Field(
        default="sigv4",
        description="How OpenSearch requests are signed: `sigv4` (AWS) or `none` (a local node).",
    )
    #: Read alias of the memory index; each physical index behind it is named
    #: ``<alias>--<model>-<version>`` so that a new embedding model builds a new index.
    search_alias: str = Field(default="memvault-memories", pattern=r"^[a-z0-9][a-z0-9_-]{0,80}$")
    index_dir: str | None = Field(
        default=None,
        description="The embedded index's folder (`search_backend` `embedded`).",
    )
    #: How soon a write becomes searchable in OpenSearch (its refresh interval): shorter
    #: is fresher recall for more indexing work. The local stack uses 500ms.
    search_refresh_interval: str = Field(default="1s", pattern=r"^[0-9]+(ms|s)$")
    #: AWS deployments with fine-grained access control: IAM roles that only search
    #: (the API's); the indexer, the domain's master user, maps them to a read-only role.
    search_reader_role_arns: list[str] = Field(default_factory=list)
    #: ... and roles that write tombstones (the purge pipeline's), mapped to a role that
    #: may write documents of those indexes but not create or delete indexes.
    search_writer_role_arns: list[str] = Field(default_factory=list)
    #: The embedder: ``titan-v2`` (Amazon Bedrock, the AWS default), ``minilm`` (local
    #: all-MiniLM-L6-v2 on numpy) or ``hashing`` (deterministic, for unit tests only).
    embedding_model: Literal[
        "titan-v2", "minilm", "e5-small-v2", "bge-small-en-v1.5", "bge-small-zh-v1.5", "hashing"
    ] = "titan-v2"
    #: A second model for memories and queries written in Chinese (``search.language``):
    #: ``bge-small-zh-v1.5``, or ``none``. An English model (e5-small-v2) reads Chinese
    #: only through word pieces; Titan V2 is multilingual and needs none. The local stack
    #: turns it on beside an English ONNX model when it is installed.
    embedding_model_zh: Literal["none", "bge-small-zh-v1.5"] = "none"
    bedrock_embedding_model_id: str = Field(
        default="amazon.titan-embed-text-v2:0",
        description="The Bedrock model that embeds for `embedding_model` `titan-v2`.",
    )
    #: Titan V2 output size (256, 512 or 1024).
    titan_dimensions: Literal[256, 512, 1024] = 512
    #: Recall: candidates taken from each of the keyword and vector lists; the relevance
    #: floor (a query whose best cosine similarity is below it, and which no memory
    #: matches by ``recall_keyword_coverage`` of its words, gets nothing); and how far
    #: below the best match a memory may fall and still come back. Floor and margin are
    #: the embedder's own unless set (``memvault.search.fusion.TUNINGS``; MiniLM's are
    #: 0.35 and 0.6).
    recall_candidates: int = Field(default=40, ge=10, le=200)
    recall_relevance_floor: float | None = Field(
        default=None,
        ge=-1.0,
        le=1.0,
        description="A query whose best cosine similarity is under it, and that no memory "
        "matches by `recall_keyword_coverage` of its words, gets nothing; unset, the embedder's "
        "own.",
    )
    recall_keyword_coverage: float = Field(
        default=0.4,
        ge=0.0,
        le=1.0,
        description="The share of a query's words a memory must hold to pass the relevance floor, "
        "and to be kept, without similarity.",
    )
    recall_similarity_margin: float | None = Field(
        default=None,
        ge=0.0,
        le=2.0,
        description="How far below the best similarity a memory may fall and still come back; "
        "unset, the embedder's own.",
    )
    #: The vector list's share of the fused score (the embedder's own when unset).
    recall_vector_weight: float | None = Field(default=None, ge=0.0, le=1.0)
    #: Conversation context: a memory with ``source.thread`` and ``source.turn`` gains
    #: this share of the fused score of its best neighbouring turn (0 turns it off), and
    #: recall reads back this many candidates, not only the first page, to find them.
    recall_context_weight: float = Field(default=0.3, ge=0.0, le=1.0)
    recall_context_candidates: int = Field(
        default=30,
        ge=1,
        le=200,
        description="When the best matches are conversation turns, recall re-validates the "
        "fused list's first this many candidates to find their neighbours.",
    )
    #: Reranking (opt-in, AWS): the Bedrock reranking model's ARN (Amazon Rerank 1.0 or
    #: Cohere Rerank 3.5), how many of the best items it reorders, and how long a recall
    #: waits for it before answering in fused order.
    rerank_model_arn: str | None = None
    rerank_candidates: int = Field(
        default=20, ge=2, le=100, description="How many of the best items the reranker reorders."
    )
    rerank_timeout_s: float = Field(
        default=2.0,
        gt=0.0,
        le=30.0,
        description="Seconds a recall waits for the reranker before answering in fused order.",
    )
    #: The purge pipeline: on AWS a Step Functions state machine (its ARN); without one
    #: the pipeline runs in process, ``inline`` before the request returns (tests) or on a
    #: ``background`` worker (the local stack), with the same steps and retries.
    purge_state_machine_arn: str | None = None
    purge_launch: Literal["inline", "background"] = Field(
        default="inline",
        description="Without a state machine: purge `inline` or on a `background` worker.",
    )
    #: Per-tenant overrides, as JSON: ``{"acme": {"session_idle_seconds": 600}}``.
    tenant_policies: dict[str, TenantPolicy] = Field(default_factory=dict)

    def session_clocks(self, tenant_id: str) -> tuple[int, int]:
        """(idle, absolute) session lifetimes in seconds for a tenant."""
        policy = self.tenant_policies.get(tenant_id)
        idle = (policy and policy.session_idle_seconds) or self.session_idle_seconds
        cap = (policy and policy.session_max_seconds) or self.session_max_seconds
        return idle, max(cap, idle)

    def artifact_limits(self, tenant_id: str) -> tuple[int, tuple[str, ...]]:
        """(largest size in bytes, allowed media types) for a tenant's artifacts."""
        policy = self.tenant_policies.get(tenant_id)
        size = (policy and policy.artifact_max_bytes) or self.artifact_max_bytes
        types = (policy and policy.artifact_media_types) or self.artifact_media_types
        return size, types

    @field_validator("titan_dimensions", mode="before")
    @classmethod
    def _dimensions_from_text(cls, value: object) -> object:
        """The environment gives text (``"512"``); a ``Literal`` of ints takes no text."""
        if isinstance(value, str) and value.strip().isdigit():
            return int(value)
        return value

    @model_validator(mode="after")
    def _default_within_max(self) -> Settings:
        if self.default_ttl_seconds > self.max_ttl_seconds:
            raise ValueError("default_ttl_seconds must not exceed max_ttl_seconds")
        return self

    @model_validator(mode="after")
    def _chinese_beside_an_english_model(self) -> Settings:
        """The Chinese model reads beside a local English model only: Titan V2 and the
        other embedders need none, and a Lambda function ships no ONNX model."""
        english_only = ENGLISH_ONLY_MODELS
        if self.embedding_model_zh != "none" and self.embedding_model not in english_only:
            raise ValueError(
                f"embedding_model_zh {self.embedding_model_zh} goes with embedding_model "
                f"{' or '.join(english_only)}, not {self.embedding_model}; set "
                "MEMVAULT_EMBEDDING_MODEL_ZH=none"
            )
        return self


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    return Settings()
