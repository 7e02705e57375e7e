"""Writes made on a thread of their own, in batches, for records a request need not wait on.

A recall's trace is written after its answer is built; written inline, each recall waited
for its own write transaction, and behind any memory write holding the store's write lock.
:class:`DeferredWriter` takes the record and returns at once; its thread writes whatever
has gathered, in one transaction. ``flush`` waits until the records submitted before it
are written (or have failed): a store calls it before each of its reads and deletes, so
this process always reads its own writes, and a deletion never races a pending record.
A record may carry a key (the store's: tenant and subject); ``flush(key)`` waits only for
that key's records, so a read of one subject does not wait for another's traces.

What deferral gives up: a record submitted in the last moments before the process dies
(``kill -9``, a power cut) may be lost. The records deferred are best-effort already (a
trace that cannot be written is logged and the recall still served). ``close``, and the
interpreter's exit, write what is pending first. Where no thread can be started, records
are written inline.
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections.abc import Callable, Hashable, Sequence
from typing import Any, Generic, TypeVar

from memvault.observability import logger

T = TypeVar("T")

#: Records waiting at most; past it ``submit`` waits for the thread (back-pressure).
PENDING_LIMIT = 2_000
#: How long ``close`` waits for the last batch.
CLOSE_TIMEOUT_S = 10.0
#: An idle thread ends after this long; the next record starts another.
IDLE_S = 5.0


class DeferredWriter(Generic[T]):
    """``write`` called on one thread of its own with the records submitted, oldest first,
    in batches of whatever gathered while the last batch was written. A batch whose write
    raises is written again one record at a time, so that one bad record or one busy
    moment loses no other; a record that still fails is logged (the error's type, never
    the record) and dropped."""

    def __init__(
        self,
        write: Callable[[Sequence[T]], None],
        *,
        name: str,
        limit: int = PENDING_LIMIT,
    ) -> None:
        self._write = write
        self.name = name
        self._limit = max(1, limit)
        self._cond = threading.Condition()
        self._pending: list[T] = []
        self._submitted = 0
        self._finished = 0
        #: Per key, the sequence number of its newest record not yet finished.
        self._newest: dict[Hashable, int] = {}
        self._closed = False
        self._thread: threading.Thread | None = None
        self._at_exit = False
        #: Records that could not be written.
        self.failed = 0

    def submit(self, record: T, key: Hashable = None) -> None:
        """Queue one record; written inline once the writer is closed, or where no thread
        can be started."""
        with self._cond:
            if not self._closed:
                self._cond.wait_for(lambda: len(self._pending) < self._limit or self._closed)
            if not self._closed and (self._thread is not None or self._start()):
                self._pending.append(record)
                self._submitted += 1
                if key is not None:
                    self._newest[key] = self._submitted
                self._cond.notify_all()
                return
        self._write_batch([record])

    def flush(self, key: Hashable = None, timeout: float | None = None) -> bool:
        """Wait until the records submitted before this call (only ``key``'s, when one is
        given) are written or have failed; False when ``timeout`` passed first. Not to be
        called from ``write`` itself."""
        if threading.current_thread() is self._thread:
            raise RuntimeError("a deferred write cannot wait for its own writer")
        with self._cond:
            target = self._submitted if key is None else self._newest.get(key, 0)
            return self._cond.wait_for(lambda: self._finished >= target, timeout)

    def close(self, timeout: float = CLOSE_TIMEOUT_S) -> None:
        """Write what is pending, then stop the thread; later records are written inline."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)

    @property
    def pending(self) -> int:
        with self._cond:
            return self._submitted - self._finished

    def _start(self) -> bool:
        """Start the thread (the caller holds ``_cond``); False where none can be started."""
        thread = threading.Thread(target=self._run, name=self.name, daemon=True)
        try:
            thread.start()
        except RuntimeError as err:  # the thread limit, or the interpreter shutting down
            logger.warning(
                "deferred writer not started", extra={"writer": self.name, "error": str(err)}
            )
            return False
        self._thread = thread
        if not self._at_exit:
            # At the interpreter's exit the thread, a daemon, would be stopped mid-batch.
            self._at_exit = True
            atexit.register(_close_at_exit, weakref.ref(self))
        return True

    def _run(self) -> None:
        while True:
            with self._cond:
                self._cond.wait_for(lambda: bool(self._pending) or self._closed, IDLE_S)
                if not self._pending:
                    if self._thread is threading.current_thread():
                        self._thread = None  # idle or closed: the next record starts another
                    return
                batch, self._pending = self._pending, []
                self._cond.notify_all()  # submitters held back by the limit
            self._write_batch(batch)
            with self._cond:
                self._finished += len(batch)
                done = self._finished
                self._newest = {k: n for k, n in self._newest.items() if n > done}
                self._cond.notify_all()

    def _write_batch(self, batch: Sequence[T]) -> None:
        try:
            self._write(batch)
            return
        except Exception as err:  # the records are best-effort: never stop the thread
            if len(batch) == 1:
                self._failed(1, err)
                return
        for record in batch:
            try:
                self._write([record])
            except Exception as err:
                self._failed(1, err)

    def _failed(self, records: int, err: Exception) -> None:
        with self._cond:
            self.failed += records
        logger.warning(
            "deferred records not written",
            extra={"writer": self.name, "records": records, "error": type(err).__name__},
        )


def _close_at_exit(ref: weakref.ref[DeferredWriter[Any]]) -> None:
    writer = ref()
    if writer is not None:
        writer.close()
