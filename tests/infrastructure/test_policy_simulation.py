"""Isolation by IAM, proved offline with a real policy evaluator.

moto does not evaluate IAM conditions, so the synthesized pool template's policies are
evaluated with the npm package ``@cloud-copilot/iam-simulate`` (pinned in
``policy_sim/package.json``, run with Node): a session tagged ``tenant_id=acme`` must be
allowed its own items and objects and denied tenant globex's, for DynamoDB GetItem,
Query and PutItem and S3 GetObject, and kms:Decrypt only under its own encryption context.

The evaluator is patched: ``policy_sim/patches/@cloud-copilot+iam-simulate+0.1.173.patch``,
applied by ``patch-package`` from the ``postinstall`` script on every ``npm ci``. Unpatched,
iam-simulate matches variable condition keys only of the ``prefix/name`` form (such as
``aws:PrincipalTag/tenant_id``) and drops ``kms:EncryptionContext:tenant_id`` into
``ignoredContextKeys``, so no KMS decision by encryption context could be judged. The patch
only adds matching of the colon form (``kms:EncryptionContext:context-key``, as AWS documents
it) in ``listHasVariableKeyMatch`` and ``replaceVariableInContextKey``; nothing else changes."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.infrastructure.conftest import Synth

SIM = Path(__file__).parent / "policy_sim"
ACCOUNT = "123456789012"
REGION = "us-east-1"
SESSION = f"arn:aws:sts::{ACCOUNT}:assumed-role/TenantAccessRole/memvault-acme"


def _resolve(value: Any, resources: dict[str, Any]) -> Any:
    """Enough of CloudFormation's intrinsics to turn the template's ARNs into strings."""
    if isinstance(value, list):
        return [_resolve(v, resources) for v in value]
    if not isinstance(value, dict):
        return value
    if "Ref" in value:
        return {
            "AWS::Partition": "aws",
            "AWS::AccountId": ACCOUNT,
            "AWS::Region": REGION,
            "AWS::URLSuffix": "amazonaws.com",
        }.get(value["Ref"], value["Ref"])
    if "Fn::Join" in value:
        sep, parts = value["Fn::Join"]
        return sep.join(str(_resolve(p, resources)) for p in parts)
    if "Fn::GetAtt" in value:
        logical, _ = value["Fn::GetAtt"]
        return _arn(logical, resources[logical])
    return {k: _resolve(v, resources) for k, v in value.items()}


def _arn(logical: str, resource: dict[str, Any]) -> str:
    kind = resource["Type"]
    if kind == "AWS::DynamoDB::Table":
        return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{resource['Properties']['TableName']}"
    if kind == "AWS::S3::Bucket":
        return f"arn:aws:s3:::{logical.lower()}"
    if kind == "AWS::KMS::Key":
        return f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{logical}"
    if kind == "AWS::OpenSearchService::Domain":
        return f"arn:aws:es:{REGION}:{ACCOUNT}:domain/{resource['Properties']['DomainName']}"
    if kind == "AWS::SQS::Queue":
        return f"arn:aws:sqs:{REGION}:{ACCOUNT}:{logical}"
    return f"arn:aws:iam::{ACCOUNT}:role/{logical}"


class World:
    def __init__(self, pool: Synth) -> None:
        res = pool.json["Resources"]
        self.res = res
        role_policy = next(
            p
            for p in res.values()
            if p["Type"] == "AWS::IAM::Policy"
            and "IsolationTenantAccessRole" in json.dumps(p["Properties"]["Roles"])
        )
        self.identity = _resolve(role_policy["Properties"]["PolicyDocument"], res)
        self.table = _arn(
            "",
            next(
                r
                for r in res.values()
                if r["Type"] == "AWS::DynamoDB::Table"
                and r["Properties"]["TableName"] == "memvault-memory"
            ),
        )
        bucket = next(
            k
            for k, r in res.items()
            if r["Type"] == "AWS::S3::Bucket" and k.startswith("DataArtifacts")
        )
        self.bucket = _arn(bucket, res[bucket])
        self.bucket_policy = next(
            _resolve(r["Properties"]["PolicyDocument"], res)
            for r in res.values()
            if r["Type"] == "AWS::S3::BucketPolicy" and r["Properties"]["Bucket"] == {"Ref": bucket}
        )
        self.keys = {
            ("acme" if "Acme" in k else "globex"): (
                _arn(k, r),
                _resolve(r["Properties"]["KeyPolicy"], res),
            )
            for k, r in res.items()
            if r["Type"] == "AWS::KMS::Key" and k.startswith("Tenancy")
        }

    def simulation(
        self,
        action: str,
        resource: str,
        context: dict[str, Any],
        resource_policy: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        sim: dict[str, Any] = {
            "identityPolicies": [{"name": "tenant-access", "policy": self.identity}],
            "serviceControlPolicies": [],
            "resourceControlPolicies": [],
            "request": {
                "action": action,
                "principal": SESSION,
                "resource": {"accountId": ACCOUNT, "resource": resource},
                "contextVariables": {"aws:PrincipalTag/tenant_id": "acme", **context},
            },
        }
        if resource_policy is not None:
            sim["resourcePolicy"] = resource_policy
        return sim


def _run(simulations: list[dict[str, Any]]) -> list[str]:
    node = shutil.which("node")
    assert node, "Node.js is needed for the policy evaluator"
    if not (SIM / "node_modules").exists():
        subprocess.run(["npm", "ci", "--silent"], cwd=SIM, check=True, timeout=300)
    out = subprocess.run(
        [node, "simulate.mjs"],
        cwd=SIM,
        input=json.dumps(simulations),
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    answers: list[str] = json.loads(out.stdout)
    return answers


@pytest.fixture(scope="module")
def world(pool: Synth) -> World:
    return World(pool)


@pytest.mark.parametrize("action", ["dynamodb:GetItem", "dynamodb:Query", "dynamodb:PutItem"])
def test_a_tenant_session_reaches_its_own_items_only(world: World, action: str) -> None:
    own, other = _run(
        [
            world.simulation(action, world.table, {"dynamodb:LeadingKeys": ["acme#u-1"]}),
            world.simulation(action, world.table, {"dynamodb:LeadingKeys": ["globex#u-1"]}),
        ]
    )
    assert (own, other) == ("Allowed", "ImplicitlyDenied")


def test_a_tenant_session_reaches_its_own_objects_only(world: World) -> None:
    own, other = _run(
        [
            world.simulation("s3:GetObject", f"{world.bucket}/acme/art_1", {}),
            world.simulation("s3:GetObject", f"{world.bucket}/globex/art_1", {}),
        ]
    )
    assert (own, other) == ("Allowed", "ImplicitlyDenied")


def test_a_tenant_session_lists_and_removes_only_its_own_objects(world: World) -> None:
    answers = _run(
        [
            world.simulation(
                "s3:ListBucketVersions", world.bucket, {"s3:prefix": "acme/u-1/art_1"}
            ),
            world.simulation("s3:ListBucketVersions", world.bucket, {"s3:prefix": "globex/u-1/"}),
            world.simulation("s3:DeleteObjectVersion", f"{world.bucket}/acme/u-1/art_1", {}),
            world.simulation("s3:DeleteObjectVersion", f"{world.bucket}/globex/u-1/art_1", {}),
        ]
    )
    assert answers == ["Allowed", "ImplicitlyDenied", "Allowed", "ImplicitlyDenied"]


def test_a_tenant_session_decrypts_only_under_its_own_encryption_context(world: World) -> None:
    """Through the patched evaluator (module docstring): the identity policy's
    ``OwnKeyContextOnly`` and each tenant key's policy together allow acme's session
    kms:Decrypt with ``tenant_id=acme`` on acme's key, and deny it with globex's context,
    without a context, and on globex's key under either context."""
    acme_key, acme_policy = world.keys["acme"]
    globex_key, globex_policy = world.keys["globex"]
    context = "kms:EncryptionContext:tenant_id"
    answers = _run(
        [
            world.simulation("kms:Decrypt", acme_key, {context: "acme"}, acme_policy),
            world.simulation("kms:Decrypt", acme_key, {context: "globex"}, acme_policy),
            world.simulation("kms:Decrypt", acme_key, {}, acme_policy),
            world.simulation("kms:Decrypt", globex_key, {context: "globex"}, globex_policy),
            world.simulation("kms:Decrypt", globex_key, {context: "acme"}, globex_policy),
        ]
    )
    assert answers[0] == "Allowed"
    assert all(a.endswith("Denied") for a in answers[1:]), answers
    # The key policy's own Deny statements (wrong context, missing context) bite, not
    # merely the absence of an Allow.
    assert answers[1:3] == ["ExplicitlyDenied", "ExplicitlyDenied"]


