"""The index converges to the table whatever the stream does: duplicates, reordering,
failing writes and crashes between the index write and the status write.

The records are the ones moto's DynamoDB stream produced for a real workload (writes,
corrections, confirmations, deletes, a forget). They are then delivered to the real
indexer handler in shuffled, duplicated batches, through an index that fails some bulk
requests, with the event source's retry rule (resume from the lowest failed record).
Afterwards every chain's document is checked against the memory table itself, by an
oracle that reads the table's rows and applies the documented rules, not the indexer's
own document builders.

moto keeps the per-item order of stream records but does not reorder them; reordering is
what this harness adds, since a retried or bisected batch, or a second consumer, can
deliver an older record after a newer one on AWS.
"""

from __future__ import annotations

import random
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pytest
from moto import mock_aws

from memvault.embeddings.hashing import HashingEmbedder
from memvault.handlers.indexer import handle
from memvault.indexing.indexer import Indexer
from memvault.search.backend import OpResult, SearchIndex
from memvault.search.documents import IndexOp
from memvault.search.embedded import EmbeddedIndex
from memvault.storage.dynamodb.dynamo import Dynamo, from_item
from memvault.storage.dynamodb.memory import DynamoMemoryStore
from memvault.wiring import table_names
from memvault_wire.memory import MemoryPatch
from tests.support.harness import a_write, ctx
from tests.support.recall import RecallRig, make_rig

EMBEDDER = HashingEmbedder()


class FlakyIndex:
    """Fails a share of bulk requests outright, as a node under pressure would."""

    def __init__(self, inner: SearchIndex, rng: random.Random, rate: float) -> None:
        self.inner = inner
        self.rng = rng
        self.rate = rate
        self.name = inner.name
        self.failures = 0

    def apply(self, ops: Sequence[IndexOp]) -> list[OpResult]:
        roll = self.rng.random()
        if roll < self.rate:
            self.failures += 1
            raise ConnectionError("bulk request timed out")
        results = self.inner.apply(ops)
        if roll < self.rate * 1.5:
            # Written, then the function died before recording index status.
            self.failures += 1
            raise ConnectionError("invocation ended after the bulk write")
        return results

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


@pytest.fixture(scope="module")
def workload() -> Iterator[tuple[RecallRig, list[dict[str, Any]]]]:
    """Made once for the module: every test only reads the table and delivers copies of
    the records to an index of its own."""
    with mock_aws():
        rig = make_rig("embedded", EMBEDDER, prefix="cv-")
        records: list[dict[str, Any]] = []
        rig.pump.handler = lambda event: (records.extend(event["Records"]), {})[1]
        _run_workload(rig)
        rig.pump.drain()
        yield rig, records


def _run_workload(rig: RecallRig) -> None:
    memory = rig.services.memory
    made = []
    for i in range(24):
        subject = f"u-{i % 3}"
        body = a_write(
            request_id=uuid.uuid4().hex,
            content=f"fact number {i} about topic {i % 5}",
            canonical_key=f"fact-{i % 8}" if i % 2 else None,
            scope={} if i % 3 else {"workspace": "w1"},
            source={"type": "model_inferred" if i % 7 == 0 else "user_statement", "ref": "r"},
        )
        made.append((subject, memory.write(ctx("acme", subject), subject, body).memory))
    for subject, m in made[::3]:
        memory.correct(
            ctx("acme", subject),
            subject,
            m.memory_id,
            MemoryPatch(
                expected_version=m.version, content=m.content + " (corrected)", status="active"
            ),
        )
    for subject, m in made[1::5]:
        memory.delete(ctx("acme", subject), subject, m.memory_id)
    memory.forget(ctx("acme", "u-2"), "u-2")


def _deliver(handler: Any, records: list[dict[str, Any]], rng: random.Random) -> int:
    """Random batches; a failed batch is retried from its lowest failed record."""
    attempts = 0
    queue = list(records)
    while queue:
        batch = queue[: rng.randint(1, 12)]
        attempts += 1
        try:
            failed = {f["itemIdentifier"] for f in handler({"Records": batch})["batchItemFailures"]}
        except ConnectionError:
            continue  # the whole invocation failed: the same batch comes again
        seqs = [r["dynamodb"]["SequenceNumber"] for r in batch]
        first = min((i for i, s in enumerate(seqs) if s in failed), default=len(batch))
        queue = queue[first:] if failed else queue[len(batch) :]
        assert attempts < 10_000
    return attempts


#: The life stages in their documented order (docs/recall.md, indexing): a chain's
#: document carries the external version ``memory version * 8 + stage``. Written out
#: here, not imported, so that the oracle does not share the code it checks.
STAGE = {
    name: n
    for n, name in enumerate(
        ("candidate", "active", "superseded", "expired", "deleted", "purged", "removed"),
        start=1,
    )
}
LIVE = ("candidate", "active")


@dataclass(frozen=True)
class Expected:
    #: The document's external version.
    version: int
    #: Fields the document must hold, with their values.
    body: dict[str, Any]


