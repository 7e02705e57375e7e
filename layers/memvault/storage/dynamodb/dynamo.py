"""Thin helpers over the low-level DynamoDB client: (de)serialisation, batch reads,
transactions, and the one place where ``ClientError`` codes become domain errors."""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from boto3.dynamodb.types import TypeDeserializer, TypeSerializer
from botocore.exceptions import ClientError

from memvault_wire.errors import InternalError, Throttled

_SER = TypeSerializer()
_DE = TypeDeserializer()

_THROTTLING = {
    "ProvisionedThroughputExceededException",
    "ThrottlingException",
    "RequestLimitExceeded",
}


def _clean(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(str(value))
    if isinstance(value, Mapping):
        # Nested None stays (stored as NULL); only top-level attributes are left out.
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_clean(v) for v in value]
    return value


def to_attr(value: Any) -> dict[str, Any]:
    return _SER.serialize(_clean(value))  # type: ignore[no-any-return]


def to_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """Serialise a plain dict; ``None`` values are left out rather than stored as NULL."""
    return {k: to_attr(v) for k, v in item.items() if v is not None}


def _plain(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | set):
        return [_plain(v) for v in value]
    return value


def from_item(item: Mapping[str, Any]) -> dict[str, Any]:
    return {k: _plain(_DE.deserialize(v)) for k, v in item.items()}


def key(pk: str, sk: str) -> dict[str, Any]:
    return {"pk": {"S": pk}, "sk": {"S": sk}}


class TransactionConflict(Exception):
    """A transaction was cancelled; ``failed`` names the labelled items whose condition failed."""

    def __init__(self, failed: set[str]) -> None:
        super().__init__(f"conditions failed: {sorted(failed)}")
        self.failed = failed


@dataclass
class Tx:
    """A transaction under construction; each item carries a label for error reporting."""

    items: list[dict[str, Any]] = field(default_factory=list)
    labels: list[str] = field(default_factory=list)

    def add(self, label: str, item: dict[str, Any]) -> None:
        self.items.append(item)
        self.labels.append(label)


def map_client_error(err: ClientError) -> Exception:
    code = err.response.get("Error", {}).get("Code", "")
    if code in _THROTTLING:
        return Throttled(
            "the store is throttling requests; retry with backoff", {"retryable": True}
        )
    return InternalError("the store rejected the request", {"store_error": code})