def test_no_tenant_key_decrypts_without_an_encryption_context(world: World) -> None:
    """Without any encryption context, each tenant key's policy denies decryption
    outright. (The context-bearing cases are judged above, through the patched
    evaluator; test_stack.py asserts the same statements structurally, and the
    encryption-context binding itself is exercised against KMS with the artifact store.)"""
    answers = _run(
        [world.simulation("kms:Decrypt", arn, {}, policy) for arn, policy in world.keys.values()]
    )
    assert answers == ["ExplicitlyDenied", "ExplicitlyDenied"]


# An upload under a tenant's key is two decisions: S3 authorizes the caller's PutObject
# (identity policy and bucket policy), then asks KMS for a data key on the caller's behalf
# (kms:ViaService s3, the caller's own credentials) under the encryption context it sends:
# the request's context plus ``aws:s3:arn``, the object's ARN; with an S3 Bucket Key,
# only ``aws:s3:arn`` and the bucket's ARN. Both must be allowed.
OBJECT = "acme/u-1/art_1"
SSE_KMS = {
    "s3:x-amz-server-side-encryption": "aws:kms",
    "s3:x-amz-server-side-encryption-aws-kms-key-id": "alias/memvault/acme",
    "aws:SecureTransport": "true",
}
VIA_S3 = {
    "kms:ViaService": f"s3.{REGION}.amazonaws.com",
    "aws:CalledVia": ["s3.amazonaws.com"],
    "aws:CalledViaFirst": "s3.amazonaws.com",
    "aws:ViaAWSService": "true",
    "aws:SecureTransport": "true",
}


