"""The local stand-in for DynamoDB TTL, which moto never runs.

It deletes items whose TTL attribute is in the past, so that the table's stream carries
the same REMOVE a real TTL deletion would. moto cannot mark those records as the
service's own: DynamoDB sets ``userIdentity`` to ``{"type": "Service", "principalId":
"dynamodb.amazonaws.com"}`` on TTL deletes. The sweeper remembers the keys it removed
and ``as_service_deletes`` marks the matching stream records the same way, so stream
consumers see what they would see on AWS.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import Any

from memvault.storage.dynamodb.tables import ALL_TABLES, TableSpec, physical_name

SERVICE_IDENTITY = {"type": "Service", "principalId": "dynamodb.amazonaws.com"}


class TtlSweeper:
    def __init__(
        self, client: Any, table_prefix: str, specs: tuple[TableSpec, ...] = ALL_TABLES
    ) -> None:
        self.client = client
        self.tables = [(physical_name(s, table_prefix), s) for s in specs if s.ttl_attribute]
        self.swept: set[tuple[str, str, str]] = set()

    def sweep(self, now: float | None = None) -> int:
        """Delete every item past its TTL; returns how many went."""
        cutoff = int(time.time() if now is None else now)
        removed = 0
        for name, spec in self.tables:
            assert spec.ttl_attribute
            kwargs: dict[str, Any] = {
                "TableName": name,
                "FilterExpression": "#ttl < :now",
                "ExpressionAttributeNames": {"#ttl": spec.ttl_attribute},
                "ExpressionAttributeValues": {":now": {"N": str(cutoff)}},
                "ProjectionExpression": "pk, sk",
            }
            while True:
                page = self.client.scan(**kwargs)
                for item in page["Items"]:
                    removed += self._delete(name, spec, item, cutoff)
                if "LastEvaluatedKey" not in page:
                    break
                kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        return removed

    def _delete(self, name: str, spec: TableSpec, item: dict[str, Any], cutoff: int) -> int:
        try:
            # Only if still expired: an item renewed since the scan stays.
            self.client.delete_item(
                TableName=name,
                Key={"pk": item["pk"], "sk": item["sk"]},
                ConditionExpression="#ttl < :now",
                ExpressionAttributeNames={"#ttl": spec.ttl_attribute},
                ExpressionAttributeValues={":now": {"N": str(cutoff)}},
            )
        except self.client.exceptions.ConditionalCheckFailedException:
            return 0
        self.swept.add((name, item["pk"]["S"], item["sk"]["S"]))
        return 1

    def as_service_deletes(
        self, table: str, records: Iterable[dict[str, Any]]
    ) -> list[dict[str, Any]]:
        """Stream records with the sweeper's REMOVEs marked as DynamoDB's own TTL deletes."""
        marked = []
        for record in records:
            keys = record.get("dynamodb", {}).get("Keys", {})
            ident = (table, keys.get("pk", {}).get("S"), keys.get("sk", {}).get("S"))
            if record.get("eventName") == "REMOVE" and ident in self.swept:
                record = {**record, "userIdentity": dict(SERVICE_IDENTITY)}
            marked.append(record)
        return marked
