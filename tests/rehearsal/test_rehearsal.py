"""The deploy rehearsal: the stacks ``cdk deploy`` makes, tried as an operator would,
offline (tests/rehearsal/world.py says how, and where moto differs from AWS).

For a silo and a pool stack, each synthesized from the CDK app: every function builds its
settings from the template's environment; API Gateway proxy events reach every documented
operation through the TOKEN authorizer; writes reach the search index through the
memory table's stream and the indexer; deletions run through the template's own state
machine in moto's interpreter, with throttles at every task, an index outage past the
retries and a crash between steps, each ending COMPLETED by the sweeper alone; API
Gateway's own answers (unknown path, missing or expired token, oversize body) keep their
status codes in the error envelope; and every AWS call each function made is judged
against its role by the IAM evaluator, for its own tenant and across tenants.

``make rehearsal`` runs this file and writes each stack's report of calls under
build/rehearsal/; ``make test`` runs it too.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from typing import Any

import pytest
import requests

from memvault.config import Settings
from memvault.services.purge_pipeline import PURGE_PIPELINE
from tests.rehearsal.conftest import TENANTS, issuer_of
from tests.rehearsal.gateway import MAX_PAYLOAD, Answer, Gateway
from tests.rehearsal.iam import Judge, report
from tests.rehearsal.runtime import Fault
from tests.rehearsal.template import ACCOUNT, REGION, ROOT
from tests.rehearsal.world import FUNCTIONS, World
from tests.support.issuer import Issuer

ALL_SCOPES = "memory:read memory:write memory:delete sessions:write runs:write artifacts:write"
#: The smallest concurrency quota a new account may be given (Lambda keeps 100 of an
#: account's quota unreserved, so any reservation at all fails there).
NEW_ACCOUNT_CONCURRENCY = 10
REPORTS = ROOT / "build" / "rehearsal"
#: Every purge task state: Begin, each step, Finish. ``make test`` runs the fast form
#: (Begin, the index step, Finish); ``make rehearsal`` (MEMVAULT_REHEARSAL=full) all.
EVERY_TASK = [("begin", None), *[("step", s.copy) for s in PURGE_PIPELINE], ("finish", None)]
FULL = os.environ.get("MEMVAULT_REHEARSAL") == "full"
TASKS = EVERY_TASK if FULL else [("begin", None), ("step", "index"), ("finish", None)]
DONE = {"DONE", "NOT_APPLICABLE"}


def token(issuer: Issuer, tenant: str = "acme", subject: str = "u-1", **claims: Any) -> str:
    return "Bearer " + issuer.token(
        iss=issuer_of(tenant), tenant_id=tenant, subject_id=subject, scope=ALL_SCOPES, **claims
    )


class Client:
    def __init__(self, gateway: Gateway, issuer: Issuer, tenant: str, subject: str) -> None:
        self.gateway, self.tenant, self.subject = gateway, tenant, subject
        self.token = token(issuer, tenant, subject)
        self.n = 0

    def __call__(self, method: str, path: str, body: Any = None, **kw: Any) -> Answer:
        return self.gateway.request(method, path, token=self.token, body=body, **kw)

    def ok(self, method: str, path: str, body: Any = None, status: int = 200) -> Any:
        answer = self(method, path, body)
        assert answer.status == status, (method, path, answer)
        return answer.json() if answer.body else None

    def memory(self, content: str) -> str:
        self.n += 1
        body = {
            "request_id": f"rehearsal-{self.subject}-{self.n}",
            "kind": "semantic",
            "canonical_key": f"fact-{self.n}",
            "content": content,
            "source": {"type": "user_statement", "ref": f"msg-{self.n}"},
            "consent": True,
        }
        made = self.ok("POST", f"/v1/subjects/{self.subject}/memories", body, 201)
        return str(made["memory_id"])

    def job(self, deletion_id: str) -> dict[str, Any]:
        return dict(self.ok("GET", f"/v1/deletions/{deletion_id}"))


def completed_by_sweeper(
    world: World, client: Client, deletion_id: str, sweeps: int = 4
) -> dict[str, Any]:
    """Wait for the executions; while the job is unfinished, run the schedule again."""
    for _ in range(sweeps + 1):
        world.wait_for_executions()
        job = client.job(deletion_id)
        if job["status"] == "COMPLETED":
            return job
        world.sweep()
    return client.job(deletion_id)


# ------------------------------------------------------------------- the stack


def test_every_function_builds_its_settings_from_the_template(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each function's environment exactly as the template gives it (text, intrinsics
    resolved), read by the runtime's own Settings: every MEMVAULT_ variable names a
    setting (a misspelt one would be ignored silently), and each setting reads the
    template's value, not its default (the rehearsal's region is not the default's)."""
    for name in FUNCTIONS:
        process = world.function(name)
        given = {k: v for k, v in process.environment.items() if k.startswith("MEMVAULT_")}
        for key in [k for k in os.environ if k.startswith("MEMVAULT_")]:
            monkeypatch.delenv(key)
        for key, value in given.items():
            monkeypatch.setenv(key, value)
        settings = Settings()
        dumped = settings.model_dump(mode="json")
        for key, value in given.items():
            field = key.removeprefix("MEMVAULT_").lower()
            assert field in Settings.model_fields, (name, key)
            try:
                expected = json.loads(value)
            except ValueError:
                expected = value
            read = dumped[field]
            assert read == expected or str(read) == value, (name, key)
        assert settings.aws_region == REGION, name


