"""Isolation by IAM: what each function may reach, directly (silo) or only through a
tenant-scoped session (pool)."""

from __future__ import annotations

from aws_cdk import Stack
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms
from aws_cdk import aws_lambda as lambda_
from aws_cdk import aws_s3 as s3

from constructs import Construct
from infra import settings
from infra.constructs.tenancy import CRYPTO_ACTIONS

TAG = f"${{aws:PrincipalTag/{settings.TENANT_TAG}}}"
ITEM_ACTIONS = [
    "dynamodb:GetItem",
    "dynamodb:BatchGetItem",
    "dynamodb:Query",
    "dynamodb:PutItem",
    "dynamodb:UpdateItem",
    "dynamodb:DeleteItem",
    "dynamodb:BatchWriteItem",
    "dynamodb:ConditionCheckItem",
]
OBJECT_ACTIONS = [
    "s3:GetObject",
    "s3:GetObjectVersion",
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:DeleteObjectVersion",
]
#: The purge lists an object's versions and deletes each; it never reads or writes one.
PURGE_OBJECT_ACTIONS = ["s3:DeleteObject", "s3:DeleteObjectVersion"]
#: Listing (needed to tell a missing object from a forbidden one, and to find versions).
LIST_ACTIONS = ["s3:ListBucket", "s3:ListBucketVersions"]


