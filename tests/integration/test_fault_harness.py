"""A deterministic fault harness for write → change feed → indexer → index → recall → purge.

One integer seed decides everything: the workload (writes, corrections, deletes, subject
forgets, TTL expiry over a few subjects, the fake clock's steps), the change feed's
delivery (batch sizes, reordering, duplicates, records held back and delivered late,
some of them more than ``index.gc_deletes`` (60 s) of fake clock after their chain's
tombstone), the crashes (which point, which pass) and the index's failures (requests
failing whole, bulk items failing one by one, answers lost after the write). Ids come
from the seed too, so a failing seed replays exactly (the same integer gives each target
its own run)::

    MEMVAULT_FAULT_SEED=123 PYTHONPATH=layers:local:. .venv/bin/python -m pytest \\
        'tests/integration/test_fault_harness.py::test_one_seed_on_the_embedded_store[sqlite-seed123]'

``MEMVAULT_FAULT_SEED`` alone runs that seed on both targets; ``MEMVAULT_FAULT_SEEDS=400``
runs seeds 0..399 (the default, 36, keeps the file near half a minute of CPU).

Targets. The embedded SQLite store with its transactional outbox, the outbox pump and the
embedded index on disk (what ``make run`` runs), and, with fewer seeds, the DynamoDB
table on moto with its stream read by the stream pump. The real indexer, purge runner and
services run in both; only the faults and the delivery are the harness's.

Crashes. A crash is :class:`~tests.support.faults.Crash`, a ``BaseException`` that no
production ``except Exception`` may swallow: it unwinds through open transactions (which
roll back), then the harness drops every object of the "process" and reopens it from its
files (SQLite database, embedded index folder; on the DynamoDB target moto's tables and
the event source mapping's position are the cloud's and survive). Crash points: before a
write's transaction; inside a store transaction, after the row and before its outbox
record (sqlite); after the commit, before the caller hears (the acknowledgement is lost,
the client retries with the same request id); after the tombstone and job, before the
purge starts; before and after each purge step (after: the step's work is done, its copy
status not recorded); after the index write, before the indexer records index status or
the feed is acknowledged; after the status, before the acknowledgement. The client
retries the operation it was in (corrections re-read first, as a 409 asks). The seed
also picks how purges launch: inline (a crash in the purge reaches the client, whose
retried delete resumes it) or in the background, as the local stack does by default
(the client has its 202; a crash loses the worker's queue).

Unfinished deletions. A deletion job a crash leaves REQUESTED, BLOCKED or PURGING (its
delete committed, its purge cut short, or queued for the background worker and lost) is
resumed when the process starts: the embedded-store node calls ``resume_unfinished`` on
every open, as the local stack does (``resumed_at_start`` counts them). On the DynamoDB
target the harness plays AWS's part by running the runner itself (``resumed_as_aws_*``):
there Step Functions retries an interrupted task, and the scheduled sweeper starts a
job whose execution never started (``tests/integration/test_purge_sweeper.py``).

gc_deletes, honestly. OpenSearch forgets a *deleted* document's version after
``index.gc_deletes`` (60 s); a late INSERT after that would be accepted. memvault never
deletes an index document: a chain that stops being recallable is overwritten by a
tombstone document at a higher external version, and the embedded index keeps tombstones
forever, as OpenSearch keeps any document. So no clock is involved in the refusal on
either backend; the harness still delivers stale INSERT/MODIFY records more than 60 s
of fake clock after their chain's tombstone (``late_records``), so that a change to
deleting documents instead would be caught.

Oracles, after the run drains (the feed read to its end, every held record delivered,
the final TTL sweep delivered):

- index == store: every live chain's document is a memory document of its current
  version (memory id, version, status, content hash, external version, a vector of the
  model); every other chain, and every document of a chain the store no longer holds, is
  a tombstone; the current version's ``index_status`` is ``indexed``;
- every acknowledged write is readable (GET answers the chain's latest acknowledged
  version) unless deleted, forgotten or expired, which answer 404;
- recall: a keyword recall of each live active memory's own word returns it; no recall
  (during the run or after) returns anything deleted, forgotten, expired or superseded;
- no resurrection: during the run, a chain once seen as a deletion's tombstone in the
  index never holds a memory document again;
- index status: during the run, a live version marked ``indexed`` is in the index (at
  its version or newer) at every step, never only promised;
- every deletion job is COMPLETED with every copy DONE or NOT_APPLICABLE, and did its
  work: no chain of a forgotten epoch is live, no version of a deleted chain is kept;
- one stored version per request id; at most one current version per chain, and it is
  the chain head's.

Mutations this harness was checked against (each on a scratch copy): the index accepting
a stale external version; deleting index documents instead of writing tombstones (what
``gc_deletes`` would then forget); the outbox pump acknowledging before the index write;
the indexer acknowledging failed bulk items; the indexer recording ``indexed`` before
the write; the purge runner marking a copy DONE before its step ran. Each fails seeds.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import random
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Literal
from unittest import mock

import pytest

from memvault.config import Settings
from memvault.embeddings.hashing import HashingEmbedder
from memvault.indexing.indexer import Indexer
from memvault.search.documents import STAGES, Stage
from memvault.search.embedded import EmbeddedIndex
from memvault.services.bundle import Services
from memvault.services.deletion import resume_unfinished
from memvault.storage.ports.changes import Change
from memvault.storage.sqlite.db import Database, OutboxFeed
from memvault.wiring import build_services
from memvault_local.outbox_pump import OutboxPump
from memvault_wire.errors import NotFound, VersionConflict
from memvault_wire.memory import (
    CopyState,
    DeletionScope,
    DeletionState,
    IndexStatus,
    MemoryPatch,
    MemoryStatus,
)
from memvault_wire.recall import RecallRequest
from tests.support import reliability
from tests.support.backends import STORES
from tests.support.faults import (
    GC_DELETES_SECONDS,
    Crash,
    CrashingFeed,
    CrashingLauncher,
    CrashingRepo,
    CrashingStep,
    CrashingStore,
    CrashPlan,
    Delivery,
    DeliveryOdds,
    FaultyIndex,
    IndexFaults,
    SeededIds,
)
from tests.support.harness import FakeClock, a_write, ctx

EMBEDDER = HashingEmbedder()
TENANT = "acme"
SUBJECTS = ("u-0", "u-1", "u-2")
KEYS = ("pref-drink", "pref-seat", "home-city")
TOPICS = ("tea", "train", "desk", "garden", "piano", "bicycle")
INDEX_NAME = f"fh--{EMBEDDER.slug}"

#: Seeds per target; ``MEMVAULT_FAULT_SEEDS=400`` runs more (the DynamoDB target on moto
#: costs about ten times as much per seed, so it gets a twelfth as many).
_MANY = int(os.environ.get("MEMVAULT_FAULT_SEEDS", "36"))
SEEDS = {"sqlite": _MANY, "dynamodb": max(3, _MANY // 12)}
_ONLY = os.environ.get("MEMVAULT_FAULT_SEED")
REPLAY = (
    "MEMVAULT_FAULT_SEED={seed} PYTHONPATH=layers:local:. .venv/bin/python -m pytest "
    "'tests/integration/test_fault_harness.py::{test}[{store}-seed{seed}]'"
)
TESTS = {
    "sqlite": "test_one_seed_on_the_embedded_store",
    "dynamodb": "test_one_seed_on_dynamodb_streams",
}


def seeds_for(store: str) -> list[int]:
    if _ONLY is not None:
        return [int(_ONLY)]
    return list(range(SEEDS[store]))


# ------------------------------------------------------------------------- the plan


#: Crash points and the passes to pick from, per target (a pass beyond what a seed's run
#: reaches simply never crashes).
CRASH_POINTS: dict[str, tuple[str, int]] = {
    "store.commit.before": ("both", 20),
    "store.commit.after": ("both", 20),
    "store.outbox.emit": ("sqlite", 40),
    "delete.launch.before": ("both", 4),
    "purge.primary.before": ("both", 3),
    "purge.primary.after": ("both", 3),
    "purge.versions.before": ("both", 3),
    "purge.versions.after": ("both", 3),
    "purge.index.before": ("both", 3),
    "purge.index.after": ("both", 3),
    "purge.sessions.after": ("both", 3),
    "index.apply.after": ("both", 20),
    "indexer.status.after": ("both", 18),
    "feed.ack.before": ("sqlite", 10),
}


@dataclass
class Plan:
    """Everything the seed decides before the run starts (the rest is drawn as it goes)."""

    seed: int
    operations: int
    crashes: dict[str, set[int]]
    index: IndexFaults
    odds: DeliveryOdds
    batch_size: int
    #: ``inline``: the purge runs before the delete answers (a crash in it reaches the
    #: client, who retries); ``background``: as the local stack's default, it runs later
    #: on a worker whose queue is memory (the client already has its answer).
    launch: str

    def describe(self) -> str:
        crashes = ", ".join(f"{p}#{sorted(n)}" for p, n in sorted(self.crashes.items()))
        return (
            f"{self.operations} operations, purge {self.launch}, batches of {self.batch_size}, "
            f"crashes at {crashes}; index fails requests {self.index.request:.0%}, items "
            f"{self.index.item:.0%}, answers {self.index.after_write:.0%}; delivery defers "
            f"{self.odds.defer:.0%}, late copies {self.odds.late_copy:.0%}, duplicates "
            f"{self.odds.duplicate:.1f} a batch"
        )

    @classmethod
    def draw(cls, seed: int, store: str, rng: random.Random) -> Plan:
        points = sorted(p for p, (where, _) in CRASH_POINTS.items() if where in ("both", store))
        crashes: dict[str, set[int]] = {}
        for point in rng.sample(points, rng.randint(2, 5)):
            crashes.setdefault(point, set()).add(rng.randint(1, CRASH_POINTS[point][1]))
        return cls(
            seed=seed,
            operations=rng.randint(30, 45) if store == "sqlite" else rng.randint(14, 18),
            crashes=crashes,
            index=IndexFaults(
                request=rng.choice((0.0, 0.05, 0.1)),
                item=rng.choice((0.0, 0.05, 0.1, 0.2)),
                after_write=rng.choice((0.0, 0.05)),
            ),
            odds=DeliveryOdds(
                defer=rng.choice((0.0, 0.05, 0.1, 0.15)),
                late_copy=rng.choice((0.05, 0.1, 0.2)),
                duplicate=rng.choice((0.2, 0.5, 1.0)),
            ),
            batch_size=rng.randint(1, 8),
            launch=rng.choice(("inline", "background")),
        )


# ------------------------------------------------------------------------- targets


class Node:
    """One running "process": services, indexer, index and the feed's pump."""

    services: Services
    indexer: Indexer
    index: FaultyIndex
    raw_index: EmbeddedIndex

    def __init__(self, run: Run) -> None:
        self.run = run

    def _wire(self, services: Services, index: FaultyIndex, indexer_store: Any) -> None:
        run = self.run
        plan = run.crash_plan
        services.memory.repo = CrashingRepo(services.memory.repo, plan)
        self.queue = QueuedLauncher()  # a fresh process has nothing queued
        launcher = services.memory.purge if run.plan.launch == "inline" else self.queue
        services.memory.purge = CrashingLauncher(launcher, plan)
        runner = services.purge
        runner.sleep = lambda seconds: None
        runner.handlers = {c: CrashingStep(s, plan) for c, s in runner.handlers.items()}
        self.services = services
        self.indexer = Indexer(index, EMBEDDER, CrashingStore(indexer_store, plan), run.clock)
        run.delivery.indexer = self.indexer

    def open_index(self) -> FaultyIndex:
        run = self.run
        self.raw_index = EmbeddedIndex(INDEX_NAME, run.folder / "index")
        self.index = FaultyIndex(self.raw_index, run.rng_index, run.plan.index, run.crash_plan)
        return self.index

    def restart(self) -> None:
        """Close everything and start again; a crash while starting (the embedded store
        resumes unfinished deletions as it starts) is one more restart."""
        self.close()
        for _ in range(100):
            try:
                self.open()
                return
            except Crash:
                self.run.counts["crashes_while_starting"] += 1
                self.close()
        raise AssertionError("the node crashed on every one of 100 starts")

    def open(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def poll(self) -> int:
        raise NotImplementedError

    def drain(self) -> None:
        raise NotImplementedError

    def backlog(self) -> int:
        raise NotImplementedError

    def sweep(self, now_epoch: int) -> None:
        raise NotImplementedError

    def dropped(self) -> int:
        raise NotImplementedError


class QueuedLauncher:
    """``BackgroundPurgeLauncher`` without its thread: launched jobs wait in memory until
    the workload's purge worker runs them, so a crash loses them as it loses the pool's."""

    def __init__(self) -> None:
        self.queue: list[str] = []

    def launch(self, tenant_id: str, deletion_id: str, *, resume: bool = False) -> None:
        if deletion_id not in self.queue:
            self.queue.append(deletion_id)


class SqliteNode(Node):
    """Local mode: the SQLite store, its outbox read by the outbox pump, the embedded
    index in a folder; all of it reopened from disk on a restart."""

    def open(self) -> None:
        run = self.run
        settings = Settings(
            store="sqlite",
            data_dir=str(run.folder / "data"),
            table_prefix="fh-",
            artifacts_bucket="fh-artifacts",
        )
        index = self.open_index()
        services = build_services(
            settings, clock=run.clock, ids=run.ids, search=index, embedder=EMBEDDER
        )
        self._wire(services, index, services.stores.memory)
        # What the local stack does when it starts: finish every deletion a crash cut short.
        resumed = resume_unfinished(self.services.purge, self.services.memory.purge)
        run.counts["resumed_at_start"] += len(resumed)
        self.feed = CrashingFeed(OutboxFeed(services.stores.database), run.crash_plan)
        self.pump = OutboxPump(
            self.feed,  # type: ignore[arg-type]
            run.delivery,
            batch_size=run.plan.batch_size,
            # Enough that no change goes to the failure file: that is an alarm, not
            # convergence, and the faults here are transient.
            max_retries=1_000_000,
            backoff_seconds=0.0,
        )

    def close(self) -> None:
        self.services.stores.database.close()
        self.raw_index.close()

    def poll(self) -> int:
        return self.pump.poll_once()

    def drain(self) -> None:
        self.pump.drain(max_rounds=100_000)

    def backlog(self) -> int:
        return self.pump.backlog()

    def sweep(self, now_epoch: int) -> None:
        self.services.stores.memory.sweep_expired(now_epoch)  # type: ignore[attr-defined]

    def dropped(self) -> int:
        return self.pump.dropped


@contextlib.contextmanager
def outbox_crashes(plan: CrashPlan) -> Iterator[None]:
    """Crash inside a store transaction: the row written, its outbox record not yet."""
    real = Database.emit

    def emit(conn: Any, *args: Any, **kwargs: Any) -> None:
        plan.point("store.outbox.emit")
        real(conn, *args, **kwargs)

    with mock.patch.object(Database, "emit", staticmethod(emit)):
        yield


class DynamoNode(Node):
    """AWS on moto: the memory table's stream read by the stream pump. The tables and the
    pump (the event source mapping's position and in-flight batch) are the cloud's and
    survive a crash; the services, the indexer and the index are reopened."""

    def open(self) -> None:
        import boto3

        from memvault.handlers.indexer import handle
        from memvault.storage.dynamodb.dynamo import Dynamo
        from memvault.storage.dynamodb.memory import DynamoMemoryStore
        from memvault.storage.dynamodb.tables import create_tables
        from memvault.wiring import table_names
        from memvault_local.keys import LocalTenantKeys, ensure_bucket
        from memvault_local.stream_pump import StreamPump
        from memvault_local.sweeper import TtlSweeper
        from tests.support.harness import SerializedClient

        run = self.run
        settings = Settings(table_prefix="fh-", artifacts_bucket="fh-artifacts")
        client = SerializedClient(boto3.client("dynamodb", region_name="us-east-1"))
        s3 = boto3.client("s3", region_name="us-east-1")
        if not getattr(self, "created", False):
            create_tables(client, "fh-")
            ensure_bucket(s3, settings.artifacts_bucket)
            self.created = True
        keys = LocalTenantKeys(
            boto3.client("kms", region_name="us-east-1"), settings.tenant_key_alias_prefix
        )
        index = self.open_index()
        services = build_services(
            settings,
            client=client,
            clock=run.clock,
            ids=run.ids,
            s3=s3,
            keys=keys,
            search=index,
            embedder=EMBEDDER,
        )
        store = DynamoMemoryStore(Dynamo(client, table_names(settings)))
        self._wire(services, index, store)
        delivery = run.delivery
        if getattr(self, "pump", None) is None:
            self.pump = StreamPump(
                client,
                boto3.client("dynamodbstreams", region_name="us-east-1"),
                table_names(settings)["memory"],
                lambda event: handle(event, delivery),  # type: ignore[arg-type]
                batch_size=run.plan.batch_size,
                max_retries=1_000_000,
                backoff_seconds=0.0,
            )
        self.sweeper = TtlSweeper(client, "fh-")

    def close(self) -> None:
        self.raw_index.close()

    def poll(self) -> int:
        return self.pump.poll_once()

    def drain(self) -> None:
        self.pump.drain(max_rounds=100_000)

    def backlog(self) -> int:
        with self.pump._lock:
            self.pump._discover()
            for shard in self.pump.shards.values():
                self.pump._read(shard)
            return sum(len(s.pending) for s in self.pump.shards.values())

    def sweep(self, now_epoch: int) -> None:
        self.sweeper.sweep(now_epoch)

    def dropped(self) -> int:
        return self.pump.dropped


# ------------------------------------------------------------------------- the model


@dataclass
class Acked:
    """An acknowledged write or correction, as the client knows it."""

    memory_id: str
    subject: str
    chain_id: str
    version: int
    word: str
    topic: str
    expires_at: datetime
    status: MemoryStatus
    #: How many forgets of the subject were acknowledged before this version.
    generation: int
    request_id: str | None


@dataclass
class Outcome:
    seed: int
    store: str
    operations: int = 0
    violations: list[str] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    fingerprint: str = ""
    trace: list[str] = field(default_factory=list)
    seconds: float = 0.0
    plan: str = ""

    def message(self) -> str:
        lines = [
            f"seed {self.seed} on {self.store}: {len(self.violations)} violation(s)",
            f"plan: {self.plan}",
            *(f"  - {v}" for v in self.violations[:25]),
            "last steps:",
            *(f"    {t}" for t in self.trace[-30:]),
            "replay: " + REPLAY.format(seed=self.seed, store=self.store, test=TESTS[self.store]),
        ]
        return "\n".join(lines)


class Run:
    """One seed's run on one target."""

    def __init__(self, seed: int, store: str, folder: Path) -> None:
        self.seed, self.store, self.folder = seed, store, folder
        root = random.Random(f"memvault-fault-harness:{store}:{seed}")
        self.rng = random.Random(root.getrandbits(64))  # workload and clock
        self.rng_index = random.Random(root.getrandbits(64))
        delivery_rng = random.Random(root.getrandbits(64))
        self.ids = SeededIds(random.Random(root.getrandbits(64)))
        self.plan = Plan.draw(seed, store, random.Random(root.getrandbits(64)))
        self.crash_plan = CrashPlan(self.plan.crashes)
        self.clock = FakeClock()
        self.delivery = Delivery(
            delivery_rng, self.clock, self.plan.odds, on_delivered=self._delivered
        )
        self.out = Outcome(seed, store, plan=self.plan.describe())
        self.counts = self.out.counts
        # The client's knowledge.
        self.acked: dict[str, Acked] = {}
        self.latest: dict[str, str] = {}  # chain -> memory id of its latest acked version
        self.deleted: dict[str, float] = {}  # chain -> when its delete was acknowledged
        self.forgets: Counter[str] = Counter()
        self.forgotten_at: dict[str, float] = {}  # chain -> when its subject was forgotten
        self.requests: list[str] = []
        self.words = 0
        self.tombstoned_seen: set[str] = set()
        self.node: Node = SqliteNode(self) if store == "sqlite" else DynamoNode(self)

    # -------------------------------------------------------------- bookkeeping

    def now(self) -> float:
        return self.clock.now().timestamp()

    def note(self, text: str) -> None:
        self.out.trace.append(f"[{len(self.out.trace)} t+{self.now() - START:.0f}s] {text}")

    def violation(self, text: str) -> None:
        """Record a violation once (a check that runs after every step finds it again)."""
        if text not in self.out.violations:
            self.out.violations.append(text)
            self.note(f"VIOLATION {text}")

    def gone(self, chain_id: str) -> float | None:
        """When the chain stopped being readable by the client's own acts, if it did."""
        return self.deleted.get(chain_id, self.forgotten_at.get(chain_id))

    def _delivered(self, change: Change, how: str) -> None:
        """Every record the indexer took: count the stale live ones after the tombstone."""
        image = change.new or change.old or {}
        chain_id = image.get("chain_id")
        gone = self.gone(str(chain_id)) if chain_id else None
        if gone is None or change.new is None:
            return
        live = change.new.get("type") == "memory" and change.new.get("status") in (
            "active",
            "candidate",
        )
        if live:
            if self.now() - gone > GC_DELETES_SECONDS:
                self.counts["late_records"] += 1
            else:
                self.counts["stale_records"] += 1

    def live(self, memory_id: str) -> bool:
        """Whether the client expects ``memory_id``'s chain readable now (at its latest)."""
        m = self.acked[memory_id]
        head = self.acked[self.latest[m.chain_id]]
        return (
            m.chain_id not in self.deleted
            and head.generation == self.forgets[m.subject]
            and head.expires_at.timestamp() > self.now()
        )

    def readable_by_id(self, memory_id: str) -> bool:
        """Whether GET of ``memory_id`` should answer (with its chain's latest version):
        its chain is live and its own version has not expired (an expired version is
        removed by the TTL sweep, even when a later version of its chain lives on)."""
        return self.live(memory_id) and self.acked[memory_id].expires_at.timestamp() > self.now()

    def live_heads(self, subject: str | None = None) -> list[Acked]:
        heads = [self.acked[mid] for mid in self.latest.values()]
        return [
            h for h in heads if (subject is None or h.subject == subject) and self.live(h.memory_id)
        ]

    # ------------------------------------------------------------------ calls

    def call(self, what: str, attempt: Callable[[bool], Any], *, retry: bool = True) -> Any:
        """Run one client call; on a crash restart the process and, if ``retry``, call
        again (``attempt(True)``), as a client whose request died does."""
        again = False
        for _ in range(12):
            try:
                return attempt(again)
            except Crash as crash:
                self.counts["crashes"] += 1
                self.counts[f"crash:{crash.point}"] += 1
                self.note(f"CRASH at {crash.point} during {what}; restart")
                self.node.restart()
                self.counts["restarts"] += 1
                if not retry:
                    return None
                again = True
        raise AssertionError(f"{what}: crashed on every retry")

    def guarded(self, what: str, fn: Callable[[], Any]) -> Any:
        """An operation whose unexpected error is a violation, not the harness's end."""
        try:
            return fn()
        except (AssertionError, Crash):
            raise
        except Exception as err:
            self.violation(f"{what} raised {type(err).__name__}: {err}")
            return None

    # ------------------------------------------------------------------ workload

    def run(self) -> Outcome:
        started = time.perf_counter()
        self.node.open()
        try:
            with outbox_crashes(self.crash_plan) if self.store == "sqlite" else _nothing():
                for _ in range(self.plan.operations):
                    self.advance()
                    self.step()
                self.finish()
            self.check()
        finally:
            with contextlib.suppress(Exception):
                self.node.close()
        self.out.seconds = time.perf_counter() - started
        self.counts.update(
            {f"delivery:{k}": v for k, v in self.delivery.counts.items() if not k.startswith("d")}
        )
        self.counts["duplicates"] = self.delivery.counts["duplicates"]
        self.counts["deferred"] = self.delivery.counts["deferred"]
        self.counts["late_copies"] = self.delivery.counts["late-copy"]
        self.counts["replays"] = self.delivery.counts["replay"]
        self.counts["deliveries"] = self.delivery.counts["deliveries"]
        for name, n in self.node.index.counts.items():
            self.counts[name] += n
        return self.out

    def advance(self) -> None:
        if self.rng.random() < 0.08:
            seconds = self.rng.uniform(GC_DELETES_SECONDS + 1, 400)
        else:
            seconds = self.rng.expovariate(1 / 12)
        self.clock.advance(seconds=seconds)

    def step(self) -> None:
        kinds = ["write", "correct", "delete", "forget", "sweep", "poll", "release", "recall"]
        weights = [40, 14, 10, 2.5, 5, 18, 6, 5]
        if self.counts["op:forget"] >= 2:
            weights[3] = 0
        kind = self.rng.choices(kinds, weights)[0]
        if self.node.queue.queue and self.rng.random() < 0.5:
            kind = "purge"  # the background worker's turn
        if kind in ("correct", "recall") and not self.live_heads():
            kind = "write"
        if kind == "delete" and not self.acked:
            kind = "write"
        self.counts[f"op:{kind}"] += 1
        if kind in ("write", "correct", "delete", "forget", "sweep", "recall"):
            self.out.operations += 1
        getattr(self, f"do_{kind}")()
        if kind in ("poll", "release", "sweep", "delete", "forget", "purge"):
            self.check_during_run()

    def new_word(self) -> str:
        self.words += 1
        return f"zq{self.words}w"

    def do_write(self) -> None:
        subject = self.rng.choice(SUBJECTS)
        word, topic = self.new_word(), self.rng.choice(TOPICS)
        inferred = self.rng.random() < 0.15
        body = a_write(
            request_id=f"req-{self.seed}-{len(self.requests)}",
            content=f"{subject} said something about the {topic}, marker {word}",
            # An inference goes in as a memory of its own: it may not replace a fact.
            canonical_key=(
                self.rng.choice(KEYS) if not inferred and self.rng.random() < 0.4 else None
            ),
            scope={},
            tags=[topic],
            source={"type": "model_inferred" if inferred else "user_statement", "ref": "r"},
            ttl_seconds=self.rng.randint(60, 900) if self.rng.random() < 0.3 else 90 * 86400,
        )
        self.requests.append(body.request_id)
        result = self.guarded(
            "write",
            lambda: self.call(
                "write",
                lambda again: self.node.services.memory.write(ctx(TENANT, subject), subject, body),
            ),
        )
        if result is None:
            return
        m = result.memory
        self.note(f"write {m.memory_id[-6:]} chain {m.chain_id[-6:]} v{m.version} {subject}")
        self.remember(m, word, topic)

    def remember(self, m: Any, word: str, topic: str) -> None:
        self.acked[m.memory_id] = Acked(
            memory_id=m.memory_id,
            subject=m.subject_id,
            chain_id=m.chain_id,
            version=m.version,
            word=word,
            topic=topic,
            expires_at=m.expires_at,
            status=m.status,
            generation=self.forgets[m.subject_id],
            request_id=m.request_id,
        )
        held = self.latest.get(m.chain_id)
        if held is None or self.acked[held].version < m.version:
            self.latest[m.chain_id] = m.memory_id

    def do_correct(self) -> None:
        head = self.rng.choice(self.live_heads())
        # By any version id of the chain whose own row is still there (an expired one
        # may already be swept: GET and PATCH of it answer 404).
        versions = [
            a.memory_id
            for a in self.acked.values()
            if a.chain_id == head.chain_id and self.readable_by_id(a.memory_id)
        ]
        target = self.rng.choice(versions)
        word = self.new_word()
        content = f"{head.subject} corrected the {head.topic} note, marker {word}"
        patch = MemoryPatch(expected_version=head.version, content=content)

        def attempt(again: bool) -> Any:
            service = self.node.services.memory
            if again:  # the first try may have committed: re-read, as a 409 asks
                current = service.get(ctx(TENANT, head.subject), head.subject, target)
                if current.version == head.version + 1 and current.content == content:
                    return current
            return service.correct(ctx(TENANT, head.subject), head.subject, target, patch)

        try:
            m = self.call("correct", attempt)
        except (NotFound, VersionConflict) as err:
            self.violation(f"correct of live {target} answered {type(err).__name__}")
            return
        self.note(f"correct {target[-6:]} -> {m.memory_id[-6:]} v{m.version}")
        self.remember(m, word, head.topic)

    def do_delete(self) -> None:
        pick = self.rng.choice(sorted(self.acked))
        m = self.acked[pick]
        own_row = m.expires_at.timestamp() > self.now()  # else it may be swept already
        expected_found = own_row and (m.chain_id in self.deleted or self.live(pick))
        try:
            job = self.call(
                "delete",
                lambda again: self.node.services.memory.delete(
                    ctx(TENANT, m.subject), m.subject, pick
                ),
            )
        except NotFound:
            if expected_found:
                self.violation(f"delete of {pick} answered 404 while it was live")
            return
        self.note(f"delete {pick[-6:]} chain {m.chain_id[-6:]} -> {job.status.value}")
        if m.chain_id not in self.deleted:
            self.deleted[m.chain_id] = self.now()
            self.replay_later([m.chain_id])

    def do_forget(self) -> None:
        subject = self.rng.choice(SUBJECTS)
        job = self.guarded(
            "forget",
            lambda: self.call(
                "forget",
                lambda again: self.node.services.memory.forget(ctx(TENANT, subject), subject),
            ),
        )
        if job is None:
            return
        self.note(f"forget {subject} -> {job.status.value}")
        chains = []
        for chain_id, mid in self.latest.items():
            a = self.acked[mid]
            if a.subject == subject and a.generation == self.forgets[subject]:
                self.forgotten_at.setdefault(chain_id, self.now())
                chains.append(chain_id)
        self.forgets[subject] += 1
        self.replay_later(chains)

    def replay_later(self, chains: list[str]) -> None:
        """Schedule an old live record of each chain for after gc_deletes has passed."""
        for chain_id in chains[:3]:
            records = self.delivery.live_records_of([chain_id])
            if records and self.rng.random() < 0.85:
                self.delivery.hold(
                    self.rng.choice(records),
                    "replay",
                    delay=self.rng.uniform(GC_DELETES_SECONDS + 1, 300),
                )

    def do_purge(self) -> None:
        """The background worker takes the oldest queued job and runs it."""
        deletion_id = self.node.queue.queue[0]

        def attempt(again: bool) -> Any:
            self.node.queue.queue.remove(deletion_id)
            return self.node.services.purge.run(TENANT, deletion_id)

        job = self.call("purge worker", attempt, retry=False)
        if job is not None:
            self.note(f"purge worker ran {deletion_id[-6:]} -> {job.status.value}")

    def do_sweep(self) -> None:
        now = int(self.now())
        self.call("sweep", lambda again: self.node.sweep(now))
        self.note("sweep")

    def do_poll(self) -> None:
        n = self.rng.randint(1, 4)

        def attempt(again: bool) -> None:
            for _ in range(n):
                self.node.poll()

        self.guarded("poll", lambda: self.call("poll", attempt, retry=False))

    def do_release(self) -> None:
        taken = self.guarded(
            "release",
            lambda: self.call("release", lambda again: self.delivery.release(), retry=False),
        )
        self.note(f"released {taken}")

    def do_recall(self) -> None:
        subject = self.rng.choice(SUBJECTS)
        mine = [a for a in self.acked.values() if a.subject == subject]
        if not mine:
            return
        picks = self.rng.sample(mine, min(3, len(mine)))
        query = " ".join([*(a.word for a in picks), picks[0].topic])
        self.check_recall(subject, query, "hybrid")

    # ------------------------------------------------------------------ checks

    def allowed(self, subject: str) -> set[str]:
        """What recall may return: the latest version of each live chain, if active."""
        return {h.memory_id for h in self.live_heads(subject) if h.status is MemoryStatus.ACTIVE}

    def check_recall(
        self, subject: str, query: str, mode: Literal["hybrid", "keyword", "vector"]
    ) -> list[str]:
        result = self.node.services.recall.recall(
            ctx(TENANT, subject), subject, RecallRequest(query=query, mode=mode, limit=50)
        )
        got = [i.memory.memory_id for i in result.items]
        extra = set(got) - self.allowed(subject)
        for mid in sorted(extra):
            why = "unknown"
            if mid in self.acked:
                a = self.acked[mid]
                if a.chain_id in self.deleted:
                    why = "deleted"
                elif a.generation != self.forgets[subject]:
                    why = "forgotten"
                elif self.latest[a.chain_id] != mid:
                    why = "superseded"
                elif a.expires_at.timestamp() <= self.now():
                    why = "expired"
                elif a.status is not MemoryStatus.ACTIVE:
                    why = a.status.value
            self.violation(f"recall for {subject} returned {mid} ({why})")
        return got

    def check_index_status(self) -> None:
        """``index_status: indexed`` on a live version is a promise that the index holds it
        (or a newer state of its chain): recorded after the index write, never before."""
        repo, index = self.node.services.stores.memory, self.node.index
        for head in self.live_heads():
            m = repo.version(TENANT, head.subject, head.memory_id)
            if m is None or m.index_status is not IndexStatus.INDEXED:
                continue
            stage = Stage.ACTIVE if m.status is MemoryStatus.ACTIVE else Stage.CANDIDATE
            held = index.get(TENANT, m.chain_id)
            if held is None or held[0] < m.version * STAGES + int(stage):
                self.violation(
                    f"{m.memory_id} says indexed, the index holds "
                    f"{'nothing' if held is None else f'version {held[0]}'} of its chain"
                )

    def check_during_run(self) -> None:
        self.check_index_status()
        self.check_no_resurrection()

    def check_no_resurrection(self) -> None:
        index = self.node.index
        for chain_id in sorted(set(self.deleted) | set(self.forgotten_at)):
            held = index.get(TENANT, chain_id)
            if held is None:
                continue
            if held[1]["doc_type"] == "tombstone":
                # Only a deletion's tombstone: a "superseded" or "removed" one (an older
                # version replaced, or expired) is legitimately followed by the chain's
                # newer live version if the records arrive out of order.
                if held[1]["status"] in ("deleted", "purged"):
                    self.tombstoned_seen.add(chain_id)
            elif chain_id in self.tombstoned_seen:
                self.violation(f"chain {chain_id} came back as a memory document (v{held[0]})")
                self.tombstoned_seen.discard(chain_id)

    # ------------------------------------------------------------------ the end

    def settle(self) -> None:
        """Deliver everything: held records (their due times passed) and the feed."""
        for _ in range(400):
            try:
                if not self.delivery.held and not self.node.backlog():
                    return
                self.delivery.release(everything=True)
                self.check_during_run()
                self.node.drain()
                self.check_during_run()
            except Crash as crash:
                self.counts["crashes"] += 1
                self.counts[f"crash:{crash.point}"] += 1
                self.note(f"CRASH at {crash.point} while draining; restart")
                self.node.restart()
                self.counts["restarts"] += 1
        self.violation("the feed and the held records did not drain")

    def finish(self) -> None:
        # Whatever is still held is delivered more than gc_deletes after it was held.
        self.clock.advance(seconds=self.rng.uniform(GC_DELETES_SECONDS + 1, 120))
        self.settle()
        while self.node.queue.queue:
            self.do_purge()
        self.resume_jobs()
        self.settle()
        self.clock.advance(seconds=1)
        now = int(self.now()) + 1  # a version expiring this very second goes too
        self.call("final sweep", lambda again: self.node.sweep(now))
        self.settle()

    def resume_jobs(self) -> None:
        """Bring every unfinished deletion job to its end.

        A memory's FAILED job is resumed as the API documents: delete it again (a crash
        during an inline purge was already resumed so, by the client's retry)."""
        for _ in range(10):
            repo = self.node.services.stores.memory
            unfinished = [
                (entry, repo.job(TENANT, entry.deletion_id)) for entry in repo.deletion_log(TENANT)
            ]
            unfinished = [
                (e, j)
                for e, j in unfinished
                if j is None or j.status is not DeletionState.COMPLETED
            ]
            if not unfinished:
                return
            for entry, job in unfinished:
                if job is None:
                    self.violation(f"deletion {entry.deletion_id} is logged but has no job")
                    continue
                if job.scope is DeletionScope.MEMORY and job.status is DeletionState.FAILED:
                    mid = next(
                        (a.memory_id for a in self.acked.values() if a.chain_id == job.target),
                        None,
                    )
                    if mid is None:
                        self.violation(f"job {job.deletion_id} names a chain never written")
                        continue
                    self.counts["purge_resumed_by_delete"] += 1
                    self.call("delete again", self._delete_again(job.subject_id, mid))
                    continue
                if isinstance(self.node, SqliteNode):
                    # The embedded store resumes unfinished jobs when it starts: a
                    # restart (which may itself crash, and is then retried) must do it.
                    self.counts["restarts_to_resume"] += 1
                    self.note(f"restart to resume {job.scope.value} job {job.deletion_id[-6:]}")
                    self.call("restart", lambda again: self.node.restart())
                    self.do_purge()
                    continue
                # AWS: Step Functions retries an interrupted task, and the sweeper starts
                # a job whose execution was never started; the harness plays both.
                self.counts[f"resumed_as_aws_{job.scope.value.lower()}_jobs"] += 1
                self.note(f"resume {job.scope.value} job {job.deletion_id[-6:]}")
                self.call("resume job", self._resume(job.deletion_id))
        self.violation("deletion jobs still unfinished after 10 resumes")

    def _delete_again(self, subject: str, memory_id: str) -> Callable[[bool], Any]:
        return lambda again: self.node.services.memory.delete(
            ctx(TENANT, subject), subject, memory_id
        )

    def _resume(self, deletion_id: str) -> Callable[[bool], Any]:
        return lambda again: self.node.services.purge.run(TENANT, deletion_id)

    def check(self) -> None:
        node = self.node
        repo = node.services.stores.memory
        now = self.clock.now()
        # The feed is read to its end; nothing was dropped to the failure file.
        if node.backlog() or self.delivery.held:
            self.violation(f"undelivered: backlog {node.backlog()}, held {len(self.delivery.held)}")
        if node.dropped():
            self.violation(f"{node.dropped()} change(s) dropped to the failure file")
        docs = node.index.documents(TENANT)
        seen_chains: set[str] = set()
        by_request: Counter[str] = Counter()
        for subject in SUBJECTS:
            epoch = repo.subject_epoch(TENANT, subject)
            versions, chains = repo.subject_items(TENANT, subject)
            by_id = {v.memory_id: v for v in versions}
            for v in versions:
                if v.request_id:
                    by_request[v.request_id] += 1
            for chain in chains:
                seen_chains.add(chain.chain_id)
                current = by_id.get(chain.current_memory_id)
                live = (
                    chain.live
                    and current is not None
                    and current.status in (MemoryStatus.ACTIVE, MemoryStatus.CANDIDATE)
                    and current.subject_epoch == epoch
                )
                currents = [
                    v.memory_id
                    for v in versions
                    if v.chain_id == chain.chain_id
                    and v.status in (MemoryStatus.ACTIVE, MemoryStatus.CANDIDATE)
                ]
                if len(currents) > 1 or (currents and currents != [chain.current_memory_id]):
                    self.violation(f"chain {chain.chain_id}: current versions {currents}")
                # The purge's own work, once every job is COMPLETED: each chain of a
                # retired epoch is tombstoned, and no version of a tombstoned chain keeps
                # its content.
                if chain.live and chain.subject_epoch < epoch:
                    self.violation(f"chain {chain.chain_id} of a forgotten epoch is still live")
                kept = [v.memory_id for v in versions if v.chain_id == chain.chain_id]
                if not chain.live and kept:
                    self.violation(f"deleted chain {chain.chain_id} keeps {len(kept)} version(s)")
                held = docs.get(chain.chain_id)
                if not live:
                    if held is not None and held[1]["doc_type"] != "tombstone":
                        self.violation(
                            f"chain {chain.chain_id} ({chain.state}) is a memory document "
                            f"in the index (v{held[1]['memory_version']})"
                        )
                    elif held is None and chain.deletion_id:
                        self.violation(f"deleted chain {chain.chain_id} has no tombstone")
                    continue
                assert current is not None
                stage = Stage.ACTIVE if current.status is MemoryStatus.ACTIVE else Stage.CANDIDATE
                if held is None:
                    self.violation(f"live chain {chain.chain_id} is not indexed")
                    continue
                version, body = held
                problems = []
                if body["doc_type"] != "memory":
                    problems.append(f"a {body.get('status')} tombstone")
                else:
                    if body["memory_id"] != current.memory_id:
                        problems.append(f"memory {body['memory_id']} not {current.memory_id}")
                    if body["memory_version"] != current.version:
                        problems.append(f"v{body['memory_version']} not v{current.version}")
                    if body["status"] != current.status.value:
                        problems.append(f"status {body['status']}")
                    if body["content_hash"] != current.content_hash:
                        problems.append("content hash")
                    if not body.get("embedding") or body.get("model_id") != EMBEDDER.model_id:
                        problems.append("no vector of the model")
                if version != current.version * STAGES + int(stage):
                    problems.append(f"external version {version}")
                if current.index_status is not IndexStatus.INDEXED:
                    problems.append(f"index_status {current.index_status.value}")
                if problems:
                    self.violation(f"live chain {chain.chain_id}: {', '.join(problems)}")
        for chain_id, (_, body) in sorted(docs.items()):
            if chain_id not in seen_chains and body["doc_type"] != "tombstone":
                self.violation(f"index holds chain {chain_id}, which the store does not")
        for request_id, n in sorted(by_request.items()):
            if n > 1:
                self.violation(f"request {request_id} stored {n} versions")
        # Every acknowledged write: readable at its chain's latest version, or gone.
        memory = node.services.memory
        for mid, a in sorted(self.acked.items()):
            try:
                got = memory.get(ctx(TENANT, a.subject), a.subject, mid)
            except NotFound:
                if self.readable_by_id(mid):
                    self.violation(f"acknowledged {mid} is not readable")
                continue
            if not self.readable_by_id(mid):
                self.violation(f"{mid} is readable after it was deleted, forgotten or expired")
            elif got.memory_id != self.latest[a.chain_id]:
                self.violation(f"{mid} reads as {got.memory_id}, not {self.latest[a.chain_id]}")
        for a in self.acked.values():
            n = by_request[a.request_id or ""]
            if a.request_id and n != 1 and self.readable_by_id(a.memory_id):
                self.violation(f"request {a.request_id} stored {n} versions")
        # Recall: each live active memory by its own word; nothing else ever.
        for subject in SUBJECTS:
            for head in self.live_heads(subject):
                found = self.check_recall(subject, head.word, "keyword")
                if head.status is MemoryStatus.ACTIVE and head.memory_id not in found:
                    self.violation(f"keyword recall of {head.memory_id}'s word misses it")
            for topic in TOPICS[:3]:
                self.check_recall(subject, f"the {topic}", "hybrid")
        # Deletion jobs.
        for entry in repo.deletion_log(TENANT):
            job = repo.job(TENANT, entry.deletion_id)
            if job is None or job.status is not DeletionState.COMPLETED:
                self.violation(
                    f"deletion {entry.deletion_id} is {job.status.value if job else 'missing'}"
                )
                continue
            for copy in job.copies:
                if copy.status not in (CopyState.DONE, CopyState.NOT_APPLICABLE):
                    self.violation(f"deletion {entry.deletion_id}: {copy.name} {copy.status}")
        self.counts["purges"] = len(repo.deletion_log(TENANT))
        self.counts["chains"] = len(seen_chains)
        self.out.fingerprint = hashlib.sha256(
            repr(
                (
                    sorted((k, v[0], v[1]["doc_type"]) for k, v in docs.items()),
                    sorted(self.counts.items()),
                    now.isoformat(),
                    self.out.trace,
                )
            ).encode()
        ).hexdigest()


START = FakeClock().now().timestamp()


@contextlib.contextmanager
def _nothing() -> Iterator[None]:
    yield


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """The services log every write and every failed batch; a run makes thousands."""
    log = logging.getLogger("memvault")
    level = log.level
    log.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        log.setLevel(level)


def run_seed(seed: int, store: str, folder: Path) -> Outcome:
    with quiet():
        if store == "dynamodb":
            from moto import mock_aws

            with mock_aws():
                return Run(seed, store, folder).run()
        return Run(seed, store, folder).run()


# ------------------------------------------------------------------------- the tests

_outcomes: dict[str, dict[int, Outcome]] = {"sqlite": {}, "dynamodb": {}}


def _outcome(seed: int, store: str, tmp_path_factory: pytest.TempPathFactory) -> Outcome:
    held = _outcomes[store].get(seed)
    if held is None:
        held = run_seed(seed, store, tmp_path_factory.mktemp(f"faults-{store}-{seed}"))
        _outcomes[store][seed] = held
    return held


@pytest.mark.parametrize("seed", seeds_for("sqlite"), ids=lambda s: f"sqlite-seed{s}")
def test_one_seed_on_the_embedded_store(
    seed: int, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outcome = _outcome(seed, "sqlite", tmp_path_factory)
    if outcome.violations:
        pytest.fail(outcome.message(), pytrace=False)


@pytest.mark.parametrize("seed", seeds_for("dynamodb"), ids=lambda s: f"dynamodb-seed{s}")
def test_one_seed_on_dynamodb_streams(seed: int, tmp_path_factory: pytest.TempPathFactory) -> None:
    outcome = _outcome(seed, "dynamodb", tmp_path_factory)
    if outcome.violations:
        pytest.fail(outcome.message(), pytrace=False)


def test_a_seed_replays_exactly(tmp_path: Path) -> None:
    seed = seeds_for("sqlite")[0]
    first = run_seed(seed, "sqlite", tmp_path / "a")
    second = run_seed(seed, "sqlite", tmp_path / "b")
    assert first.trace == second.trace
    assert first.fingerprint == second.fingerprint


@pytest.mark.parametrize("store", STORES)
def test_the_fault_harness_holds_over_every_seed(
    store: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outcomes = [_outcome(seed, store, tmp_path_factory) for seed in seeds_for(store)]
    total: Counter[str] = Counter()
    for o in outcomes:
        total.update(o.counts)
    failing = [o for o in outcomes if o.violations]
    violations = sum(len(o.violations) for o in outcomes)
    if _ONLY is not None:  # a replay of one seed is a debugging run, not a measurement
        assert violations == 0, "\n\n".join(o.message() for o in failing)
        return
    reliability.record(
        "fault-harness",
        category="deletion",
        fault="reorder, duplicate, delay > gc_deletes, crash between steps, failing bulk items",
        oracle="index == store; no resurrection; acknowledged writes readable; purges COMPLETED",
        seeds=len(outcomes),
        operations=sum(o.operations for o in outcomes),
        violations=violations,
        store=store,
        details={
            "crashes": total["crashes"],
            "duplicates": total["duplicates"],
            "late_records": total["late_records"],
            "failed_items": total["failed_items"],
            "failed_requests": total["failed_requests"],
            "lost_answers": total["lost_answers"],
            "deferred": total["deferred"],
            "replays": total["replays"],
            "reordered_batches": total["delivery:reordered_batches"],
            "deliveries": total["deliveries"],
            "purges": total["purges"],
            "resumed_at_start": total["resumed_at_start"],
            "restarts_to_resume": total["restarts_to_resume"],
            "resumed_as_aws_memory_jobs": total["resumed_as_aws_memory_jobs"],
            "resumed_as_aws_subject_jobs": total["resumed_as_aws_subject_jobs"],
            "purge_resumed_by_delete": total["purge_resumed_by_delete"],
            "background_purge_seeds": sum("purge background" in o.plan for o in outcomes),
            "crash_points": {
                k.removeprefix("crash:"): v
                for k, v in sorted(total.items())
                if k.startswith("crash:")
            },
        },
    )
    if failing:
        summary = [
            f"{violations} violation(s) on {store} in seeds "
            + ", ".join(str(o.seed) for o in failing),
            *(
                f"  seed {o.seed}: {o.violations[0]} (+{len(o.violations) - 1} more); replay: "
                + REPLAY.format(seed=o.seed, store=store, test=TESTS[store])
                for o in failing
            ),
            "",
            failing[0].message(),
        ]
        pytest.fail("\n".join(summary), pytrace=False)
