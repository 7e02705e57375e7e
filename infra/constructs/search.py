"""Recall's search index: the OpenSearch domain, and the indexer that keeps it in step
with the memory table through the table's stream.

The index is derived data (docs/architecture.md: it proposes candidates, the memory table decides),
so the indexer may lag or fail without harm to correctness: failed batches are retried,
halved, and finally recorded (shard and sequence range only) in an encrypted queue.
"""

from __future__ import annotations

import hashlib
import re

from aws_cdk import ArnFormat, RemovalPolicy, Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_lambda_event_sources as sources
from aws_cdk import aws_logs as logs
from aws_cdk import aws_opensearchservice as opensearch
from aws_cdk import aws_sqs as sqs

from constructs import Construct
from infra import settings
from infra.deployment import Deployment

#: What recall needs of the index (``_search``/``_msearch`` are POST, reads are GET).
READ_ACTIONS = ["es:ESHttpGet", "es:ESHttpPost"]
#: What the indexer needs: documents, bulk requests, index and alias management.
WRITE_ACTIONS = ["es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPost", "es:ESHttpPut"]
#: What the purge needs: check the index exists (HEAD, as every writer does first),
#: overwrite a chain's document with a tombstone (bulk), refresh, and read it back.
PURGE_ACTIONS = ["es:ESHttpGet", "es:ESHttpHead", "es:ESHttpPost", "es:ESHttpPut"]
DOMAIN_NAME = re.compile(r"^[a-z][a-z0-9-]{2,27}$")


def domain_name(table_prefix: str) -> str:
    """The domain's name, unique where the tables' names are (same prefix): OpenSearch
    allows 3 to 28 characters of ``a-z0-9-``, starting with a letter."""
    wanted = f"{table_prefix}search"
    if DOMAIN_NAME.match(wanted):
        return wanted
    readable = re.sub(r"[^a-z0-9-]", "-", wanted.lower()).strip("-")
    digest = hashlib.sha256(wanted.encode()).hexdigest()[:8]
    return f"mv-{readable[:16]}-{digest}".replace("--", "-")


