"""The purge pipeline's infrastructure, checked on the synthesized templates: the state
machine follows ``PURGE_PIPELINE`` (order, retry policies, failure handling), its role
may only invoke the purge function, the purge function reaches only what its steps
touch, the API may only start (and read) its executions, and failures raise alarms."""

from __future__ import annotations

import json
from typing import Any

import pytest
from infra import settings
from infra.constructs.purge import STATE_MACHINE_ENV

from memvault.services.purge_pipeline import BEGIN, FAIL, FINISH, PURGE_PIPELINE, STEP
from tests.infrastructure.conftest import Synth, statements
from tests.infrastructure.conftest import as_list as _list
from tests.infrastructure.conftest import function as _function
from tests.infrastructure.conftest import one as _one
from tests.infrastructure.conftest import role as _role
from tests.infrastructure.test_policy_simulation import ACCOUNT, REGION, _run

IDS = {"tenant_id.$": "$.tenant_id", "deletion_id.$": "$.deletion_id"}
#: Prefixes of actions on data, which the state machine's role must not hold at all and
#: no role may hold on every resource.
DATA_ACTIONS = ("dynamodb:", "s3:", "kms:", "es:", "bedrock:", "sqs:", "sts:", "states:")
#: What Step Functions itself needs for the execution log and tracing (no resource).
SERVICE_ACTIONS = {
    "logs:CreateLogDelivery",
    "logs:GetLogDelivery",
    "logs:UpdateLogDelivery",
    "logs:DeleteLogDelivery",
    "logs:ListLogDeliveries",
    "logs:PutResourcePolicy",
    "logs:DescribeResourcePolicies",
    "logs:DescribeLogGroups",
    "xray:PutTraceSegments",
    "xray:PutTelemetryRecords",
    "xray:GetSamplingRules",
    "xray:GetSamplingTargets",
}


def _machine(synth: Synth) -> tuple[str, dict[str, Any]]:
    return _one(synth, "AWS::StepFunctions::StateMachine")


def _placeholder(value: Any) -> str:
    """A token of the definition's Fn::Join as a readable placeholder."""
    if "Ref" in value:
        return f"<{value['Ref']}>"
    logical, attribute = value["Fn::GetAtt"]
    return f"<{logical}.{attribute}>"


def _definition(synth: Synth) -> dict[str, Any]:
    raw = _machine(synth)[1]["Properties"]["DefinitionString"]
    if isinstance(raw, str):
        text = raw
    else:
        sep, parts = raw["Fn::Join"]
        text = sep.join(p if isinstance(p, str) else _placeholder(p) for p in parts)
    definition: dict[str, Any] = json.loads(text)
    return definition


def _path(definition: dict[str, Any]) -> list[str]:
    """The states from StartAt along each ``Next`` until a terminal state."""
    states = definition["States"]
    path, name = [], definition["StartAt"]
    while name is not None:
        assert name not in path, f"loop at {name}"
        path.append(name)
        name = states[name].get("Next")
    return path


def _payload(state: dict[str, Any]) -> dict[str, Any]:
    payload: dict[str, Any] = state["Parameters"]["Payload"]
    return payload


# The state machine


