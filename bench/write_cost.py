"""Write cost: the DynamoDB request units each memvault operation consumes, and what
1,000 of them cost at on-demand prices.

Method. memvault's own services and DynamoDB adapter run against moto (in-process
``mock_aws``). A botocore hook on the client the services use
(``before-parameter-build.dynamodb`` and ``after-call.dynamodb``) captures every API call
with its parameters and its response. A second, uninstrumented client reads each item a
write touches from moto just before and just after the call, so that UpdateItem,
DeleteItem and an overwriting PutItem are billed on the item *as stored* (before and
after), not on the request. The units are then computed here, by DynamoDB's published
rules; moto's own ConsumedCapacity figures are never used.

The rules, as the AWS documentation states them:

- "DynamoDB item sizes and formats" (Developer Guide, CapacityUnitCalculations.html):
  an item's size is the sum over its attributes of the UTF-8 length of the name plus
  the value's size; strings: UTF-8 bytes; numbers: about 1 byte per two significant
  digits plus 1 (leading and trailing zeroes trimmed; at most 38 digits, so at most
  21 bytes); binary: raw bytes; null and Boolean: 1 byte; List and Map: 3 bytes plus
  their elements, each element 1 byte more (a Map's keys count as names). Sets are
  taken as the sum of their elements.
- "DynamoDB read and write operations" (read-write-operations.html): a write is 1 unit
  per started 1 KB of the larger of the item before and after (PutItem, UpdateItem;
  DeleteItem: the deleted item), each BatchWriteItem entry on its own; a write whose
  condition fails still consumes units for the existing item (at least 1). A read is 1
  unit per started 4 KB, strongly consistent (half that eventually consistent);
  BatchGetItem rounds each item on its own; Query adds up the sizes of the items it
  reads (before any filter) and rounds the total; a key that is not found still costs
  the minimum; projections do not reduce the size.
- "Amazon DynamoDB Transactions: How it works", section "Capacity management for
  transactions" (transaction-apis.html): DynamoDB does two underlying reads or writes
  of every item of a transaction (prepare and commit): TransactWriteItems is 2 write
  units per started 1 KB per item, TransactGetItems 2 read units per started 4 KB; a
  ConditionCheck reads its item (2 read units per started 4 KB).
- "Global secondary indexes" (GSI.html, "Provisioned throughput considerations"): a
  table write also writes each GSI whose key attributes the item has, sized by the
  index's projection (a changed index key is a delete plus a put). memvault's tables
  define no GSI or LSI (layers/memvault/storage/dynamodb/tables.py, infra/constructs/data.py);
  the run checks that with DescribeTable and the rule is applied anyway.

Not billed in request units: DescribeTable and the other control-plane calls, DynamoDB
Streams reads by a Lambda event source mapping (free), and deletions by TTL (free).
"""

from __future__ import annotations

import base64
import copy
import math
import re
import sys
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

WRITE_UNIT_BYTES = 1024
READ_UNIT_BYTES = 4096
MAX_NUMBER_BYTES = 21

#: The issue's goal for one governed write.
TARGET_WRU_PER_GOVERNED_WRITE = 6

#: DynamoDB on-demand, us-east-1, standard table class, since the November 2024 cut.
USD_PER_MILLION_WRU = 0.625
USD_PER_MILLION_RRU = 0.125
PRICES = {
    "as_of": "DynamoDB on-demand prices in effect since 1 November 2024 (the on-demand "
    "throughput price cut announced 14 November 2024); check "
    "https://aws.amazon.com/dynamodb/pricing/on-demand/ before quoting",
    "region": "us-east-1",
    "table_class": "standard",
    "usd_per_million_write_request_units": USD_PER_MILLION_WRU,
    "usd_per_million_read_request_units": USD_PER_MILLION_RRU,
}

#: The search index is a fixed monthly line, not per request. The instance, node count
#: and volume are the CDK app's defaults (infra/settings.py: SEARCH_INSTANCE_TYPE,
#: SEARCH_DATA_NODES, SEARCH_VOLUME_GIB); the prices are assumptions.
SEARCH_INSTANCE_TYPE = "t3.small.search"
SEARCH_DATA_NODES = 1
SEARCH_USD_PER_NODE_HOUR = 0.036
SEARCH_VOLUME_GIB = 10
SEARCH_GP3_USD_PER_GIB_MONTH = 0.122
HOURS_PER_MONTH = 730

_DATA_PLANE = {
    "GetItem",
    "BatchGetItem",
    "Query",
    "Scan",
    "TransactGetItems",
    "PutItem",
    "UpdateItem",
    "DeleteItem",
    "BatchWriteItem",
    "TransactWriteItems",
}


def _log(message: str) -> None:
    print(f"[write_cost] {message}", file=sys.stderr, flush=True)


@contextmanager
def _stdout_kept_clean() -> Iterator[None]:
    """Nothing but the caller's output may reach stdout: memvault's Powertools logger
    writes JSON lines there (its INFO lines are muted here, warnings go to stderr), and
    Powertools' metrics print there when they flush."""
    import logging

    moved: list[logging.StreamHandler[Any]] = []
    loggers = [logging.getLogger(), *logging.root.manager.loggerDict.values()]
    for lg in loggers:
        for handler in getattr(lg, "handlers", []):
            if isinstance(handler, logging.StreamHandler) and handler.stream in (
                sys.stdout,
                sys.__stdout__,
            ):
                handler.setStream(sys.stderr)
                moved.append(handler)
    service = logging.getLogger("memvault")
    level = service.level
    service.setLevel(logging.WARNING)
    try:
        with redirect_stdout(sys.stderr):
            yield
    finally:
        service.setLevel(level)
        for handler in moved:
            handler.setStream(sys.stdout)


