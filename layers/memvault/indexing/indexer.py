"""The indexer: the memory store's changes in, index writes and index status out.

For one batch: each record becomes at most one index op (documents.py); ops for the same
chain collapse to the newest; live documents are embedded in one call (and those holding
Chinese once more by the Chinese model, where there is one); everything is
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

from memvault.clock import Clock
from memvault.embeddings import Embedder, model_names
from memvault.observability import logger
from memvault.search.backend import APPLIED, FAILED, OpResult, SearchIndex
from memvault.search.documents import IndexOp, op_from_images
from memvault.search.language import resolve
from memvault.storage.ports.changes import Change
from memvault.storage.ports.memory import IndexStatusUpdate, MemoryStore
from memvault_wire.memory import IndexStatus


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


def op_from_change(change: Change) -> IndexOp | None:
    """One change of the feed as an index op."""
    new = dict(change.new) if change.new is not None else None
    old = dict(change.old) if change.old is not None else None
    op = op_from_images(change.kind.value, new, old)
    if op is None:
        return None
    return dataclasses.replace(op, origin=change.position)


class Indexer:
    def __init__(
        self,
        index: SearchIndex,
        embedder: Embedder,
        store: MemoryStore,
        clock: Clock,
        *,
        chinese: Embedder | None = None,
    ) -> None:
        self.index = index
        self.embedder = embedder
        self.store = store
        self.clock = clock
        #: The Chinese model (``embedding_model_zh``): memories that hold Chinese get its
        #: vector too (``search.language``).
        self.chinese = chinese

    def process(self, changes: Sequence[Change], unreadable: Sequence[str] = ()) -> BatchOutcome:
        """Index a batch of changes; ``unreadable`` names the positions of records the
        feed's adapter could not read (reported back as failures)."""
        outcome = BatchOutcome(records=len(changes) + len(unreadable))
        outcome.failed_sequence_numbers.extend(unreadable)
        ops: list[IndexOp] = []
        for change in changes:
            try:
                op = op_from_change(change)
            except (KeyError, ValueError, TypeError) as err:
                # A record we cannot read is a poison record: report it, never crash the
                # batch (the event source bisects, then sends it to the failure queue).
                seq = change.position
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
        self._record_statuses(
            [r.op for r in results if r.op.live and r.outcome != FAILED], IndexStatus.INDEXED
        )
        return results

    def _embed(self, ops: list[IndexOp]) -> list[IndexOp]:
        live = [op for op in ops if op.live and op.document is not None]
        if not live:
            return ops
        docs = [op.document for op in live if op.document]
        texts = [doc.content for doc in docs]
        vectors = self.embedder.embed(texts)
        chinese: dict[int, list[float]] = {}
        if self.chinese is not None:
            routed = [i for i, doc in enumerate(docs) if resolve(doc.content, doc.language) == "zh"]
            if routed:
                chinese = self._chinese_vectors(routed, texts)
        filled: dict[int, IndexOp] = {}
        for i, (op, vector) in enumerate(zip(live, vectors, strict=True)):
            assert op.document is not None
            doc = dataclasses.replace(
                op.document,
                embedding=vector,
                model_id=self.embedder.model_id,
                model_version=self.embedder.model_version,
                embedding_zh=chinese.get(i),
            )
            filled[id(op)] = dataclasses.replace(op, document=doc)
        return [filled.get(id(op), op) for op in ops]

    def _chinese_vectors(self, routed: list[int], texts: list[str]) -> dict[int, list[float]]:
        """The Chinese model's vectors of ``texts[i]`` for each ``i`` in ``routed``; none
        when it fails. The batch is written without them, its memories recalled through
        the English vectors like any other, rather than the whole batch (English memories
        and tombstones too) failing with it; ``memvault reindex`` fills them in later."""
        assert self.chinese is not None
        try:
            found = self.chinese.embed([texts[i] for i in routed])
        except Exception as err:
            logger.warning(
                "chinese embedding failed; indexed without it",
                extra={"documents": len(routed), "error": type(err).__name__},
            )
            return {}
        return dict(zip(routed, found, strict=True))

    def _record_statuses(self, ops: list[IndexOp], status: IndexStatus) -> None:
        """Set ``index_status`` on each version only while it is still what was indexed
        (a version that moved on, or is gone, gets its newer event indexed instead)."""
        model = model_names(self.embedder)
        # A memory that holds Chinese was embedded by the Chinese model too: both are named.
        both = model_names(self.embedder, self.chinese) if self.chinese is not None else model
        now = self.clock.now()
        updates = []
        for op in ops:
            assert op.document is not None
            updates.append(
                IndexStatusUpdate(
                    tenant_id=op.tenant_id,
                    subject_id=op.subject_id,
                    memory_id=op.memory_id,
                    status=op.document.status,
                    version=op.memory_version,
                    indexed_version=op.version,
                    embedding_model=model if op.document.embedding_zh is None else both,
                    at=now,
                    index_status=status.value,
                )
            )
        self.store.record_index_statuses(updates)