def test_no_concurrency_is_reserved_beyond_a_new_accounts_quota(world: World) -> None:
    reserved = sum(
        int(f["Properties"].get("ReservedConcurrentExecutions", 0))
        for f in world.template.of_type("AWS::Lambda::Function").values()
    )
    # Lambda refuses a reservation that leaves fewer than 100 unreserved.
    assert reserved == 0 or reserved <= NEW_ACCOUNT_CONCURRENCY - 100, reserved


# ---------------------------------------------------------------- the scenario


@pytest.fixture(scope="module")
def owner(gateway: Gateway, issuer: Issuer) -> Client:
    return Client(gateway, issuer, "acme", "u-1")


@pytest.fixture(scope="module")
def scenario(world: World, owner: Client) -> dict[str, Any]:
    """One of everything through the deployed API, as an agent would use it."""
    o, s = owner, owner.subject
    ids: dict[str, Any] = {"subject_id": s}
    ids["memory_id"] = o.memory("Prefers green tea in the afternoon")
    memory = f"/v1/subjects/{s}/memories/{ids['memory_id']}"
    ids["memory_id"] = o.ok("PATCH", memory, {"expected_version": 1, "tags": ["drink"]})[
        "memory_id"
    ]
    ids["indexed"] = world.drain_stream()
    for _ in range(50):  # the index refreshes each second (search_refresh_interval)
        ids["recall"] = o.ok("POST", f"/v1/subjects/{s}/recall", {"query": "green tea", "limit": 5})
        if ids["recall"]["items"]:
            break
        time.sleep(0.1)
    base = f"/v1/subjects/{s}/sessions/s-1"
    o.ok("POST", f"{base}/messages", {"request_id": "m-1", "role": "user", "content": "Hi"}, 201)
    o.ok("PUT", f"{base}/summary", {"content": "Greeting", "from_seq": 1, "through_seq": 1})
    ids["session_id"] = "s-1"
    ids["run_id"] = "run-1"
    o.ok("PUT", "/v1/runs/run-1", {"subject_id": s, "plan_version": "p1"}, 201)
    o.ok(
        "POST",
        "/v1/runs/run-1/checkpoints",
        {"expected_version": 1, "status": "RUNNING", "step": "a"},
    )
    o.ok("PUT", "/v1/runs/run-1/operations/op-1", {"status": "PENDING"})
    o.ok("POST", "/v1/runs/run-1/events", {"event_id": "e-1", "type": "note.added", "payload": {}})
    data = b"rehearsal artifact"
    started = o.ok(
        "POST",
        f"/v1/subjects/{s}/artifacts",
        {
            "request_id": "art-1",
            "media_type": "text/plain",
            "size_bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
            "name": "note.txt",
        },
        201,
    )
    ids["artifact_id"] = started["artifact_id"]
    uploaded = requests.put(
        started["upload"]["url"], data=data, headers=started["upload"]["headers"], timeout=30
    )
    assert uploaded.status_code == 200, (started["upload"], uploaded.text[:500])
    ids["upload"] = uploaded.status_code
    ids["upload_request"] = started["upload"]
    o.ok("POST", f"/v1/subjects/{s}/artifacts/{ids['artifact_id']}/commit")
    context = {
        "goal": "Plan",
        "token_budget": 2000,
        "session_id": "s-1",
        "run_id": "run-1",
        "query": "tea",
    }
    ids["manifest"] = o.ok("POST", f"/v1/subjects/{s}/context", context)["manifest"]
    ids["recall_id"] = ids["recall"]["recall_id"]
    ids["export"] = o.ok("GET", f"/v1/subjects/{s}/export")
    # The direct-invocation function, as the SDK's Lambda transport calls it.
    direct = world.function("direct").invoke(
        {
            "operation": "memory.write",
            "token": o.token.removeprefix("Bearer "),
            "params": {"subject_id": s},
            "body": {
                "request_id": "direct-1",
                "kind": "procedural",
                "canonical_key": "direct-fact",
                "content": "Restarts the build agent before a release",
                "source": {"type": "tool_result", "ref": "direct"},
                "consent": True,
            },
        }
    )
    ids["direct"] = direct
    gone = o.memory("Lives near the old harbour")
    ids["deletion"] = o.ok("DELETE", f"/v1/subjects/{s}/memories/{gone}", status=202)
    ids["deletion_id"] = ids["deletion"]["deletion_id"]
    world.wait_for_executions()
    ids["job"] = o.job(ids["deletion_id"])
    return ids


