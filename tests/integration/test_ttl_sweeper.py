"""The local TTL sweeper: expired items go, and on a table with a stream (the memory
table; the others have none) their REMOVE reaches it, marked as DynamoDB's own service
delete, as a real TTL deletion would be."""

from __future__ import annotations

from hashlib import sha256
from typing import Any

import boto3

from memvault.services.bundle import Services
from memvault_local.sweeper import SERVICE_IDENTITY, TtlSweeper
from memvault_wire.artifact import StartUpload
from memvault_wire.session import AppendMessage
from tests.support.harness import FakeClock, ctx


def stream_records(table: str) -> list[dict[str, Any]]:
    ddb = boto3.client("dynamodb", region_name="us-east-1")
    streams = boto3.client("dynamodbstreams", region_name="us-east-1")
    arn = ddb.describe_table(TableName=table)["Table"]["LatestStreamArn"]
    records: list[dict[str, Any]] = []
    for shard in streams.describe_stream(StreamArn=arn)["StreamDescription"]["Shards"]:
        iterator = streams.get_shard_iterator(
            StreamArn=arn, ShardId=shard["ShardId"], ShardIteratorType="TRIM_HORIZON"
        )["ShardIterator"]
        records += streams.get_records(ShardIterator=iterator)["Records"]
    return records


def test_expired_session_items_are_swept(services: Services, ddb: Any, clock: FakeClock) -> None:
    services.sessions.append(
        ctx(), "u-1", "s-1", AppendMessage(request_id="r1", role="user", content="hello")
    )
    sweeper = TtlSweeper(ddb, "test-")

    assert sweeper.sweep(now=clock.now().timestamp()) == 0  # nothing expired yet
    idle_expiry = clock.now().timestamp() + 30 * 60
    # Idle expiry is enforced on read; the whole session leaves the table together at
    # its absolute expiry, so no message is ever left without its head.
    assert sweeper.sweep(now=idle_expiry + 1) == 0
    assert sweeper.sweep(now=clock.now().timestamp() + 86_400 + 1) == 3  # head, message, receipt
    assert ddb.scan(TableName="test-sessions")["Items"] == []


def test_a_swept_items_remove_is_on_the_stream_as_the_services_own(
    services: Services, ddb: Any, clock: FakeClock
) -> None:
    now = int(clock.now().timestamp())
    expired = {"pk": {"S": "acme#u-1"}, "sk": {"S": "EXPIRED"}, "ttl": {"N": str(now - 1)}}
    kept = {"pk": {"S": "acme#u-1"}, "sk": {"S": "KEPT"}, "ttl": {"N": str(now + 3600)}}
    for item in (expired, kept):
        ddb.put_item(TableName="test-memory", Item=item)
    sweeper = TtlSweeper(ddb, "test-")

    assert sweeper.sweep(now=now) == 1

    records = stream_records("test-memory")
    removes = [r for r in records if r["eventName"] == "REMOVE"]
    assert [r["dynamodb"]["Keys"]["sk"]["S"] for r in removes] == ["EXPIRED"]
    marked = sweeper.as_service_deletes("test-memory", records)
    swept = [r for r in marked if r["eventName"] == "REMOVE"]
    assert swept and all(r["userIdentity"] == SERVICE_IDENTITY for r in swept)
    assert all("userIdentity" not in r for r in marked if r["eventName"] == "INSERT")


def test_a_receipt_renewed_after_the_scan_is_not_swept(
    services: Services, ddb: Any, clock: FakeClock
) -> None:
    """The delete is conditional on the TTL still being past. An upload receipt past its
    TTL that DynamoDB has not removed yet is replaced by the next upload under its
    request id, with a new TTL; when that lands between the sweeper's scan and its
    delete, the new receipt stays (its upload would otherwise lose its idempotency)."""
    body = StartUpload(
        request_id="up-1",
        media_type="text/plain",
        size_bytes=5,
        sha256=sha256(b"hello").hexdigest(),
    )
    first, _ = services.artifacts.start(ctx(), "u-1", body)
    clock.advance(seconds=services.artifacts.settings.staged_upload_seconds + 1)
    receipt = {"pk": {"S": "acme#u-1"}, "sk": {"S": "REQ#up-1"}}
    retried: list[Any] = []

    class RetryLandsBeforeTheDelete:
        """The sweeper's client: the upload's retry commits between scan and delete."""

        def __getattr__(self, name: str) -> Any:
            return getattr(ddb, name)

        def delete_item(self, **kwargs: Any) -> Any:
            if kwargs["Key"] == receipt and not retried:
                retried.append(services.artifacts.start(ctx(), "u-1", body))
            return ddb.delete_item(**kwargs)

    sweeper = TtlSweeper(RetryLandsBeforeTheDelete(), "test-")

    assert sweeper.sweep(now=clock.now().timestamp()) == 0
    [(again, created)] = retried
    assert created and again.artifact_id != first.artifact_id  # the old receipt had expired
    held = ddb.get_item(TableName="test-artifacts", Key=receipt)["Item"]
    assert held["artifact_id"]["S"] == again.artifact_id
    replay, created = services.artifacts.start(ctx(), "u-1", body)
    assert not created and replay.artifact_id == again.artifact_id
