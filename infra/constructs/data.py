"""The DynamoDB tables, built from the same definitions the runtime and tests use."""

from __future__ import annotations

from aws_cdk import Duration, RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_s3 as s3

from constructs import Construct
from memvault.storage.dynamodb.tables import ALL_TABLES, TableSpec, physical_name

_STREAM_VIEWS = {
    "NEW_AND_OLD_IMAGES": dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
    "NEW_IMAGE": dynamodb.StreamViewType.NEW_IMAGE,
    "KEYS_ONLY": dynamodb.StreamViewType.KEYS_ONLY,
}


class DataTables(Construct):
    """On-demand tables, point-in-time recovery, a customer-managed key, streams and TTL
    as each table's spec asks; deletion protection and retention in production; the
    artifacts bucket (its uploads and references arrive with the artifacts work)."""

    def __init__(
        self, scope: Construct, construct_id: str, *, table_prefix: str, production: bool
    ) -> None:
        super().__init__(scope, construct_id)
        self.key = kms.Key(
            self,
            "TablesKey",
            description="memvault DynamoDB tables",
            enable_key_rotation=True,
            removal_policy=RemovalPolicy.RETAIN if production else RemovalPolicy.DESTROY,
        )
        self.tables: dict[str, dynamodb.Table] = {
            spec.name: self._table(spec, table_prefix, production) for spec in ALL_TABLES
        }
        removal = RemovalPolicy.RETAIN if production else RemovalPolicy.DESTROY
        self.access_logs = s3.Bucket(
            self,
            "AccessLogs",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_PREFERRED,
            lifecycle_rules=[s3.LifecycleRule(expiration=Duration.days(365))],
            removal_policy=removal,
            auto_delete_objects=not production,
        )
        # Objects live under "<tenant>/", each encrypted with its tenant's key under the
        # encryption context {"tenant_id", "artifact_id"} (storage/s3/objects.py). No S3
        # Bucket Key: with one, S3 asks KMS for a bucket-level key under the bucket ARN as
        # its only context, which every tenant key's policy refuses (infra/constructs/
        # tenancy.py); each presigned upload also signs "bucket key: false" itself.
        self.artifacts = s3.Bucket(
            self,
            "Artifacts",
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            encryption=s3.BucketEncryption.KMS,
            encryption_key=self.key,
            bucket_key_enabled=False,
            enforce_ssl=True,
            versioned=True,
            server_access_logs_bucket=self.access_logs,
            server_access_logs_prefix="artifacts/",
            lifecycle_rules=[
                s3.LifecycleRule(noncurrent_version_expiration=Duration.days(30)),
                s3.LifecycleRule(abort_incomplete_multipart_upload_after=Duration.days(1)),
            ],
            removal_policy=removal,
            auto_delete_objects=not production,
        )
        # A PUT must name SSE-KMS and a key: one that names neither would be encrypted
        # under the bucket's default key, outside any tenant's key and context. (S3 has no
        # condition key for the encryption context or the Bucket Key; the tenant key's
        # policy refuses a data key without the tenant's context, so such a PUT fails.)
        objects = self.artifacts.arn_for_objects("*")
        self.artifacts.add_to_resource_policy(
            iam.PolicyStatement(
                sid="PutsAreSseKms",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"],
                resources=[objects],
                conditions={"StringNotEquals": {"s3:x-amz-server-side-encryption": "aws:kms"}},
            )
        )
        self.artifacts.add_to_resource_policy(
            iam.PolicyStatement(
                sid="PutsNameTheirKey",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["s3:PutObject"],
                resources=[objects],
                conditions={"Null": {"s3:x-amz-server-side-encryption-aws-kms-key-id": "true"}},
            )
        )

    def _table(self, spec: TableSpec, prefix: str, production: bool) -> dynamodb.Table:
        return dynamodb.Table(
            self,
            f"{spec.name.capitalize()}Table",
            table_name=physical_name(spec, prefix),
            partition_key=dynamodb.Attribute(
                name=spec.partition_key, type=dynamodb.AttributeType.STRING
            ),
            sort_key=dynamodb.Attribute(name=spec.sort_key, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            encryption=dynamodb.TableEncryption.CUSTOMER_MANAGED,
            encryption_key=self.key,
            stream=_STREAM_VIEWS[spec.stream] if spec.stream else None,
            time_to_live_attribute=spec.ttl_attribute,
            deletion_protection=production,
            removal_policy=RemovalPolicy.RETAIN if production else RemovalPolicy.DESTROY,
        )
