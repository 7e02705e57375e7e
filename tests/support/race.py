"""Races that really race: threads released together by a barrier."""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

T = TypeVar("T")


def together(n: int, task: Callable[[int], T], *, timeout: float = 120.0) -> list[T]:
    """Run ``task(0)`` .. ``task(n - 1)`` on ``n`` threads that a barrier releases at the
    same instant; the results in order (a task's exception is raised here).

    Without the barrier a pool's first thread can finish before its last one starts,
    and a "race" runs one caller at a time."""
    barrier = threading.Barrier(n)

    def released(i: int) -> T:
        barrier.wait(timeout=30)
        return task(i)

    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(released, i) for i in range(n)]
        return [f.result(timeout=timeout) for f in futures]
