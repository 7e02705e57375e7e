"""Rebuild an index from the memory table, the source of truth (``memvault reindex``).

The store is read page by page (``MemoryStore.rebuild_records``: a large store streams
rather than loads); every memory version becomes the same op the stream would have
produced for its current state, and the ops go through the indexer's bulk path. External
versions make a rebuild safe to run while the stream indexer writes to the same index.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from memvault.indexing.indexer import Indexer
from memvault.search.backend import APPLIED, FAILED
from memvault.search.documents import IndexOp, op_from_item

Progress = Callable[[int], None]


@dataclass
class RebuildReport:
    scanned: int = 0
    written: int = 0
    stale: int = 0
    failed: int = 0


def rebuild(
    indexer: Indexer,
    items: Iterator[dict[str, Any]],
    *,
    batch: int = 64,
    progress: Progress | None = None,
) -> RebuildReport:
    report = RebuildReport()
    pending: list[IndexOp] = []

    def flush() -> None:
        for result in indexer.write(pending):
            if result.outcome == APPLIED:
                report.written += 1
            elif result.outcome == FAILED:
                report.failed += 1
            else:
                report.stale += 1
        if progress is not None:
            progress(len(pending))
        pending.clear()

    for item in items:
        report.scanned += 1
        op = op_from_item(item)
        if op is None:
            continue
        pending.append(op)
        if len(pending) >= batch:
            flush()
    if pending:
        flush()
    return report
