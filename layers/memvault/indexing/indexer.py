"""The indexer: memory-table stream records in, index writes and index status out.

For one batch: each record becomes at most one index op (documents.py); ops for the same
chain collapse to the newest; live documents are embedded in one call; everything is
written in one bulk request under external versions; then the memory item records
``index_status`` with a condition on its status and version, so an old or slow consumer
never overwrites a newer state. A record whose op could not be written is reported as a
failure (by sequence number), and the event source retries from it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memvault.clock import Clock, iso
from memvault.embeddings import Embedder
from memvault.models.memory import IndexStatus
from memvault.observability import logger
from memvault.search.backend import APPLIED, FAILED, OpResult, SearchIndex
from memvault.search.documents import IndexOp, op_from_images
from memvault.storage import keys
from memvault.storage.dynamo import Dynamo, TransactionConflict, from_item


@dataclass
class BatchOutcome:
    """What one batch did, in ids and counts only."""

    records: int = 0
    ops: int = 0
    applied: int = 0
    stale: int = 0
    skipped: int = 0
    failed_sequence_numbers: list[str] = field(default_factory=list)

    def as_log(self) -> dict[str, Any]:
        return {
            "records": self.records,
            "ops": self.ops,
            "applied": self.applied,
            "stale": self.stale,
            "skipped": self.skipped,
            "failed": len(self.failed_sequence_numbers),
        }


def op_from_record(record: dict[str, Any]) -> IndexOp | None:
    """One raw stream record (the event source's shape) as an index op."""
    ddb = record.get("dynamodb") or {}
    new = from_item(ddb["NewImage"]) if ddb.get("NewImage") else None
    old = from_item(ddb["OldImage"]) if ddb.get("OldImage") else None
    op = op_from_images(str(record.get("eventName")), new, old)
    if op is None:
        return None
    return dataclasses.replace(op, origin=str(ddb.get("SequenceNumber", "")))


class Indexer:
    def __init__(self, index: SearchIndex, embedder: Embedder, db: Dynamo, clock: Clock) -> None:
        self.index = index
        self.embedder = embedder
        self.db = db
        self.clock = clock

    def process(self, records: Sequence[dict[str, Any]]) -> BatchOutcome:
        outcome = BatchOutcome(records=len(records))
        ops: list[IndexOp] = []
        for record in records:
            try:
                op = op_from_record(record)
            except (KeyError, ValueError, TypeError) as err:
                # A record we cannot read is a poison record: report it, never crash the
                # batch (the event source bisects, then sends it to the failure queue).
                seq = str((record.get("dynamodb") or {}).get("SequenceNumber", ""))
                logger.error(
                    "unreadable stream record",
                    extra={"sequence_number": seq, "error": type(err).__name__},
                )
                outcome.failed_sequence_numbers.append(seq)
                continue
            if op is None:
                outcome.skipped += 1
            else:
                ops.append(op)
        results = self.write(ops)
        outcome.ops = len(results)
        for result in results:
            if result.outcome == APPLIED:
                outcome.applied += 1
            elif result.outcome == FAILED:
                outcome.failed_sequence_numbers.extend(
                    o.origin or "" for o in ops if o.chain_id == result.op.chain_id
                )
            else:
                outcome.stale += 1
        outcome.failed_sequence_numbers = sorted(set(outcome.failed_sequence_numbers))
        logger.info("index batch", extra=outcome.as_log())
        return outcome

    def write(self, ops: Iterable[IndexOp]) -> list[OpResult]:
        """Newest op per chain, embedded, written in bulk, then index status recorded."""
        newest: dict[tuple[str, str], IndexOp] = {}
        for op in ops:
            held = newest.get((op.tenant_id, op.chain_id))
            if held is None or op.version > held.version:
                newest[(op.tenant_id, op.chain_id)] = op
        chosen = list(newest.values())
        chosen = self._embed(chosen)
        results = self.index.apply(chosen)
        for result in results:
            if result.op.live and result.outcome != FAILED:
                self._record_status(result.op, IndexStatus.INDEXED)
        return results

    def _embed(self, ops: list[IndexOp]) -> list[IndexOp]:
        live = [op for op in ops if op.live and op.document is not None]
        if not live:
            return ops
        vectors = self.embedder.embed([op.document.content for op in live if op.document])
        filled: dict[int, IndexOp] = {}
        for op, vector in zip(live, vectors, strict=True):
            assert op.document is not None
            doc = dataclasses.replace(
                op.document,
                embedding=vector,
                model_id=self.embedder.model_id,
                model_version=self.embedder.model_version,
            )
            filled[id(op)] = dataclasses.replace(op, document=doc)
        return [filled.get(id(op), op) for op in ops]

    def _record_status(self, op: IndexOp, status: IndexStatus) -> None:
        """Set ``index_status`` on the memory item only while it is still what was indexed."""
        assert op.document is not None
        try:
            self.db.update(
                "memory",
                keys.subject_pk(op.tenant_id, op.subject_id),
                keys.version_sk(op.memory_id),
                "SET index_status = :s, indexed_version = :v, embedding_model = :m, "
                "indexed_at = :now",
                names={"#status": "status"},
                values={
                    ":s": status.value,
                    ":v": op.version,
                    ":m": f"{self.embedder.model_id}@{self.embedder.model_version}",
                    ":now": iso(self.clock.now()),
                    ":status": op.document.status,
                    ":version": op.memory_version,
                },
                condition="#status = :status AND version = :version "
                "AND (attribute_not_exists(indexed_version) OR indexed_version <= :v)",
            )
        except TransactionConflict:
            return  # the item moved on (or is gone): its newer event will be indexed
