"""One deployed stack, rehearsed: its resources stood up on moto from the template, its
functions running from their assets (``runtime.py``), API Gateway in front of them
(``gateway.py``), the memory table's stream feeding the indexer as the event source
mapping would, the scheduler calling the sweeper, and moto's Step Functions interpreter
executing the template's own state machine with its Lambda tasks sent to the purge
function's process.

Where moto differs from AWS (the rehearsal's limits, each said where it matters): it
ignores IAM (every call is judged afterwards by ``iam.py`` with a policy evaluator),
TTL and transaction tokens, and one moto server is not atomic under threads (the
rehearsal drives one request at a time).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import boto3

from tests.rehearsal.endpoints import Bedrock, SearchDomain
from tests.rehearsal.runtime import (
    FunctionProcess,
    InvocationError,
    Runtime,
    Throttled,
    runtime_boto,
)
from tests.rehearsal.template import REGION, Template, host_twin

#: The functions of a stack by their construct name (``Compute/<Name>Function``).
FUNCTIONS = ("api", "authorizer", "direct", "sweeper", "indexer", "purge")
#: Step Functions' retry waits run this many times faster than the template says; the
#: simulated time they stand for is kept (``World.simulated_seconds``).
RETRY_SPEEDUP = 200.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class World:
    mode: str
    template: Template
    endpoint: str
    runtime: Runtime
    search: SearchDomain
    bedrock: Bedrock
    workdir: Path
    keys: dict[str, str] = field(default_factory=dict)  # function -> its access key
    stream_position: dict[str, str] = field(default_factory=dict)
    dead_letters: list[dict[str, Any]] = field(default_factory=list)
    simulated_wait: float = 0.0
    _started: float = field(default_factory=time.monotonic)

    # -------------------------------------------------------------- clients

    def client(self, service: str) -> Any:
        return boto3.client(
            service,
            region_name=REGION,
            endpoint_url=self.endpoint,
            aws_access_key_id="rehearsal",
            aws_secret_access_key="rehearsal",
        )

    @property
    def simulated_seconds(self) -> float:
        """Seconds since the world started, counting retry waits at their full length."""
        return time.monotonic() - self._started + self.simulated_wait

    def function(self, name: str) -> FunctionProcess:
        return self.runtime.functions[name]

    def logical(self, name: str) -> str:
        prefix = f"Compute{name.capitalize()}Function"
        (found,) = [
            k
            for k in self.template.of_type("AWS::Lambda::Function")
            if k.startswith(prefix) and "ServiceRole" not in k
        ]
        return found

    # -------------------------------------------------------------- events

    def sweep(self) -> Any:
        """The schedule's event, as EventBridge sends it to the sweeper."""
        event = {
            "version": "0",
            "id": "rehearsal",
            "detail-type": "Scheduled Event",
            "source": "aws.events",
            "account": "123456789012",
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "region": REGION,
            "resources": [],
            "detail": {},
        }
        return self.function("sweeper").invoke(event)

    def drain_stream(self) -> int:
        """Send what the memory table's stream holds to the function its event source
        mapping names, as the mapping does: nothing while it is disabled, records its
        filters drop skipped, batches of BatchSize; with ReportBatchItemFailures a partial
        failure is retried from the first failed record (without it, a returned answer
        is the whole batch's success), at most MaximumRetryAttempts times, then the
        batch's range goes to the on-failure destination."""
        (mapping,) = self.template.of_type("AWS::Lambda::EventSourceMapping").values()
        props = self.template.resolve(mapping["Properties"])
        if props.get("Enabled", True) in (False, "false"):
            return 0
        target = self.runtime.by_function_name(str(props["FunctionName"]))
        partial = "ReportBatchItemFailures" in props.get("FunctionResponseTypes", [])
        streams = self.client("dynamodbstreams")
        arn = props["EventSourceArn"]
        sent = 0
        for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
            shard_id = shard["ShardId"]
            after = self.stream_position.get(shard_id)
            iterator = streams.get_shard_iterator(
                StreamArn=arn,
                ShardId=shard_id,
                **(
                    {"ShardIteratorType": "AFTER_SEQUENCE_NUMBER", "SequenceNumber": after}
                    if after
                    else {"ShardIteratorType": str(props.get("StartingPosition", "LATEST"))}
                ),
            )["ShardIterator"]
            records = streams.get_records(ShardIterator=iterator)["Records"]
            kept = [r for r in records if _passes(r, props.get("FilterCriteria"))]
            for start in range(0, len(kept), int(props["BatchSize"])):
                batch = kept[start : start + int(props["BatchSize"])]
                sent += self._deliver(
                    target, batch, arn, int(props["MaximumRetryAttempts"]), partial, props
                )
            if records:
                self.stream_position[shard_id] = records[-1]["dynamodb"]["SequenceNumber"]
        return sent

    def _deliver(
        self,
        target: FunctionProcess,
        batch: list[dict[str, Any]],
        arn: str,
        retries: int,
        partial: bool,
        props: dict[str, Any],
    ) -> int:
        records = [{**json.loads(json.dumps(r, default=str)), "eventSourceARN": arn} for r in batch]
        for _ in range(retries + 1):
            try:
                answer = target.invoke({"Records": records})
            except InvocationError:  # the whole batch failed: retried as is
                continue
            failures = [f["itemIdentifier"] for f in (answer or {}).get("batchItemFailures", [])]
            if not failures or not partial:
                return len(batch)
            first = next(
                i for i, r in enumerate(records) if r["dynamodb"]["SequenceNumber"] in failures
            )
            records = records[first:]
        destination = props.get("DestinationConfig", {}).get("OnFailure", {}).get("Destination")
        self.dead_letters.append(
            {"first": records[0]["dynamodb"]["SequenceNumber"], "destination": destination}
        )
        return len(batch) - len(records)

    def wait_for_executions(self, timeout: float = 120.0) -> list[dict[str, Any]]:
        """Wait until no execution of the purge state machine runs; all of them."""
        sfn = self.client("stepfunctions")
        (logical,) = self.template.of_type("AWS::StepFunctions::StateMachine")
        arn = self.template.arn(logical)
        deadline = time.monotonic() + timeout
        while True:
            executions = sfn.list_executions(stateMachineArn=arn)["executions"]
            if all(e["status"] != "RUNNING" for e in executions):
                return list(executions)
            if time.monotonic() > deadline:
                raise TimeoutError(f"purge executions still running: {executions}")
            time.sleep(0.05)

    def stop(self) -> None:
        self.runtime.stop()
        self.search.stop()
        self.bedrock.stop()