class Isolation(Construct):
    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        pool: bool,
        tables: dict[str, dynamodb.Table],
        table_key: kms.IKey,
        bucket: s3.IBucket,
        tenant_keys: dict[str, kms.Key],
        functions: list[lambda_.Function],
    ) -> None:
        super().__init__(scope, construct_id)
        self.tenant_role: iam.Role | None = None
        table_arns = [t.table_arn for t in tables.values()]
        callers = [f for f in functions if f.node.id in ("ApiFunction", "DirectFunction")]
        purge = next((f for f in functions if f.node.id == "PurgeFunction"), None)
        if purge is not None:
            self._purge(
                purge,
                None if pool else next(iter(tenant_keys)),
                tables=tables,
                table_key=table_key,
                bucket=bucket,
            )
        sweeper = next(f for f in functions if f.node.id == "SweeperFunction")
        # The sweeper works across tenants by design: it only removes uploads never
        # committed, and the bytes that arrive through a deleted artifact's unexpired
        # upload URL (it reads that artifact's record, then removes it once no URL lives).
        sweeper.add_to_role_policy(
            iam.PolicyStatement(
                sid="FindStagedUploads",
                actions=["dynamodb:Scan", "dynamodb:GetItem", "dynamodb:DeleteItem"],
                resources=[tables["artifacts"].table_arn],
            )
        )
        sweeper.add_to_role_policy(
            iam.PolicyStatement(
                sid="ListStagedObjects",
                actions=LIST_ACTIONS,
                resources=[bucket.bucket_arn],
            )
        )
        sweeper.add_to_role_policy(
            iam.PolicyStatement(
                sid="RemoveStagedObjects",
                actions=["s3:DeleteObject", "s3:DeleteObjectVersion"],
                resources=[bucket.arn_for_objects("*")],
            )
        )
        # ... and finds deletions whose purge never started: the deletion log (ids only)
        # and each one's job.
        sweeper.add_to_role_policy(
            iam.PolicyStatement(
                sid="FindUnstartedPurges",
                actions=["dynamodb:Scan", "dynamodb:Query"],
                resources=[tables["audit"].table_arn],
            )
        )
        sweeper.add_to_role_policy(
            iam.PolicyStatement(
                sid="ReadDeletionJobs",
                actions=["dynamodb:GetItem"],
                resources=[tables["deletions"].table_arn],
            )
        )
        table_key.grant_decrypt(sweeper)
        health = iam.PolicyStatement(
            actions=["dynamodb:DescribeTable"], resources=[tables["memory"].table_arn]
        )
        for fn in callers:
            fn.add_to_role_policy(health)
        if not pool:
            ((tenant, key),) = tenant_keys.items()
            for fn in callers:
                fn.add_to_role_policy(
                    iam.PolicyStatement(actions=ITEM_ACTIONS, resources=table_arns)
                )
                table_key.grant_encrypt_decrypt(fn)
                fn.add_to_role_policy(
                    iam.PolicyStatement(
                        sid="TenantObjects",
                        actions=OBJECT_ACTIONS,
                        resources=[bucket.arn_for_objects(f"{tenant}/*")],
                    )
                )
                fn.add_to_role_policy(
                    iam.PolicyStatement(
                        sid="TenantObjectListing",
                        actions=LIST_ACTIONS,
                        resources=[bucket.bucket_arn],
                        conditions={"StringLike": {"s3:prefix": [f"{tenant}/*"]}},
                    )
                )
                fn.add_to_role_policy(
                    iam.PolicyStatement(
                        sid="TenantKeyContext",
                        actions=CRYPTO_ACTIONS,
                        resources=[key.key_arn],
                        conditions={
                            "StringEquals": {f"kms:EncryptionContext:{settings.TENANT_TAG}": tenant}
                        },
                    )
                )
            return
        role = iam.Role(
            self,
            "TenantAccessRole",
            description="Assumed per request with the caller's tenant as session tag",
            assumed_by=iam.CompositePrincipal(
                *[iam.ArnPrincipal(fn.role.role_arn) for fn in callers if fn.role]
            ).with_session_tags(),
        )
        assert role.assume_role_policy is not None
        role.assume_role_policy.add_statements(
            iam.PolicyStatement(
                sid="RequireTenantTag",
                effect=iam.Effect.DENY,
                principals=[iam.AnyPrincipal()],
                actions=["sts:AssumeRole", "sts:TagSession"],
                conditions={"Null": {f"aws:RequestTag/{settings.TENANT_TAG}": "true"}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="OwnItemsOnly",
                actions=ITEM_ACTIONS,
                resources=table_arns,
                conditions={"ForAllValues:StringLike": {"dynamodb:LeadingKeys": [f"{TAG}#*"]}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="TablesKeyThroughDynamoDB",
                actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*"],
                resources=[table_key.key_arn],
                conditions={
                    "StringEquals": {
                        "kms:ViaService": f"dynamodb.{Stack.of(self).region}.amazonaws.com"
                    }
                },
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="OwnObjectsOnly",
                actions=OBJECT_ACTIONS,
                resources=[bucket.arn_for_objects(f"{TAG}/*")],
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="OwnObjectListingOnly",
                actions=LIST_ACTIONS,
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [f"{TAG}/*"]}},
            )
        )
        role.add_to_policy(
            iam.PolicyStatement(
                sid="OwnKeyContextOnly",
                actions=CRYPTO_ACTIONS,
                resources=[k.key_arn for k in tenant_keys.values()],
                conditions={"StringEquals": {f"kms:EncryptionContext:{settings.TENANT_TAG}": TAG}},
            )
        )
        for fn in callers:
            fn.add_to_role_policy(
                iam.PolicyStatement(
                    actions=["sts:AssumeRole", "sts:TagSession"],
                    resources=[role.role_arn],
                )
            )
            fn.add_environment("MEMVAULT_TENANT_ROLE_ARN", role.role_arn)
        self.tenant_role = role

    @staticmethod
    def _purge(
        fn: lambda_.Function,
        tenant: str | None,
        *,
        tables: dict[str, dynamodb.Table],
        table_key: kms.IKey,
        bucket: s3.IBucket,
    ) -> None:
        """What the purge steps touch, on the function's own role. Like the sweeper it
        works for whichever tenant a deletion names (in a pool, every tenant of the
        stack): it serves no caller, and runs only as the state machine's task, whose
        executions only the API starts, for a deletion it accepted from that tenant. A
        subject's sessions and run state are found by scanning for the tenant's and
        subject's key prefix, which a tenant-scoped session cannot do (``Scan`` carries
        no leading keys to bound it)."""
        fn.add_to_role_policy(
            iam.PolicyStatement(
                sid="PurgeItems",
                actions=ITEM_ACTIONS,
                resources=[tables[name].table_arn for name in settings.PURGE_TABLES],
            )
        )
        fn.add_to_role_policy(
            iam.PolicyStatement(
                sid="FindSubjectItems",
                actions=["dynamodb:Scan"],
                resources=[tables[name].table_arn for name in settings.PURGE_SCANNED_TABLES],
            )
        )
        fn.add_to_role_policy(
            iam.PolicyStatement(
                sid="TablesKeyThroughDynamoDB",
                actions=["kms:Decrypt", "kms:Encrypt", "kms:GenerateDataKey*"],
                resources=[table_key.key_arn],
                conditions={
                    "StringEquals": {
                        "kms:ViaService": f"dynamodb.{Stack.of(fn).region}.amazonaws.com"
                    }
                },
            )
        )
        # Object versions are listed and deleted; no object is read, so no tenant key.
        prefix = f"{tenant}/*" if tenant else "*"
        fn.add_to_role_policy(
            iam.PolicyStatement(
                sid="DeleteObjectVersions",
                actions=PURGE_OBJECT_ACTIONS,
                resources=[bucket.arn_for_objects(prefix)],
            )
        )
        fn.add_to_role_policy(
            iam.PolicyStatement(
                sid="ListObjectVersions",
                actions=LIST_ACTIONS,
                resources=[bucket.bucket_arn],
                conditions={"StringLike": {"s3:prefix": [prefix]}} if tenant else None,
            )
        )
