"""The CDK app's properties, checked on the synthesized templates (not resource counts)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from aws_cdk.assertions import Match

from memvault.storage.tables import ALL_TABLES, TableSpec
from tests.infrastructure.conftest import Synth, statements

DATA_ACTION_PREFIXES = ("dynamodb:", "s3:", "kms:")


@pytest.mark.parametrize("spec", ALL_TABLES, ids=lambda s: s.name)
def test_each_table_matches_its_shared_definition(silo: Synth, spec: TableSpec) -> None:
    props: dict[str, Any] = {
        "TableName": f"memvault-{spec.name}",
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
    silo.template.has_resource_properties("AWS::DynamoDB::Table", props)


def test_production_tables_are_protected_and_retained(pool_production: Synth) -> None:
    for table in pool_production.resources("AWS::DynamoDB::Table").values():
        assert table["Properties"]["DeletionProtectionEnabled"] is True
        assert table["DeletionPolicy"] == "Retain"


def test_functions_are_arm64_current_python_traced_with_bounded_logs(silo: Synth) -> None:
    functions = silo.resources("AWS::Lambda::Function")
    ours = {k: v for k, v in functions.items() if k.startswith("Compute")}
    assert len(ours) == 6  # api, authorizer, direct, sweeper, indexer, purge
    for fn in ours.values():
        props = fn["Properties"]
        assert props["Architectures"] == ["arm64"]
        assert props["Runtime"] == "python3.14"
        assert props["TracingConfig"] == {"Mode": "Active"}
        assert props["ReservedConcurrentExecutions"] > 0
        assert props["Layers"]
    for group in silo.resources("AWS::Logs::LogGroup").values():
        assert group["Properties"]["RetentionInDays"] > 0


def test_the_layer_holds_linux_arm64_builds_of_compiled_dependencies(silo: Synth) -> None:
    compiled = [p.name for p in silo.outdir.glob("asset.*/python/pydantic_core/*.so")]
    assert compiled
    assert all("aarch64-linux-gnu" in name and "cpython-314" in name for name in compiled)
    assert list(silo.outdir.glob("asset.*/python/memvault/services/memory.py"))
    assert not list(silo.outdir.glob("asset.*/python/botocore"))  # the runtime provides it


def test_every_route_but_health_and_openapi_needs_the_authorizer(silo: Synth, pool: Synth) -> None:
    for synth in (silo, pool):
        methods = synth.resources("AWS::ApiGateway::Method")
        resources = synth.resources("AWS::ApiGateway::Resource")
        public = {
            k
            for k, v in resources.items()
            if v["Properties"]["PathPart"] in ("health", "openapi.json")
        }
        for method in methods.values():
            props = method["Properties"]
            resource = props["ResourceId"].get("Ref")
            if resource in public:
                assert props["AuthorizationType"] == "NONE"
            else:
                assert props["AuthorizationType"] == "CUSTOM"
                assert "AuthorizerId" in props


def test_the_api_logs_access_throttles_and_answers_errors_in_the_contracts_format(
    silo: Synth,
) -> None:
    stage = next(iter(silo.resources("AWS::ApiGateway::Stage").values()))["Properties"]
    assert "DestinationArn" in stage["AccessLogSetting"]
    settings = stage["MethodSettings"][0]
    assert settings["ThrottlingRateLimit"] > 0
    assert settings["DataTraceEnabled"] is False  # bodies hold memory content
    responses = silo.resources("AWS::ApiGateway::GatewayResponse")
    unauthorized = next(
        r for r in responses.values() if r["Properties"]["ResponseType"] == "UNAUTHORIZED"
    )
    body = json.loads(unauthorized["Properties"]["ResponseTemplates"]["application/json"])
    assert body["error"]["code"] == "unauthorized"


def test_pool_mode_has_a_usage_plan_per_tenant(pool: Synth, silo: Synth) -> None:
    plans = {
        p["Properties"]["UsagePlanName"]: p["Properties"]
        for p in pool.resources("AWS::ApiGateway::UsagePlan").values()
    }
    assert set(plans) == {"Memvault-pool-acme", "Memvault-pool-globex"}
    assert plans["Memvault-pool-globex"]["Throttle"] == {"RateLimit": 20, "BurstLimit": 40}
    api = next(iter(pool.resources("AWS::ApiGateway::RestApi").values()))
    assert api["Properties"]["ApiKeySourceType"] == "AUTHORIZER"
    assert not silo.resources("AWS::ApiGateway::UsagePlan")


def test_waf_is_attached_when_enabled(pool_production: Synth, pool: Synth) -> None:
    assert pool_production.resources("AWS::WAFv2::WebACLAssociation")
    assert not pool.resources("AWS::WAFv2::WebACL")


def test_each_tenant_key_is_usable_only_with_its_encryption_context(pool: Synth) -> None:
    keys = {k: v for k, v in pool.resources("AWS::KMS::Key").items() if k.startswith("Tenancy")}
    assert len(keys) == 2
    for logical, key in keys.items():
        tenant = "acme" if "Acme" in logical else "globex"
        denies = [s for s in key["Properties"]["KeyPolicy"]["Statement"] if s["Effect"] == "Deny"]
        conditions = [s["Condition"] for s in denies]
        assert {"StringNotEquals": {"kms:EncryptionContext:tenant_id": tenant}} in conditions
        assert {"Null": {"kms:EncryptionContext:tenant_id": "true"}} in conditions


def test_pool_data_access_goes_only_through_the_tenant_scoped_role(pool: Synth) -> None:
    tenant_role = statements(pool, "IsolationTenantAccessRole")
    items = next(s for s in tenant_role if s.get("Sid") == "OwnItemsOnly")
    assert items["Condition"] == {
        "ForAllValues:StringLike": {"dynamodb:LeadingKeys": ["${aws:PrincipalTag/tenant_id}#*"]}
    }
    kms = next(s for s in tenant_role if s.get("Sid") == "OwnKeyContextOnly")
    assert kms["Condition"] == {
        "StringEquals": {"kms:EncryptionContext:tenant_id": "${aws:PrincipalTag/tenant_id}"}
    }
    for fn in ("ComputeApiFunction", "ComputeDirectFunction"):
        actions = [a for s in statements(pool, fn) for a in _list(s["Action"])]
        assert "sts:AssumeRole" in actions
        assert not [
            a for a in actions if a.startswith("dynamodb:") and a != "dynamodb:DescribeTable"
        ]
    trust = next(
        v
        for k, v in pool.resources("AWS::IAM::Role").items()
        if k.startswith("IsolationTenantAccessRole")
    )
    trust_actions = {
        a
        for s in trust["Properties"]["AssumeRolePolicyDocument"]["Statement"]
        for a in _list(s["Action"])
    }
    assert {"sts:AssumeRole", "sts:TagSession"} <= trust_actions


def test_no_role_grants_a_data_action_on_every_resource(silo: Synth, pool: Synth) -> None:
    for synth in (silo, pool):
        for policy in synth.resources("AWS::IAM::Policy").values():
            for statement in policy["Properties"]["PolicyDocument"]["Statement"]:
                data = [a for a in _list(statement["Action"]) if a.startswith(DATA_ACTION_PREFIXES)]
                if data and statement["Effect"] == "Allow":
                    assert "*" not in _list(statement["Resource"]), statement


def test_alarms_cover_errors_throttles_and_api_faults(silo: Synth) -> None:
    alarms = silo.resources("AWS::CloudWatch::Alarm")
    metrics = {
        (a["Properties"]["Namespace"], a["Properties"]["MetricName"]) for a in alarms.values()
    }
    assert {
        ("AWS/Lambda", "Errors"),
        ("AWS/Lambda", "Throttles"),
        ("AWS/ApiGateway", "5XXError"),
    } <= metrics
    assert all(a["Properties"]["AlarmActions"] for a in alarms.values())
    assert silo.resources("AWS::CloudWatch::Dashboard")


def test_silo_fixes_its_tenant_in_configuration(silo: Synth) -> None:
    fn = next(
        v
        for k, v in silo.resources("AWS::Lambda::Function").items()
        if k.startswith("ComputeApiFunction")
    )
    env = fn["Properties"]["Environment"]["Variables"]
    assert env["MEMVAULT_SILO_TENANT_ID"] == "acme"
    assert "MEMVAULT_TENANT_ROLE_ARN" not in env


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]


def test_staged_uploads_are_swept_on_a_schedule(silo: Synth) -> None:
    rules = silo.resources("AWS::Events::Rule")
    assert [r["Properties"]["ScheduleExpression"] for r in rules.values()] == ["rate(1 hour)"]
    target = next(iter(rules.values()))["Properties"]["Targets"][0]["Arn"]["Fn::GetAtt"][0]
    assert target.startswith("ComputeSweeperFunction")


def test_silo_functions_reach_only_their_tenants_objects_and_key_context(silo: Synth) -> None:
    api = statements(silo, "ComputeApiFunction")
    objects = next(s for s in api if s.get("Sid") == "TenantObjects")
    assert objects["Resource"]["Fn::Join"][1][-1] == "/acme/*"
    key = next(s for s in api if s.get("Sid") == "TenantKeyContext")
    assert key["Condition"] == {"StringEquals": {"kms:EncryptionContext:tenant_id": "acme"}}