# ------------------------------------------------------------------------- the rules


def number_size(text: str) -> int:
    """Bytes of a Number value: 1 per two significant digits, plus 1 ("DynamoDB item
    sizes and formats"); leading and trailing zeroes do not count."""
    mantissa = re.split("[eE]", text.strip().lstrip("+-"))[0].replace(".", "")
    digits = max(len(mantissa.strip("0")), 1)
    return min(math.ceil(digits / 2) + 1, MAX_NUMBER_BYTES)


def _raw(value: Any) -> bytes:
    if isinstance(value, bytes | bytearray):
        return bytes(value)
    if hasattr(value, "value"):  # boto3.dynamodb.types.Binary
        return bytes(value.value)
    return base64.b64decode(value)


def value_size(value: Mapping[str, Any]) -> int:
    """Bytes of one AttributeValue in DynamoDB's wire form (``{"S": "..."}``), without
    the name of the attribute that holds it."""
    ((kind, inner),) = value.items()
    if kind == "S":
        return len(inner.encode())
    if kind == "N":
        return number_size(inner)
    if kind == "B":
        return len(_raw(inner))
    if kind in ("BOOL", "NULL"):
        return 1
    if kind == "SS":
        return sum(len(s.encode()) for s in inner)
    if kind == "NS":
        return sum(number_size(n) for n in inner)
    if kind == "BS":
        return sum(len(_raw(b)) for b in inner)
    if kind == "L":
        return 3 + sum(1 + value_size(v) for v in inner)
    if kind == "M":
        return 3 + sum(1 + len(k.encode()) + value_size(v) for k, v in inner.items())
    raise ValueError(f"unknown attribute type {kind!r}")


def item_size(item: Mapping[str, Mapping[str, Any]] | None) -> int:
    """Bytes of an item: every attribute's name (UTF-8) plus its value; 0 for no item."""
    if not item:
        return 0
    return sum(len(name.encode()) + value_size(v) for name, v in item.items())


def write_units(size: int, *, transactional: bool = False) -> int:
    """Write request units of one item write of ``size`` bytes (the larger of before and
    after): 1 per started KB, at least 1; twice that inside a transaction."""
    units = max(1, math.ceil(size / WRITE_UNIT_BYTES))
    return 2 * units if transactional else units


def read_units(size: int, *, consistent: bool = True, transactional: bool = False) -> float:
    """Read request units of one item read: 1 per started 4 KB (at least 1, also for a
    key that is not found); half eventually consistent; twice in a transaction."""
    units = max(1, math.ceil(size / READ_UNIT_BYTES))
    if transactional:
        return float(2 * units)
    return units if consistent else units / 2


def query_read_units(sizes: Sequence[int], *, consistent: bool = True) -> float:
    """Query and Scan: the sizes of every item read are added, then rounded up once."""
    units = max(1, math.ceil(sum(sizes) / READ_UNIT_BYTES))
    return units if consistent else units / 2


@dataclass(frozen=True)
class SecondaryIndex:
    """A GSI as DescribeTable shows it: its key attributes and what it projects."""

    name: str
    keys: tuple[str, ...]
    projection: str  # ALL, KEYS_ONLY or INCLUDE
    table_keys: tuple[str, ...]
    include: tuple[str, ...] = ()

    def projected(self, item: Mapping[str, Any] | None) -> dict[str, Any] | None:
        """The index's copy of ``item``, or ``None`` when the item is not in the index."""
        if not item or not all(k in item for k in self.keys):
            return None
        if self.projection == "ALL":
            return dict(item)
        wanted = set(self.keys) | set(self.table_keys)
        if self.projection == "INCLUDE":
            wanted |= set(self.include)
        return {k: v for k, v in item.items() if k in wanted}


def gsi_write_units(
    before: Mapping[str, Any] | None, after: Mapping[str, Any] | None, index: SecondaryIndex
) -> int:
    """Write units one table write costs on one GSI ("Global secondary indexes",
    provisioned throughput considerations): nothing when the index copy is unchanged,
    one write when it appears, disappears or changes in place, a delete and a put when
    its index key changes."""
    old, new = index.projected(before), index.projected(after)
    if old is None and new is None:
        return 0
    if old is None or new is None:
        return write_units(item_size(old or new))
    if all(old[k] == new[k] for k in index.keys):
        return 0 if old == new else write_units(max(item_size(old), item_size(new)))
    return write_units(item_size(old)) + write_units(item_size(new))


# ---------------------------------------------------------------------- the recorder


@dataclass
class ItemCost:
    action: str
    table: str
    what: str
    bytes_before: int | None = None
    bytes_after: int | None = None
    billed_bytes: int = 0
    wru: int = 0
    rru: float = 0.0
    gsi_wru: int = 0
    failed: bool = False

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"action": self.action, "table": self.table, "what": self.what}
        if self.bytes_before is not None or self.bytes_after is not None:
            out["bytes_before"] = self.bytes_before
            out["bytes_after"] = self.bytes_after
        out["billed_bytes"] = self.billed_bytes
        if self.wru:
            out["wru"] = self.wru
        if self.rru:
            out["rru"] = self.rru
        if self.gsi_wru:
            out["gsi_wru"] = self.gsi_wru
        if self.failed:
            out["condition_failed"] = True
        return out


