"""The CDK app's properties, checked on the synthesized templates (not resource counts)."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest
from aws_cdk.assertions import Match
from infra import settings as infra_settings
from infra.app import ROOT
from infra.deployment import Deployment, from_context

from memvault.storage.dynamodb.tables import ALL_TABLES, TableSpec
from tests.infrastructure.conftest import (
    PRODUCTION_ALARM_EMAIL,
    PRODUCTION_ALARM_TOPIC,
    PRODUCTION_RESERVED,
    Synth,
    function,
    one,
    statements,
)

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


# ------------------------------------------------------------ deployment defects (A-E)


def _deployment(**context: str) -> Deployment:
    return from_context({"tenant": "acme", **context}.get, ROOT)


def test_no_function_reserves_concurrency_unless_the_deployment_asks(
    silo: Synth, pool_production: Synth
) -> None:
    """216 reserved by default (plus Lambda's 100 unreserved) needed an account quota of
    316: a new account (10, or 1000 shared with other stacks) failed on its first
    function. Now none is reserved unless the context asks, and then only what it names."""
    for synth in (silo, pool_production):
        assert len([k for k in synth.resources("AWS::Lambda::Function") if "Compute" in k]) == 6
    for name in infra_settings.FUNCTIONS:
        props = function(silo, name.capitalize())[1]["Properties"]
        assert "ReservedConcurrentExecutions" not in props, name
        reserved = function(pool_production, name.capitalize())[1]["Properties"].get(
            "ReservedConcurrentExecutions"
        )
        assert reserved == PRODUCTION_RESERVED.get(name), name


def test_reserved_concurrency_is_none_true_or_named_counts_and_is_validated() -> None:
    assert _deployment().reserved_concurrency == {}
    assert _deployment(reserved_concurrency="false").reserved_concurrency == {}
    every = _deployment(reserved_concurrency="true")
    assert every.reserved_concurrency == {
        name: limits["reserved"] for name, limits in infra_settings.FUNCTIONS.items()
    }
    assert every.reserved_concurrency_total == 216
    named = _deployment(reserved_concurrency='{"api": 100, "purge": 5}')
    assert named.reserved_concurrency == {"api": 100, "purge": 5}
    assert named.reserved_concurrency_total == 105  # needs a quota of at least 205
    from_cdk_json = from_context({"tenant": "acme", "reserved_concurrency": {"api": 7}}.get, ROOT)
    assert from_cdk_json.reserved_concurrency == {"api": 7}
    for bad in (
        '{"apii": 10}',  # no such function
        '{"api": 0}',  # would throttle every call
        '{"api": -1}',
        '{"api": "10"}',
        '{"api": 1.5}',
        "[100]",
        "100",
        "yes",
    ):
        with pytest.raises(ValueError, match=r"reserved_concurrency|greater than|integer"):
            _deployment(reserved_concurrency=bad)


_GATEWAY_RENDERING = {
    # What API Gateway substitutes (gateway response templates are not VTL).
    "$context.error.messageString": json.dumps('Missing "Authentication" Token'),
    "$context.error.responseType": "MISSING_AUTHENTICATION_TOKEN",
    "$context.requestId": "5f0c8e1e-1d2b-4c3a-9f3e-0123456789ab",
}


def _rendered(template: str) -> Any:
    for variable, value in _GATEWAY_RENDERING.items():
        template = template.replace(variable, value)
    assert "$" not in template, template
    return json.loads(template)


def test_gateway_responses_keep_the_gateways_status_codes_in_the_error_envelope(
    silo: Synth, pool: Synth
) -> None:
    """DEFAULT_4XX and DEFAULT_5XX once rewrote every unlisted gateway error to 400
    ``validation_failed`` or 500: an unknown path, a WAF block, a 504 timeout. They now
    set no status; the listed types answer their own code with the gateway's status,
    except an unknown route (404) and an expired AWS token (401)."""
    for synth in (silo, pool):
        responses = {
            r["Properties"]["ResponseType"]: r["Properties"]
            for r in synth.resources("AWS::ApiGateway::GatewayResponse").values()
        }
        expected = {
            "DEFAULT_4XX": (None, "request_rejected"),
            "DEFAULT_5XX": (None, "internal"),
            "UNAUTHORIZED": (None, "unauthorized"),
            "EXPIRED_TOKEN": ("401", "unauthorized"),
            "ACCESS_DENIED": (None, "forbidden"),
            "INVALID_API_KEY": (None, "forbidden"),
            "WAF_FILTERED": (None, "forbidden"),
            "MISSING_AUTHENTICATION_TOKEN": ("404", "not_found"),
            "RESOURCE_NOT_FOUND": (None, "not_found"),
            "THROTTLED": (None, "throttled"),
            "QUOTA_EXCEEDED": (None, "throttled"),
            "REQUEST_TOO_LARGE": (None, "payload_too_large"),
            "BAD_REQUEST_BODY": (None, "validation_failed"),
            "BAD_REQUEST_PARAMETERS": (None, "validation_failed"),
            "INTEGRATION_TIMEOUT": (None, "gateway_timeout"),
        }
        assert set(responses) == set(expected)
        for kind, (status, code) in expected.items():
            props = responses[kind]
            assert props.get("StatusCode") == status, kind
            body = _rendered(props["ResponseTemplates"]["application/json"])
            assert set(body) == {"error"}, kind
            assert set(body["error"]) == {"code", "message", "details"}, kind
            assert body["error"]["code"] == code, kind
            assert isinstance(body["error"]["message"], str) and body["error"]["message"]
            details = body["error"]["details"]
            assert details["correlation_id"] == _GATEWAY_RENDERING["$context.requestId"]
            if kind.startswith("DEFAULT_"):
                # The gateway's own message (quoted by API Gateway) and response type.
                assert body["error"]["message"] == 'Missing "Authentication" Token'
                assert details["response_type"] == "MISSING_AUTHENTICATION_TOKEN"


def test_tenant_key_uploads_never_use_an_s3_bucket_key_and_must_name_sse_kms(
    pool: Synth,
) -> None:
    """With a Bucket Key S3 asks KMS for a bucket-level key under the bucket ARN as its
    only encryption context, which every tenant key's policy refuses: no upload under a
    tenant key could succeed. (test_policy_simulation.py evaluates the decisions.)"""
    _, bucket = one(pool, "AWS::S3::Bucket", "DataArtifacts")
    rules = bucket["Properties"]["BucketEncryption"]["ServerSideEncryptionConfiguration"]
    assert [r.get("BucketKeyEnabled", False) for r in rules] == [False]
    policy = next(
        p["Properties"]["PolicyDocument"]["Statement"]
        for p in pool.resources("AWS::S3::BucketPolicy").values()
        if p["Properties"]["Bucket"] == {"Ref": one(pool, "AWS::S3::Bucket", "DataArtifacts")[0]}
    )
    denies = {s["Sid"]: s for s in policy if s.get("Sid", "").startswith("Puts")}
    assert denies["PutsAreSseKms"]["Condition"] == {
        "StringNotEquals": {"s3:x-amz-server-side-encryption": "aws:kms"}
    }
    assert denies["PutsNameTheirKey"]["Condition"] == {
        "Null": {"s3:x-amz-server-side-encryption-aws-kms-key-id": "true"}
    }
    assert all(s["Effect"] == "Deny" and s["Action"] == "s3:PutObject" for s in denies.values())


def _topic(synth: Synth) -> str:
    return one(synth, "AWS::SNS::Topic", "ObservabilityAlarms")[0]


def test_alarms_notify_an_email_and_an_existing_topic_when_given(
    silo: Synth, pool_production: Synth
) -> None:
    assert not silo.resources("AWS::SNS::Subscription")
    for alarm in silo.resources("AWS::CloudWatch::Alarm").values():
        assert alarm["Properties"]["AlarmActions"] == [{"Ref": _topic(silo)}]
    (subscription,) = pool_production.resources("AWS::SNS::Subscription").values()
    assert subscription["Properties"] == {
        "Protocol": "email",
        "Endpoint": PRODUCTION_ALARM_EMAIL,
        "TopicArn": {"Ref": _topic(pool_production)},
    }
    alarms = pool_production.resources("AWS::CloudWatch::Alarm").values()
    assert alarms
    for alarm in alarms:
        assert alarm["Properties"]["AlarmActions"] == [
            {"Ref": _topic(pool_production)},
            PRODUCTION_ALARM_TOPIC,
        ]


def test_alarm_settings_are_validated() -> None:
    ok = _deployment(alarm_email="ops@acme.example", alarm_topic_arn=PRODUCTION_ALARM_TOPIC)
    assert (ok.alarm_email, ok.alarm_topic_arn) == ("ops@acme.example", PRODUCTION_ALARM_TOPIC)
    assert _deployment().alarm_email is None and _deployment().alarm_topic_arn is None
    for email in ("ops", "ops@acme", "a@b.example,c@d.example", "ops @acme.example"):
        with pytest.raises(ValueError, match="alarm_email"):
            _deployment(alarm_email=email)
    for arn in (
        "ops-alarms",
        "arn:aws:sns:us-east-1:1234:ops",
        "arn:aws:sqs:us-east-1:123456789012:ops",
        "arn:aws:sns:us-east-1:123456789012:ops.fifo",  # alarms cannot publish to FIFO
    ):
        with pytest.raises(ValueError, match="alarm_topic_arn"):
            _deployment(alarm_topic_arn=arn)


def test_the_stack_outputs_what_operators_and_agent_runtimes_need(silo: Synth) -> None:
    outputs = silo.json["Outputs"]
    assert outputs["AlarmTopicArn"]["Value"] == {"Ref": _topic(silo)}
    assert "ApiUrl" in outputs
    direct, props = function(silo, "Direct")
    assert props["Properties"]["FunctionName"] == "Memvault-acme-direct"
    assert outputs["DirectFunctionName"]["Value"] == {"Ref": direct}
    assert outputs["DirectFunctionArn"]["Value"] == {"Fn::GetAtt": [direct, "Arn"]}


def test_the_direct_functions_name_fits_lambdas_limits() -> None:
    assert _deployment().direct_function_name == "Memvault-acme-direct"
    longest = _deployment(tenant="t" * 64)  # the longest tenant id there may be
    other = _deployment(tenant="t" * 63 + "u")
    for name in (longest.direct_function_name, other.direct_function_name):
        assert len(name) <= 64 and name.endswith("-direct"), name
        assert re.fullmatch(r"[A-Za-z0-9_-]+", name), name
    assert longest.direct_function_name != other.direct_function_name


def test_only_the_memory_table_has_a_stream(silo: Synth) -> None:
    """Only the memory table's stream has a consumer (the indexer); the sessions table's
    had none and only cost a stream to keep."""
    streamed = [
        t["Properties"]["TableName"]
        for t in silo.resources("AWS::DynamoDB::Table").values()
        if "StreamSpecification" in t["Properties"]
    ]
    assert streamed == ["memvault-memory"]
