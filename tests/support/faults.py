"""Fault injection for the write → change feed → indexer → index → recall → purge path.

Everything here is driven by one ``random.Random`` (or a plan drawn from one), so a seed
replays exactly; nothing reads the wall clock or the process's own randomness.

- :class:`Crash` is a process dying at a named point. It derives from ``BaseException``
  so that no ``except Exception`` in production code can swallow it, as none can swallow
  a ``kill -9``: open SQLite transactions roll back on the way out, and the harness then
  drops every in-memory object and reopens the component from its files.
- :class:`CrashPlan` names the points and the hit (1st, 2nd... pass) at which each
  crashes. Hits are counted across restarts, so one planned crash happens once.
- :class:`FaultyIndex` wraps a search index: a bulk request fails outright, fails some of
  its items (the others are written, as an OpenSearch ``_bulk`` answer with per-item
  errors), or is written and then reported failed (the invocation died after the write).
- :class:`Delivery` sits between the change feed's pump and the indexer: it shuffles each
  batch, adds duplicates of records already delivered, holds some records back and hands
  them over later (after newer records of the same chain, and after the clock has moved
  more than OpenSearch's ``index.gc_deletes``), as a retried or bisected batch, or a
  second consumer of another shard, does on AWS.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from memvault.clock import Clock
from memvault.indexing.indexer import BatchOutcome, Indexer, op_from_change
from memvault.search.backend import FAILED, OpResult, SearchFilter, SearchIndex, SearchResult
from memvault.search.documents import IndexOp
from memvault.storage.ports.changes import Change

#: OpenSearch's default ``index.gc_deletes``: how long a deleted document's version is kept.
GC_DELETES_SECONDS = 60


class Crash(BaseException):
    """The process died at ``point`` (not an ``Exception``: nothing may catch it)."""

    def __init__(self, point: str) -> None:
        super().__init__(point)
        self.point = point


class CrashPlan:
    """Crash at the ``n``-th pass through a point, for each (point, n) planned."""

    def __init__(self, plan: dict[str, set[int]] | None = None) -> None:
        self.plan = {k: set(v) for k, v in (plan or {}).items()}
        self.hits: Counter[str] = Counter()
        self.crashed: Counter[str] = Counter()
        self.armed = True

    def point(self, name: str) -> None:
        self.hits[name] += 1
        if self.armed and self.hits[name] in self.plan.get(name, ()):
            self.crashed[name] += 1
            raise Crash(name)

    @property
    def crashes(self) -> int:
        return sum(self.crashed.values())


@dataclass
class IndexFaults:
    """Per-request probabilities of a bulk request's failure modes."""

    request: float = 0.0  # the request fails before anything is written
    item: float = 0.0  # each item fails on its own (the rest are written)
    after_write: float = 0.0  # written, then the answer is lost


class FaultyIndex:
    """A search index whose bulk writes fail as a loaded node's do, and which can crash
    the process right after a write (before the indexer records or acknowledges it)."""

    def __init__(
        self, inner: SearchIndex, rng: random.Random, faults: IndexFaults, plan: CrashPlan
    ) -> None:
        self.inner = inner
        self.rng = rng
        self.faults = faults
        self.plan = plan
        self.name = inner.name
        self.remote = inner.remote
        self.counts: Counter[str] = Counter()

    def apply(self, ops: Sequence[IndexOp]) -> list[OpResult]:
        if not ops:
            return self.inner.apply(ops)
        if self.rng.random() < self.faults.request:
            self.counts["failed_requests"] += 1
            raise ConnectionError("bulk request timed out")
        failing = [self.rng.random() < self.faults.item for _ in ops]
        written = self.inner.apply([op for op, bad in zip(ops, failing, strict=True) if not bad])
        self.plan.point("index.apply.after")
        answers = iter(written)
        results = []
        for op, bad in zip(ops, failing, strict=True):
            if bad:
                self.counts["failed_items"] += 1
                results.append(OpResult(op, FAILED, "es_rejected_execution_exception"))
            else:
                results.append(next(answers))
        if self.rng.random() < self.faults.after_write:
            self.counts["lost_answers"] += 1
            raise ConnectionError("invocation ended after the bulk write")
        return results

    def search(
        self, flt: SearchFilter, text: str, vector: Sequence[float] | None, k: int
    ) -> SearchResult:
        return self.inner.search(flt, text, vector, k)

    def get(self, tenant_id: str, chain_id: str) -> tuple[int, dict[str, Any]] | None:
        return self.inner.get(tenant_id, chain_id)

    def documents(self, tenant_id: str) -> dict[str, tuple[int, dict[str, Any]]]:
        return self.inner.documents(tenant_id)

    def ensure(self) -> None:
        self.inner.ensure()

    def refresh(self) -> None:
        self.inner.refresh()