@dataclass
class Call:
    api: str
    phase: str
    items: list[ItemCost] = field(default_factory=list)
    failed: bool = False

    @property
    def wru(self) -> int:
        return sum(i.wru + i.gsi_wru for i in self.items)

    @property
    def rru(self) -> float:
        return sum(i.rru for i in self.items)


@dataclass(frozen=True)
class TableShape:
    logical: str
    keys: tuple[str, ...]
    indexes: tuple[SecondaryIndex, ...]
    local_indexes: int
    stream: str | None


def _what(table: str, key: Mapping[str, Any]) -> str:
    """What a memvault item is, from its table and key (storage/dynamodb/keys.py's layout)."""
    from memvault.storage.dynamodb import keys

    pk = str(key.get("pk", {}).get("S", ""))
    sk = str(key.get("sk", {}).get("S", ""))
    if table == "memory":
        if sk.startswith(keys.VERSION_PREFIX):
            return "memory version"
        if sk.startswith(keys.CHAIN_PREFIX):
            return "chain head"
        if sk.startswith(keys.POINTER_PREFIX):
            return "canonical pointer"
        if sk == keys.SUBJECT_META_SK:
            return "subject epoch"
    if table == "idempotency":
        return "idempotency record"
    if table == "audit":
        return "deletion log entry" if pk.endswith(keys.deletion_log_pk("")) else "audit event"
    if table == "deletions":
        return "deletion job"
    return f"{table} item"


