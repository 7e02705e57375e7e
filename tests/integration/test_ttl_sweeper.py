"""The local TTL sweeper: expired items go, and their REMOVE reaches the table's stream
(marked as DynamoDB's own service delete, as a real TTL deletion would be)."""

from __future__ import annotations

from typing import Any

import boto3

from memvault.models.session import AppendMessage
from memvault.wiring import Services
from memvault_local.sweeper import SERVICE_IDENTITY, TtlSweeper
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


def test_expired_session_items_are_swept_and_their_remove_is_on_the_stream(
    services: Services, ddb: Any, clock: FakeClock
) -> None:
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

    records = stream_records("test-sessions")
    removes = [r for r in records if r["eventName"] == "REMOVE"]
    assert {r["dynamodb"]["Keys"]["sk"]["S"] for r in removes} >= {"SESSION", "MSG#0000000001"}
    marked = sweeper.as_service_deletes("test-sessions", records)
    swept = [r for r in marked if r["eventName"] == "REMOVE"]
    assert all(r["userIdentity"] == SERVICE_IDENTITY for r in swept)
    assert all("userIdentity" not in r for r in marked if r["eventName"] == "INSERT")


def test_an_item_whose_ttl_moved_on_after_the_scan_is_not_swept(ddb: Any) -> None:
    """The delete is conditional on the TTL still being past: an item renewed between the
    sweeper's scan and its delete stays."""
    key = {"pk": {"S": "acme#u-1#s"}, "sk": {"S": "X"}}
    ddb.put_item(TableName="test-sessions", Item={**key, "ttl": {"N": "100"}})
    sweeper = TtlSweeper(ddb, "test-")
    real_delete = ddb._client.delete_item

    def renew_then_delete(**kwargs: Any) -> Any:
        ddb._client.update_item(
            TableName="test-sessions",
            Key=kwargs["Key"],
            UpdateExpression="SET #t = :t",
            ExpressionAttributeNames={"#t": "ttl"},
            ExpressionAttributeValues={":t": {"N": "999999"}},
        )
        return real_delete(**kwargs)

    ddb._client.delete_item = renew_then_delete
    assert sweeper.sweep(now=200) == 0
    assert ddb.get_item(TableName="test-sessions", Key=key)["Item"]["ttl"]["N"] == "999999"