class Dynamo:
    """The low-level client plus the physical table names."""

    def __init__(self, client: Any, table_names: Mapping[str, str]) -> None:
        self.client = client
        self.names = dict(table_names)

    def get(self, table: str, pk: str, sk: str) -> dict[str, Any] | None:
        try:
            out = self.client.get_item(
                TableName=self.names[table], Key=key(pk, sk), ConsistentRead=True
            )
        except ClientError as err:
            raise map_client_error(err) from err
        item = out.get("Item")
        return from_item(item) if item else None

    def get_many(self, table: str, keys: list[tuple[str, str]]) -> list[dict[str, Any]]:
        """Consistent batch read; unprocessed keys are retried with backoff."""
        name = self.names[table]
        unique = list(dict.fromkeys(keys))
        found: list[dict[str, Any]] = []
        for start in range(0, len(unique), 100):
            chunk = [key(pk, sk) for pk, sk in unique[start : start + 100]]
            found += [item for _, item in self._batch_get({name: chunk})]
        return found

    def get_across(self, wanted: list[tuple[str, str, str]]) -> list[dict[str, Any] | None]:
        """Consistent reads of items of several tables (``(table, pk, sk)``, 100 at most) in
        one batch; each answer is the item or ``None``, in the order asked."""
        by_table: dict[str, list[dict[str, Any]]] = {}
        for table, pk, sk in wanted:
            by_table.setdefault(self.names[table], []).append(key(pk, sk))
        tables = {self.names[t]: t for t, _, _ in wanted}
        found = {
            (tables[name], str(item["pk"]), str(item["sk"])): item
            for name, item in self._batch_get(by_table)
        }
        return [found.get(w) for w in wanted]

    def _batch_get(
        self, keys_by_table: dict[str, list[dict[str, Any]]]
    ) -> list[tuple[str, dict[str, Any]]]:
        """One BatchGetItem (consistent), its unprocessed keys retried with backoff: every
        item found, with the physical name of its table."""
        pending: dict[str, Any] = {
            name: {"Keys": keys, "ConsistentRead": True} for name, keys in keys_by_table.items()
        }
        found: list[tuple[str, dict[str, Any]]] = []
        for attempt in range(8):
            try:
                out = self.client.batch_get_item(RequestItems=pending)
            except ClientError as err:
                raise map_client_error(err) from err
            for name, items in out.get("Responses", {}).items():
                found += [(name, from_item(i)) for i in items]
            pending = out.get("UnprocessedKeys") or {}
            if not pending:
                return found
            time.sleep(min(0.05 * 2**attempt, 1.0))
        raise Throttled("the store did not answer every key; retry", {"retryable": True})

    def query(
        self,
        table: str,
        pk: str,
        sk_prefix: str,
        *,
        start_sk: str | None = None,
        limit: int | None = None,
        newest_first: bool = False,
        filter_expression: str | None = None,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
    ) -> tuple[list[dict[str, Any]], str | None]:
        """One page of a partition's items whose sort key begins with ``sk_prefix``."""
        params: dict[str, Any] = {
            "TableName": self.names[table],
            "KeyConditionExpression": "pk = :pk AND begins_with(sk, :prefix)",
            "ExpressionAttributeValues": {":pk": to_attr(pk), ":prefix": to_attr(sk_prefix)},
            "ConsistentRead": True,
        }
        if not sk_prefix:  # the whole partition
            params["KeyConditionExpression"] = "pk = :pk"
            del params["ExpressionAttributeValues"][":prefix"]
        if filter_expression:
            params["FilterExpression"] = filter_expression
            params["ExpressionAttributeValues"].update(
                {k: to_attr(v) for k, v in (values or {}).items()}
            )
        if names:
            params["ExpressionAttributeNames"] = names
        if start_sk:
            params["ExclusiveStartKey"] = key(pk, start_sk)
        if limit:
            params["Limit"] = limit
        if newest_first:
            params["ScanIndexForward"] = False
        try:
            out = self.client.query(**params)
        except ClientError as err:
            raise map_client_error(err) from err
        last = out.get("LastEvaluatedKey")
        return [from_item(i) for i in out.get("Items", [])], (last["sk"]["S"] if last else None)

    def query_all(self, table: str, pk: str, sk_prefix: str) -> Iterator[dict[str, Any]]:
        start: str | None = None
        while True:
            items, start = self.query(table, pk, sk_prefix, start_sk=start)
            yield from items
            if start is None:
                return

    def transact(self, tx: Tx) -> None:
        try:
            self.client.transact_write_items(TransactItems=tx.items)
        except ClientError as err:
            code = err.response.get("Error", {}).get("Code", "")
            if code == "TransactionCanceledException":
                reasons = err.response.get("CancellationReasons") or []
                failed = {
                    label
                    for label, reason in zip(tx.labels, reasons, strict=False)
                    if reason.get("Code") == "ConditionalCheckFailed"
                }
                if failed:
                    raise TransactionConflict(failed) from err
                if any(
                    r.get("Code") in ("TransactionConflict", "ThrottlingError") for r in reasons
                ):
                    raise Throttled(
                        "a concurrent transaction touched the same items; retry",
                        {"retryable": True},
                    ) from err
            raise map_client_error(err) from err

    def put(
        self,
        table: str,
        item: Mapping[str, Any],
        condition: str | None = None,
        values: dict[str, Any] | None = None,
        names: dict[str, str] | None = None,
    ) -> None:
        params: dict[str, Any] = {"TableName": self.names[table], "Item": to_item(item)}
        if condition:
            params["ConditionExpression"] = condition
        if names:
            params["ExpressionAttributeNames"] = names
        if values:
            params["ExpressionAttributeValues"] = {k: to_attr(v) for k, v in values.items()}
        try:
            self.client.put_item(**params)
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                raise TransactionConflict({"put"}) from err
            raise map_client_error(err) from err

    def update(
        self,
        table: str,
        pk: str,
        sk: str,
        expression: str,
        *,
        names: dict[str, str] | None = None,
        values: dict[str, Any] | None = None,
        condition: str | None = None,
    ) -> None:
        params: dict[str, Any] = {
            "TableName": self.names[table],
            "Key": key(pk, sk),
            "UpdateExpression": expression,
        }
        if names:
            params["ExpressionAttributeNames"] = names
        if values:
            params["ExpressionAttributeValues"] = {k: to_attr(v) for k, v in values.items()}
        if condition:
            params["ConditionExpression"] = condition
        try:
            self.client.update_item(**params)
        except ClientError as err:
            if err.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                raise TransactionConflict({"update"}) from err
            raise map_client_error(err) from err

    def scan_prefix(self, table: str, pk_prefix: str) -> Iterator[dict[str, Any]]:
        """Every item whose partition key starts with ``pk_prefix`` (a full scan, paged:
        for rare bulk work such as forgetting a subject, never on a request path)."""
        params: dict[str, Any] = {"TableName": self.names[table]}
        if pk_prefix:
            params["FilterExpression"] = "begins_with(pk, :p)"
            params["ExpressionAttributeValues"] = {":p": {"S": pk_prefix}}
        while True:
            try:
                page = self.client.scan(**params)
            except ClientError as err:
                raise map_client_error(err) from err
            for raw in page.get("Items", []):
                yield from_item(raw)
            if "LastEvaluatedKey" not in page:
                return
            params["ExclusiveStartKey"] = page["LastEvaluatedKey"]

    def put_many(self, table: str, items: Sequence[Mapping[str, Any]]) -> None:
        """Put items in batches of 25 (not atomic; each put is whole); unprocessed ones
        are retried with backoff."""
        self._batch_write(
            table, [{"PutRequest": {"Item": to_item(i)}} for i in items], "write every item"
        )

    def delete_many(self, table: str, item_keys: list[tuple[str, str]]) -> int:
        """Delete items in batches of 25 (idempotent); unprocessed ones are retried."""
        unique = list(dict.fromkeys(item_keys))
        self._batch_write(
            table,
            [{"DeleteRequest": {"Key": key(pk, sk)}} for pk, sk in unique],
            "delete every item",
        )
        return len(unique)

    def _batch_write(self, table: str, requests: list[dict[str, Any]], what: str) -> None:
        """``BatchWriteItem`` in batches of 25, retrying unprocessed requests with backoff;
        ``Throttled`` when some are still unprocessed after eight tries."""
        name = self.names[table]
        for start in range(0, len(requests), 25):
            pending: dict[str, Any] = {name: requests[start : start + 25]}
            for attempt in range(8):
                try:
                    out = self.client.batch_write_item(RequestItems=pending)
                except ClientError as err:
                    raise map_client_error(err) from err
                pending = out.get("UnprocessedItems") or {}
                if not pending:
                    break
                time.sleep(min(0.05 * 2**attempt, 1.0))
            if pending:
                raise Throttled(f"the store did not {what}; retry", {"retryable": True})