class CrashingStore:
    """The indexer's handle on the memory store: may crash right after the index status
    is recorded (the index written, the feed not yet acknowledged)."""

    def __init__(self, inner: Any, plan: CrashPlan) -> None:
        self.inner = inner
        self.plan = plan

    def record_index_statuses(self, updates: Any) -> Any:
        done = self.inner.record_index_statuses(updates)
        self.plan.point("indexer.status.after")
        return done

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class CrashingRepo:
    """The services' memory store: may crash before a write's transaction, or after it
    committed and before the caller heard (the acknowledgement is lost)."""

    def __init__(self, inner: Any, plan: CrashPlan) -> None:
        self.inner = inner
        self.plan = plan

    def commit_version(self, new: Any) -> None:
        self.plan.point("store.commit.before")
        self.inner.commit_version(new)
        self.plan.point("store.commit.after")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class CrashingLauncher:
    """The purge launcher: may crash after the tombstone and job committed, before the
    purge started."""

    def __init__(self, inner: Any, plan: CrashPlan) -> None:
        self.inner = inner
        self.plan = plan

    def launch(self, tenant_id: str, deletion_id: str, *, resume: bool = False) -> None:
        self.plan.point("delete.launch.before")
        self.inner.launch(tenant_id, deletion_id, resume=resume)


class CrashingStep:
    """One purge step: may crash before it runs, or after it ran and before the runner
    recorded its copy's status (so a resume runs it again)."""

    def __init__(self, inner: Any, plan: CrashPlan) -> None:
        self.inner = inner
        self.copy = inner.copy
        self.plan = plan

    def run(self, job: Any) -> Any:
        self.plan.point(f"purge.{self.copy}.before")
        result = self.inner.run(job)
        self.plan.point(f"purge.{self.copy}.after")
        return result


