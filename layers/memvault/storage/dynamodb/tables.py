"""Table definitions: the one place that the CDK app, the local stack and tests read.

Every partition key begins with ``<tenant_id>#`` so that IAM ``dynamodb:LeadingKeys``
can confine a tenant-scoped session to its own items.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

StreamView = Literal["NEW_AND_OLD_IMAGES", "NEW_IMAGE", "KEYS_ONLY"]


@dataclass(frozen=True)
class TableSpec:
    #: Logical name; the physical name is ``<prefix><name>``.
    name: str
    purpose: str
    partition_key: str = "pk"
    sort_key: str = "sk"
    ttl_attribute: str | None = None
    stream: StreamView | None = None


MEMORY = TableSpec(
    name="memory",
    purpose="memory versions, chain heads (compare-and-set), canonical pointers, subject epochs",
    ttl_attribute="ttl",
    # The indexer and purge pipeline consume both images.
    stream="NEW_AND_OLD_IMAGES",
)
IDEMPOTENCY = TableSpec(
    name="idempotency",
    purpose="one record per (tenant, subject, request id): payload hash and first result",
    ttl_attribute="ttl",
)
AUDIT = TableSpec(
    name="audit",
    purpose="append-only audit events (ids only) and the deletion log, never recalled",
    ttl_attribute="ttl",
)
DELETIONS = TableSpec(
    name="deletions",
    purpose="deletion jobs with a status per copy",
)

SESSIONS = TableSpec(
    name="sessions",
    purpose="session memory: head (two clocks), messages, summaries; native TTL",
    ttl_attribute="ttl",
    # No stream: nothing consumes one (a session's items leave together by TTL, and
    # nothing is derived from them elsewhere). Add one with its consumer.
)
RUNS = TableSpec(
    name="runs",
    purpose="run state: current checkpoint (CAS), version history, operations, event receipts",
    ttl_attribute="ttl",
)

ARTIFACTS = TableSpec(
    name="artifacts",
    purpose="artifact metadata (state, sha256, pinned S3 version, references), upload receipts",
    ttl_attribute="ttl",
)

ALL_TABLES: tuple[TableSpec, ...] = (
    MEMORY,
    IDEMPOTENCY,
    AUDIT,
    DELETIONS,
    SESSIONS,
    RUNS,
    ARTIFACTS,
)


def physical_name(spec: TableSpec, prefix: str) -> str:
    return f"{prefix}{spec.name}"


def table_names(prefix: str, specs: tuple[TableSpec, ...] = ALL_TABLES) -> dict[str, str]:
    """Logical name -> physical name of every table."""
    return {spec.name: physical_name(spec, prefix) for spec in specs}


def create_table_request(spec: TableSpec, prefix: str) -> dict[str, Any]:
    """The ``CreateTable`` request for a spec (local stack and tests)."""
    request: dict[str, Any] = {
        "TableName": physical_name(spec, prefix),
        "BillingMode": "PAY_PER_REQUEST",
        "AttributeDefinitions": [
            {"AttributeName": spec.partition_key, "AttributeType": "S"},
            {"AttributeName": spec.sort_key, "AttributeType": "S"},
        ],
        "KeySchema": [
            {"AttributeName": spec.partition_key, "KeyType": "HASH"},
            {"AttributeName": spec.sort_key, "KeyType": "RANGE"},
        ],
    }
    if spec.stream:
        request["StreamSpecification"] = {"StreamEnabled": True, "StreamViewType": spec.stream}
    return request


def create_tables(client: Any, prefix: str, specs: tuple[TableSpec, ...] = ALL_TABLES) -> None:
    """Create the tables that do not exist yet, with TTL where the spec asks for it."""
    existing = set(client.list_tables().get("TableNames", []))
    for spec in specs:
        name = physical_name(spec, prefix)
        if name in existing:
            continue
        client.create_table(**create_table_request(spec, prefix))
        client.get_waiter("table_exists").wait(TableName=name)
        if spec.ttl_attribute:
            client.update_time_to_live(
                TableName=name,
                TimeToLiveSpecification={"Enabled": True, "AttributeName": spec.ttl_attribute},
            )
