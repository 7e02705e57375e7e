"""Local stand-in for a Lambda event source mapping on a DynamoDB stream.

It reads the table's stream from moto (shard iterators, ``GetRecords``) and hands the
handler batches shaped as the event source would (``Records`` with ``eventSourceARN``).
Like the mapping configured in the CDK app, it honours ``batchItemFailures`` by
resuming from the lowest failed sequence number, retries a failing batch a bounded
number of times with backoff, and then sends its ids (never its content) to an
on-failure file and moves on, so that one poison record never blocks a shard.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

Handler = Callable[[dict[str, Any]], dict[str, Any]]


@dataclass
class _Shard:
    shard_id: str
    iterator: str | None
    #: Records read but not yet acknowledged by the handler (a failed batch's tail).
    pending: list[dict[str, Any]] = field(default_factory=list)
    attempts: int = 0


class StreamPump:
    def __init__(
        self,
        dynamodb: Any,
        streams: Any,
        table_name: str,
        handler: Handler,
        *,
        batch_size: int = 100,
        max_retries: int = 5,
        on_failure: Path | None = None,
        backoff_seconds: float = 0.2,
    ) -> None:
        self.dynamodb = dynamodb
        self.streams = streams
        self.table_name = table_name
        self.handler = handler
        self.batch_size = batch_size
        self.max_retries = max_retries
        self.on_failure = on_failure
        self.backoff_seconds = backoff_seconds
        self.stream_arn: str | None = None
        self.shards: dict[str, _Shard] = {}
        self.delivered = 0
        self.dropped = 0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._discovered_at = 0.0

    # -------------------------------------------------------------------- shards

    def _discover(self) -> None:
        # Shards change rarely (DynamoDB rolls them about every four hours): look again
        # every few seconds, not on every poll.
        now = time.monotonic()
        if self.shards and now - self._discovered_at < 5.0:
            return
        self._discovered_at = now
        if self.stream_arn is None:
            table = self.dynamodb.describe_table(TableName=self.table_name)["Table"]
            self.stream_arn = table.get("LatestStreamArn")
            if self.stream_arn is None:
                raise RuntimeError(f"table {self.table_name} has no stream enabled")
        described = self.streams.describe_stream(StreamArn=self.stream_arn)["StreamDescription"]
        for shard in described.get("Shards", []):
            sid = shard["ShardId"]
            if sid not in self.shards:
                iterator = self.streams.get_shard_iterator(
                    StreamArn=self.stream_arn, ShardId=sid, ShardIteratorType="TRIM_HORIZON"
                )["ShardIterator"]
                self.shards[sid] = _Shard(sid, iterator)

    def _read(self, shard: _Shard) -> None:
        while shard.iterator is not None and len(shard.pending) < self.batch_size:
            out = self.streams.get_records(
                ShardIterator=shard.iterator, Limit=self.batch_size - len(shard.pending)
            )
            records = out.get("Records", [])
            shard.iterator = out.get("NextShardIterator")
            for record in records:
                record.setdefault("eventSourceARN", self.stream_arn)
            shard.pending.extend(records)
            if not records:
                break

    # --------------------------------------------------------------------- batches

    def poll_once(self) -> int:
        """Deliver at most one batch per shard; the number of records acknowledged."""
        with self._lock:
            self._discover()
            done = 0
            for shard in self.shards.values():
                self._read(shard)
                if shard.pending:
                    done += self._deliver(shard)
            return done

    def drain(self, max_rounds: int = 1000) -> int:
        """Deliver until the stream is read to its end (tests and benchmarks)."""
        total = 0
        for _ in range(max_rounds):
            with self._lock:
                self._discover()
                for shard in self.shards.values():
                    self._read(shard)
                busy = any(s.pending for s in self.shards.values())
            if not busy:
                return total
            total += self.poll_once()
        raise RuntimeError("the stream did not drain")

    def _deliver(self, shard: _Shard) -> int:
        batch = shard.pending[: self.batch_size]
        try:
            answer = self.handler({"Records": batch})
            failed = {f["itemIdentifier"] for f in answer.get("batchItemFailures") or []}
        except Exception:
            failed = {batch[0]["dynamodb"]["SequenceNumber"]}
        if not failed:
            shard.pending = shard.pending[len(batch) :]
            shard.attempts = 0
            self.delivered += len(batch)
            return len(batch)
        # Resume from the lowest failed sequence number, as the event source does.
        seqs = [r["dynamodb"]["SequenceNumber"] for r in batch]
        first = min((i for i, s in enumerate(seqs) if s in failed), default=0)
        acknowledged = first
        shard.pending = shard.pending[first:]
        self.delivered += acknowledged
        shard.attempts += 1
        if shard.attempts > self.max_retries:
            poison = shard.pending.pop(0)
            self._send_to_failure(poison)
            shard.attempts = 0
        else:
            time.sleep(min(self.backoff_seconds * 2 ** (shard.attempts - 1), 2.0))
        return acknowledged

    def _send_to_failure(self, record: dict[str, Any]) -> None:
        self.dropped += 1
        if self.on_failure is None:
            return
        self.on_failure.parent.mkdir(parents=True, exist_ok=True)
        entry = {
            "eventSourceARN": record.get("eventSourceARN"),
            "eventName": record.get("eventName"),
            "SequenceNumber": record["dynamodb"]["SequenceNumber"],
            "Keys": record["dynamodb"].get("Keys"),
        }
        with self.on_failure.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")

    # ---------------------------------------------------------------- background

    def start(self, interval: float = 0.1) -> None:
        def loop() -> None:
            while not self._stop.is_set():
                try:
                    moved = self.poll_once()
                except Exception:
                    moved = 0
                    self._stop.wait(1.0)
                if not moved:
                    self._stop.wait(interval)

        self._thread = threading.Thread(target=loop, name="stream-pump", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