def _passes(record: dict[str, Any], criteria: Any) -> bool:
    """Lambda's event filtering, for the patterns this stack could use: a record passes
    when any filter's pattern matches it (only key equality and presence are modelled;
    a pattern the rehearsal cannot read fails closed)."""
    if not criteria or not criteria.get("Filters"):
        return True
    for item in criteria["Filters"]:
        pattern = json.loads(item["Pattern"])
        if _matches(json.loads(json.dumps(record, default=str)), pattern):
            return True
    return False


def _matches(value: Any, pattern: Any) -> bool:
    if isinstance(pattern, dict):
        return isinstance(value, dict) and all(
            k in value and _matches(value[k], v) for k, v in pattern.items()
        )
    if isinstance(pattern, list):
        return any(p == value for p in pattern if not isinstance(p, dict))
    return bool(pattern == value)


# ---------------------------------------------------------------- stand-up


def stand_up(template: Template, endpoint: str) -> None:
    """Create the template's stateful resources on moto from their properties."""
    kms = _client("kms", endpoint)
    for logical, resource in template.of_type("AWS::KMS::Key").items():
        props = template.resolve(resource["Properties"])
        key = kms.create_key(
            Policy=json.dumps(props.get("KeyPolicy", {})),
            Description=props.get("Description", logical),
        )["KeyMetadata"]
        template.known[(logical, "Ref")] = key["KeyId"]
        template.known[(logical, "Arn")] = key["Arn"]
    for resource in template.of_type("AWS::KMS::Alias").values():
        props = template.resolve(resource["Properties"])
        kms.create_alias(AliasName=props["AliasName"], TargetKeyId=props["TargetKeyId"])

    dynamodb = _client("dynamodb", endpoint)
    for logical, resource in template.of_type("AWS::DynamoDB::Table").items():
        props = template.resolve(resource["Properties"])
        args: dict[str, Any] = {
            "TableName": props["TableName"],
            "KeySchema": props["KeySchema"],
            "AttributeDefinitions": props["AttributeDefinitions"],
            "BillingMode": props.get("BillingMode", "PROVISIONED"),
        }
        if props.get("GlobalSecondaryIndexes"):
            args["GlobalSecondaryIndexes"] = props["GlobalSecondaryIndexes"]
        if props.get("StreamSpecification"):
            args["StreamSpecification"] = {"StreamEnabled": True, **props["StreamSpecification"]}
        if props.get("SSESpecification"):
            sse = props["SSESpecification"]
            args["SSESpecification"] = {
                "Enabled": bool(sse.get("SSEEnabled")),
                **({"SSEType": sse["SSEType"]} if sse.get("SSEType") else {}),
                **({"KMSMasterKeyId": sse["KMSMasterKeyId"]} if sse.get("KMSMasterKeyId") else {}),
            }
        table = dynamodb.create_table(**args)["TableDescription"]
        if table.get("LatestStreamArn"):
            template.known[(logical, "StreamArn")] = table["LatestStreamArn"]
        if props.get("TimeToLiveSpecification", {}).get("Enabled"):
            dynamodb.update_time_to_live(
                TableName=props["TableName"],
                TimeToLiveSpecification=props["TimeToLiveSpecification"],
            )

    s3 = _client("s3", endpoint)
    for logical, resource in template.of_type("AWS::S3::Bucket").items():
        props = template.resolve(resource.get("Properties", {}))
        name = template.physical(logical)
        s3.create_bucket(Bucket=name, CreateBucketConfiguration={"LocationConstraint": REGION})
        if props.get("VersioningConfiguration"):
            s3.put_bucket_versioning(
                Bucket=name, VersioningConfiguration=props["VersioningConfiguration"]
            )
        if props.get("BucketEncryption"):
            rules = [
                {
                    "ApplyServerSideEncryptionByDefault": rule["ServerSideEncryptionByDefault"],
                    **(
                        {"BucketKeyEnabled": rule["BucketKeyEnabled"]}
                        if "BucketKeyEnabled" in rule
                        else {}
                    ),
                }
                for rule in props["BucketEncryption"]["ServerSideEncryptionConfiguration"]
            ]
            s3.put_bucket_encryption(
                Bucket=name, ServerSideEncryptionConfiguration={"Rules": rules}
            )
    for resource in template.of_type("AWS::S3::BucketPolicy").values():
        props = template.resolve(resource["Properties"])
        # moto applies a bucket policy's statements without their conditions (a Deny
        # unless aws:SecureTransport would refuse every request): the conditional ones
        # are left to iam.py's evaluator, which judges each S3 call with the policy whole.
        document = dict(props["PolicyDocument"])
        document["Statement"] = [s for s in document["Statement"] if "Condition" not in s]
        s3.put_bucket_policy(Bucket=props["Bucket"], Policy=json.dumps(document))

    sqs = _client("sqs", endpoint)
    for logical in template.of_type("AWS::SQS::Queue"):
        sqs.create_queue(QueueName=template.queue_name(logical))

    sfn = _client("stepfunctions", endpoint)
    for logical, resource in template.of_type("AWS::StepFunctions::StateMachine").items():
        props = template.resolve(resource["Properties"])
        definition = props.get("DefinitionString")
        sfn.create_state_machine(
            name=props.get("StateMachineName") or logical,
            definition=definition,
            roleArn=props["RoleArn"],
            type=props.get("StateMachineType", "STANDARD"),
        )