class Search(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        deployment: Deployment,
        memory_table: dynamodb.ITable,
        table_key: kms.IKey,
        indexer: lambda_.Function,
        readers: list[lambda_.Function],
        purger: lambda_.Function | None = None,
    ) -> None:
        super().__init__(scope, construct_id)
        stack = Stack.of(self)
        removal = RemovalPolicy.RETAIN if deployment.production else RemovalPolicy.DESTROY
        assert indexer.role is not None
        self.indexer = indexer
        self.readers = readers
        self.purger = purger
        self.key = kms.Key(
            self,
            "SearchKey",
            description=f"{settings.APP} search index and indexer dead-letter queue",
            enable_key_rotation=True,
            removal_policy=removal,
        )
        self.domain_name = domain_name(deployment.table_prefix)
        # The ARN is built from the name: the domain's access policy names its own paths,
        # which a reference to the domain's attribute would make circular.
        self.domain_arn = stack.format_arn(
            service="es",
            resource="domain",
            resource_name=self.domain_name,
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        self.log_groups = {
            kind: logs.LogGroup(
                self, f"{kind}Logs", retention=settings.SEARCH_LOG_RETENTION, removal_policy=removal
            )
            for kind in ("SlowSearch", "SlowIndex", "App")
        }
        # OpenSearch checks at creation that it may write to its log groups.
        log_policy = logs.ResourcePolicy(
            self,
            "LogDelivery",
            resource_policy_name=f"{self.domain_name}-logs",
            policy_statements=[
                iam.PolicyStatement(
                    sid="OpenSearchLogDelivery",
                    principals=[iam.ServicePrincipal("es.amazonaws.com")],
                    actions=["logs:CreateLogStream", "logs:PutLogEvents"],
                    resources=[group.log_group_arn for group in self.log_groups.values()],
                    conditions={
                        "StringEquals": {"aws:SourceAccount": stack.account},
                        "ArnLike": {"aws:SourceArn": self.domain_arn},
                    },
                )
            ],
        )
        nodes = deployment.search_data_nodes
        masters = settings.SEARCH_MASTER_NODES
        self.domain = opensearch.Domain(
            self,
            "Domain",
            domain_name=self.domain_name,
            version=settings.SEARCH_ENGINE,
            capacity=opensearch.CapacityConfig(
                data_nodes=nodes,
                data_node_instance_type=deployment.search_instance_type,
                master_nodes=masters or None,
                master_node_instance_type=settings.SEARCH_MASTER_INSTANCE_TYPE if masters else None,
                multi_az_with_standby_enabled=False,
            ),
            zone_awareness=opensearch.ZoneAwarenessConfig(
                enabled=nodes > 1,
                availability_zone_count=(3 if nodes % 3 == 0 else 2) if nodes > 1 else None,
            ),
            ebs=opensearch.EbsOptions(
                enabled=True,
                volume_size=settings.SEARCH_VOLUME_GIB,
                volume_type=ec2.EbsDeviceVolumeType.GP3,
            ),
            encryption_at_rest=opensearch.EncryptionAtRestOptions(enabled=True, kms_key=self.key),
            node_to_node_encryption=True,
            enforce_https=True,
            tls_security_policy=opensearch.TLSSecurityPolicy.TLS_1_2,
            # Fine-grained access control with IAM only: the indexer, which creates the
            # indexes and aliases, is the master user; no internal user database.
            fine_grained_access_control=opensearch.AdvancedSecurityOptions(
                master_user_arn=indexer.role.role_arn
            ),
            logging=opensearch.LoggingOptions(
                slow_search_log_enabled=True,
                slow_search_log_group=self.log_groups["SlowSearch"],
                slow_index_log_enabled=True,
                slow_index_log_group=self.log_groups["SlowIndex"],
                app_log_enabled=True,
                app_log_group=self.log_groups["App"],
            ),
            # Our own resource policy above (the default is a custom resource per domain).
            suppress_logs_resource_policy=True,
            enable_version_upgrade=True,
            removal_policy=removal,
        )
        self.domain.node.add_dependency(log_policy)
        self.endpoint = f"https://{self.domain.domain_endpoint}"
        # The resource policy, set on the domain itself rather than through the L2's
        # custom resource: signed requests from these roles only, to this domain only. In
        # the same account it grants by itself, so each role gets only its own actions.
        cfn_domain = self.domain.node.default_child
        assert isinstance(cfn_domain, opensearch.CfnDomain)
        paths = f"{self.domain_arn}/*"
        cfn_domain.access_policies = iam.PolicyDocument(
            statements=[
                iam.PolicyStatement(
                    sid="IndexerMaintainsTheIndex",
                    principals=[iam.ArnPrincipal(indexer.role.role_arn)],
                    actions=WRITE_ACTIONS,
                    resources=[paths],
                ),
                iam.PolicyStatement(
                    sid="RecallReadsTheIndex",
                    principals=[iam.ArnPrincipal(fn.role.role_arn) for fn in readers if fn.role],
                    actions=READ_ACTIONS,
                    resources=[paths],
                ),
                *(
                    [
                        iam.PolicyStatement(
                            sid="PurgeTombstonesDocuments",
                            principals=[iam.ArnPrincipal(purger.role.role_arn)],
                            actions=PURGE_ACTIONS,
                            resources=[paths],
                        )
                    ]
                    if purger is not None and purger.role is not None
                    else []
                ),
            ]
        )
        environment = {
            "MEMVAULT_SEARCH_BACKEND": "opensearch",
            "MEMVAULT_SEARCH_ENDPOINT": self.endpoint,
            "MEMVAULT_SEARCH_AUTH": "sigv4",
            "MEMVAULT_SEARCH_ALIAS": settings.SEARCH_ALIAS,
            "MEMVAULT_EMBEDDING_MODEL": settings.EMBEDDING_MODEL,
            "MEMVAULT_BEDROCK_EMBEDDING_MODEL_ID": settings.BEDROCK_EMBEDDING_MODEL_ID,
            "MEMVAULT_TITAN_DIMENSIONS": str(settings.TITAN_DIMENSIONS),
        }
        self.model_arn = stack.format_arn(
            service="bedrock",
            account="",
            resource="foundation-model",
            resource_name=settings.BEDROCK_EMBEDDING_MODEL_ID,
            arn_format=ArnFormat.SLASH_RESOURCE_NAME,
        )
        embed = iam.PolicyStatement(
            sid="EmbedWithTitan", actions=["bedrock:InvokeModel"], resources=[self.model_arn]
        )
        reader_environment = dict(environment)
        rerank: list[iam.PolicyStatement] = []
        if deployment.rerank_model:
            rerank_arn = stack.format_arn(
                service="bedrock",
                account="",
                resource="foundation-model",
                resource_name=deployment.rerank_model,
                arn_format=ArnFormat.SLASH_RESOURCE_NAME,
            )
            reader_environment["MEMVAULT_RERANK_MODEL_ARN"] = rerank_arn
            rerank = [
                # Rerank takes no resource; what it may run is bounded by InvokeModel.
                iam.PolicyStatement(sid="Rerank", actions=["bedrock:Rerank"], resources=["*"]),
                iam.PolicyStatement(
                    sid="InvokeTheReranker", actions=["bedrock:InvokeModel"], resources=[rerank_arn]
                ),
            ]
        for fn in readers:
            for name, value in reader_environment.items():
                fn.add_environment(name, value)
            fn.add_to_role_policy(embed)
            for statement in rerank:
                fn.add_to_role_policy(statement)
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    sid="SearchTheIndex",
                    actions=READ_ACTIONS,
                    resources=[f"{self.domain.domain_arn}/*"],
                )
            )
        for name, value in environment.items():
            indexer.add_environment(name, value)
        # The roles the indexer, as master user, maps to a read-only OpenSearch role (with
        # fine-grained access control an IAM role not mapped inside the domain gets 403).
        indexer.add_environment(
            "MEMVAULT_SEARCH_READER_ROLE_ARNS",
            stack.to_json_string([fn.role.role_arn for fn in readers if fn.role]),
        )
        if purger is not None and purger.role is not None:
            # The purge writes tombstones and embeds nothing, but the index's name comes
            # from the embedding model: it is told the same settings, and no Bedrock.
            for name, value in environment.items():
                purger.add_environment(name, value)
            purger.add_to_role_policy(
                iam.PolicyStatement(
                    sid="TombstoneDocuments",
                    actions=PURGE_ACTIONS,
                    resources=[f"{self.domain.domain_arn}/*"],
                )
            )
            # With fine-grained access control an IAM role not mapped inside the domain
            # gets 403: the indexer (the master user) is told which roles write tombstones.
            indexer.add_environment(
                "MEMVAULT_SEARCH_WRITER_ROLE_ARNS", stack.to_json_string([purger.role.role_arn])
            )
        indexer.add_to_role_policy(embed)
        indexer.add_to_role_policy(
            iam.PolicyStatement(
                sid="MaintainTheIndex",
                actions=WRITE_ACTIONS,
                resources=[f"{self.domain.domain_arn}/*"],
            )
        )
        # It re-reads a memory and records its index status (a conditional update).
        indexer.add_to_role_policy(
            iam.PolicyStatement(
                sid="RecordIndexStatus",
                actions=["dynamodb:GetItem", "dynamodb:UpdateItem"],
                resources=[memory_table.table_arn],
            )
        )
        indexer.add_to_role_policy(
            iam.PolicyStatement(
                sid="TablesKeyThroughDynamoDB",
                actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*"],
                resources=[table_key.key_arn],
                conditions={
                    "StringEquals": {"kms:ViaService": f"dynamodb.{stack.region}.amazonaws.com"}
                },
            )
        )
        self.dlq = sqs.Queue(
            self,
            "IndexerDeadLetters",
            encryption=sqs.QueueEncryption.KMS,
            encryption_master_key=self.key,
            enforce_ssl=True,
            retention_period=settings.INDEXER_DLQ_RETENTION,
            removal_policy=removal,
        )
        # The mapping is declared directly: DynamoEventSource would also grant
        # dynamodb:ListStreams on every resource; here it is this table's streams only.
        assert memory_table.table_stream_arn is not None, "the memory table needs its stream"
        indexer.add_to_role_policy(
            iam.PolicyStatement(
                sid="ReadTheMemoryStream",
                actions=[
                    "dynamodb:DescribeStream",
                    "dynamodb:GetRecords",
                    "dynamodb:GetShardIterator",
                ],
                resources=[memory_table.table_stream_arn],
            )
        )
        indexer.add_to_role_policy(
            iam.PolicyStatement(
                sid="FindTheMemoryStream",
                actions=["dynamodb:ListStreams"],
                resources=[f"{memory_table.table_arn}/stream/*"],
            )
        )
        # Stream records are encrypted under the tables' key.
        indexer.add_to_role_policy(
            iam.PolicyStatement(
                sid="DecryptTheMemoryStream",
                actions=["kms:Decrypt", "kms:DescribeKey"],
                resources=[table_key.key_arn],
            )
        )
        self.event_source = indexer.add_event_source_mapping(
            "MemoryStream",
            event_source_arn=memory_table.table_stream_arn,
            starting_position=lambda_.StartingPosition.TRIM_HORIZON,
            batch_size=settings.INDEXER_BATCH_SIZE,
            max_batching_window=settings.INDEXER_BATCHING_WINDOW,
            bisect_batch_on_error=True,
            retry_attempts=settings.INDEXER_RETRY_ATTEMPTS,
            max_record_age=settings.INDEXER_MAX_RECORD_AGE,
            parallelization_factor=settings.INDEXER_PARALLELIZATION,
            report_batch_item_failures=True,
            on_failure=sources.SqsDlq(self.dlq),
        )
