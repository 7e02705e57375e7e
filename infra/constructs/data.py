"""The DynamoDB tables, built from the same definitions the runtime and tests use."""

from __future__ import annotations

from aws_cdk import RemovalPolicy
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_kms as kms

from constructs import Construct
from memvault.storage.tables import ALL_TABLES, TableSpec, physical_name

_STREAM_VIEWS = {
    "NEW_AND_OLD_IMAGES": dynamodb.StreamViewType.NEW_AND_OLD_IMAGES,
    "NEW_IMAGE": dynamodb.StreamViewType.NEW_IMAGE,
    "KEYS_ONLY": dynamodb.StreamViewType.KEYS_ONLY,
}


class DataTables(Construct):
    """On-demand tables, point-in-time recovery, a customer-managed key, streams and TTL
    as each table's spec asks; deletion protection and retention in production."""

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