def _client(service: str, endpoint: str) -> Any:
    return boto3.client(
        service,
        region_name=REGION,
        endpoint_url=endpoint,
        aws_access_key_id="rehearsal",
        aws_secret_access_key="rehearsal",
    )


def functions(
    template: Template, endpoint: str, search: SearchDomain, bedrock: Bedrock, workdir: Path
) -> dict[str, FunctionProcess]:
    """Each function as the template defines it: its asset, its layers (as host twins),
    the runtime's boto3, its handler, memory, timeout and environment."""
    boto = runtime_boto(workdir / "runtime")
    made = {}
    for logical, resource in template.of_type("AWS::Lambda::Function").items():
        name = next((n for n in FUNCTIONS if logical.startswith(f"Compute{n.capitalize()}")), None)
        if name is None:
            continue  # CDK's own custom-resource providers
        props = resource["Properties"]
        layers = []
        for ref in props.get("Layers", []):
            layer = template.resources[ref["Ref"]]
            layers.append(host_twin(template.asset_dir(layer["Properties"]["Content"])))
        environment = {
            k: str(v)
            for k, v in template.resolve(props.get("Environment", {}).get("Variables", {})).items()
        }
        environment.update(
            {
                # Every AWS call goes to moto; Bedrock's runtime to its stand-in.
                "AWS_ENDPOINT_URL": endpoint,
                "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": bedrock.endpoint,
                "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
                "SSL_CERT_FILE": str(search.cert),
                # The function role's credentials, one key per function to tell them apart.
                "AWS_ACCESS_KEY_ID": f"ASIA{name.upper()}ROLE",
                "AWS_SECRET_ACCESS_KEY": "rehearsal",
                "AWS_SESSION_TOKEN": f"session-{name}",
            }
        )
        made[name] = FunctionProcess(
            name=name,
            function_name=template.physical(logical),
            handler=props["Handler"],
            paths=[host_twin(template.asset_dir(props["Code"]), inner=""), *layers, boto],
            environment=environment,
            memory_mb=int(props.get("MemorySize", 128)),
            timeout_s=int(props.get("Timeout", 3)),
            workdir=workdir,
        )
    return made


