"""cdk-nag findings this project accepts, each with the reason it is right here.

Anything not listed fails synthesis (tests/infrastructure/test_nag.py keeps it so).
"""

from __future__ import annotations

from aws_cdk import Acknowledgment, Validations

from constructs import IConstruct
from infra import settings
from infra.stack import MemvaultStack

PACK = "AwsSolutions::AwsSolutions"
BASIC_EXECUTION = (
    "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
)
PUSH_TO_LOGS = (
    "Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AmazonAPIGatewayPushToCloudWatchLogs"
)


def _ack(scope: IConstruct, rule: str, reason: str) -> None:
    Validations.of(scope).acknowledge(Acknowledgment(id=f"{PACK}-{rule}", reason=reason))


def acknowledge(stack: MemvaultStack) -> None:
    compute = stack.compute
    _ack(
        compute,
        f"IAM4[{BASIC_EXECUTION}]",
        "Each function writes only to its own log group; the managed basic-execution policy "
        "is what Lambda documents for that and grants nothing on memvault's data.",
    )
    _ack(
        compute,
        "IAM5[Resource::*]",
        "X-Ray tracing (xray:PutTraceSegments, xray:PutTelemetryRecords) cannot be scoped "
        "to a resource, nor can bedrock:Rerank where a reranker is configured (the model it "
        "runs is bounded by bedrock:InvokeModel on that one model); no other data action "
        "in these roles uses a wildcard resource.",
    )
    _ack(
        compute,
        "IAM5[Action::kms:ReEncrypt*]",
        "CDK's encrypt/decrypt grants on one key ARN each (the tables' key; the search key "
        "for the indexer's dead-letter queue); the wildcard is a family of KMS actions, not "
        "of keys.",
    )
    _ack(
        compute,
        "IAM5[Action::kms:GenerateDataKey*]",
        "CDK's encrypt/decrypt grants on one key ARN each (the tables' key; the search key "
        "for the indexer's dead-letter queue); the wildcard is a family of KMS actions, not "
        "of keys.",
    )
    api = stack.api
    _ack(
        api,
        f"IAM4[{PUSH_TO_LOGS}]",
        "API Gateway's account-level logging role; AWS documents this managed policy for it.",
    )
    _ack(
        api.rest_api.root.node.find_child("v1").node.find_child("health"),
        "APIG4",
        "GET /v1/health is public by the API contract: liveness for load balancers.",
    )
    _ack(
        api.rest_api.root.node.find_child("v1").node.find_child("health"),
        "COG4",
        "GET /v1/health is public by the API contract.",
    )
    _ack(
        api.rest_api.root.node.find_child("v1").node.find_child("openapi.json"),
        "APIG4",
        "GET /v1/openapi.json is public by the API contract: the API's own description.",
    )
    _ack(
        api.rest_api.root.node.find_child("v1").node.find_child("openapi.json"),
        "COG4",
        "GET /v1/openapi.json is public by the API contract.",
    )
    _ack(
        api.rest_api.root.node.find_child("v1").node.find_child("{proxy+}"),
        "COG4",
        "Tenants bring their own identity providers; a Lambda TOKEN authorizer verifies "
        "their RS256 JWTs against each tenant's JWKS, which a Cognito authorizer cannot.",
    )
    if not stack.deployment.enable_waf:
        _ack(
            api.rest_api,
            "APIG3",
            "WAF is optional and billed per web ACL; enable it with --context enable_waf=true.",
        )
    bucket = stack.get_logical_id(stack.data.artifacts.node.default_child)  # type: ignore[arg-type]
    _ack(
        stack.compute.functions["sweeper"],
        f"IAM5[Resource::<{bucket}.Arn>/*]",
        "The staged-upload sweeper serves every tenant by design; it may only delete "
        "objects (never read them), and deletes only uploads never committed.",
    )
    if stack.deployment.silo_tenant:
        _ack(
            compute,
            f"IAM5[Resource::<{bucket}.Arn>/{stack.deployment.silo_tenant}/*]",
            "The silo tenant's own object prefix: the functions serve only that tenant.",
        )
    _search(stack)
    _purge(stack)
    isolation = stack.isolation
    if isolation.tenant_role is not None:
        _ack(
            isolation.tenant_role,
            "IAM5[Action::kms:GenerateDataKey*]",
            "Data keys of the tenants' keys, only under the caller's own encryption context "
            "(kms:EncryptionContext:tenant_id = the session's tenant tag).",
        )
        _ack(
            isolation.tenant_role,
            "IAM5[Action::kms:ReEncrypt*]",
            "Re-encryption under the tenants' keys, only within the caller's own encryption "
            "context.",
        )
        bucket = stack.get_logical_id(stack.data.artifacts.node.default_child)  # type: ignore[arg-type]
        _ack(
            isolation.tenant_role,
            f"IAM5[Resource::<{bucket}.Arn>/<aws:PrincipalTag/tenant_id>/*]",
            "Objects under the caller's own tenant prefix only: the wildcard is bounded by "
            "the session's tenant tag.",
        )