def _expected(rig: RecallRig) -> dict[str, Expected]:
    """From the memory table's rows and the documented rules alone, never from the code
    under test: per chain, its current version's document when the chain is live and
    that version active or a candidate; otherwise an ids-only tombstone at the current
    version's stage (a purged version's row keeps ids only: its stage is ``purged``)."""
    client = rig.client
    name = table_names(rig.settings)["memory"]
    items = [from_item(i) for i in client.scan(TableName=name)["Items"]]
    rows = {i["memory_id"]: i for i in items if str(i["sk"]).startswith("MEM#")}
    expected: dict[str, Expected] = {}
    for chain in items:
        if not str(chain["sk"]).startswith("CHAIN#"):
            continue
        tenant_id, subject_id = str(chain["pk"]).split("#", 1)
        version = int(chain["current_version"])
        row = rows[chain["current_memory_id"]]
        if row["type"] == "memory-tombstone":
            stage = "purged"
        else:
            assert row["type"] == "memory" and int(row["version"]) == version, row
            stage = str(row["status"])
        ids = {
            "chain_id": chain["chain_id"],
            "memory_id": chain["current_memory_id"],
            "tenant_id": tenant_id,
            "subject_id": subject_id,
            "memory_version": version,
            "status": stage,
        }
        if chain["state"] == "live" and stage in LIVE:
            body = {
                **ids,
                "doc_type": "memory",
                "kind": row["kind"],
                "canonical_key": row.get("canonical_key"),
                "content": row["content"],
                "tags": list(row.get("tags") or []),
                "sensitivity": row["sensitivity"],
                "visibility": list(row.get("visibility") or []),
                "source_type": row["source_type"],
                "content_hash": row["content_hash"],
                "model_id": EMBEDDER.model_id,
            }
        else:
            body = {**ids, "doc_type": "tombstone"}
        expected[chain["chain_id"]] = Expected(version * 8 + STAGE[stage], body)
    return expected


@pytest.mark.parametrize("seed", range(6))
def test_the_index_converges_under_duplicates_reordering_and_failures(
    workload: tuple[RecallRig, list[dict[str, Any]]], seed: int
) -> None:
    rig, records = workload
    rng = random.Random(seed)
    delivered = records + rng.sample(records, len(records) // 3)  # a third duplicated
    rng.shuffle(delivered)
    index = FlakyIndex(EmbeddedIndex(f"cv-{seed}"), rng, rate=0.25)
    indexer = Indexer(
        index, EMBEDDER, DynamoMemoryStore(Dynamo(rig.client, table_names(rig.settings))), rig.clock
    )  # type: ignore[arg-type]

    attempts = _deliver(lambda e: handle(e, indexer), delivered, rng)

    assert index.failures > 0 and attempts > index.failures
    docs = index.documents("acme")
    expected = _expected(rig)
    # Not vacuous: the workload leaves active, candidate and purged chains behind.
    assert {w.body["status"] for w in expected.values()} >= {"active", "candidate", "purged"}
    for chain_id, want in expected.items():
        held = docs.get(chain_id)
        # Every chain was indexed once, so a chain that left life keeps a tombstone: a
        # missing document is a bug (a late INSERT could bring the memory back).
        assert held is not None, f"{chain_id}: no document"
        version, body = held
        assert version == want.version, (chain_id, version, want)
        assert {k: body.get(k) for k in want.body} == want.body, chain_id
        if want.body["doc_type"] == "memory":
            vector = EMBEDDER.embed([want.body["content"]])[0]
            assert body["embedding"] == pytest.approx(vector, abs=1e-6), chain_id
        else:
            # Above every live version the chain ever had, and nothing of the content.
            assert version > want.body["memory_version"] * 8 + STAGE["active"], chain_id
            assert "content" not in body and body.get("embedding") is None, chain_id
    assert set(docs) == set(expected)


def test_a_poison_record_is_reported_and_does_not_block_the_rest(
    workload: tuple[RecallRig, list[dict[str, Any]]],
) -> None:
    rig, records = workload
    index = EmbeddedIndex("cv-poison")
    indexer = Indexer(
        index, EMBEDDER, DynamoMemoryStore(Dynamo(rig.client, table_names(rig.settings))), rig.clock
    )
    inserts = [
        r
        for r in records
        if r["eventName"] == "INSERT" and r["dynamodb"]["Keys"]["sk"]["S"].startswith("MEM#")
    ][:3]
    poison = {
        **inserts[1],
        "dynamodb": {
            **inserts[1]["dynamodb"],
            "NewImage": {"sk": {"S": "MEM#x"}, "type": {"S": "memory"}, "status": {"S": "active"}},
        },
    }

    answer = handle({"Records": [inserts[0], poison, inserts[2]]}, indexer)

    assert answer["batchItemFailures"] == [{"itemIdentifier": poison["dynamodb"]["SequenceNumber"]}]
    assert len(index.documents("acme")) == 2