def test_the_scenario_runs_on_the_deployed_functions(
    world: World, scenario: dict[str, Any]
) -> None:
    assert scenario["indexed"] >= 2  # the write and its correction, through the stream
    assert any(
        h["memory"]["memory_id"] == scenario["memory_id"] for h in scenario["recall"]["items"]
    ), scenario["recall"]
    assert scenario["upload"] == 200
    assert scenario["direct"]["statusCode"] == 201, scenario["direct"]
    assert scenario["job"]["status"] == "COMPLETED", scenario["job"]
    assert {c["status"] for c in scenario["job"]["copies"]} <= DONE
    assert not world.dead_letters
    assert world.search.unsigned == 0  # every search request was signed (SigV4)


def _openapi(gateway: Gateway) -> dict[str, Any]:
    answer = gateway.request("GET", "/v1/openapi.json")
    assert answer.status == 200
    return dict(answer.json())


def test_every_documented_operation_answers_through_the_gateway(
    world: World, gateway: Gateway, owner: Client, scenario: dict[str, Any]
) -> None:
    """Each operation of the served OpenAPI document, with the scenario's ids and an empty
    body where it takes one: the gateway routes it, the authorizer's cached policy allows
    it, the function answers, never a 5xx, and every error in the envelope."""
    values = {**scenario, "version": "1", "operation_id": "op-1"}
    sent = 0
    for path, item in _openapi(gateway)["paths"].items():
        for method, operation in item.items():
            if method not in ("get", "post", "put", "patch", "delete"):
                continue
            if method == "delete" and path.endswith(("/memories", "/memories/{memory_id}")):
                continue  # deleting the scenario's memories: the deletion tests do that
            concrete = re.sub(r"\{(\w+)\}", lambda m: str(values[m.group(1)]), path)
            body = {} if "requestBody" in operation else None
            answer = owner(method.upper(), concrete, body)
            sent += 1
            assert answer.status < 500, (method, path, answer)
            assert answer.source == "function", (method, path, answer)
            if answer.status >= 400:
                assert set(answer.json()["error"]) >= {"code", "message"}, (method, path)
    assert sent >= 30


# ------------------------------------------------------------------ the gateway


def test_api_gateways_own_answers_keep_their_status_in_the_envelope(
    world: World, gateway: Gateway, issuer: Issuer
) -> None:
    """An unknown path, a missing token, an expired token, a body over API Gateway's 10 MB:
    each answered by API Gateway itself with its own status code (never rewritten to 400
    or 500 by a DEFAULT_4XX/5XX override) and the API's error envelope."""
    expired = "Bearer " + issuer.token(
        iss=issuer_of("acme"), tenant_id="acme", subject_id="u-1", issued_ago=4000, lifetime=600
    )
    good = token(issuer)
    cases = {
        "unknown path": (gateway.request("GET", "/v2/nothing", token=good), (403, 404)),
        "missing token": (gateway.request("GET", "/v1/subjects/u-1/memories"), (401,)),
        "expired token": (
            gateway.request("GET", "/v1/subjects/u-1/memories", token=expired),
            (401,),
        ),
        "oversize body": (
            gateway.request(
                "POST", "/v1/subjects/u-1/memories", token=good, raw_body="x" * (MAX_PAYLOAD + 1)
            ),
            (413,),
        ),
    }
    for name, (answer, statuses) in cases.items():
        assert answer.source == "gateway", name
        assert answer.status in statuses, (name, answer)
        error = answer.json()["error"]
        assert error["code"] and error["message"], (name, answer)


