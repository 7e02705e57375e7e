"""The indexer's local model (MiniLM, or a packaged ONNX model) in a child process: indexing
never holds the API's interpreter lock.

On AWS the indexer is its own Lambda and embeds through Bedrock; locally it runs in the
stack's process, and MiniLM's forward pass is CPU work. In the same process, the API's
request threads and the indexer's embedding take turns on one interpreter lock: while
clients write, embedding crawled along at about a quarter of its idle rate, and every
request waited behind it. Here the indexer's embedding runs in a child process at a lower
CPU priority (``nice``), with numpy's BLAS free to use every core the API leaves idle. The
API process keeps its own copy of the model for queries (one text, a few milliseconds).

The protocol on the child's stdin and stdout: frames of a 4-byte big-endian length and a
pickle. A request is a list of texts; the answer is ``("ok", rows, float32 bytes)`` or
``("error", message, retryable)``. The first frame from the child is
``("ready", model_version)`` once the weights are loaded. Pickle is safe here: both ends
are this program, over a pipe no one else holds. The child exits when its stdin closes.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import signal
import struct
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import IO, Any

import numpy as np

from memvault.embeddings.base import EmbeddingUnavailable
from memvault.embeddings.minilm import MiniLmEmbedder
from memvault.embeddings.onnx import MODELS, OnnxEmbedder
from memvault.observability import logger

#: The embedders a worker can run: both are local models loaded from a folder.
LocalModel = MiniLmEmbedder | OnnxEmbedder

#: CPU priority of the child: under load the scheduler gives the API about nine tenths.
NICE = 10
_HEADER = struct.Struct(">I")


def _send(out: IO[bytes], message: Any) -> None:
    data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    out.write(_HEADER.pack(len(data)) + data)
    out.flush()


def _receive(stream: IO[bytes]) -> Any:
    header = stream.read(_HEADER.size)
    if len(header) < _HEADER.size:
        raise EOFError("the embedding worker closed its pipe")
    (size,) = _HEADER.unpack(header)
    data = stream.read(size)
    if len(data) < size:
        raise EOFError("the embedding worker closed its pipe mid-answer")
    return pickle.loads(data)  # noqa: S301 - our own child, over our own pipe


class _Child:
    """One worker process and its two pipe ends. The process is started here; ``ready``
    waits for its model to load (so several can load at once)."""

    def __init__(self, kind: str, model_dir: str, nice: int) -> None:
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join(p for p in sys.path if p),
            # One BLAS thread per worker: parallelism comes from the processes, and a
            # BLAS thread pool spins for a core whenever the API has taken it.
            OPENBLAS_NUM_THREADS="1",
            OMP_NUM_THREADS="1",
        )
        self.process = subprocess.Popen(  # noqa: S603 - our interpreter, our module, our args
            [sys.executable, "-m", "memvault_local.embed_worker", kind, model_dir, str(nice)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            # Its own process group: Ctrl-C in the terminal goes to the stack, which then
            # closes the worker's stdin; the worker never takes the signal itself.
            process_group=0,
        )

    def ready(self, expected_version: str, model_id: str) -> None:
        """Wait for the worker's hello: its model loaded, with the weights expected."""
        try:
            hello = self.receive()
        except (OSError, EOFError, pickle.UnpicklingError):
            self.close()
            raise EmbeddingUnavailable(
                "the embedding worker did not start", model_id=model_id, retryable=True
            ) from None
        if hello[0] != "ready" or hello[1] != expected_version:
            self.close()
            raise EmbeddingUnavailable(
                f"the embedding worker loaded other weights ({hello[1]!r})", model_id=model_id
            )

    def alive(self) -> bool:
        return self.process.poll() is None

    def send(self, message: Any) -> None:
        assert self.process.stdin is not None
        _send(self.process.stdin, message)

    def receive(self) -> Any:
        assert self.process.stdout is not None
        return _receive(self.process.stdout)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            if self.process.stdin is not None:
                self.process.stdin.close()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()