class Recorder:
    """Every DynamoDB call a client makes, costed by the rules above.

    ``client`` is instrumented; ``inspector`` (same moto backend, no hooks) reads the
    stored items before and after each write, and replays queries without their filter.
    """

    def __init__(self, client: Any, inspector: Any, prefix: str) -> None:
        self.inspector = inspector
        self.phase = "setup"
        self.calls: list[Call] = []
        self.control_plane: Counter[str] = Counter()
        self.tables: dict[str, TableShape] = {}
        for name in inspector.list_tables()["TableNames"]:
            if name.startswith(prefix):
                self.tables[name] = self._shape(name, prefix)
        #: Logical table name -> physical name.
        self.names = {shape.logical: name for name, shape in self.tables.items()}
        client.meta.events.register("before-parameter-build.dynamodb", self._before)
        client.meta.events.register("after-call.dynamodb", self._after)

    def _shape(self, name: str, prefix: str) -> TableShape:
        table = self.inspector.describe_table(TableName=name)["Table"]
        table_keys = tuple(k["AttributeName"] for k in table["KeySchema"])
        indexes = tuple(
            SecondaryIndex(
                name=g["IndexName"],
                keys=tuple(k["AttributeName"] for k in g["KeySchema"]),
                projection=g["Projection"]["ProjectionType"],
                table_keys=table_keys,
                include=tuple(g["Projection"].get("NonKeyAttributes", [])),
            )
            for g in table.get("GlobalSecondaryIndexes", [])
        )
        stream = table.get("StreamSpecification") or {}
        return TableShape(
            logical=name.removeprefix(prefix),
            keys=table_keys,
            indexes=indexes,
            local_indexes=len(table.get("LocalSecondaryIndexes", [])),
            stream=stream.get("StreamViewType") if stream.get("StreamEnabled") else None,
        )

    @contextmanager
    def during(self, phase: str) -> Iterator[list[Call]]:
        """Label the calls made inside the block; the yielded list holds them once the
        block ends."""
        outer, self.phase = self.phase, phase
        start = len(self.calls)
        mine: list[Call] = []
        try:
            yield mine
        finally:
            mine.extend(self.calls[start:])
            self.phase = outer

    # -- hooks

    def _key_of(self, table: str, item: Mapping[str, Any]) -> dict[str, Any]:
        return {k: item[k] for k in self.tables[table].keys}

    def _peek(self, table: str, key: Mapping[str, Any]) -> dict[str, Any] | None:
        out = self.inspector.get_item(TableName=table, Key=dict(key), ConsistentRead=True)
        item: dict[str, Any] | None = out.get("Item")
        return item

    def _targets(
        self, api: str, params: Mapping[str, Any]
    ) -> list[tuple[str, str, dict[str, Any]]]:
        """(action, table, key) of every item a write call touches."""
        if api == "PutItem":
            return [("Put", params["TableName"], self._key_of(params["TableName"], params["Item"]))]
        if api in ("UpdateItem", "DeleteItem"):
            return [(api.removesuffix("Item"), params["TableName"], dict(params["Key"]))]
        if api == "TransactWriteItems":
            out = []
            for entry in params["TransactItems"]:
                ((action, body),) = entry.items()
                key = (
                    body["Key"] if "Key" in body else self._key_of(body["TableName"], body["Item"])
                )
                out.append((action, body["TableName"], dict(key)))
            return out
        if api == "BatchWriteItem":
            out = []
            for table, requests in params["RequestItems"].items():
                for request in requests:
                    if "PutRequest" in request:
                        out.append(
                            ("Put", table, self._key_of(table, request["PutRequest"]["Item"]))
                        )
                    else:
                        out.append(("Delete", table, dict(request["DeleteRequest"]["Key"])))
            return out
        return []

    def _before(
        self, params: dict[str, Any], model: Any, context: dict[str, Any], **_: Any
    ) -> None:
        api = model.name
        if api not in _DATA_PLANE:
            return
        targets = self._targets(api, params)
        context["write_cost"] = {
            "params": copy.deepcopy(params),
            "targets": targets,
            "before": [self._peek(table, key) for _, table, key in targets],
        }

    def _after(
        self,
        http_response: Any,
        parsed: dict[str, Any],
        model: Any,
        context: dict[str, Any],
        **_: Any,
    ) -> None:
        api = model.name
        pending = context.pop("write_cost", None)
        if pending is None:
            self.control_plane[api] += 1
            return
        failed = http_response.status_code >= 300
        call = Call(api=api, phase=self.phase, failed=failed)
        params = pending["params"]
        if pending["targets"]:
            self._cost_writes(call, api, pending, failed)
        elif api == "GetItem":
            self._cost_get(call, params, parsed)
        elif api == "BatchGetItem":
            self._cost_batch_get(call, params, parsed)
        elif api == "TransactGetItems":
            for entry in params["TransactItems"]:
                get = entry["Get"]
                size = item_size(self._peek(get["TableName"], get["Key"]))
                call.items.append(
                    self._read_item(
                        "TransactGet", get["TableName"], get["Key"], size, transactional=True
                    )
                )
        elif api in ("Query", "Scan"):
            self._cost_query(call, api, params)
        self.calls.append(call)

    def _logical(self, table: str) -> str:
        return self.tables[table].logical if table in self.tables else table

    def _read_item(
        self,
        action: str,
        table: str,
        key: Mapping[str, Any],
        size: int,
        *,
        consistent: bool = True,
        transactional: bool = False,
    ) -> ItemCost:
        logical = self._logical(table)
        return ItemCost(
            action=action,
            table=logical,
            what=_what(logical, key),
            billed_bytes=size,
            rru=read_units(size, consistent=consistent, transactional=transactional),
        )

    def _cost_writes(self, call: Call, api: str, pending: dict[str, Any], failed: bool) -> None:
        transactional = api == "TransactWriteItems"
        for (action, table, key), before in zip(pending["targets"], pending["before"], strict=True):
            after = before if failed else self._peek(table, key)
            logical = self._logical(table)
            b, a = item_size(before), item_size(after)
            if action == "ConditionCheck":
                cost = ItemCost(
                    action=action,
                    table=logical,
                    what=_what(logical, key),
                    bytes_before=b if before else None,
                    billed_bytes=b,
                    rru=read_units(b, transactional=True),
                    failed=failed,
                )
            else:
                # A failed condition still bills the existing item (at least 1 unit).
                billed = b if failed else max(b, a)
                cost = ItemCost(
                    action=action,
                    table=logical,
                    what=_what(logical, key),
                    bytes_before=b if before else None,
                    bytes_after=a if after else None,
                    billed_bytes=billed,
                    wru=write_units(billed, transactional=transactional),
                    failed=failed,
                )
                if not failed and table in self.tables:
                    cost.gsi_wru = sum(
                        gsi_write_units(before, after, index)
                        for index in self.tables[table].indexes
                    )
            call.items.append(cost)

    def _cost_get(self, call: Call, params: Mapping[str, Any], parsed: Mapping[str, Any]) -> None:
        table, key = params["TableName"], params["Key"]
        item = parsed.get("Item")
        if item is not None and "ProjectionExpression" in params:
            item = self._peek(table, key)  # a projection does not reduce the size
        call.items.append(
            self._read_item(
                "Get", table, key, item_size(item), consistent=bool(params.get("ConsistentRead"))
            )
        )

    def _cost_batch_get(
        self, call: Call, params: Mapping[str, Any], parsed: Mapping[str, Any]
    ) -> None:
        for table, request in params["RequestItems"].items():
            keys = self.tables[table].keys if table in self.tables else ("pk", "sk")
            found = {
                tuple(repr(i[k]) for k in keys): i
                for i in parsed.get("Responses", {}).get(table, [])
            }
            unprocessed = {
                tuple(repr(k[n]) for n in keys)
                for k in (parsed.get("UnprocessedKeys") or {}).get(table, {}).get("Keys", [])
            }
            projected = "ProjectionExpression" in request
            for key in request["Keys"]:
                ident = tuple(repr(key[n]) for n in keys)
                if ident in unprocessed:
                    continue  # not read, not billed; the adapter asks again
                item = found.get(ident)
                if item is not None and projected:
                    item = self._peek(table, key)
                call.items.append(
                    self._read_item(
                        "BatchGet",
                        table,
                        key,
                        item_size(item),
                        consistent=bool(request.get("ConsistentRead")),
                    )
                )

    def _cost_query(self, call: Call, api: str, params: Mapping[str, Any]) -> None:
        # Billed on every item read, before the filter and whatever the projection:
        # replay the key condition alone, with the same start and limit.
        replay = {
            k: params[k]
            for k in (
                "TableName",
                "IndexName",
                "KeyConditionExpression",
                "ExclusiveStartKey",
                "Limit",
                "ScanIndexForward",
                "ConsistentRead",
                "Segment",
                "TotalSegments",
            )
            if k in params
        }
        used = set(re.findall(r"[:#][A-Za-z0-9_]+", params.get("KeyConditionExpression", "")))
        for field_name in ("ExpressionAttributeValues", "ExpressionAttributeNames"):
            wanted = {k: v for k, v in (params.get(field_name) or {}).items() if k in used}
            if wanted:
                replay[field_name] = wanted
        read = getattr(self.inspector, "query" if api == "Query" else "scan")(**replay)
        sizes = [item_size(i) for i in read.get("Items", [])]
        table = params["TableName"]
        logical = self._logical(table)
        call.items.append(
            ItemCost(
                action=api,
                table=logical,
                what=f"{len(sizes)} item(s) read",
                billed_bytes=sum(sizes),
                rru=query_read_units(sizes, consistent=bool(params.get("ConsistentRead"))),
            )
        )


