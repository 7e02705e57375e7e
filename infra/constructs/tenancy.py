"""One KMS key per tenant, usable only with that tenant's encryption context."""

from __future__ import annotations

import re

from aws_cdk import RemovalPolicy
from aws_cdk import aws_iam as iam
from aws_cdk import aws_kms as kms

from constructs import Construct
from infra import settings

CRYPTO_ACTIONS = ["kms:Encrypt", "kms:Decrypt", "kms:ReEncrypt*", "kms:GenerateDataKey*"]


def logical(tenant_id: str) -> str:
    return re.sub(r"[^A-Za-z0-9]", "", tenant_id.title()) or "Tenant"


class TenantKeys(Construct):
    def __init__(
        self, scope: Construct, construct_id: str, *, tenants: list[str], production: bool
    ) -> None:
        super().__init__(scope, construct_id)
        self.keys: dict[str, kms.Key] = {}
        for tenant in tenants:
            key = kms.Key(
                self,
                f"Key{logical(tenant)}",
                alias=f"{settings.TENANT_KEY_ALIAS_PREFIX}{tenant}",
                description=f"{settings.APP} data of tenant {tenant}",
                enable_key_rotation=True,
                removal_policy=RemovalPolicy.RETAIN if production else RemovalPolicy.DESTROY,
            )
            context_key = f"kms:EncryptionContext:{settings.TENANT_TAG}"
            # Deny wins over any allow: whoever holds an allow, the key encrypts and
            # decrypts only under this tenant's encryption context.
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="OnlyWithThisTenantsEncryptionContext",
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=CRYPTO_ACTIONS,
                    resources=["*"],
                    conditions={"StringNotEquals": {context_key: tenant}},
                )
            )
            key.add_to_resource_policy(
                iam.PolicyStatement(
                    sid="NeverWithoutAnEncryptionContext",
                    effect=iam.Effect.DENY,
                    principals=[iam.AnyPrincipal()],
                    actions=CRYPTO_ACTIONS,
                    resources=["*"],
                    conditions={"Null": {context_key: "true"}},
                )
            )
            self.keys[tenant] = key