def test_a_body_over_the_apis_own_limit_is_refused_by_the_function(
    world: World, owner: Client
) -> None:
    answer = owner(
        "POST", "/v1/subjects/u-1/memories", raw_body=json.dumps({"content": "x" * 200_000})
    )
    assert (answer.status, answer.json()["error"]["code"]) == (413, "payload_too_large")


def test_the_authorizers_cached_policy_serves_every_route(
    world: World, gateway: Gateway, owner: Client
) -> None:
    """API Gateway caches the authorizer's answer per token for its TTL: the policy made
    for the first route must allow every other route too."""
    assert gateway.authorizer_ttl > 0
    policy = gateway.cache[owner.token]
    from tests.rehearsal.gateway import allows

    for route in (
        "GET/v1/runs/x",
        "DELETE/v1/subjects/u-1/memories",
        "POST/v1/subjects/u-2/recall",
    ):
        arn = f"arn:aws:execute-api:{REGION}:{ACCOUNT}:rehearsal/prod/{route}"
        assert allows(policy["policyDocument"], arn), route


# -------------------------------------------------------------------- deletion


@pytest.mark.parametrize(("action", "copy"), TASKS, ids=lambda v: v or "-")
def test_one_throttle_at_any_purge_task_is_absorbed_by_the_execution(
    world: World, owner: Client, action: str, copy: str | None
) -> None:
    world.runtime.faults[:] = [Fault(action, "throttle", copy, times=1)]
    memory = owner.memory(f"throttled at {action} {copy}")
    deletion = owner.ok("DELETE", f"/v1/subjects/u-1/memories/{memory}", status=202)
    executions = world.wait_for_executions()
    mine = [e for e in executions if e["name"].startswith(deletion["deletion_id"])]
    assert [e["status"] for e in mine] == ["SUCCEEDED"]
    assert world.runtime.faults[0].times == 0  # the throttle did happen
    assert owner.job(deletion["deletion_id"])["status"] == "COMPLETED"


@pytest.mark.parametrize(("action", "copy"), TASKS, ids=lambda v: v or "-")
def test_throttles_past_the_retries_at_any_purge_task_end_completed_by_the_sweeper(
    world: World, owner: Client, action: str, copy: str | None
) -> None:
    world.runtime.faults[:] = [Fault(action, "throttle", copy, times=12)]
    memory = owner.memory(f"throttled long at {action} {copy}")
    deletion = owner.ok("DELETE", f"/v1/subjects/u-1/memories/{memory}", status=202)
    world.wait_for_executions()
    world.runtime.faults.clear()
    job = completed_by_sweeper(world, owner, deletion["deletion_id"])
    assert job["status"] == "COMPLETED", job
    assert {c["status"] for c in job["copies"]} <= DONE


def test_an_index_outage_of_five_minutes_ends_completed_by_the_sweeper(
    world: World, owner: Client
) -> None:
    memory = owner.memory("Keeps a cat called Miso")
    world.drain_stream()
    world.search.down = True
    outage_started = world.simulated_seconds
    try:
        deletion = owner.ok("DELETE", f"/v1/subjects/u-1/memories/{memory}", status=202)
        world.wait_for_executions()
        job = owner.job(deletion["deletion_id"])
        assert job["status"] == "FAILED", job  # the index step's retries are spent
        world.sweep()  # the schedule during the outage: another attempt, failing too
        world.wait_for_executions()
        # The rest of the five minutes passes (simulated), then the domain is back.
        world.simulated_wait += max(0.0, 300 - (world.simulated_seconds - outage_started))
    finally:
        world.search.down = False
    job = completed_by_sweeper(world, owner, deletion["deletion_id"])
    assert job["status"] == "COMPLETED", job
    assert {c["status"] for c in job["copies"]} <= DONE