# ---------------------------------------------------------------------- the report


def _round(x: float) -> float | int:
    return int(x) if float(x).is_integer() else round(x, 3)


def summarize(calls: Sequence[Call], description: str | None = None) -> dict[str, Any]:
    """One operation: its calls by API, its units, and every item with its size."""
    writes: Counter[str] = Counter()
    for c in calls:
        for i in c.items:
            if i.wru or i.gsi_wru:
                writes[f"{i.action} {i.what}"] += i.wru + i.gsi_wru
    out: dict[str, Any] = {}
    if description:
        out["description"] = description
    out |= {
        "calls_by_api": dict(Counter(c.api for c in calls)),
        "wru": sum(c.wru for c in calls),
        "rru": _round(sum(c.rru for c in calls)),
        "wru_by_item": dict(writes),
        "failed_calls": sum(c.failed for c in calls),
        "calls": [{"api": c.api, "items": [i.as_dict() for i in c.items]} for c in calls],
    }
    return out


def _usd(wru: float, rru: float, times: int) -> float:
    per = (wru * USD_PER_MILLION_WRU + rru * USD_PER_MILLION_RRU) / 1_000_000
    return round(per * times, 6)


def _opensearch_monthly() -> dict[str, Any]:
    instances = SEARCH_DATA_NODES * SEARCH_USD_PER_NODE_HOUR * HOURS_PER_MONTH
    storage = SEARCH_DATA_NODES * SEARCH_VOLUME_GIB * SEARCH_GP3_USD_PER_GIB_MONTH
    return {
        "instance_type": SEARCH_INSTANCE_TYPE,
        "data_nodes": SEARCH_DATA_NODES,
        "usd_per_node_hour": SEARCH_USD_PER_NODE_HOUR,
        "hours_per_month": HOURS_PER_MONTH,
        "gp3_volume_gib_per_node": SEARCH_VOLUME_GIB,
        "gp3_usd_per_gib_month": SEARCH_GP3_USD_PER_GIB_MONTH,
        "instances_usd_per_month": round(instances, 2),
        "storage_usd_per_month": round(storage, 2),
        "usd_per_month": round(instances + storage, 2),
        "assumption": "ASSUMPTION, to check against the AWS price list: on-demand "
        "us-east-1 prices for Amazon OpenSearch Service, not read from it here. "
        "t3.small.search is the CDK app's small default (burstable, one node, no zone "
        "awareness); a production domain (two or more data nodes, e.g. m7g.large.search, "
        "optionally three dedicated masters) costs several times this.",
    }


# ----------------------------------------------------------------------- the scenario


def _sized(
    text: str,
    n: int,
    filler: str = " Noted during the weekly planning call and confirmed in the follow-up thread.",
) -> str:
    """``text`` cut or padded (with a neutral clause) to exactly ``n`` characters."""
    while len(text) < n:
        text += filler
    cut = text[:n]
    return cut[:-1] + "." if cut.endswith(" ") else cut


CONTENT_CHARS = 200
CONTENT = _sized(
    "Prefers Chinese for internal technical documents and English for anything a customer "
    "will read; wants code comments in English and meeting summaries under two hundred "
    "words, with the decisions listed first.",
    CONTENT_CHARS,
)
#: The same preference in Chinese (3 UTF-8 bytes a character): the project's users write both.
CONTENT_CJK = _sized(
    "偏好在内部技术文档中使用中文，面向客户的内容使用英文；代码注释用英文，"  # noqa: RUF001 - Chinese punctuation
    "会议纪要控制在两百字以内，先列出决定事项。",  # noqa: RUF001 - Chinese punctuation
    CONTENT_CHARS,
    filler="在每周计划会议上提到，并在后续讨论中确认。",  # noqa: RUF001 - Chinese punctuation
)
TAGS = ["preference", "language", "documents"]
SOURCE = {"type": "user_statement", "ref": "msg-1742"}
SCOPE = {"workspace": "w1"}

TOPICS = (
    "travel",
    "diet",
    "calendar",
    "tooling",
    "reporting",
    "security",
    "family",
    "hardware",
    "reading",
    "fitness",
)


class _Clock:
    def __init__(self) -> None:
        self.current = datetime(2026, 1, 5, 9, 0, tzinfo=UTC)

    def now(self) -> datetime:
        return self.current

    def tick(self) -> None:
        self.current += timedelta(seconds=1)


class _Ids:
    """Ids of the same length as ``RandomIds``' (``mem_`` + 32 hex), in sequence, so that
    item sizes are the same on every run."""

    def __init__(self) -> None:
        self.n = 0

    def new_id(self, prefix: str) -> str:
        self.n += 1
        return f"{prefix}_{self.n:032x}"