class CrashingFeed:
    """The local outbox feed: may crash before the pump moves its durable cursor."""

    def __init__(self, inner: Any, plan: CrashPlan) -> None:
        self.inner = inner
        self.plan = plan

    def read(self, consumer: str, limit: int) -> list[Change]:
        return list(self.inner.read(consumer, limit))

    def acknowledge(self, consumer: str, position: str) -> None:
        self.plan.point("feed.ack.before")
        self.inner.acknowledge(consumer, position)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class SeededIds:
    """Memory, chain and deletion ids from the seed, so a replay names the same things."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng

    def new_id(self, prefix: str) -> str:
        return f"{prefix}_{self.rng.getrandbits(128):032x}"


# --------------------------------------------------------------------------- delivery


@dataclass
class Held:
    """A record held back (or a copy of one), handed to the indexer at ``due``."""

    change: Change
    due: float
    why: str  # "deferred" (its only delivery), "late-copy", "replay"


@dataclass
class DeliveryOdds:
    defer: float = 0.0  # the record's only delivery comes later
    late_copy: float = 0.0  # delivered now, and a copy later
    duplicate: float = 0.0  # per batch: how many old records to mix in, on average
    short_delay: tuple[float, float] = (1.0, 45.0)
    long_delay: tuple[float, float] = (GC_DELETES_SECONDS + 1.0, 400.0)
    long_share: float = 0.5


@dataclass
class Delivery:
    """Between the feed's pump and the indexer. ``process`` is what the pump calls (for a
    DynamoDB stream, through the stream handler); held records go to ``release``.

    ``indexer`` is swapped on every restart; ``held`` and ``seen`` are not: they are
    records in flight outside the process that crashed (another shard's consumer, a
    retried invocation), which is what makes them arrive late."""

    rng: random.Random
    clock: Clock
    odds: DeliveryOdds
    indexer: Indexer | None = None
    #: Called with each change the indexer took (not failed), and when it was delivered.
    on_delivered: Callable[[Change, str], None] | None = None
    held: list[Held] = field(default_factory=list)
    seen: list[Change] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)

    def _now(self) -> float:
        return self.clock.now().timestamp()

    def _delay(self) -> float:
        long = self.rng.random() < self.odds.long_share
        lo, hi = self.odds.long_delay if long else self.odds.short_delay
        return self.rng.uniform(lo, hi)

    def hold(self, change: Change, why: str, delay: float | None = None) -> None:
        self.held.append(
            Held(change, self._now() + (self._delay() if delay is None else delay), why)
        )
        self.counts[why] += 1

    def process(self, changes: Sequence[Change], unreadable: Sequence[str] = ()) -> BatchOutcome:
        now_batch: list[Change] = []
        for change in changes:
            roll = self.rng.random()
            if roll < self.odds.defer:
                self.hold(change, "deferred")
                continue
            now_batch.append(change)
            if roll < self.odds.defer + self.odds.late_copy:
                self.hold(change, "late-copy")
        extra = 0
        while self.seen and self.rng.random() < self.odds.duplicate / (1 + self.odds.duplicate):
            now_batch.append(self.rng.choice(self.seen))
            extra += 1
        self.counts["duplicates"] += extra
        if len(now_batch) > 1:
            before = [c.position for c in now_batch]
            self.rng.shuffle(now_batch)
            if [c.position for c in now_batch] != before:
                self.counts["reordered_batches"] += 1
        self.seen.extend(changes)
        del self.seen[:-500]
        return self._deliver(now_batch, unreadable, "feed")

    def _deliver(
        self, changes: Sequence[Change], unreadable: Sequence[str], how: str
    ) -> BatchOutcome:
        assert self.indexer is not None
        outcome = self.indexer.process(list(changes), unreadable)
        failed = set(outcome.failed_sequence_numbers)
        self.counts["deliveries"] += len(changes)
        if self.on_delivered is not None:
            for change in changes:
                if change.position not in failed:
                    self.on_delivered(change, how)
        return outcome

    def release(self, *, everything: bool = False) -> int:
        """Hand over the held records that are due (or all), in small random batches; a
        failed one is held again briefly. Returns how many were taken."""
        now = self._now()
        ready = [h for h in self.held if everything or h.due <= now]
        self.rng.shuffle(ready)
        taken = 0
        while ready:
            size = self.rng.randint(1, 4)
            group, ready = ready[:size], ready[size:]
            try:
                outcome = self._deliver([h.change for h in group], (), "held")
                failed = set(outcome.failed_sequence_numbers)
            except Exception:  # the whole invocation failed: every record comes again
                failed = {h.change.position for h in group}
            for h in group:
                if h.change.position in failed:
                    h.due = now + self.rng.uniform(1.0, 20.0)
                    self.counts["held_retries"] += 1
                else:
                    self.held.remove(h)
                    taken += 1
        return taken

    def live_records_of(self, chain_ids: Iterable[str]) -> list[Change]:
        """Records already delivered that would index a live document of these chains."""
        wanted = set(chain_ids)
        out = []
        for change in self.seen:
            try:
                op = op_from_change(change)
            except (KeyError, ValueError, TypeError):
                continue
            if op is not None and op.live and op.chain_id in wanted:
                out.append(change)
        return out