class WorkerEmbedder:
    """An ``Embedder`` whose ``embed`` runs in worker processes (the local models only).

    ``processes`` workers (default: one per core, at most 2), each on one BLAS thread at
    a lower CPU priority; a batch is dealt out among them and put back in order. Its
    identity (model id, version, slug, dimensions) is the local ``embedder``'s, and each
    worker must load the same weights (it reports its version; a mismatch is refused).
    Calls are serialised, as the indexer makes them one batch at a time. Workers that
    died are started again on the next call; a call that fails raises
    ``EmbeddingUnavailable`` (retryable), so the change feed retries the batch.
    """

    #: Below this many texts a batch goes to one worker: dealing it out costs more.
    SPLIT_AT = 8

    def __init__(
        self, embedder: LocalModel, *, processes: int | None = None, nice: int = NICE
    ) -> None:
        self.local = embedder
        self.nice = nice
        self.processes = max(1, processes or min(2, os.cpu_count() or 1))
        self._lock = threading.Lock()
        self._children: list[_Child] = []
        self.starts = 0

    @property
    def model_id(self) -> str:
        return self.local.model_id

    @property
    def model_version(self) -> str:
        return self.local.model_version

    @property
    def dimensions(self) -> int:
        return self.local.dimensions

    @property
    def slug(self) -> str:
        return self.local.slug

    @property
    def pids(self) -> list[int]:
        return [child.process.pid for child in self._children]

    def start(self) -> None:
        """Start the workers now and wait until their model is loaded."""
        with self._lock:
            self._running()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts; use embed_one for one text")
        if not texts:
            return []
        texts = list(texts)
        with self._lock:
            children = self._running()
            ways = 1 if len(texts) < self.SPLIT_AT else len(children)
            shares = [texts[i::ways] for i in range(ways)]
            try:
                for child, share in zip(children, shares, strict=False):
                    child.send(share)
                answers = [child.receive() for child, _ in zip(children, shares, strict=False)]
            except (OSError, EOFError, pickle.UnpicklingError) as err:
                self._discard()
                raise EmbeddingUnavailable(
                    f"the embedding worker stopped ({type(err).__name__})",
                    model_id=self.model_id,
                    retryable=True,
                ) from None
        for answer in answers:
            if answer[0] == "error":
                raise EmbeddingUnavailable(answer[1], model_id=self.model_id, retryable=answer[2])
        vectors: list[list[float]] = [[] for _ in texts]
        for way, (_, rows, raw) in enumerate(answers):
            block = np.frombuffer(raw, dtype=np.float32).reshape(rows, self.dimensions)
            vectors[way::ways] = block.tolist()
        return vectors

    def embed_one(self, text: str) -> list[float]:
        return self.embed([text])[0]

    def embed_query(self, text: str) -> list[float]:
        return self.local.embed_query(text)  # one text: the API process's copy answers

    def close(self) -> None:
        with self._lock:
            self._discard()

    def _running(self) -> list[_Child]:
        if len(self._children) == self.processes and all(c.alive() for c in self._children):
            return self._children
        self._discard()
        model_dir = str(self.local.model_dir)
        kind = self.local.spec.name if isinstance(self.local, OnnxEmbedder) else "minilm"
        try:
            # Every worker is started before any is waited for: they load their models at
            # once, each on its own core, instead of one after the other.
            for _ in range(self.processes):
                self._children.append(_Child(kind, model_dir, self.nice))
                self.starts += 1
            for child in self._children:
                child.ready(self.model_version, self.model_id)
        except (EmbeddingUnavailable, OSError):
            self._discard()
            raise
        logger.info("embedding workers started", extra={"pids": self.pids, "nice": self.nice})
        return self._children

    def _discard(self) -> None:
        children, self._children = self._children, []
        for child in children:
            child.close()


def serve(kind: str, model_dir: str, nice: int, stdin: IO[bytes], stdout: IO[bytes]) -> None:
    """The child: load the model, then answer requests until stdin closes."""
    with contextlib.suppress(OSError):
        os.nice(nice)
    embedder: LocalModel = (
        OnnxEmbedder(kind, model_dir) if kind in MODELS else MiniLmEmbedder(model_dir)
    )
    embedder.load()
    _send(stdout, ("ready", embedder.model_version))
    while True:
        try:
            texts = _receive(stdin)
        except EOFError:
            return
        try:
            vectors = np.asarray(embedder.embed(texts), dtype=np.float32)
            _send(stdout, ("ok", len(texts), vectors.tobytes()))
        except EmbeddingUnavailable as err:
            _send(stdout, ("error", str(err), err.retryable))
        except Exception as err:  # the parent sees a type name, never a text
            _send(stdout, ("error", f"embedding failed: {type(err).__name__}", False))


if __name__ == "__main__":
    # The stack owns its workers and ends them by closing their stdin (as its own exit
    # does). A SIGINT sent to a worker all the same is left to the stack: one that took
    # it died with a traceback in the log.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # Frames go on the real stdout; anything printed by a library goes to stderr.
    frames = sys.stdout.buffer
    sys.stdout = sys.stderr
    # The stack gone before an answer was written: nothing is left to answer.
    with contextlib.suppress(BrokenPipeError):
        serve(sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.stdin.buffer, frames)