@contextmanager
def moto_server(runtime_ref: list[Runtime], world_ref: list[World]) -> Iterator[str]:
    """A moto server in this process (so that its Lambda can be answered by the
    rehearsal's runtime), with Step Functions executing state machines."""
    from moto.awslambda import exceptions as lambda_errors
    from moto.awslambda.models import LambdaBackend
    from moto.core.config import default_user_config
    from moto.server import ThreadedMotoServer
    from moto.stepfunctions.parser.asl.component.common.retry import retrier_decl

    port = free_port()
    previous = {
        "port": os.environ.get("MOTO_PORT"),
        "config": dict(default_user_config["stepfunctions"]),
        "invoke": LambdaBackend.invoke,
        "time": retrier_decl.time,
    }

    def invoke(
        self: Any, function_name: str, qualifier: Any, body: Any, headers: Any, response: Any
    ) -> bytes:
        try:
            payload, errored = runtime_ref[0].lambda_invoke(function_name, body)
        except KeyError:
            raise lambda_errors.LambdaClientError(
                "ResourceNotFoundException", f"Function not found: {function_name}"
            ) from None
        except Throttled:
            raise lambda_errors.LambdaClientError(
                "TooManyRequestsException", "Rate exceeded"
            ) from None
        if errored:
            response["x-amz-function-error"] = "Unhandled"
        return payload

    def sleep(seconds: float) -> None:
        if world_ref:
            world_ref[0].simulated_wait += seconds * (1 - 1 / RETRY_SPEEDUP)
        time.sleep(seconds / RETRY_SPEEDUP)

    os.environ["MOTO_PORT"] = str(port)
    default_user_config["stepfunctions"]["execute_state_machine"] = True
    LambdaBackend.invoke = invoke  # type: ignore[method-assign,assignment]
    retrier_decl.time = SimpleNamespace(sleep=sleep)  # type: ignore[assignment]
    logging.getLogger("werkzeug").setLevel(logging.WARNING)
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()
        LambdaBackend.invoke = previous["invoke"]  # type: ignore[method-assign]
        retrier_decl.time = previous["time"]
        default_user_config["stepfunctions"].clear()
        default_user_config["stepfunctions"].update(previous["config"])
        if previous["port"] is None:
            os.environ.pop("MOTO_PORT", None)
        else:
            os.environ["MOTO_PORT"] = str(previous["port"])
        from moto import mock_aws

        with mock_aws():  # entering a mock resets every backend this server filled
            pass


def _clear_deployed_indices(opensearch_url: str) -> None:
    """Remove what an earlier rehearsal left on the node: a deployed stack names its index
    ``memvault-memories--<model>`` (other tests use their own random prefixes), and both
    modes deploy tenant ``acme`` with the same memories. The silo's leftovers outranked the
    pool's own memory in its recall, and re-validation then dropped every stale hit: an
    empty answer, as on a node reused across runs. Each rehearsal starts on an empty one,
    as a fresh deployment does."""
    listing = urllib.request.urlopen(
        f"{opensearch_url}/_cat/indices/memvault-memories*?format=json", timeout=30
    )
    for row in json.loads(listing.read() or b"[]"):
        request = urllib.request.Request(f"{opensearch_url}/{row['index']}", method="DELETE")
        urllib.request.urlopen(request, timeout=30).read()


@contextmanager
def rehearse(outdir: Path, mode: str, opensearch_url: str, workdir: Path) -> Iterator[World]:
    """Stand the synthesized stack in ``outdir`` up and yield it, rehearsed."""
    template = Template.load(outdir)
    runtime_ref: list[Runtime] = []
    world_ref: list[World] = []
    _clear_deployed_indices(opensearch_url)
    search = SearchDomain(opensearch_url, workdir / "tls")
    bedrock = Bedrock()
    search.start()
    bedrock.start()
    for logical in template.of_type("AWS::OpenSearchService::Domain"):
        template.endpoints[(logical, "DomainEndpoint")] = search.endpoint
    with moto_server(runtime_ref, world_ref) as endpoint:
        stand_up(template, endpoint)
        runtime = Runtime(functions(template, endpoint, search, bedrock, workdir))
        runtime_ref.append(runtime)
        world = World(mode, template, endpoint, runtime, search, bedrock, workdir)
        world_ref.append(world)
        try:
            yield world
        finally:
            world.stop()