def _purge(stack: MemvaultStack) -> None:
    purge = stack.purge
    function = stack.get_logical_id(purge.function.node.default_child)  # type: ignore[arg-type]
    _ack(
        purge.state_machine.role,
        "IAM5[Resource::*]",
        "What Step Functions needs to deliver the execution log (logs:*LogDelivery, "
        "logs:PutResourcePolicy, logs:Describe*: CloudWatch Logs' vended-log delivery "
        "APIs take no resource) and X-Ray tracing (xray:PutTraceSegments, "
        "PutTelemetryRecords, GetSampling*: no resource either); the role's only other "
        "action is lambda:InvokeFunction on the purge function.",
    )
    _ack(
        purge.state_machine.role,
        f"IAM5[Resource::<{function}.Arn>:*]",
        "Versions and aliases of the one purge function (CDK's grant for a Lambda task); "
        "the role may invoke no other function.",
    )
    if not stack.deployment.silo_tenant:
        bucket = stack.get_logical_id(stack.data.artifacts.node.default_child)  # type: ignore[arg-type]
        _ack(
            purge.function,
            f"IAM5[Resource::<{bucket}.Arn>/*]",
            "The purge deletes the object versions of the deletion's tenant, which in a pool "
            "may be any tenant of the stack; it may only delete objects (never read or write "
            "them), and runs only as the state machine's task, started by the API for a "
            "deletion that tenant's own token requested.",
        )
    for fn in purge.starters:
        _ack(
            fn,
            f"IAM5[Resource::{_executions(purge.name)}]",
            "states:DescribeExecution on the purge state machine's own executions: each "
            "is named after its deletion id, which is known only when the API accepts "
            "the deletion.",
        )


def _executions(name: str) -> str:
    return f"arn:<AWS::Partition>:states:<AWS::Region>:<AWS::AccountId>:execution:{name}:*"


def _search(stack: MemvaultStack) -> None:
    search = stack.search
    domain = stack.get_logical_id(search.domain.node.default_child)  # type: ignore[arg-type]
    for fn in (*search.readers, search.indexer, *([search.purger] if search.purger else [])):
        _ack(
            fn,
            f"IAM5[Resource::<{domain}.Arn>/*]",
            "HTTP paths of this one OpenSearch domain (es:ESHttp* authorizes by path); the "
            "actions are the few this function needs, and the domain's FGAC decides per index.",
        )
    table = stack.get_logical_id(stack.data.tables["memory"].node.default_child)  # type: ignore[arg-type]
    _ack(
        search.indexer,
        f"IAM5[Resource::<{table}.Arn>/stream/*]",
        "dynamodb:ListStreams on the memory table's own streams (the labels are not known "
        "before deployment), as AWS documents for a stream-reading Lambda role.",
    )
    _ack(
        search.domain,
        "OS1",
        "No VPC in this stack (the functions run outside one): the domain is reached over "
        "HTTPS (TLS 1.2+) only with SigV4-signed requests from the three roles its access "
        "policy names, and fine-grained access control (IAM master, no internal users) "
        "authorizes each request.",
    )
    _ack(
        search.domain,
        "OS3",
        "Access is granted to IAM roles, not to IP addresses: the callers are Lambda "
        "functions without fixed addresses, and every request is SigV4-signed.",
    )
    if settings.SEARCH_MASTER_NODES == 0:
        _ack(
            search.domain,
            "OS4",
            "A small start: dedicated master nodes triple the hourly bill of a one- or "
            "two-node domain that holds only a derived, rebuildable index; set "
            "SEARCH_MASTER_NODES = 3 in infra/settings.py when the domain grows.",
        )
    if stack.deployment.search_data_nodes == 1:
        _ack(
            search.domain,
            "OS7",
            "One data node (a small start) cannot spread over zones; the index is derived "
            "and rebuilt from the memory table, and recall re-reads the table. Deploy with "
            "--context search_data_nodes=2 (or more) for zone awareness.",
        )
    _ack(
        search.dlq,
        "SQS3",
        "This queue is itself the dead-letter destination of the indexer's stream mapping "
        "(failed batches' shard and sequence ranges); it needs no queue behind it.",
    )
