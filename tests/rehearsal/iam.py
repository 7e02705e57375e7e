"""Every AWS call a rehearsed function made, judged against the IAM policies the template
gives its caller, with the policy evaluator the infrastructure tests use
(``@cloud-copilot/iam-simulate``, run by Node; see tests/infrastructure/
test_policy_simulation.py for the evaluator and its patch).

A call signed with a function's own key is judged against that function's role (its
inline policies from the template, and the resource's own policy where the service has
one: a KMS key policy, the search domain's access policy, a role's trust policy). A call
signed with a key that an ``AssumeRole`` of the tenant-access role returned (pool mode)
is judged against that role, with the session's tenant tag as ``aws:PrincipalTag``; and
the same call with the tenant named as another tenant of the stack must be denied.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from tests.infrastructure.test_policy_simulation import _run
from tests.rehearsal.template import ACCOUNT, REGION, Template


@dataclass
class Request:
    action: str
    resource: str
    context: dict[str, Any] = field(default_factory=dict)
    #: The service's own policy on the resource, when it has one.
    resource_policy: dict[str, Any] | None = None


@dataclass
class Judged:
    function: str
    call: str
    request: Request
    principal: str
    tenant: str | None
    decision: str
    #: The same request for another tenant (tenant sessions only) and its decision.
    across: str | None = None


def _key_value(attribute: dict[str, Any]) -> str:
    return str(next(iter(attribute.values())))


def _leading_keys(params: dict[str, Any], key: str = "pk") -> list[str]:
    if "Key" in params:
        return [_key_value(params["Key"][key])]
    if "Item" in params:
        return [_key_value(params["Item"][key])]
    condition = params.get("KeyConditionExpression")
    if condition:
        names = params.get("ExpressionAttributeNames", {})
        values = params.get("ExpressionAttributeValues", {})
        for name, placeholder in re.findall(r"(#?\w+)\s*=\s*(:\w+)", condition):
            if names.get(name, name) == key:
                return [_key_value(values[placeholder])]
    return []


class Judge:
    def __init__(self, template: Template, tenants: list[str]) -> None:
        self.t = template
        self.tenants = tenants
        self.keys_by_alias: dict[str, str] = {}
        for props in (v["Properties"] for v in template.of_type("AWS::KMS::Alias").values()):
            resolved = template.resolve(props)
            self.keys_by_alias[resolved["AliasName"]] = resolved["TargetKeyId"]
        self.key_policies = {
            template.arn(k): template.resolve(v["Properties"].get("KeyPolicy"))
            for k, v in template.of_type("AWS::KMS::Key").items()
        }
        self.domain_policies = {
            template.arn(k): template.resolve(v["Properties"].get("AccessPolicies"))
            for k, v in template.of_type("AWS::OpenSearchService::Domain").items()
        }
        self.bucket_policies = {
            f"arn:aws:s3:::{template.resolve(v['Properties']['Bucket'])}": template.resolve(
                v["Properties"]["PolicyDocument"]
            )
            for v in template.of_type("AWS::S3::BucketPolicy").values()
        }
        self.trust = {
            template.arn(k): template.resolve(v["Properties"].get("AssumeRolePolicyDocument"))
            for k, v in template.of_type("AWS::IAM::Role").items()
        }

    # ------------------------------------------------------------ policies

    def role_of(self, function_logical: str) -> str:
        role = self.t.resources[function_logical]["Properties"]["Role"]
        return str(role["Fn::GetAtt"][0])

    def policies(self, role_logical: str) -> list[dict[str, Any]]:
        found = []
        for logical, policy in self.t.of_type("AWS::IAM::Policy").items():
            roles = policy["Properties"].get("Roles", [])
            if {"Ref": role_logical} in roles:
                found.append(
                    {
                        "name": logical,
                        "policy": self.t.resolve(policy["Properties"]["PolicyDocument"]),
                    }
                )
        for i, inline in enumerate(
            self.t.resources[role_logical]["Properties"].get("Policies", [])
        ):
            found.append(
                {"name": f"{role_logical}-{i}", "policy": self.t.resolve(inline["PolicyDocument"])}
            )
        return found

    # ------------------------------------------------------------- requests

    def requests(self, call: dict[str, Any]) -> list[Request]:
        """The IAM requests one API call makes (a transaction: one per item)."""
        service, op, p = call["service"], call["operation"], call["params"]
        if service == "dynamodb":
            return self._dynamodb(op, p)
        if service == "s3":
            found = self._s3(op, p)
            policy = self.bucket_policies.get(f"arn:aws:s3:::{p['Bucket']}")
            for request in found:
                # The functions reach S3 over TLS on AWS (the rehearsal's moto is plain HTTP).
                request.context.setdefault("aws:SecureTransport", "true")
                request.resource_policy = policy
            return found
        if service == "kms":
            key = str(p.get("KeyId") or "")
            if ":alias/" in key:
                key = "alias/" + key.split(":alias/", 1)[1]
            key = self.keys_by_alias.get(key, key)
            if key and not key.startswith("arn:"):
                key = f"arn:aws:kms:{REGION}:{ACCOUNT}:key/{key}"
            context = {
                f"kms:EncryptionContext:{k}": v
                for k, v in (p.get("EncryptionContext") or {}).items()
            }
            if p.get("ViaService"):
                context["kms:ViaService"] = f"{p['ViaService']}.{REGION}.amazonaws.com"
                context["kms:CallerAccount"] = ACCOUNT
            if not key:  # Decrypt names no key: the tenant's, by its context
                tenant = (p.get("EncryptionContext") or {}).get("tenant_id")
                key = self.keys_by_alias.get(f"alias/memvault/{tenant}", "")
            return [Request(f"kms:{op}", key, context, self.key_policies.get(key))]
        if service == "sts" and op == "AssumeRole":
            tags = {f"aws:RequestTag/{t['Key']}": t["Value"] for t in p.get("Tags", [])}
            found = [Request("sts:AssumeRole", p["RoleArn"], tags, self.trust.get(p["RoleArn"]))]
            if tags:
                found.append(
                    Request("sts:TagSession", p["RoleArn"], tags, self.trust.get(p["RoleArn"]))
                )
            return found
        if service == "stepfunctions":
            arn = p.get("stateMachineArn") or p.get("executionArn")
            return [Request(f"states:{op}", str(arn))]
        if service == "bedrock-runtime":
            model = f"arn:aws:bedrock:{REGION}::foundation-model/{p['modelId']}"
            return [Request(f"bedrock:{op}", model)]
        if service == "es":
            (domain,) = self.domain_policies
            path = p["path"].split("?", 1)[0]
            action = {
                "GET": "ESHttpGet",
                "HEAD": "ESHttpHead",
                "POST": "ESHttpPost",
                "PUT": "ESHttpPut",
                "DELETE": "ESHttpDelete",
            }[op]
            return [Request(f"es:{action}", f"{domain}{path}", {}, self.domain_policies[domain])]
        raise AssertionError(f"the rehearsal cannot judge {service}:{op} yet")

    def _table(self, name: str) -> str:
        return f"arn:aws:dynamodb:{REGION}:{ACCOUNT}:table/{name}"

    def _dynamodb(self, op: str, p: dict[str, Any]) -> list[Request]:
        if op == "TransactWriteItems":
            kinds = {
                "Put": "PutItem",
                "Update": "UpdateItem",
                "Delete": "DeleteItem",
                "ConditionCheck": "ConditionCheckItem",
            }
            found = []
            for item in p["TransactItems"]:
                ((kind, body),) = item.items()
                found.append(
                    Request(
                        f"dynamodb:{kinds[kind]}",
                        self._table(body["TableName"]),
                        {"dynamodb:LeadingKeys": _leading_keys(body)},
                    )
                )
            return found
        if op == "TransactGetItems":
            return [
                Request(
                    "dynamodb:GetItem",
                    self._table(i["Get"]["TableName"]),
                    {"dynamodb:LeadingKeys": _leading_keys(i["Get"])},
                )
                for i in p["TransactItems"]
            ]
        if op in ("BatchGetItem", "BatchWriteItem"):
            found = []
            for table, body in p["RequestItems"].items():
                if op == "BatchGetItem":
                    keys = [_key_value(k["pk"]) for k in body["Keys"]]
                else:
                    keys = [
                        _key_value(
                            next(iter(w.values())).get("Key", next(iter(w.values())).get("Item"))[
                                "pk"
                            ]
                        )
                        for w in body
                    ]
                found.append(
                    Request(
                        f"dynamodb:{op}",
                        self._table(table),
                        {"dynamodb:LeadingKeys": sorted(set(keys))},
                    )
                )
            return found
        context = {}
        keys = _leading_keys(p)
        if keys:
            context["dynamodb:LeadingKeys"] = keys
        resource = self._table(p["TableName"])
        if p.get("IndexName"):
            resource += f"/index/{p['IndexName']}"
        return [Request(f"dynamodb:{op}", resource, context)]

    def _s3(self, op: str, p: dict[str, Any]) -> list[Request]:
        bucket = f"arn:aws:s3:::{p['Bucket']}"
        obj = f"{bucket}/{p.get('Key', '')}"
        versioned = "VersionId" in p
        simple = {
            "PutObject": "PutObject",
            "GetObject": "GetObjectVersion" if versioned else "GetObject",
            "HeadObject": "GetObjectVersion" if versioned else "GetObject",
            "DeleteObject": "DeleteObjectVersion" if versioned else "DeleteObject",
            "CopyObject": "PutObject",
            "GetObjectAttributes": "GetObjectAttributes",
        }
        if op in simple:
            context = {}
            if op == "PutObject":
                for name, param in (
                    ("s3:x-amz-server-side-encryption", "ServerSideEncryption"),
                    ("s3:x-amz-server-side-encryption-aws-kms-key-id", "SSEKMSKeyId"),
                ):
                    if p.get(param):
                        context[name] = p[param]
            return [Request(f"s3:{simple[op]}", obj, context)]
        if op == "ListObjectVersions":
            return [Request("s3:ListBucketVersions", bucket, {"s3:prefix": p.get("Prefix", "")})]
        if op in ("ListObjectsV2", "ListObjects"):
            return [Request("s3:ListBucket", bucket, {"s3:prefix": p.get("Prefix", "")})]
        if op == "DeleteObjects":
            return [
                Request(
                    "s3:DeleteObjectVersion" if "VersionId" in o else "s3:DeleteObject",
                    f"{bucket}/{o['Key']}",
                )
                for o in p["Delete"]["Objects"]
            ]
        raise AssertionError(f"the rehearsal cannot judge s3:{op} yet")

    # --------------------------------------------------------------- judging

    def judge(
        self, function_logicals: dict[str, str], calls: dict[str, list[dict[str, Any]]]
    ) -> list[Judged]:
        """Every call of every function: its decision, and across tenants where it ran
        on a tenant session."""
        sessions: dict[str, tuple[str, str]] = {}  # assumed key -> (role arn, tenant)
        for made in calls.values():
            for call in made:
                if call["operation"] == "AssumeRole" and call.get("assumed_key"):
                    tags = {t["Key"]: t["Value"] for t in call["params"].get("Tags", [])}
                    sessions[call["assumed_key"]] = (
                        call["params"]["RoleArn"],
                        tags.get("tenant_id", ""),
                    )
        roles_by_arn = {self.t.arn(k): k for k in self.t.of_type("AWS::IAM::Role")}
        judged: list[Judged] = []
        simulations: list[dict[str, Any]] = []
        for function, made in calls.items():
            own_role = self.role_of(function_logicals[function])
            for call in made:
                if call.get("error") == "EndpointConnectionError":
                    continue
                tenant = None
                role = own_role
                if call.get("access_key") in sessions:
                    role_arn, tenant = sessions[call["access_key"]]
                    role = roles_by_arn[role_arn]
                principal = (
                    f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/memvault-{tenant}"
                    if tenant
                    else f"arn:aws:sts::{ACCOUNT}:assumed-role/{role}/{function}"
                )
                policies = self.policies(role)
                for request in self.requests(call):
                    context = dict(request.context)
                    if tenant:
                        context["aws:PrincipalTag/tenant_id"] = tenant
                    entry = Judged(
                        function,
                        f"{call['service']}:{call['operation']}",
                        request,
                        principal,
                        tenant,
                        "",
                    )
                    simulations.append(self._simulation(policies, principal, request, context))
                    if tenant:
                        other = next(t for t in self.tenants if t != tenant)
                        swapped = Request(
                            **json.loads(
                                json.dumps(request.__dict__)
                                .replace(f"{tenant}#", f"{other}#")
                                .replace(f"/{tenant}/", f"/{other}/")
                                .replace(f'"{tenant}/', f'"{other}/')
                                .replace(f'"{tenant}"', f'"{other}"')
                            )
                        )
                        if (
                            swapped.resource == request.resource
                            and swapped.context == request.context
                        ):
                            entry.across = "tenant-neutral"
                        else:
                            entry.across = "pending"
                            simulations.append(
                                self._simulation(
                                    policies,
                                    principal,
                                    swapped,
                                    {**swapped.context, "aws:PrincipalTag/tenant_id": tenant},
                                )
                            )
                    judged.append(entry)
        answers = iter(_run(simulations)) if simulations else iter([])
        for entry in judged:
            entry.decision = next(answers)
            if entry.across == "pending":
                entry.across = next(answers)
        return judged

    @staticmethod
    def _simulation(
        policies: list[dict[str, Any]], principal: str, request: Request, context: dict[str, Any]
    ) -> dict[str, Any]:
        sim: dict[str, Any] = {
            "identityPolicies": policies,
            "serviceControlPolicies": [],
            "resourceControlPolicies": [],
            "request": {
                "action": request.action,
                "principal": principal,
                "resource": {"accountId": ACCOUNT, "resource": request.resource},
                "contextVariables": context,
            },
        }
        if request.resource_policy:
            sim["resourcePolicy"] = request.resource_policy
        return sim


def report(judged: list[Judged]) -> str:
    """The calls per function: action, count, decision, and across tenants."""
    lines = [
        "| function | call | IAM action | calls | own tenant | across tenants |",
        "|---|---|---|---|---|---|",
    ]
    rows: dict[tuple[str, str, str, str, str], int] = {}
    for j in judged:
        key = (j.function, j.call, j.request.action, j.decision, j.across or "n/a (service role)")
        rows[key] = rows.get(key, 0) + 1
    for (function, call, action, decision, across), count in sorted(rows.items()):
        lines.append(f"| {function} | {call} | {action} | {count} | {decision} | {across} |")
    return "\n".join(lines)
