"""The request-unit rules of the write-cost benchmark (bench/write_cost.py), by hand.

Sizes follow "DynamoDB item sizes and formats"; units follow "DynamoDB read and write
operations" and, for transactions, "Amazon DynamoDB Transactions: How it works". The
benchmark itself is run by ``make bench``, not here.
"""

from __future__ import annotations

import boto3
import pytest
from bench.write_cost import (
    Recorder,
    SecondaryIndex,
    gsi_write_units,
    item_size,
    number_size,
    query_read_units,
    read_units,
    write_units,
)


def test_a_string_is_its_name_plus_its_utf8_bytes() -> None:
    assert item_size({"name": {"S": "Alice"}}) == 4 + 5
    # Three UTF-8 bytes a character, in the name as in the value.
    assert item_size({"名": {"S": "中文"}}) == 3 + 6


@pytest.mark.parametrize(
    ("number", "size"),
    [
        ("12345", 4),  # five significant digits: 3 bytes, plus 1
        ("1775000000", 3),  # trailing zeroes trimmed: 1775
        ("-0.00120", 2),  # leading and trailing zeroes trimmed: 12
        ("0", 2),
        ("1" * 38, 20),
    ],
)
def test_a_number_is_a_byte_per_two_significant_digits_plus_one(number: str, size: int) -> None:
    assert number_size(number) == size
    assert number_size(number) <= 21
    assert item_size({"n": {"N": number}}) == 1 + size


def test_binary_null_and_boolean() -> None:
    assert item_size({"b": {"B": b"\x00\x01\x02"}}) == 1 + 3  # raw bytes, not base64
    assert item_size({"ok": {"BOOL": True}, "x": {"NULL": True}}) == (2 + 1) + (1 + 1)


def test_lists_and_maps_cost_three_bytes_plus_a_byte_per_element() -> None:
    assert item_size({"l": {"L": []}}) == 1 + 3
    assert item_size({"tags": {"L": [{"S": "a"}, {"S": "bc"}]}}) == 4 + 3 + (1 + 1) + (1 + 2)
    # A map's keys count as attribute names.
    assert item_size({"m": {"M": {"key": {"S": "v"}}}}) == 1 + 3 + (1 + 3 + 1)
    nested = {"m": {"M": {"l": {"L": [{"N": "7"}]}}}}
    assert item_size(nested) == 1 + 3 + (1 + 1 + (3 + (1 + 2)))


def test_sets_are_the_sum_of_their_elements() -> None:
    assert item_size({"ss": {"SS": ["a", "bb"]}}) == 2 + 3
    assert item_size({"ns": {"NS": ["1", "12345"]}}) == 2 + (2 + 4)


def test_an_item_adds_up_its_attributes() -> None:
    item = {"pk": {"S": "acme#u-1"}, "sk": {"S": "JOB"}, "version": {"N": "3"}}
    assert item_size(item) == (2 + 8) + (2 + 3) + (7 + 2)
    assert item_size(None) == 0


def test_writes_round_up_to_the_next_kilobyte() -> None:
    assert write_units(0) == 1  # a write always costs at least one unit
    assert write_units(1) == 1
    assert write_units(1024) == 1
    assert write_units(1025) == 2
    assert write_units(3584) == 4  # a 3.5 KB item


def test_transactions_double_the_units() -> None:
    assert write_units(882, transactional=True) == 2
    assert write_units(1025, transactional=True) == 4
    assert read_units(100, transactional=True) == 2
    assert read_units(8192, transactional=True) == 4


def test_reads_round_up_to_the_next_four_kilobytes() -> None:
    assert read_units(3500) == 1  # "reading a 3,500-byte item" = a 4 KB item
    assert read_units(4096) == 1
    assert read_units(4097) == 2
    assert read_units(8192) == 2  # an 8 KB item: 2 strongly consistent ...
    assert read_units(8192, consistent=False) == 1  # ... 1 eventually consistent
    assert read_units(0) == 1  # a key that is not found still costs the minimum
    assert read_units(0, consistent=False) == 0.5