@pytest.mark.parametrize("name", ["silo", "pool"])
def test_the_state_machine_runs_the_pipeline_in_its_order(
    name: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(name)
    definition = _definition(synth)
    path = _path(definition)
    assert path[:-1] == ["Begin", *[f"Purge {s.copy}" for s in PURGE_PIPELINE], "Finish"]
    states = definition["States"]
    assert states[path[-1]]["Type"] == "Succeed"
    assert _payload(states["Begin"]) == {"action": BEGIN, **IDS}
    assert _payload(states["Finish"]) == {"action": FINISH, **IDS}
    for step in PURGE_PIPELINE:
        assert _payload(states[f"Purge {step.copy}"]) == {"action": STEP, "copy": step.copy, **IDS}


@pytest.mark.parametrize("step", PURGE_PIPELINE, ids=lambda s: s.copy)
def test_each_step_is_retried_with_its_own_policy(silo: Synth, step: Any) -> None:
    state = _definition(silo)["States"][f"Purge {step.copy}"]
    (retry,) = state["Retry"]  # one retrier: the step's policy covers Lambda's faults too
    assert "PurgeStepFailed" in retry["ErrorEquals"]
    assert {"Lambda.ServiceException", "Lambda.TooManyRequestsException"} <= set(
        retry["ErrorEquals"]
    )
    assert "States.ALL" not in retry["ErrorEquals"]  # anything else is caught at once
    assert retry["IntervalSeconds"] == step.retry.interval_seconds
    assert retry["MaxAttempts"] == step.retry.max_attempts
    assert retry["BackoffRate"] == step.retry.backoff_rate


@pytest.mark.parametrize("step", PURGE_PIPELINE, ids=lambda s: s.copy)
def test_each_steps_final_failure_is_recorded_for_that_step_and_fails_the_run(
    silo: Synth, step: Any
) -> None:
    states = _definition(silo)["States"]
    (catch,) = states[f"Purge {step.copy}"]["Catch"]
    assert catch["ErrorEquals"] == ["States.ALL"]
    assert catch["ResultPath"] == "$.error"
    record = states[catch["Next"]]
    assert record["Type"] == "Task"
    assert _payload(record) == {"action": FAIL, "copy": step.copy, "error.$": "$.error", **IDS}
    assert record["ResultPath"] is None  # the error stays in the state for the Fail state
    assert states[record["Next"]]["Type"] == "Fail"
    # Nothing else leads to the failure record of this step.
    leads = [
        k
        for k, s in states.items()
        if s.get("Next") == catch["Next"]
        or any(c["Next"] == catch["Next"] for c in s.get("Catch", []))
    ]
    assert leads == [f"Purge {step.copy}"]


def test_every_task_retries_throttles_and_catches_the_rest_into_a_failed_run(
    silo: Synth,
) -> None:
    """A throttle at Begin once failed the execution with the job BLOCKED for good: Begin,
    Finish and the failure records carried only CDK's default retrier (no
    Lambda.TooManyRequestsException) and no catch. Every task now retries Lambda's faults,
    throttles included, with backoff, and ends in the Fail state on anything else (the
    sweeper then launches the job again)."""
    states = _definition(silo)["States"]
    tasks = {k: s for k, s in states.items() if s["Type"] == "Task"}
    for name, task in tasks.items():
        retried = {e for r in task.get("Retry", []) for e in r["ErrorEquals"]}
        assert "Lambda.TooManyRequestsException" in retried, name
        assert all(r.get("BackoffRate", 1) > 1 for r in task["Retry"]), name
        (catch,) = task["Catch"]
        assert catch["ErrorEquals"] == ["States.ALL"], name
        after = states[catch["Next"]]
        if after["Type"] == "Task":
            after = states[after["Next"]]
        assert after["Type"] == "Fail", name


@pytest.mark.parametrize("name", ["silo", "pool"])
def test_every_task_invokes_the_purge_function_with_ids_only_and_keeps_no_result(
    name: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(name)
    function = _function(synth, "Purge")[0]
    tasks = [s for s in _definition(synth)["States"].values() if s["Type"] == "Task"]
    assert len(tasks) == 2 + 2 * len(PURGE_PIPELINE)  # begin, finish; each step and its record
    for task in tasks:
        assert task["Resource"] == "arn:<AWS::Partition>:states:::lambda:invoke"
        assert task["Parameters"]["FunctionName"] == f"<{function}.Arn>"
        assert task["ResultPath"] is None
        payload = _payload(task)
        assert set(payload) <= {"action", "copy", "error.$", *IDS}


def test_an_execution_outlasts_the_worst_case_of_every_retry(silo: Synth) -> None:
    """The longest path (Begin, every step, then Finish or a failure record) with every
    task using all its attempts at the function's timeout and every backoff wait."""
    definition = _definition(silo)
    states = definition["States"]
    timeout = _function(silo, "Purge")[1]["Properties"]["Timeout"]

    def worst(state: dict[str, Any]) -> float:
        retries = state.get("Retry", [])
        attempts = max([r["MaxAttempts"] for r in retries], default=0)
        waits = max(
            (
                sum(
                    r["IntervalSeconds"] * r.get("BackoffRate", 2.0) ** n
                    for n in range(r["MaxAttempts"])
                )
                for r in retries
            ),
            default=0,
        )
        return (1 + attempts) * timeout + waits

    path = [states[name] for name in _path(definition) if states[name]["Type"] == "Task"]
    records = [states[c["Next"]] for s in path for c in s.get("Catch", [])]
    longest = sum(worst(s) for s in path) + max(worst(r) for r in records)
    assert definition["TimeoutSeconds"] == settings.PURGE_EXECUTION_TIMEOUT.to_seconds()
    assert definition["TimeoutSeconds"] > longest


@pytest.mark.parametrize("name", ["silo", "pool"])
def test_the_state_machine_is_standard_traced_and_logs_ids_only(
    name: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(name)
    props = _machine(synth)[1]["Properties"]
    assert props["StateMachineType"] == "STANDARD"
    assert props["TracingConfiguration"] == {"Enabled": True}
    logging = props["LoggingConfiguration"]
    assert logging["Level"] == "ALL"
    assert logging["IncludeExecutionData"] is False
    (destination,) = logging["Destinations"]
    group = destination["CloudWatchLogsLogGroup"]["LogGroupArn"]["Fn::GetAtt"][0]
    group_props = synth.resources("AWS::Logs::LogGroup")[group]["Properties"]
    assert group_props["RetentionInDays"] > 0
    assert group_props["LogGroupName"].startswith("/aws/vendedlogs/states/")
    assert props["StateMachineName"] == f"{synth.stack.stack_name}-purge"


# What each role may do


@pytest.mark.parametrize("name", ["silo", "pool"])
def test_the_execution_role_may_only_invoke_the_purge_function(
    name: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(name)
    role, props = _one(synth, "AWS::IAM::Role", "PurgeStateMachineRole")
    trust = props["Properties"]["AssumeRolePolicyDocument"]["Statement"]
    assert [s["Principal"] for s in trust] == [{"Service": "states.amazonaws.com"}]
    assert not props["Properties"].get("ManagedPolicyArns")
    found = statements(synth, role)
    assert found
    function = _function(synth, "Purge")[0]
    invoke = [s for s in found if "lambda:InvokeFunction" in _list(s["Action"])]
    assert [_list(s["Action"]) for s in invoke] == [["lambda:InvokeFunction"]]
    assert invoke[0]["Resource"] == [
        {"Fn::GetAtt": [function, "Arn"]},
        {"Fn::Join": ["", [{"Fn::GetAtt": [function, "Arn"]}, ":*"]]},
    ]
    for statement in found:
        assert statement["Effect"] == "Allow"
        if statement in invoke:
            continue
        assert set(_list(statement["Action"])) <= SERVICE_ACTIONS, statement
    actions = {a for s in found for a in _list(s["Action"])}
    assert not {a for a in actions if a.startswith(DATA_ACTIONS)}


def _purge_allowed(synth: Synth, prefix: str) -> list[dict[str, Any]]:
    return [
        s
        for s in statements(synth, "ComputePurgeFunction")
        if s["Effect"] == "Allow" and any(a.startswith(prefix) for a in _list(s["Action"]))
    ]


@pytest.mark.parametrize("name", ["silo", "pool"])
def test_the_purge_function_reaches_only_what_its_steps_touch(
    name: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(name)
    tables = {
        v["Properties"]["TableName"].removeprefix("memvault-"): k
        for k, v in synth.resources("AWS::DynamoDB::Table").items()
    }
    items = _purge_allowed(synth, "dynamodb:")
    reached: dict[str, set[str]] = {}
    for s in items:
        for resource in _list(s["Resource"]):
            reached.setdefault(resource["Fn::GetAtt"][0], set()).update(_list(s["Action"]))
    assert set(reached) == {tables[t] for t in settings.PURGE_TABLES}
    assert tables["idempotency"] not in reached
    for table, actions in reached.items():
        assert {"dynamodb:Query", "dynamodb:DeleteItem", "dynamodb:BatchWriteItem"} <= actions
        scanned = table in {tables[t] for t in ("sessions", "runs")}
        assert ("dynamodb:Scan" in actions) is scanned, table
    # The tables' key, only through DynamoDB.
    (key,) = _purge_allowed(synth, "kms:")
    assert key["Resource"] == {
        "Fn::GetAtt": [_one(synth, "AWS::KMS::Key", "DataTablesKey")[0], "Arn"]
    }
    assert key["Condition"] == {
        "StringEquals": {
            "kms:ViaService": {
                "Fn::Join": ["", ["dynamodb.", {"Ref": "AWS::Region"}, ".amazonaws.com"]]
            }
        }
    }
    # Object versions: listed and deleted (the tenant's own in a silo), never read.
    bucket = _one(synth, "AWS::S3::Bucket", "DataArtifacts")[0]
    prefix = "acme/*" if name == "silo" else "*"
    s3 = _purge_allowed(synth, "s3:")
    granted = {a: s for s in s3 for a in _list(s["Action"])}
    assert set(granted) == {
        "s3:DeleteObject",
        "s3:DeleteObjectVersion",
        "s3:ListBucket",
        "s3:ListBucketVersions",
    }
    assert granted["s3:DeleteObjectVersion"]["Resource"] == {
        "Fn::Join": ["", [{"Fn::GetAtt": [bucket, "Arn"]}, f"/{prefix}"]]
    }
    listing = granted["s3:ListBucketVersions"]
    assert listing["Resource"] == {"Fn::GetAtt": [bucket, "Arn"]}
    if name == "silo":
        assert listing["Condition"] == {"StringLike": {"s3:prefix": ["acme/*"]}}
    # The index's paths only.
    domain = _one(synth, "AWS::OpenSearchService::Domain")[0]
    es = _purge_allowed(synth, "es:")
    assert {a for s in es for a in _list(s["Action"])} == {
        "es:ESHttpGet",
        "es:ESHttpHead",
        "es:ESHttpPost",
        "es:ESHttpPut",
    }
    for s in es:
        assert s["Resource"] == {"Fn::Join": ["", [{"Fn::GetAtt": [domain, "Arn"]}, "/*"]]}
    # Nothing else: no model, no other state machine, no tenant session, no key admin.
    everything = {a for s in _purge_allowed(synth, "") for a in _list(s["Action"])}
    assert not {a for a in everything if a.startswith(("bedrock:", "states:", "sqs:", "sts:"))}
    assert not everything & {"kms:ScheduleKeyDeletion", "kms:DisableKey", "s3:PutObject"}
    env = _function(synth, "Purge")[1]["Properties"]["Environment"]["Variables"]
    assert "MEMVAULT_TENANT_ROLE_ARN" not in env
    trust = _one(synth, "AWS::IAM::Role", "IsolationTenantAccessRole") if name == "pool" else None
    if trust is not None:
        assert _role(synth, "Purge") not in json.dumps(trust[1])


@pytest.mark.parametrize("name", ["silo", "pool"])
def test_the_purge_function_grants_no_data_action_on_every_resource(
    name: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(name)
    for s in _purge_allowed(synth, ""):
        if any(a.startswith(DATA_ACTIONS) for a in _list(s["Action"])):
            assert "*" not in _list(s["Resource"]), s
            assert not any(a.endswith(":*") for a in _list(s["Action"])), s


def test_the_purge_function_is_configured_like_the_others_and_for_the_index(
    silo: Synth,
) -> None:
    props = _function(silo, "Purge")[1]["Properties"]
    api = _function(silo, "Api")[1]["Properties"]
    assert props["Handler"] == "index.handler"
    for field in ("Runtime", "Architectures", "Layers", "TracingConfig"):
        assert props[field] == api[field]
    assert props["Timeout"] == 300
    assert props["MemorySize"] == 512
    assert "ReservedConcurrentExecutions" not in props  # only on request (docs/deploy.md)
    group = props["LoggingConfig"]["LogGroup"]["Ref"]
    assert silo.resources("AWS::Logs::LogGroup")[group]["Properties"]["RetentionInDays"] > 0
    env = props["Environment"]["Variables"]
    domain = _one(silo, "AWS::OpenSearchService::Domain")[0]
    assert (
        env.items()
        >= {
            "POWERTOOLS_SERVICE_NAME": "memvault-purge",
            "MEMVAULT_TABLE_PREFIX": "memvault-",
            "MEMVAULT_AWS_REGION": {"Ref": "AWS::Region"},
            "MEMVAULT_SILO_TENANT_ID": "acme",
            "MEMVAULT_TENANT_KEY_ALIAS_PREFIX": "alias/memvault/",
            "MEMVAULT_SEARCH_BACKEND": "opensearch",
            "MEMVAULT_SEARCH_AUTH": "sigv4",
            "MEMVAULT_SEARCH_ALIAS": "memvault-memories",
            "MEMVAULT_EMBEDDING_MODEL": "titan-v2",
            "MEMVAULT_TITAN_DIMENSIONS": "512",
            "MEMVAULT_SEARCH_ENDPOINT": {
                "Fn::Join": ["", ["https://", {"Fn::GetAtt": [domain, "DomainEndpoint"]}]]
            },
        }.items()
    )
    bucket = _one(silo, "AWS::S3::Bucket", "DataArtifacts")[0]
    assert env["MEMVAULT_ARTIFACTS_BUCKET"] == {"Ref": bucket}
    assert "MEMVAULT_TENANT_ISSUERS" not in env
    # The key aliases the runtime derives are the ones the stack creates.
    aliases = [a["Properties"]["AliasName"] for a in silo.resources("AWS::KMS::Alias").values()]
    assert f"{env['MEMVAULT_TENANT_KEY_ALIAS_PREFIX']}acme" in aliases


def test_the_indexer_is_told_which_role_writes_tombstones(silo: Synth) -> None:
    env = _function(silo, "Indexer")[1]["Properties"]["Environment"]["Variables"]
    assert _role(silo, "Purge") in json.dumps(env["MEMVAULT_SEARCH_WRITER_ROLE_ARNS"])
    assert _role(silo, "Purge") not in json.dumps(env["MEMVAULT_SEARCH_READER_ROLE_ARNS"])


@pytest.mark.parametrize("name", ["silo", "pool"])
def test_the_api_and_the_sweeper_may_only_start_and_read_purge_executions(
    name: str, request: pytest.FixtureRequest
) -> None:
    synth: Synth = request.getfixturevalue(name)
    machine = _machine(synth)[0]
    machine_name = _machine(synth)[1]["Properties"]["StateMachineName"]
    executions = {
        "Fn::Join": [
            "",
            [
                "arn:",
                {"Ref": "AWS::Partition"},
                ":states:",
                {"Ref": "AWS::Region"},
                ":",
                {"Ref": "AWS::AccountId"},
                f":execution:{machine_name}:*",
            ],
        ]
    }
    # The sweeper starts the purge of a deletion whose start was lost after its commit.
    for fn in ("Api", "Direct", "Sweeper"):
        found = [
            s
            for s in statements(synth, f"Compute{fn}Function")
            if any(a.startswith("states:") for a in _list(s["Action"]))
        ]
        granted = {
            a: s["Resource"] for s in found for a in _list(s["Action"]) if a.startswith("states:")
        }
        assert granted == {
            "states:StartExecution": {"Ref": machine},
            "states:DescribeExecution": executions,
        }
        env = _function(synth, fn)[1]["Properties"]["Environment"]["Variables"]
        assert env[STATE_MACHINE_ENV] == {"Ref": machine}
    # Nobody else starts a purge.
    starters = {
        role
        for policy in synth.resources("AWS::IAM::Policy").values()
        for s in policy["Properties"]["PolicyDocument"]["Statement"]
        if "states:StartExecution" in _list(s["Action"])
        for role in json.dumps(policy["Properties"]["Roles"]).split('"')
        if role.startswith("Compute")
    }
    assert starters == {_role(synth, "Api"), _role(synth, "Direct"), _role(synth, "Sweeper")}


def _lambda_arn(logical: str) -> str:
    return f"arn:aws:lambda:{REGION}:{ACCOUNT}:function:{logical}"


def _resolve(value: Any, resources: dict[str, Any]) -> Any:
    """The template's intrinsics as strings, with Lambda functions' ARNs too."""
    if isinstance(value, list):
        return [_resolve(v, resources) for v in value]
    if not isinstance(value, dict):
        return value
    if "Ref" in value:
        return {"AWS::Partition": "aws", "AWS::AccountId": ACCOUNT, "AWS::Region": REGION}.get(
            value["Ref"], value["Ref"]
        )
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(str(_resolve(p, resources)) for p in parts)
    if "Fn::GetAtt" in value:
        logical, _ = value["Fn::GetAtt"]
        resource = resources[logical]
        kind = resource["Type"]
        if kind == "AWS::Lambda::Function":
            return _lambda_arn(logical)
        if kind == "AWS::DynamoDB::Table":
            name = resource["Properties"]["TableName"]
            return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"
        if kind == "AWS::S3::Bucket":
            return f"arn:aws:s3:::{logical.lower()}"
        if kind == "AWS::KMS::Key":
            return f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{logical}"
        if kind == "AWS::OpenSearchService::Domain":
            name = resource["Properties"]["DomainName"]
            return f"arn:aws:es:{REGION}:{ACCOUNT}:domain/{name}"
        return f"arn:aws:iam::{ACCOUNT}:role/{logical}"
    return {k: _resolve(v, resources) for k, v in value.items()}


def test_the_roles_are_judged_by_a_policy_evaluator(silo: Synth) -> None:
    """The execution role invokes the purge function and no other; the purge role deletes
    the tenant's object versions and tombstones documents, and nothing beyond."""
    res = silo.json["Resources"]

    def identity(role: str) -> dict[str, Any]:
        policy = next(
            p
            for p in silo.resources("AWS::IAM::Policy").values()
            if role in json.dumps(p["Properties"]["Roles"])
        )
        resolved: dict[str, Any] = _resolve(policy["Properties"]["PolicyDocument"], res)
        return resolved

    def ask(role: str, action: str, resource: str) -> dict[str, Any]:
        return {
            "identityPolicies": [{"name": "role", "policy": identity(role)}],
            "serviceControlPolicies": [],
            "resourceControlPolicies": [],
            "request": {
                "action": action,
                "principal": f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/session",
                "resource": {"accountId": ACCOUNT, "resource": resource},
                "contextVariables": {},
            },
        }

    machine_role = _one(silo, "AWS::IAM::Role", "PurgeStateMachineRole")[0]
    purge_role = _role(silo, "Purge")
    purge, api = _function(silo, "Purge")[0], _function(silo, "Api")[0]
    bucket = _one(silo, "AWS::S3::Bucket", "DataArtifacts")[0].lower()
    domain = _one(silo, "AWS::OpenSearchService::Domain")[1]["Properties"]["DomainName"]
    index = f"arn:aws:es:{REGION}:{ACCOUNT}:domain/{domain}/memvault-memories/_doc/c-1"
    table = f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/memvault-"
    answers = _run(
        [
            ask(machine_role, "lambda:InvokeFunction", _lambda_arn(purge)),
            ask(machine_role, "lambda:InvokeFunction", _lambda_arn(api)),
            ask(machine_role, "dynamodb:DeleteItem", f"{table}memory"),
            ask(purge_role, "s3:DeleteObjectVersion", f"arn:aws:s3:::{bucket}/acme/u-1/a-1"),
            ask(purge_role, "s3:DeleteObjectVersion", f"arn:aws:s3:::{bucket}/other/u-1/a-1"),
            ask(purge_role, "s3:PutObject", f"arn:aws:s3:::{bucket}/acme/u-1/a-1"),
            ask(purge_role, "dynamodb:DeleteItem", f"{table}memory"),
            ask(purge_role, "dynamodb:DeleteItem", f"{table}idempotency"),
            ask(purge_role, "es:ESHttpPut", index),
            ask(purge_role, "es:ESHttpDelete", index),
            ask(purge_role, "lambda:InvokeFunction", _lambda_arn(api)),
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
        "ImplicitlyDenied",
        "ImplicitlyDenied",
    ]


# Alarms and dashboard


@pytest.mark.parametrize("metric", ["ExecutionsFailed", "ExecutionsTimedOut"])
def test_failed_or_timed_out_purges_raise_alarms(silo: Synth, metric: str) -> None:
    machine = _machine(silo)[0]
    topic = _one(silo, "AWS::SNS::Topic")[0]
    found = [
        a["Properties"]
        for a in silo.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"]["Namespace"] == "AWS/States" and a["Properties"]["MetricName"] == metric
    ]
    assert len(found) == 1
    (alarm,) = found
    assert alarm["Dimensions"] == [{"Name": "StateMachineArn", "Value": {"Ref": machine}}]
    assert alarm["Threshold"] == 1
    assert alarm["ComparisonOperator"] == "GreaterThanOrEqualToThreshold"
    assert alarm["Statistic"] == "Sum"
    assert alarm["AlarmActions"] == [{"Ref": topic}]


def test_a_purge_whose_relaunches_ran_out_raises_an_alarm(silo: Synth) -> None:
    """The launcher counts PurgeAbandoned once a deletion's bounded relaunches are spent."""
    topic = _one(silo, "AWS::SNS::Topic")[0]
    (alarm,) = [
        a["Properties"]
        for a in silo.resources("AWS::CloudWatch::Alarm").values()
        if a["Properties"].get("MetricName") == "PurgeAbandoned"
    ]
    assert alarm["Namespace"] == "memvault"
    assert alarm["Dimensions"] == [{"Name": "service", "Value": "memvault"}]
    assert alarm["Threshold"] == 1
    assert {"Ref": topic} in alarm["AlarmActions"]


def test_the_purge_functions_errors_raise_an_alarm(silo: Synth) -> None:
    purge = {"Name": "FunctionName", "Value": {"Ref": _function(silo, "Purge")[0]}}
    assert any(
        a["Properties"]["MetricName"] == "Errors" and purge in a["Properties"]["Dimensions"]
        for a in silo.resources("AWS::CloudWatch::Alarm").values()
    )


def test_the_dashboard_shows_the_purge_pipeline(silo: Synth) -> None:
    _, dashboard = _one(silo, "AWS::CloudWatch::Dashboard")
    body = json.dumps(dashboard["Properties"]["DashboardBody"])
    for metric in ("ExecutionsStarted", "ExecutionsSucceeded", "ExecutionsFailed"):
        assert metric in body