class _StepFunctionsStandIn:
    """What the delete request does on AWS: start an execution (no DynamoDB); the purge's
    tasks are then measured one by one, as the state machine invokes them."""

    def __init__(self) -> None:
        self.started: list[tuple[str, str]] = []

    def launch(self, tenant_id: str, deletion_id: str, *, resume: bool = False) -> None:
        self.started.append((tenant_id, deletion_id))


def _write_body(request_id: str, **overrides: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "request_id": request_id,
        "kind": "semantic",
        "canonical_key": "preferred-language",
        "content": CONTENT,
        "tags": TAGS,
        "scope": SCOPE,
        "source": SOURCE,
        "sensitivity": "internal",
        "consent": True,
        "ttl_seconds": 90 * 86_400,
    }
    body.update(overrides)
    return body


def _scenario(rec: Recorder, services: Any, pump: Any, index: Any, clock: _Clock) -> dict[str, Any]:
    from memvault.handlers.purge import handle
    from memvault.models.access import AccessContext, Scope
    from memvault.services.purge_pipeline import BEGIN, FINISH, PURGE_PIPELINE, STEP
    from memvault_wire.memory import MemoryPatch, MemoryWrite
    from memvault_wire.recall import RecallRequest

    ops: dict[str, Any] = {}
    tenant = "acme"

    def ctx(subject: str) -> AccessContext:
        return AccessContext(
            tenant_id=tenant,
            principal="agent-client-1",
            subject_id=subject,
            scopes=frozenset(Scope) - {Scope.SUBJECTS_ANY},
        )

    def sync(name: str, description: str) -> None:
        with rec.during(name) as calls:
            pump.drain()
            pump.drain()  # the records the indexer's own writes produced
            index.refresh()
        ops[name] = summarize(calls, description)

    memory = services.memory
    u1 = ctx("u-1")

    # -- recall corpus (setup, not measured): 30 memories of another subject, indexed
    _log("seeding 30 memories for the recall corpus")
    u2 = ctx("u-2")
    for n in range(30):
        topic = TOPICS[n % len(TOPICS)]
        memory.write(
            u2,
            "u-2",
            MemoryWrite.model_validate(
                _write_body(
                    f"seed-{n}",
                    canonical_key=f"{topic}-note-{n // len(TOPICS)}",
                    content=_sized(f"About {topic}, note {n}: {CONTENT}", CONTENT_CHARS),
                    tags=[topic, "seed"],
                )
            ),
        )
        clock.tick()
    pump.drain()
    pump.drain()
    index.refresh()

    # -- writes
    _log("governed write (new fact with a canonical key)")
    first = MemoryWrite.model_validate(_write_body("req-1"))
    with rec.during("governed_write") as calls:
        written = memory.write(u1, "u-1", first)
    assert written.created
    version = rec.inspector.get_item(
        TableName=rec.names["memory"],
        Key={
            "pk": {"S": f"{tenant}#u-1"},
            "sk": {"S": f"MEM#{written.memory.memory_id}"},
        },
    )["Item"]
    anatomy = _anatomy(version)
    ops["governed_write"] = summarize(
        calls,
        "POST /v1/subjects/{id}/memories, a new fact with a canonical key: reads of the "
        "idempotency record, subject epoch and canonical pointer, then one transaction "
        "(idempotency record, version, chain head, pointer, subject-epoch check, audit event)",
    )
    clock.tick()
    sync(
        "indexer_after_write",
        "the memory table's stream to the indexer (batch of one): the index-status update "
        "on the version (asynchronous, after the 201)",
    )

    with rec.during("idempotent_replay") as calls:
        memory.write(u1, "u-1", first)
    ops["idempotent_replay"] = summarize(
        calls, "the same POST again (same request_id and payload): answered from the record"
    )
    clock.tick()

    _log("governed write without a canonical key")
    with rec.during("governed_write_without_canonical_key") as calls:
        memory.write(
            u1,
            "u-1",
            MemoryWrite.model_validate(_write_body("req-2", kind="episodic", canonical_key=None)),
        )
    ops["governed_write_without_canonical_key"] = summarize(
        calls, "POST of an episodic memory without a canonical key (no pointer to claim)"
    )
    clock.tick()
    sync("indexer_after_write_without_canonical_key", "its index-status update")

    _log("governed write with 200 Chinese characters")
    with rec.during("governed_write_200_cjk_chars") as calls:
        memory.write(
            u1,
            "u-1",
            MemoryWrite.model_validate(
                _write_body("req-cjk", canonical_key="preferred-language-zh", content=CONTENT_CJK)
            ),
        )
    ops["governed_write_200_cjk_chars"] = summarize(
        calls,
        "the governed write with its 200 characters of content in Chinese (600 UTF-8 bytes "
        "instead of 200): the version item passes 1 KB",
    )
    clock.tick()
    sync("indexer_after_write_200_cjk_chars", "its index-status update")

    _log("governed write superseding the fact")
    with rec.during("governed_write_superseding") as calls:
        newer = memory.write(
            u1,
            "u-1",
            MemoryWrite.model_validate(
                _write_body(
                    "req-3",
                    content=_sized("Now prefers English everywhere. " + CONTENT, CONTENT_CHARS),
                )
            ),
        ).memory
    ops["governed_write_superseding"] = summarize(
        calls,
        "POST with the canonical key of a live fact: reads the pointer, chain head and "
        "current version; the transaction also moves the chain head by compare-and-set "
        "and marks the old version superseded",
    )
    clock.tick()
    sync("indexer_after_superseding_write", "its stream records to the indexer")

    _log("correction")
    patch = MemoryPatch(
        expected_version=newer.version,
        content=_sized(
            "Corrected: prefers English everywhere except Chinese design notes. " + CONTENT,
            CONTENT_CHARS,
        ),
    )
    with rec.during("correction") as calls:
        corrected = memory.correct(u1, "u-1", newer.memory_id, patch)
    ops["correction"] = summarize(
        calls,
        "PATCH /v1/subjects/{id}/memories/{memory_id}: resolve (version, chain head, subject "
        "epoch), then one transaction: new version, chain head compare-and-set, pointer, old "
        "version superseded, subject-epoch check, audit event",
    )
    clock.tick()
    sync("indexer_after_correction", "its stream records to the indexer")

    # -- delete and purge
    _log("delete (request path) and purge tasks")
    stand_in = _StepFunctionsStandIn()
    memory.purge = stand_in
    with rec.during("delete_request") as calls:
        job = memory.delete(u1, "u-1", corrected.memory_id)
    ops["delete_request"] = summarize(
        calls,
        "DELETE /v1/subjects/{id}/memories/{memory_id} up to its 202: locate, re-read chain, "
        "epoch, current version and pointer, one transaction (tombstone the chain head, mark "
        "the current version deleted, release the pointer, deletion job, deletion log, "
        "audit event), start the purge (Step Functions; no DynamoDB), read the job back",
    )
    clock.tick()
    sync("indexer_after_delete", "the tombstone's stream records to the indexer")

    assert stand_in.started == [(tenant, job.deletion_id)]
    events = [{"action": BEGIN}]
    events += [{"action": STEP, "copy": step.copy} for step in PURGE_PIPELINE]
    events += [{"action": FINISH}]
    tasks: dict[str, Any] = {}
    purge_calls: list[Call] = []
    for event in events:
        name = event["action"] + (f":{event['copy']}" if "copy" in event else "")
        with rec.during(f"purge.{name}") as calls:
            answer = handle(
                {**event, "tenant_id": tenant, "deletion_id": job.deletion_id}, services.purge
            )
        tasks[name] = {k: v for k, v in summarize(calls).items() if k != "calls"} | {
            "calls": [{"api": c.api, "items": [i.as_dict() for i in c.items]} for c in calls]
        }
        purge_calls += calls
        clock.tick()
    assert answer["status"] == "COMPLETED", answer
    total = summarize(purge_calls)
    ops["purge"] = {
        "description": "the purge pipeline's Step Functions tasks (memvault.handlers.purge, one "
        "per state: begin, one per step, finish) for that memory's chain of three versions "
        "(the first write, the superseding write, the correction), in-process",
        "calls_by_api": total["calls_by_api"],
        "wru": total["wru"],
        "rru": total["rru"],
        "wru_by_item": total["wru_by_item"],
        "failed_calls": total["failed_calls"],
        "tasks": tasks,
    }
    sync("indexer_after_purge", "the purge's stream records to the indexer")

    # -- recall
    _log("recall")
    with rec.during("recall") as calls:
        result = services.recall.recall(
            u2,
            "u-2",
            RecallRequest(
                query="which language for internal technical documents and travel notes",
                scope=SCOPE,
                limit=10,
            ),
        )
    ops["recall"] = summarize(
        calls,
        "POST /v1/subjects/{id}/recall, limit 10, over 30 memories: the re-validation batch "
        "read (subject epoch and the best limit+2 candidates' versions); the candidates "
        "come from the search index (OpenSearch on AWS, not DynamoDB)",
    )
    ops["recall"]["returned"] = len(result.items)
    with rec.during("recall_naming_canonical_key") as calls:
        result = services.recall.recall(
            u2,
            "u-2",
            RecallRequest(query="remind me of travel-note-0 before I book", scope=SCOPE, limit=10),
        )
    ops["recall_naming_canonical_key"] = summarize(
        calls,
        "a recall whose query names a canonical key: one more batch read of the pointers "
        "(the slug under each memory kind), then the re-validation batch read",
    )
    ops["recall_naming_canonical_key"]["returned"] = len(result.items)
    ops["governed_write"]["memory_version_anatomy"] = anatomy
    return ops


