"""Local stand-in for the Lambda event source mapping: the outbox read with a durable cursor.

It reads the embedded store's outbox (``OutboxFeed``) after the consumer's cursor, hands
the indexer a batch of neutral changes, and moves the cursor past what was done. Like the
mapping configured in the CDK app it resumes from the lowest failed position, retries a
failing batch a bounded number of times with backoff, then writes the failing change's
ids (never its content) to an on-failure file and moves on, so one poison change never
blocks the feed. The cursor lives in the database, so a restart (or a crash) resumes
where the last acknowledged batch ended: a change is delivered at least once, and the
indexer's external versions make a second delivery harmless.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Protocol

from memvault.indexing.indexer import BatchOutcome
from memvault.observability import logger
from memvault.storage.ports.changes import Change
from memvault.storage.sqlite.db import OutboxFeed

CONSUMER = "indexer"


class ChangeHandler(Protocol):
    def process(self, changes: list[Change]) -> BatchOutcome: ...


class OutboxPump:
    def __init__(
        self,
        feed: OutboxFeed,
        handler: ChangeHandler,
        *,
        consumer: str = CONSUMER,
        batch_size: int = 200,
        max_retries: int = 5,
        on_failure: Path | None = None,
        backoff_seconds: float = 0.2,
    ) -> None:
        self.feed = feed
        self.handler = handler
        self.consumer = consumer
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.on_failure = on_failure
        self.backoff_seconds = backoff_seconds
        self.delivered = 0
        self.dropped = 0
        self._attempts = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def poll_once(self) -> int:
        """Deliver at most one batch; the number of changes acknowledged."""
        with self._lock:
            batch = self.feed.read(self.consumer, self.batch_size)
            if not batch:
                return 0
            try:
                failed = set(self.handler.process(batch).failed_sequence_numbers)
            except Exception as err:  # the whole batch failed: retry from its start
                logger.error("index batch failed", extra={"error": type(err).__name__})
                failed = {batch[0].position}
            done = next((i for i, c in enumerate(batch) if c.position in failed), len(batch))
            if done:
                self.feed.acknowledge(self.consumer, batch[done - 1].position)
                self.delivered += done
            if done == len(batch):
                self._attempts = 0
                return done
            self._attempts += 1
            if self._attempts > self.max_retries:
                self._send_to_failure(batch[done])
                self.feed.acknowledge(self.consumer, batch[done].position)
                self._attempts = 0
            else:
                time.sleep(min(self.backoff_seconds * 2 ** (self._attempts - 1), 2.0))
            return done

    def drain(self, max_rounds: int = 10_000) -> int:
        """Deliver until the feed is read to its end (tests and benchmarks)."""
        total = 0
        for _ in range(max_rounds):
            if not self.backlog():
                return total
            total += self.poll_once()
        raise RuntimeError("the change feed did not drain")

    def backlog(self) -> int:
        return self.feed.backlog(self.consumer)

    def _send_to_failure(self, change: Change) -> None:
        self.dropped += 1
        image = change.new or change.old or {}
        logger.error(
            "change dropped after retries",
            extra={"position": change.position, "memory_id": image.get("memory_id")},
        )
        if self.on_failure is None:
            return
        self.on_failure.parent.mkdir(parents=True, exist_ok=True)
        entry = {
            "position": change.position,
            "table": change.table,
            "kind": change.kind.value,
            "tenant_id": image.get("tenant_id"),
            "subject_id": image.get("subject_id"),
            "memory_id": image.get("memory_id"),
            "chain_id": image.get("chain_id"),
        }
        with self.on_failure.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")

    # ---------------------------------------------------------------- background

    def start(self, interval: float = 0.05) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                try:
                    moved = self.poll_once()
                except Exception as err:
                    logger.error("outbox pump failed", extra={"error": type(err).__name__})
                    moved = 0
                    self._stop.wait(1.0)
                if not moved:
                    self._stop.wait(interval)

        self._thread = threading.Thread(target=loop, name="outbox-pump", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
