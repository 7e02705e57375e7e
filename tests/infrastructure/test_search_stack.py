"""Recall's search infrastructure, checked on the synthesized templates: the OpenSearch
domain, the indexer and its stream mapping, what each role may do, and the alarms."""

from __future__ import annotations

import json
from typing import Any

import pytest
from infra.constructs.search import DOMAIN_NAME, domain_name

from tests.infrastructure.conftest import Synth, statements
from tests.infrastructure.conftest import as_list as _list
from tests.infrastructure.conftest import function as _function
from tests.infrastructure.conftest import one as _one
from tests.infrastructure.conftest import role as _role
from tests.infrastructure.test_policy_simulation import ACCOUNT, REGION, _resolve, _run

TITAN = "amazon.titan-embed-text-v2:0"
SEARCH_ENV = {
    "MEMVAULT_SEARCH_BACKEND": "opensearch",
    "MEMVAULT_SEARCH_AUTH": "sigv4",
    "MEMVAULT_SEARCH_ALIAS": "memvault-memories",
    "MEMVAULT_EMBEDDING_MODEL": "titan-v2",
    "MEMVAULT_BEDROCK_EMBEDDING_MODEL_ID": TITAN,
    "MEMVAULT_TITAN_DIMENSIONS": "512",
}
#: Prefixes of actions on data, which must never be granted on every resource.
DATA_ACTIONS = ("dynamodb:", "s3:", "kms:", "es:", "bedrock:", "sqs:")
#: Data actions that take no resource in IAM (what they may run is bounded by another:
#: bedrock:Rerank by bedrock:InvokeModel on the one reranking model).
RESOURCELESS = {"bedrock:Rerank"}


def _domain(synth: Synth) -> tuple[str, dict[str, Any]]:
    return _one(synth, "AWS::OpenSearchService::Domain")


def _dlq(synth: Synth) -> str:
    return _one(synth, "AWS::SQS::Queue", "SearchIndexerDeadLetters")[0]


def _domain_paths(synth: Synth) -> dict[str, Any]:
    return {"Fn::Join": ["", [{"Fn::GetAtt": [_domain(synth)[0], "Arn"]}, "/*"]]}


def _allowed(synth: Synth, role: str, prefix: str) -> list[dict[str, Any]]:
    return [
        s
        for s in statements(synth, f"Compute{role}Function")
        if s["Effect"] == "Allow" and any(a.startswith(prefix) for a in _list(s["Action"]))
    ]


# The domain