def _anatomy(item: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """Where a stored item's bytes go: names against values, the largest attributes."""
    names = sum(len(k.encode()) for k in item)
    per = {k: len(k.encode()) + value_size(v) for k, v in item.items()}
    return {
        "bytes": item_size(item),
        "attributes": len(item),
        "attribute_name_bytes": names,
        "value_bytes": item_size(item) - names,
        "largest_attributes": dict(sorted(per.items(), key=lambda kv: -kv[1])[:8]),
    }


def _target(ops: dict[str, Any]) -> dict[str, Any]:
    write = ops["governed_write"]
    follow = ops["indexer_after_write"]
    items = [i for c in write["calls"] for i in c["items"] if i.get("wru")]
    non_tx = sum(write_units(i["billed_bytes"]) for i in items)
    small = sum(i["billed_bytes"] <= WRITE_UNIT_BYTES for i in items)
    checks = [i for c in write["calls"] for i in c["items"] if i["action"] == "ConditionCheck"]
    measured = write["wru"]
    return {
        "goal_wru_per_governed_write": TARGET_WRU_PER_GOVERNED_WRITE,
        "measured_wru_request_path": measured,
        "measured_wru_with_index_status_update": measured + follow["wru"],
        "meets_goal": measured <= TARGET_WRU_PER_GOVERNED_WRITE,
        "breakdown": [
            {k: i[k] for k in ("action", "table", "what", "billed_bytes", "wru")} for i in items
        ]
        + [
            {
                "action": "Update (indexer, async)",
                "table": "memory",
                "what": "memory version index_status",
                "wru": follow["wru"],
            }
        ],
        "why": (
            f"{len(items)} item writes in one TransactWriteItems ({small} of them within "
            "1 KB), each at 2 WRU per started KB (a transaction bills prepare and commit); "
            f"{len(checks)} ConditionCheck(s) ({', '.join(i['what'] for i in checks)}) "
            f"add {sum(i['rru'] for i in checks):g} read units, no write units"
        ),
        "same_writes_outside_a_transaction_wru": non_tx,
    }


def run() -> dict[str, Any]:
    """The "Write cost" section: request units per operation, measured on moto."""
    import os
    from unittest import mock

    import boto3
    from moto import mock_aws

    from memvault.config import Settings
    from memvault.embeddings.hashing import HashingEmbedder
    from memvault.handlers.indexer import handle
    from memvault.indexing.indexer import Indexer
    from memvault.search.embedded import EmbeddedIndex
    from memvault.storage.dynamodb.tables import create_tables, table_names
    from memvault.wiring import build_services
    from memvault_local.stream_pump import StreamPump

    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_SESSION_TOKEN": "testing",
        "AWS_DEFAULT_REGION": "us-east-1",
        # moto answers DynamoDB Streams only on the classic endpoint.
        "AWS_ACCOUNT_ID_ENDPOINT_MODE": "disabled",
    }
    prefix = "wc-"
    with _stdout_kept_clean(), mock.patch.dict(os.environ, env), mock_aws():
        os.environ.pop("AWS_PROFILE", None)
        inspector = boto3.client("dynamodb", region_name="us-east-1")
        create_tables(inspector, prefix)
        client = boto3.client("dynamodb", region_name="us-east-1")
        rec = Recorder(client, inspector, prefix)
        settings = Settings(
            store="dynamodb",
            table_prefix=prefix,
            artifacts_bucket=f"{prefix}artifacts",
            embedding_model="hashing",
            purge_state_machine_arn=None,
            purge_launch="inline",
        )
        embedder = HashingEmbedder()
        index = EmbeddedIndex(f"write-cost--{embedder.slug}")
        index.ensure()
        clock = _Clock()
        services = build_services(
            settings, client=client, clock=clock, ids=_Ids(), search=index, embedder=embedder
        )
        services.purge.sleep = lambda seconds: None
        indexer = Indexer(index, embedder, services.stores.memory, clock)
        pump = StreamPump(
            client,
            boto3.client("dynamodbstreams", region_name="us-east-1"),
            table_names(prefix)["memory"],
            lambda event: handle(event, indexer),
            backoff_seconds=0.0,
        )
        ops = _scenario(rec, services, pump, index, clock)
        tables = {
            shape.logical: {
                "global_secondary_indexes": [
                    {"name": i.name, "keys": list(i.keys), "projection": i.projection}
                    for i in shape.indexes
                ],
                "local_secondary_indexes": shape.local_indexes,
                "stream": shape.stream,
            }
            for shape in rec.tables.values()
        }
        control = dict(rec.control_plane)

    write, recall = ops["governed_write"], ops["recall"]
    follow = ops["indexer_after_write"]
    return {
        "method": "memvault's services and DynamoDB adapter on moto (in-process mock_aws); "
        "every DynamoDB call captured by a botocore hook on the client; units computed by "
        "DynamoDB's published rules from the items as moto stores them (read before and "
        "after each write with an uninstrumented client), never from moto's figures",
        "rules": {
            "item_size": "DynamoDB item sizes and formats",
            "units": "DynamoDB read and write operations",
            "transactions": "Amazon DynamoDB Transactions: How it works (capacity "
            "management for transactions); ConditionCheck billed as a transactional read",
            "gsi": "Global secondary indexes: provisioned throughput considerations",
            "not_billed": "control-plane calls, Streams reads by Lambda, TTL deletions",
        },
        "memory_shape": {
            "content_chars": len(CONTENT),
            "tags": TAGS,
            "source": SOURCE,
            "scope": SCOPE,
            "kind": "semantic",
            "canonical_key": "preferred-language",
        },
        "summary": {name: {"wru": op["wru"], "rru": op["rru"]} for name, op in ops.items()},
        "tables": tables,
        "control_plane_calls": control,
        "operations": ops,
        "target": _target(ops),
        "prices": PRICES,
        "cost": {
            "per_1000_governed_writes_usd": _usd(write["wru"], write["rru"], 1000),
            "per_1000_governed_writes_with_index_status_usd": _usd(
                write["wru"] + follow["wru"], write["rru"] + follow["rru"], 1000
            ),
            "per_1000_recalls_usd": _usd(recall["wru"], recall["rru"], 1000),
            "per_1000_recalls_note": "DynamoDB re-validation only; the search itself is "
            "the OpenSearch line",
            "opensearch_monthly": _opensearch_monthly(),
            "not_included": "Lambda, API Gateway, embeddings (Bedrock), storage, "
            "Step Functions state transitions",
        },
    }