def test_batch_get_rounds_each_item_and_query_rounds_the_total() -> None:
    sizes = [1536, 6656]  # the docs' 1.5 KB and 6.5 KB items
    assert sum(read_units(s) for s in sizes) == 3  # BatchGetItem: 4 KB + 8 KB
    assert query_read_units(sizes) == 2  # Query: 8 KB in all
    assert query_read_units([]) == 1
    assert query_read_units(sizes, consistent=False) == 1


def test_a_gsi_write_follows_its_projection() -> None:
    keys_only = SecondaryIndex("by-owner", ("owner",), "KEYS_ONLY", ("pk", "sk"))
    before = {"pk": {"S": "p"}, "sk": {"S": "s"}, "owner": {"S": "a"}, "body": {"S": "x"}}
    moved = {**before, "owner": {"S": "b"}}
    edited = {**before, "body": {"S": "y" * 2000}}
    assert gsi_write_units(None, before, keys_only) == 1  # enters the index
    assert gsi_write_units(before, None, keys_only) == 1  # leaves it
    assert gsi_write_units(before, edited, keys_only) == 0  # nothing projected changed
    assert gsi_write_units(before, moved, keys_only) == 2  # index key changed: delete + put
    everything = SecondaryIndex("all", ("owner",), "ALL", ("pk", "sk"))
    assert gsi_write_units(before, edited, everything) == 2  # the 2 KB copy, rewritten
    assert gsi_write_units({"pk": {"S": "p"}}, {"pk": {"S": "q"}}, everything) == 0  # sparse


def test_the_recorder_bills_items_as_stored(aws: None) -> None:
    inspector = boto3.client("dynamodb", region_name="us-east-1")
    inspector.create_table(
        TableName="wc-t",
        BillingMode="PAY_PER_REQUEST",
        AttributeDefinitions=[
            {"AttributeName": "pk", "AttributeType": "S"},
            {"AttributeName": "sk", "AttributeType": "S"},
        ],
        KeySchema=[
            {"AttributeName": "pk", "KeyType": "HASH"},
            {"AttributeName": "sk", "KeyType": "RANGE"},
        ],
    )
    client = boto3.client("dynamodb", region_name="us-east-1")
    rec = Recorder(client, inspector, "wc-")
    key = {"pk": {"S": "p"}, "sk": {"S": "s"}}
    big = {**key, "body": {"S": "x" * 1100}}
    with rec.during("test") as calls:
        client.put_item(TableName="wc-t", Item=big)
        # A small update of a large item is billed on the stored item, before and after.
        client.update_item(
            TableName="wc-t",
            Key=key,
            UpdateExpression="SET n = :n",
            ExpressionAttributeValues={":n": {"N": "1"}},
        )
        client.transact_write_items(
            TransactItems=[
                {"Put": {"TableName": "wc-t", "Item": {"pk": {"S": "p"}, "sk": {"S": "t"}}}},
                {
                    "ConditionCheck": {
                        "TableName": "wc-t",
                        "Key": key,
                        "ConditionExpression": "n = :n",
                        "ExpressionAttributeValues": {":n": {"N": "1"}},
                    }
                },
            ]
        )
        client.get_item(TableName="wc-t", Key={"pk": {"S": "p"}, "sk": {"S": "absent"}})
    put, update, tx, get = calls
    assert (put.wru, update.wru) == (2, 2)
    assert update.items[0].bytes_before == 2 + 1 + 2 + 1 + 4 + 1100
    assert update.items[0].bytes_after == update.items[0].bytes_before + 1 + 2
    assert (tx.wru, tx.rru) == (2, 2)  # a 2 WRU put and a 2 RRU condition check
    assert (get.wru, get.rru) == (0, 0.5)  # eventually consistent, not found
