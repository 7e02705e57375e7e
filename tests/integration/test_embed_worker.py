"""The indexer's MiniLM in worker processes: the same vectors as in process, in order, and
a worker that dies is replaced on the next batch rather than stopping indexing."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator

import pytest

from memvault.embeddings.base import EmbeddingUnavailable
from memvault.embeddings.minilm import MiniLmEmbedder
from memvault_local.embed_worker import WorkerEmbedder

TEXTS = [
    "The user prefers tea over coffee.",
    "用户喜欢用中文回答问题。",
    "Deploys go out on Tuesdays after the review.",
    "short",
    "The database runs on the server in Berlin, next to the backup host.",
    "明天下午三点开会",
    "Invoices are due at the end of each month.",
    "The cat sleeps on the piano.",
    "Release notes are written in English and Chinese.",
    "coffee",
]


@pytest.fixture(scope="module")
def minilm() -> MiniLmEmbedder:
    embedder = MiniLmEmbedder()
    embedder.load()
    return embedder


@pytest.fixture
def worker(minilm: MiniLmEmbedder) -> Iterator[WorkerEmbedder]:
    pool = WorkerEmbedder(minilm, processes=2)
    try:
        yield pool
    finally:
        pool.close()


def _close(a: list[float], b: list[float]) -> bool:
    return sum(x * y for x, y in zip(a, b, strict=True)) > 0.99999


def test_workers_give_the_in_process_vectors_in_the_given_order(
    worker: WorkerEmbedder, minilm: MiniLmEmbedder
) -> None:
    assert (worker.slug, worker.dimensions, worker.model_id) == (
        minilm.slug,
        minilm.dimensions,
        minilm.model_id,
    )
    # Ten texts are dealt out between the two workers; three go to one of them.
    for texts in (TEXTS, TEXTS[:3], list(reversed(TEXTS))):
        got = worker.embed(texts)
        expected = minilm.embed(texts)
        assert len(got) == len(texts)
        assert all(_close(g, e) for g, e in zip(got, expected, strict=True))
    assert len(worker.pids) == 2 and worker.embed([]) == []


def test_a_worker_that_died_is_replaced_and_the_failed_batch_can_be_retried(
    worker: WorkerEmbedder, minilm: MiniLmEmbedder
) -> None:
    worker.start()
    first = worker.pids
    os.kill(first[0], signal.SIGKILL)
    worker._children[0].process.wait(timeout=10)  # dead before the next call
    # The next call finds the dead worker and starts the pool again before sending.
    got = worker.embed(TEXTS)
    assert all(_close(g, e) for g, e in zip(got, minilm.embed(TEXTS), strict=True))
    assert worker.pids != first and worker.starts == 4


def test_a_worker_killed_mid_batch_raises_a_retryable_error(
    worker: WorkerEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    worker.start()
    victim = worker.pids[1]
    from memvault_local import embed_worker

    real_send = embed_worker._Child.send

    def send_then_die(self: embed_worker._Child, message: object) -> None:
        real_send(self, message)
        if self.process.pid == victim:
            os.kill(victim, signal.SIGKILL)

    monkeypatch.setattr(embed_worker._Child, "send", send_then_die)
    with pytest.raises(EmbeddingUnavailable) as raised:
        worker.embed(TEXTS)
    assert raised.value.retryable
    monkeypatch.undo()
    assert len(worker.embed(TEXTS)) == len(TEXTS)


def test_the_workers_load_their_models_at_once(
    minilm: MiniLmEmbedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every worker process is started before the pool waits for any to load its model:
    they load side by side, each on its own core, and indexing can begin after one load's
    time rather than after one per worker."""
    from memvault_local import embed_worker

    pool = WorkerEmbedder(minilm, processes=2)
    started_when_waited: list[int] = []
    real_ready = embed_worker._Child.ready

    def ready(self: embed_worker._Child, expected_version: str, model_id: str) -> None:
        started_when_waited.append(sum(c.alive() for c in pool._children))
        real_ready(self, expected_version, model_id)

    monkeypatch.setattr(embed_worker._Child, "ready", ready)
    try:
        pool.start()
        assert started_when_waited == [2, 2]
        assert len(pool.embed(TEXTS)) == len(TEXTS)
    finally:
        pool.close()


def test_the_workers_are_out_of_the_stacks_process_group(minilm: MiniLmEmbedder) -> None:
    """Ctrl-C in the terminal that runs `memvault run` sends SIGINT to the terminal's
    foreground process group. The workers were in it, each died of the signal beside the
    stack, and a fresh helper found two `KeyboardInterrupt` tracebacks in the stack's log
    at each stop. They now have a group of their own; the stack ends them by closing their
    stdin."""
    pool = WorkerEmbedder(minilm, processes=2)
    try:
        pool.start()
        assert len(pool.pids) == 2
        assert all(os.getpgid(pid) not in (os.getpgrp(), 0) for pid in pool.pids)
        assert len(pool.embed(TEXTS)) == len(TEXTS)
    finally:
        pool.close()


def test_a_worker_sent_sigint_goes_on_and_ends_quietly(minilm: MiniLmEmbedder) -> None:
    """A SIGINT sent to a worker itself is left to the stack: the worker goes on
    answering, and ends, without a traceback, when its stdin closes."""
    import subprocess
    import sys
    import time

    from memvault_local import embed_worker

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    child = subprocess.Popen(
        [sys.executable, "-m", "memvault_local.embed_worker", "minilm", str(minilm.model_dir), "0"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert child.stdin is not None and child.stdout is not None and child.stderr is not None
    try:
        assert embed_worker._receive(child.stdout)[0] == "ready"
        child.send_signal(signal.SIGINT)
        time.sleep(0.2)
        embed_worker._send(child.stdin, ["The cat sleeps on the piano."])
        assert embed_worker._receive(child.stdout)[:2] == ("ok", 1)
        child.stdin.close()
        assert child.wait(timeout=30) == 0
        assert b"Traceback" not in child.stderr.read()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