def _put(world: World, headers: dict[str, Any]) -> dict[str, Any]:
    return world.simulation(
        "s3:PutObject", f"{world.bucket}/{OBJECT}", headers, world.bucket_policy
    )


def _data_key(world: World, tenant: str, context: dict[str, str]) -> dict[str, Any]:
    key, policy = world.keys[tenant]
    encryption = {f"kms:EncryptionContext:{k}": v for k, v in context.items()}
    return world.simulation(
        "kms:GenerateDataKey",
        key,
        {**VIA_S3, **encryption, "kms:EncryptionContextKeys": sorted(context)},
        policy,
    )


def test_an_upload_under_the_tenants_key_and_context_is_allowed(world: World) -> None:
    answers = _run(
        [
            _put(world, SSE_KMS),
            _data_key(
                world,
                "acme",
                {
                    "tenant_id": "acme",
                    "artifact_id": "art_1",
                    "aws:s3:arn": f"{world.bucket}/{OBJECT}",
                },
            ),
        ]
    )
    assert answers == ["Allowed", "Allowed"]


def test_an_upload_that_names_no_sse_kms_key_is_refused_by_the_bucket(world: World) -> None:
    """Without SSE-KMS and a key named, S3 would encrypt under the bucket's default key
    (the tables' key): outside any tenant's key and encryption context."""
    no_sse = {"aws:SecureTransport": "true"}
    sse_s3 = {**no_sse, "s3:x-amz-server-side-encryption": "AES256"}
    no_key = {**no_sse, "s3:x-amz-server-side-encryption": "aws:kms"}
    answers = _run([_put(world, headers) for headers in (no_sse, sse_s3, no_key)])
    assert answers == ["ExplicitlyDenied"] * 3


def test_a_data_key_under_a_bucket_key_or_without_the_tenants_context_is_refused(
    world: World,
) -> None:
    """With an S3 Bucket Key, S3 asks for the bucket-level key under the bucket's ARN
    alone; without the request's context, under the object's ARN alone. The tenant key
    refuses both outright, and another tenant's context on it."""
    object_arn = f"{world.bucket}/{OBJECT}"
    answers = _run(
        [
            _data_key(world, "acme", {"aws:s3:arn": world.bucket}),
            _data_key(world, "acme", {"aws:s3:arn": object_arn}),
            _data_key(world, "acme", {"tenant_id": "globex", "aws:s3:arn": object_arn}),
            _data_key(world, "globex", {"tenant_id": "acme", "aws:s3:arn": object_arn}),
        ]
    )
    assert answers == ["ExplicitlyDenied"] * 4, answers
