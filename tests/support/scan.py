"""Look at what is physically stored, the way an auditor would."""

from __future__ import annotations

import json
from typing import Any

from memvault.storage.dynamodb.tables import ALL_TABLES


def all_items(client: Any, prefix: str = "test-") -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for spec in ALL_TABLES:
        name = f"{prefix}{spec.name}"
        items: list[dict[str, Any]] = []
        kwargs: dict[str, Any] = {"TableName": name}
        while True:
            page = client.scan(**kwargs)
            items += page["Items"]
            if "LastEvaluatedKey" not in page:
                break
            kwargs["ExclusiveStartKey"] = page["LastEvaluatedKey"]
        out[spec.name] = items
    return out


def stored_text(client: Any, prefix: str = "test-") -> str:
    """Every stored attribute of every table, as one string to search."""
    return json.dumps(all_items(client, prefix), ensure_ascii=False)


def count(client: Any, table: str, prefix: str = "test-") -> int:
    return len(all_items(client, prefix)[table])