@pytest.mark.parametrize("name", ["silo", "pool"])
def test_the_domain_is_encrypted_https_only_and_iam_governed(
    name: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(name)
    _, domain = _domain(synth)
    props = domain["Properties"]
    assert props["EngineVersion"].startswith("OpenSearch_")
    key = props["EncryptionAtRestOptions"]
    assert key["Enabled"] is True
    assert synth.resources("AWS::KMS::Key")[key["KmsKeyId"]["Ref"]]["Properties"][
        "EnableKeyRotation"
    ]
    assert props["NodeToNodeEncryptionOptions"] == {"Enabled": True}
    assert props["DomainEndpointOptions"]["EnforceHTTPS"] is True
    assert props["DomainEndpointOptions"]["TLSSecurityPolicy"].startswith("Policy-Min-TLS-1-2")
    security = props["AdvancedSecurityOptions"]
    assert security["Enabled"] is True
    assert security["InternalUserDatabaseEnabled"] is False
    assert security["MasterUserOptions"] == {
        "MasterUserARN": {"Fn::GetAtt": [_role(synth, "Indexer"), "Arn"]}
    }
    assert "MasterUserName" not in json.dumps(security)


def test_the_domain_publishes_its_logs_to_bounded_log_groups(silo: Synth) -> None:
    _, domain = _domain(silo)
    published = domain["Properties"]["LogPublishingOptions"]
    assert set(published) >= {"SEARCH_SLOW_LOGS", "INDEX_SLOW_LOGS", "ES_APPLICATION_LOGS"}
    groups = silo.resources("AWS::Logs::LogGroup")
    for option in published.values():
        assert option["Enabled"] is True
        group = option["CloudWatchLogsLogGroupArn"]["Fn::GetAtt"][0]
        assert groups[group]["Properties"]["RetentionInDays"] > 0
    # OpenSearch may write to exactly those groups, for this account's domain only.
    _, policy = _one(silo, "AWS::Logs::ResourcePolicy", "SearchLogDelivery")
    document = json.dumps(policy["Properties"]["PolicyDocument"])
    assert '\\"Service\\":\\"es.amazonaws.com\\"' in document
    assert "aws:SourceArn" in document and "aws:SourceAccount" in document
    assert domain["DependsOn"] == [_one(silo, "AWS::Logs::ResourcePolicy")[0]]


def test_the_domain_admits_only_the_functions_that_use_it(silo: Synth, pool: Synth) -> None:
    """In the same account the domain's policy grants by itself: each role gets only the
    actions it needs, on this domain's paths only."""
    for synth in (silo, pool):
        _, domain = _domain(synth)
        name = domain["Properties"]["DomainName"]
        granted: dict[str, set[str]] = {}
        for statement in domain["Properties"]["AccessPolicies"]["Statement"]:
            assert statement["Effect"] == "Allow"
            resource = _resolve(statement["Resource"], synth.json["Resources"])
            assert resource == f"arn:aws:es:{REGION}:{ACCOUNT}:domain/{name}/*"
            for principal in _list(statement["Principal"]["AWS"]):
                role = principal["Fn::GetAtt"][0]
                granted.setdefault(role, set()).update(_list(statement["Action"]))
        assert granted == {
            _role(synth, "Indexer"): {
                "es:ESHttpGet",
                "es:ESHttpHead",
                "es:ESHttpPost",
                "es:ESHttpPut",
            },
            _role(synth, "Api"): {"es:ESHttpGet", "es:ESHttpPost"},
            _role(synth, "Direct"): {"es:ESHttpGet", "es:ESHttpPost"},
            _role(synth, "Purge"): {
                "es:ESHttpGet",
                "es:ESHttpHead",
                "es:ESHttpPost",
                "es:ESHttpPut",
            },
        }


def test_the_domain_is_small_by_default_and_kept_in_production(
    silo: Synth, pool_production: Synth
) -> None:
    _, domain = _domain(silo)
    cluster = domain["Properties"]["ClusterConfig"]
    assert cluster["InstanceCount"] == 1
    assert cluster["ZoneAwarenessEnabled"] is False
    assert domain["Properties"]["EBSOptions"]["VolumeType"] == "gp3"
    assert domain["DeletionPolicy"] == "Delete"
    assert _domain(pool_production)[1]["DeletionPolicy"] == "Retain"


@pytest.mark.parametrize(
    "prefix", ["memvault-", "", "Prod_Tables.", "x" * 64, "-a-", "9lives-", "a--b"]
)
def test_domain_names_are_valid_for_any_table_prefix(prefix: str) -> None:
    name = domain_name(prefix)
    assert DOMAIN_NAME.match(name), name
    assert "--" not in name or name == f"{prefix}search"


# The indexer and its stream


@pytest.mark.parametrize("name", ["silo", "pool"])
def test_the_indexer_follows_the_memory_stream_with_bounded_retries(
    name: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(name)
    table = next(
        k
        for k, v in synth.resources("AWS::DynamoDB::Table").items()
        if v["Properties"]["TableName"].endswith("memory")
    )
    stream = synth.resources("AWS::DynamoDB::Table")[table]["Properties"]["StreamSpecification"]
    assert stream == {"StreamViewType": "NEW_AND_OLD_IMAGES"}
    _, mapping = _one(synth, "AWS::Lambda::EventSourceMapping")
    props = mapping["Properties"]
    assert props["EventSourceArn"] == {"Fn::GetAtt": [table, "StreamArn"]}
    assert props["FunctionName"] == {"Ref": _function(synth, "Indexer")[0]}
    assert props["StartingPosition"] == "TRIM_HORIZON"
    assert 1 <= props["BatchSize"] <= 1000
    assert props["MaximumBatchingWindowInSeconds"] <= 5
    assert props["BisectBatchOnFunctionError"] is True
    assert 0 < props["MaximumRetryAttempts"] <= 10
    assert 60 <= props["MaximumRecordAgeInSeconds"] <= 24 * 3600  # within stream retention
    assert "ReportBatchItemFailures" in props["FunctionResponseTypes"]
    assert 1 <= props["ParallelizationFactor"] <= 10
    assert props["DestinationConfig"]["OnFailure"]["Destination"] == {
        "Fn::GetAtt": [_dlq(synth), "Arn"]
    }


def test_the_dead_letter_queue_is_encrypted_tls_only_and_kept_two_weeks(silo: Synth) -> None:
    dlq = _dlq(silo)
    props = silo.resources("AWS::SQS::Queue")[dlq]["Properties"]
    key = props["KmsMasterKeyId"]["Fn::GetAtt"][0]
    assert silo.resources("AWS::KMS::Key")[key]
    assert props["MessageRetentionPeriod"] == 14 * 24 * 3600
    policy = next(
        p["Properties"]
        for p in silo.resources("AWS::SQS::QueuePolicy").values()
        if {"Ref": dlq} in p["Properties"]["Queues"]
    )
    assert any(
        s["Effect"] == "Deny" and s["Condition"] == {"Bool": {"aws:SecureTransport": "false"}}
        for s in policy["PolicyDocument"]["Statement"]
    )


def test_the_indexer_is_configured_like_the_other_functions_and_for_search(silo: Synth) -> None:
    _, indexer = _function(silo, "Indexer")
    props = indexer["Properties"]
    assert props["Architectures"] == ["arm64"]
    assert props["Runtime"] == _function(silo, "Api")[1]["Properties"]["Runtime"]
    assert props["Layers"] == _function(silo, "Api")[1]["Properties"]["Layers"]
    assert props["TracingConfig"] == {"Mode": "Active"}
    assert "ReservedConcurrentExecutions" not in props  # only on request (docs/deploy.md)
    assert props["Handler"] == "index.handler"
    env = props["Environment"]["Variables"]
    assert env.items() >= SEARCH_ENV.items()
    assert env["POWERTOOLS_SERVICE_NAME"] == "memvault-indexer"
    assert env["MEMVAULT_TABLE_PREFIX"] == "memvault-"
    assert env["MEMVAULT_AWS_REGION"] == {"Ref": "AWS::Region"}
    assert env["MEMVAULT_SILO_TENANT_ID"] == "acme"
    assert "MEMVAULT_TENANT_ISSUERS" not in env
    readers = json.dumps(env["MEMVAULT_SEARCH_READER_ROLE_ARNS"])
    assert _role(silo, "Api") in readers and _role(silo, "Direct") in readers
    domain = _domain(silo)[0]
    assert env["MEMVAULT_SEARCH_ENDPOINT"] == {
        "Fn::Join": ["", ["https://", {"Fn::GetAtt": [domain, "DomainEndpoint"]}]]
    }


@pytest.mark.parametrize("fn", ["Api", "Direct"])
def test_recall_functions_are_told_where_to_search(silo: Synth, pool: Synth, fn: str) -> None:
    for synth in (silo, pool):
        env = _function(synth, fn)[1]["Properties"]["Environment"]["Variables"]
        assert env.items() >= SEARCH_ENV.items()
        assert env["MEMVAULT_SEARCH_ENDPOINT"]["Fn::Join"][1][0] == "https://"


# What each role may do


@pytest.mark.parametrize("name", ["silo", "pool"])
def test_the_indexer_role_reaches_only_the_model_the_domain_and_the_memory_table(
    name: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(name)
    resources = synth.json["Resources"]
    model = f"arn:aws:bedrock:{REGION}::foundation-model/{TITAN}"
    bedrock = _allowed(synth, "Indexer", "bedrock:")
    assert [_list(s["Action"]) for s in bedrock] == [["bedrock:InvokeModel"]]
    assert [_resolve(s["Resource"], resources) for s in bedrock] == [model]
    es = _allowed(synth, "Indexer", "es:")
    assert {a for s in es for a in _list(s["Action"])} == {
        "es:ESHttpGet",
        "es:ESHttpHead",
        "es:ESHttpPost",
        "es:ESHttpPut",
    }
    assert all(s["Resource"] == _domain_paths(synth) for s in es)
    memory = next(
        k
        for k, v in synth.resources("AWS::DynamoDB::Table").items()
        if v["Properties"]["TableName"].endswith("memory")
    )
    items = [
        s
        for s in _allowed(synth, "Indexer", "dynamodb:")
        if {"dynamodb:UpdateItem", "dynamodb:GetItem"} & set(_list(s["Action"]))
    ]
    assert items
    for s in items:
        assert s["Resource"] == {"Fn::GetAtt": [memory, "Arn"]}
    actions = {a for s in _allowed(synth, "Indexer", "") for a in _list(s["Action"])}
    assert not {a for a in actions if a.startswith("s3:")}
    assert not actions & {"dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Query"}
    assert not actions & {"es:ESHttpDelete", "es:ESHttp*", "es:*", "sts:AssumeRole"}
    for s in _allowed(synth, "Indexer", ""):
        if any(a.startswith(DATA_ACTIONS) for a in _list(s["Action"])):
            assert "*" not in _list(s["Resource"]), s


@pytest.mark.parametrize("fn", ["Api", "Direct"])
def test_recall_functions_may_read_the_index_and_embed_only(
    silo: Synth, pool: Synth, fn: str
) -> None:
    for synth in (silo, pool):
        es = _allowed(synth, fn, "es:")
        assert {a for s in es for a in _list(s["Action"])} == {"es:ESHttpGet", "es:ESHttpPost"}
        assert all(s["Resource"] == _domain_paths(synth) for s in es)
        bedrock = _allowed(synth, fn, "bedrock:")
        model = f"arn:aws:bedrock:{REGION}::foundation-model/{TITAN}"
        assert [_resolve(s["Resource"], synth.json["Resources"]) for s in bedrock] == [model]


def test_no_role_grants_a_data_action_on_every_resource(
    silo: Synth, pool: Synth, silo_reranked: Synth
) -> None:
    for synth in (silo, pool, silo_reranked):
        for policy in synth.resources("AWS::IAM::Policy").values():
            for s in policy["Properties"]["PolicyDocument"]["Statement"]:
                data = [
                    a
                    for a in _list(s["Action"])
                    if a.startswith(DATA_ACTIONS) and a not in RESOURCELESS
                ]
                if data and s["Effect"] == "Allow":
                    assert "*" not in _list(s["Resource"]), s


def test_roles_are_judged_by_a_policy_evaluator(silo: Synth) -> None:
    """The indexer's and the API's identity policies with the domain's own access policy,
    evaluated by iam-simulate: the titan model and this domain's paths only, writes for
    the indexer only, nothing for a role the domain does not name."""
    res = silo.json["Resources"]
    _, domain = _domain(silo)
    name = domain["Properties"]["DomainName"]
    domain_policy = _resolve(domain["Properties"]["AccessPolicies"], res)
    index = f"arn:aws:es:{REGION}:{ACCOUNT}:domain/{name}/memvault-memories/_search"
    other = f"arn:aws:es:{REGION}:{ACCOUNT}:domain/another-domain/memvault-memories/_search"
    titan = f"arn:aws:bedrock:{REGION}::foundation-model/{TITAN}"
    claude = f"arn:aws:bedrock:{REGION}::foundation-model/anthropic.claude-3-haiku-20240307-v1:0"

    def identity(role: str) -> dict[str, Any]:
        policy = next(
            p
            for p in silo.resources("AWS::IAM::Policy").values()
            if _role(silo, role) in json.dumps(p["Properties"]["Roles"])
        )
        resolved: dict[str, Any] = _resolve(policy["Properties"]["PolicyDocument"], res)
        return resolved

    def ask(role: str, action: str, resource: str, with_domain: bool = True) -> dict[str, Any]:
        role_logical = _role(silo, role)
        sim: dict[str, Any] = {
            "identityPolicies": [{"name": "fn", "policy": identity(role)}],
            "serviceControlPolicies": [],
            "resourceControlPolicies": [],
            "request": {
                "action": action,
                "principal": f"arn:aws:sts::{ACCOUNT}:assumed-role/{role_logical}/fn",
                "resource": {"accountId": ACCOUNT, "resource": resource},
                "contextVariables": {},
            },
        }
        if with_domain:
            sim["resourcePolicy"] = domain_policy
        return sim

    answers = _run(
        [
            ask("Indexer", "es:ESHttpPut", index),
            ask("Indexer", "es:ESHttpPut", other),
            ask("Indexer", "es:ESHttpDelete", index),
            ask("Api", "es:ESHttpPost", index),
            ask("Api", "es:ESHttpPut", index),
            ask("Authorizer", "es:ESHttpGet", index),
            ask("Indexer", "bedrock:InvokeModel", titan, with_domain=False),
            ask("Indexer", "bedrock:InvokeModel", claude, with_domain=False),
            ask("Api", "bedrock:InvokeModel", titan, with_domain=False),
        ]
    )
    assert answers == [
        "Allowed",
        "ImplicitlyDenied",
        "ImplicitlyDenied",
        "Allowed",
        "ImplicitlyDenied",
        "ImplicitlyDenied",
        "Allowed",
        "ImplicitlyDenied",
        "Allowed",
    ]


# Alarms and dashboard


def _alarms(synth: Synth) -> list[dict[str, Any]]:
    return [a["Properties"] for a in synth.resources("AWS::CloudWatch::Alarm").values()]


def test_the_indexer_lag_failures_and_dead_letters_raise_alarms(silo: Synth) -> None:
    indexer = {"Name": "FunctionName", "Value": {"Ref": _function(silo, "Indexer")[0]}}
    alarms = _alarms(silo)

    def find(namespace: str, metric: str, dimension: dict[str, Any]) -> dict[str, Any]:
        found = [
            a
            for a in alarms
            if a["Namespace"] == namespace
            and a["MetricName"] == metric
            and dimension in a.get("Dimensions", [])
        ]
        assert len(found) == 1, (namespace, metric)
        return found[0]

    age = find("AWS/Lambda", "IteratorAge", indexer)
    assert age["Statistic"] == "Maximum"
    assert age["Threshold"] <= 5 * 60 * 1000
    assert age["Period"] * age["EvaluationPeriods"] >= 5 * 60
    errors = find("AWS/Lambda", "Errors", indexer)
    assert errors["Threshold"] >= 1
    find("AWS/Lambda", "Throttles", indexer)
    dlq = {"Name": "QueueName", "Value": {"Fn::GetAtt": [_dlq(silo), "QueueName"]}}
    depth = find("AWS/SQS", "ApproximateNumberOfMessagesVisible", dlq)
    assert depth["Threshold"] == 1
    assert depth["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    topic = _one(silo, "AWS::SNS::Topic")[0]
    for alarm in (age, errors, depth):
        assert alarm["AlarmActions"] == [{"Ref": topic}]


def test_the_domain_health_raises_alarms(silo: Synth) -> None:
    metrics = {a["MetricName"]: a for a in _alarms(silo) if a["Namespace"] == "AWS/ES"}
    assert {
        "ClusterStatus.red",
        "ClusterIndexWritesBlocked",
        "FreeStorageSpace",
        "JVMMemoryPressure",
    } <= set(metrics)
    assert metrics["FreeStorageSpace"]["ComparisonOperator"] == "LessThanOrEqualToThreshold"
    domain = {"Ref": _domain(silo)[0]}  # a domain's Ref is its name
    for alarm in metrics.values():
        assert {"Name": "DomainName", "Value": domain} in alarm["Dimensions"]
        assert {"Name": "ClientId", "Value": {"Ref": "AWS::AccountId"}} in alarm["Dimensions"]


def test_the_alarm_topic_key_lets_cloudwatch_publish(silo: Synth) -> None:
    topic = _one(silo, "AWS::SNS::Topic")[1]["Properties"]
    key = silo.resources("AWS::KMS::Key")[topic["KmsMasterKeyId"]["Fn::GetAtt"][0]]
    statements = key["Properties"]["KeyPolicy"]["Statement"]
    assert any(
        s.get("Principal") == {"Service": "cloudwatch.amazonaws.com"}
        and {"kms:Decrypt", "kms:GenerateDataKey*"} <= set(_list(s["Action"]))
        for s in statements
    )


def test_the_dashboard_shows_the_indexer_and_the_domain(silo: Synth) -> None:
    _, dashboard = _one(silo, "AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in ("IteratorAge", "ApproximateNumberOfMessagesVisible", "ClusterStatus.red"):
        assert metric in body


RERANKER = "amazon.rerank-v1:0"


@pytest.fixture(scope="module")
def silo_reranked(tmp_path_factory: pytest.TempPathFactory) -> Synth:
    from tests.infrastructure.conftest import synth

    return synth(tmp_path_factory.mktemp("rerank"), tenant="acme", rerank_model=RERANKER)


@pytest.mark.parametrize("fn", ["Api", "Direct"])
def test_a_configured_reranker_may_be_run_by_the_recall_functions_only(
    silo: Synth, silo_reranked: Synth, fn: str
) -> None:
    """Opt-in per deployment (``--context rerank_model=...``): the recall functions are
    told the model's ARN and may call bedrock:Rerank (an action that takes no resource)
    and invoke that one model; without it, neither; the indexer never."""
    model = f"arn:aws:bedrock:{REGION}::foundation-model/{RERANKER}"
    _, function = _function(silo_reranked, fn)
    env = function["Properties"]["Environment"]["Variables"]
    assert _resolve(env["MEMVAULT_RERANK_MODEL_ARN"], silo_reranked.json["Resources"]) == model
    bedrock = _allowed(silo_reranked, fn, "bedrock:")
    granted = {
        (a, json.dumps(_resolve(s["Resource"], silo_reranked.json["Resources"])))
        for s in bedrock
        for a in _list(s["Action"])
    }
    titan = f"arn:aws:bedrock:{REGION}::foundation-model/{TITAN}"
    assert granted == {
        ("bedrock:InvokeModel", json.dumps(titan)),
        ("bedrock:InvokeModel", json.dumps(model)),
        ("bedrock:Rerank", json.dumps("*")),
    }
    assert not [s for s in _allowed(silo, fn, "bedrock:Rerank")]
    assert (
        "MEMVAULT_RERANK_MODEL_ARN"
        not in _function(silo, fn)[1]["Properties"]["Environment"]["Variables"]
    )
    assert not _allowed(silo_reranked, "Indexer", "bedrock:Rerank")