def test_a_crash_between_steps_ends_completed_by_the_sweeper(world: World, owner: Client) -> None:
    world.runtime.faults[:] = [Fault("step", "crash", "primary", times=1)]
    memory = owner.memory("Commutes by bicycle")
    deletion = owner.ok("DELETE", f"/v1/subjects/u-1/memories/{memory}", status=202)
    world.wait_for_executions()
    assert world.runtime.faults[0].times == 0
    job = completed_by_sweeper(world, owner, deletion["deletion_id"])
    assert job["status"] == "COMPLETED", job
    assert {c["status"] for c in job["copies"]} <= DONE


# ------------------------------------------------------------------------ IAM


def test_the_judge_refuses_what_a_role_does_not_grant(world: World) -> None:
    """The evaluator can say no: calls no role here is given are denied."""
    judge = Judge(world.template, list(TENANTS))
    table = {"TableName": "memvault-memory", "Key": {"pk": {"S": "acme#u-1"}, "sk": {"S": "x"}}}
    forged = {
        "authorizer": [
            {"service": "dynamodb", "operation": "DeleteItem", "params": table, "access_key": "k"}
        ],
        "indexer": [
            {
                "service": "stepfunctions",
                "operation": "StartExecution",
                "params": {"stateMachineArn": f"arn:aws:states:{REGION}:{ACCOUNT}:stateMachine:x"},
                "access_key": "k",
            }
        ],
    }
    judged = judge.judge({n: world.logical(n) for n in forged}, forged)
    assert [j.decision for j in judged] == ["ImplicitlyDenied", "ImplicitlyDenied"]


def presigned_upload(upload: dict[str, Any]) -> list[dict[str, Any]]:
    """The calls a presigned PUT makes, as S3 would judge them: the object write, and the
    data key S3 asks KMS for under the request's key and encryption context."""
    import base64
    from urllib.parse import parse_qs, urlsplit

    url = urlsplit(upload["url"])
    bucket, key = url.path.lstrip("/").split("/", 1)
    signer = parse_qs(url.query)["X-Amz-Credential"][0].split("/", 1)[0]
    headers = {k.lower(): v for k, v in upload["headers"].items()}
    context = json.loads(base64.b64decode(headers["x-amz-server-side-encryption-context"]))
    put = {
        "Bucket": bucket,
        "Key": key,
        "ServerSideEncryption": headers.get("x-amz-server-side-encryption"),
        "SSEKMSKeyId": headers.get("x-amz-server-side-encryption-aws-kms-key-id"),
    }
    return [
        {"service": "s3", "operation": "PutObject", "params": put, "access_key": signer},
        {
            "service": "kms",
            "operation": "GenerateDataKey",
            "params": {
                "KeyId": put["SSEKMSKeyId"],
                "EncryptionContext": context,
                "ViaService": "s3",
            },
            "access_key": signer,
        },
    ]


def test_every_aws_call_is_allowed_for_its_tenant_and_denied_across_tenants(
    world: World, scenario: dict[str, Any]
) -> None:
    """Last: the calls of the whole module, each judged against its caller's role."""
    judge = Judge(world.template, list(TENANTS) if world.mode == "pool" else ["acme"])
    logicals = {name: world.logical(name) for name in FUNCTIONS}
    calls = {name: world.function(name).calls() for name in FUNCTIONS}
    # The upload the agent sent with the API's presigned URL: S3 judges the PutObject
    # against the signer, and calls KMS with the signer's permissions and the context.
    calls["api"] += presigned_upload(scenario["upload_request"])
    judged = judge.judge(logicals, calls)
    REPORTS.mkdir(parents=True, exist_ok=True)
    (REPORTS / f"{world.mode}-calls.md").write_text(
        f"# AWS calls in the {world.mode} rehearsal\n\n{report(judged)}\n"
    )
    assert {j.function for j in judged} >= {"api", "indexer", "purge"}
    refused = [j for j in judged if j.decision != "Allowed"]
    assert not refused, [(j.function, j.call, j.request) for j in refused[:5]]
    leaks = [
        j
        for j in judged
        if j.across not in (None, "tenant-neutral") and not j.across.endswith("Denied")
    ]
    assert not leaks, [(j.function, j.call, j.request) for j in leaks[:5]]
    if world.mode == "pool":
        assert any(j.tenant for j in judged)  # tenant sessions were judged across tenants
