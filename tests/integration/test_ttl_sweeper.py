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
    assert sweeper.sweep(now=idle_expiry + 1) == 1  # the head: its idle clock ran out
    assert sweeper.sweep(now=clock.now().timestamp() + 86_400 + 1) == 2  # message, receipt

    records = stream_records("test-sessions")
    removes = [r for r in records if r["eventName"] == "REMOVE"]
    assert {r["dynamodb"]["Keys"]["sk"]["S"] for r in removes} >= {"SESSION", "MSG#0000000001"}
    marked = sweeper.as_service_deletes("test-sessions", records)
    swept = [r for r in marked if r["eventName"] == "REMOVE"]
    assert all(r["userIdentity"] == SERVICE_IDENTITY for r in swept)
    assert all("userIdentity" not in r for r in marked if r["eventName"] == "INSERT")


def test_a_renewed_item_is_not_swept(services: Services, ddb: Any, clock: FakeClock) -> None:
    services.sessions.append(
        ctx(), "u-1", "s-1", AppendMessage(request_id="r1", role="user", content="hello")
    )
    clock.advance(minutes=25)
    services.sessions.append(
        ctx(), "u-1", "s-1", AppendMessage(request_id="r2", role="user", content="again")
    )
    sweeper = TtlSweeper(ddb, "test-")
    first_idle_expiry = clock.now().timestamp() - 25 * 60 + 30 * 60
    assert sweeper.sweep(now=first_idle_expiry + 1) == 0
    assert services.sessions.read(ctx(), "u-1", "s-1").message_count == 2
