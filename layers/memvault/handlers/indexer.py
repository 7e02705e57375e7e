"""Lambda handler on the memory table's stream (event source mapping with
``ReportBatchItemFailures``, bisect on error, bounded retries and an on-failure queue).

The batch is written with one bulk request, so the records are handled together rather
than one by one; the answer is the partial-batch-failure shape Powertools' batch
utilities produce (``batchItemFailures`` by sequence number). For a stream the event
source resumes from the lowest failed sequence number, so nothing after a failure is lost.
"""

from __future__ import annotations

from functools import lru_cache
from typing import TYPE_CHECKING, Any

from memvault.observability import logger, metrics, tracer

if TYPE_CHECKING:
    from aws_lambda_powertools.utilities.typing import LambdaContext

    from memvault.indexing.indexer import Indexer


@lru_cache(maxsize=1)
def _indexer() -> Indexer:
    from memvault.wiring import build_indexer

    return build_indexer()


def handle(event: dict[str, Any], indexer: Indexer) -> dict[str, Any]:
    # Imported on first use, as the indexer is built: boto3's (de)serialiser and the
    # models behind it are most of this function's import time.
    from memvault.storage.dynamodb.changes import change_from_record

    changes, unreadable = [], []
    for record in event.get("Records") or []:
        try:
            changes.append(change_from_record(record))
        except (KeyError, ValueError, TypeError):
            unreadable.append(str((record.get("dynamodb") or {}).get("SequenceNumber", "")))
    outcome = indexer.process(changes, unreadable)
    metrics.add_metric(name="IndexApplied", unit="Count", value=outcome.applied)
    metrics.add_metric(name="IndexStale", unit="Count", value=outcome.stale)
    metrics.add_metric(
        name="IndexFailedRecords", unit="Count", value=len(outcome.failed_sequence_numbers)
    )
    return {
        "batchItemFailures": [
            {"itemIdentifier": seq} for seq in outcome.failed_sequence_numbers if seq
        ]
    }


@logger.inject_lambda_context(clear_state=True)
@tracer.capture_lambda_handler(capture_response=False)
@metrics.log_metrics
def handler(event: dict[str, Any], context: LambdaContext) -> dict[str, Any]:
    return handle(event, _indexer())
