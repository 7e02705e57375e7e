"""The CDK app builds its tables from the same definitions the runtime and tests use."""

from __future__ import annotations

from typing import Any

import aws_cdk as cdk
import pytest
from aws_cdk.assertions import Match, Template
from infra.stack import MemvaultStack

from memvault.storage.tables import ALL_TABLES, TableSpec


def synth(**context: Any) -> Template:
    app = cdk.App(context=context)
    stack = MemvaultStack(
        app, "Test", table_prefix="t-", production=context.get("production", False)
    )
    return Template.from_stack(stack)


@pytest.fixture(scope="module")
def template() -> Template:
    return synth()


@pytest.mark.parametrize("spec", ALL_TABLES, ids=lambda s: s.name)
def test_each_table_matches_its_shared_definition(template: Template, spec: TableSpec) -> None:
    props: dict[str, Any] = {
        "TableName": f"t-{spec.name}",
        "KeySchema": [
            {"AttributeName": spec.partition_key, "KeyType": "HASH"},
            {"AttributeName": spec.sort_key, "KeyType": "RANGE"},
        ],
        "BillingMode": "PAY_PER_REQUEST",
        "PointInTimeRecoverySpecification": {"PointInTimeRecoveryEnabled": True},
        "SSESpecification": Match.object_like({"SSEEnabled": True, "SSEType": "KMS"}),
    }
    if spec.ttl_attribute:
        props["TimeToLiveSpecification"] = {"AttributeName": spec.ttl_attribute, "Enabled": True}
    if spec.stream:
        props["StreamSpecification"] = {"StreamViewType": spec.stream}
    template.has_resource_properties("AWS::DynamoDB::Table", props)


def test_tables_without_ttl_or_stream_declare_none(template: Template) -> None:
    tables = template.find_resources("AWS::DynamoDB::Table")
    by_name = {t["Properties"]["TableName"]: t["Properties"] for t in tables.values()}
    for spec in ALL_TABLES:
        props = by_name[f"t-{spec.name}"]
        assert ("TimeToLiveSpecification" in props) == bool(spec.ttl_attribute)
        assert ("StreamSpecification" in props) == bool(spec.stream)


def test_production_tables_are_protected_and_retained() -> None:
    template = synth(production=True)
    template.has_resource(
        "AWS::DynamoDB::Table",
        {
            "Properties": Match.object_like({"DeletionProtectionEnabled": True}),
            "DeletionPolicy": "Retain",
        },
    )
    template.has_resource_properties("AWS::KMS::Key", {"EnableKeyRotation": True})
