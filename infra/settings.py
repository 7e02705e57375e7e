"""Names and limits of the deployment, in one place."""

from __future__ import annotations

from aws_cdk import Duration
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchservice as opensearch

APP = "memvault"

PYTHON_RUNTIME = lambda_.Runtime.PYTHON_3_14
PYTHON_VERSION = "3.14"  # the wheels the layer is built from
ARCHITECTURE = lambda_.Architecture.ARM_64
WHEEL_PLATFORM = "manylinux2014_aarch64"

LOG_RETENTION = logs.RetentionDays.ONE_MONTH
ACCESS_LOG_RETENTION = logs.RetentionDays.THREE_MONTHS

#: Per function: memory (MB), timeout, and the concurrency reserved for it when a
#: deployment asks (``--context reserved_concurrency=true``; none by default: 216 in all
#: plus Lambda's 100 unreserved would need an account quota of 316, docs/deploy.md).
FUNCTIONS = {
    "api": {"memory": 1024, "timeout": Duration.seconds(15), "reserved": 100},
    "authorizer": {"memory": 512, "timeout": Duration.seconds(5), "reserved": 50},
    "direct": {"memory": 1024, "timeout": Duration.seconds(15), "reserved": 50},
    "sweeper": {"memory": 512, "timeout": Duration.minutes(5), "reserved": 1},
    # Stream consumer: a batch embeds up to INDEXER_BATCH_SIZE texts in turn.
    "indexer": {"memory": 512, "timeout": Duration.minutes(1), "reserved": 10},
    # The purge pipeline's tasks (Step Functions invokes one per step; a step works
    # through a deletion's scope in pages and is retried, so it stays well inside this).
    "purge": {"memory": 512, "timeout": Duration.minutes(5), "reserved": 5},
}
#: How often staged uploads never committed are swept.
SWEEP_SCHEDULE = Duration.hours(1)

#: API Gateway stage throttling (all tenants together) and the default per-tenant plan.
STAGE_RATE_LIMIT = 500
STAGE_BURST_LIMIT = 1000
TENANT_RATE_LIMIT = 50
TENANT_BURST_LIMIT = 100
TENANT_MONTHLY_QUOTA = 5_000_000
AUTHORIZER_CACHE = Duration.minutes(5)

#: Recall's search index: one OpenSearch domain per stack (the tenant's own in silo mode,
#: shared in pool mode). The defaults are a small start; raise them per deployment with
#: ``--context search_instance_type=m7g.large.search --context search_data_nodes=2``.
SEARCH_ENGINE = opensearch.EngineVersion.OPENSEARCH_2_19
SEARCH_INSTANCE_TYPE = "t3.small.search"
SEARCH_DATA_NODES = 1  # zone awareness (2 or 3 zones) from 2 nodes on
SEARCH_MASTER_NODES = 0  # dedicated master nodes: 0 (none) or 3
SEARCH_MASTER_INSTANCE_TYPE = "m7g.large.search"
SEARCH_VOLUME_GIB = 10  # gp3, per data node
SEARCH_LOG_RETENTION = logs.RetentionDays.ONE_MONTH
#: What the runtime is told (layers/memvault/config.py): the read alias and the embedder.
SEARCH_ALIAS = "memvault-memories"
EMBEDDING_MODEL = "titan-v2"
BEDROCK_EMBEDDING_MODEL_ID = "amazon.titan-embed-text-v2:0"
TITAN_DIMENSIONS = 512
#: The indexer's event source mapping on the memory table's stream.
INDEXER_BATCH_SIZE = 100
INDEXER_BATCHING_WINDOW = Duration.seconds(1)
INDEXER_RETRY_ATTEMPTS = 5  # then the batch is halved (bisect) and, at last, sent to the DLQ
INDEXER_MAX_RECORD_AGE = Duration.hours(1)
INDEXER_PARALLELIZATION = 2  # concurrent batches per stream shard (in order per item key)
#: Batches given up on (their shard and sequence range, never content) wait here.
INDEXER_DLQ_RETENTION = Duration.days(14)

#: The purge pipeline (layers/memvault/purge/pipeline.py lists its steps): a Step Functions
#: standard workflow, one Lambda task per step. The tables its steps touch (never the
#: idempotency table) and those it scans, the errors a step is retried on (the handler
#: raises PurgeStepFailed; the rest are Lambda's own transient faults), the execution
#: log's retention, and the longest an execution may run: above the worst case of every
#: step using all its attempts at the function's timeout with every backoff wait
#: (tests/infrastructure/test_purge_stack.py checks that).
PURGE_TABLES = ("memory", "deletions", "audit", "sessions", "runs", "artifacts")
PURGE_SCANNED_TABLES = ("sessions", "runs")  # a subject's items, found by key prefix
#: Lambda's own transient faults, throttles included: every task (Begin, each step, each
#: failure record, Finish) is retried on these with full-jitter backoff.
PURGE_LAMBDA_ERRORS = (
    "Lambda.ServiceException",
    "Lambda.AWSLambdaException",
    "Lambda.SdkClientException",
    "Lambda.TooManyRequestsException",
    "Lambda.ClientExecutionTimeoutException",
)
PURGE_LAMBDA_RETRY_INTERVAL_SECONDS = 2
PURGE_LAMBDA_RETRY_ATTEMPTS = 6
#: A step's own retrier (its pipeline policy) covers its failure and Lambda's faults.
PURGE_RETRY_ERRORS = ("PurgeStepFailed", *PURGE_LAMBDA_ERRORS)
PURGE_LOG_RETENTION = logs.RetentionDays.THREE_MONTHS
PURGE_EXECUTION_TIMEOUT = Duration.hours(6)

#: Alarms.
ERROR_ALARM_THRESHOLD = 5  # function errors in 5 minutes
THROTTLE_ALARM_THRESHOLD = 1
API_5XX_THRESHOLD = 5
ITERATOR_AGE_THRESHOLD = Duration.seconds(60)  # the indexer's lag, held for 5 minutes
SEARCH_FREE_STORAGE_MIB = 2048  # least free storage on any data node
SEARCH_JVM_PRESSURE_PERCENT = 80  # held for 15 minutes
PURGE_FAILED_THRESHOLD = 1  # any purge execution failed or timed out

#: Each tenant's key alias is ``<TENANT_KEY_ALIAS_PREFIX><tenant>`` (the runtime is told).
TENANT_KEY_ALIAS_PREFIX = f"alias/{APP}/"

#: The session tag that scopes a tenant's credentials, and the key prefix it allows.
TENANT_TAG = "tenant_id"
