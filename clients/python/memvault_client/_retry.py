"""When to try a request again, and how long to wait first."""

from __future__ import annotations

import logging
import random
from dataclasses import dataclass, field

from memvault_client._transport import Answer, NoAnswer, Request
from memvault_client.errors import ConnectionFailed, error_from_answer

logger = logging.getLogger("memvault_client")

#: Answers that mean "not now": the server did nothing and asks to be asked again.
RETRY_STATUSES = frozenset({429, 503})


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries with exponential backoff and full jitter.

    A request is tried at most ``max_attempts`` times. It is tried again after a 429 or
    503 answer (Lambda's own throttling arrives as a 429), waiting what ``Retry-After``
    asks when the answer has one (a wait longer than ``max_retry_after`` is not waited:
    the error is raised with ``retry_after`` set), else a random time between 0 and
    ``min(max_delay, base_delay * 2 ** (attempt - 1))``. A request that got no answer at
    all (connection refused, reset or timed out) is tried again only if repeating it
    cannot do something twice. Any other error answer is raised at once.
    ``RetryPolicy(max_attempts=1)`` never retries.
    """

    max_attempts: int = 4
    base_delay: float = 0.25
    max_delay: float = 8.0
    max_retry_after: float = 60.0
    retry_statuses: frozenset[int] = field(default=RETRY_STATUSES)

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.base_delay < 0 or self.max_delay < 0 or self.max_retry_after < 0:
            raise ValueError("delays must not be negative")

    def backoff(self, attempt: int) -> float:
        """Full jitter: uniform in [0, min(max_delay, base_delay * 2 ** (attempt - 1))]."""
        ceiling = min(self.max_delay, self.base_delay * 2 ** max(0, attempt - 1))
        return random.uniform(0.0, ceiling)  # noqa: S311 - jitter, not a secret

    def after_answer(self, attempt: int, status: int, retry_after: float | None) -> float | None:
        """Seconds to wait before the next attempt after an error answer; ``None``: raise."""
        if status not in self.retry_statuses or attempt >= self.max_attempts:
            return None
        if retry_after is not None:
            return retry_after if retry_after <= self.max_retry_after else None
        return self.backoff(attempt)

    def after_no_answer(self, attempt: int, idempotent: bool) -> float | None:
        """Seconds to wait after a connection error; ``None``: raise."""
        if not idempotent or attempt >= self.max_attempts:
            return None
        return self.backoff(attempt)


def next_delay(
    policy: RetryPolicy,
    request: Request,
    attempt: int,
    *,
    answer: Answer | None = None,
    failure: NoAnswer | None = None,
) -> float:
    """After attempt ``attempt`` of ``request`` failed with ``answer`` (an error answer) or
    ``failure`` (no answer): the seconds to wait before the next attempt, or the error
    to give up with, raised. The log line names the operation, status and attempt only:
    never a body, a query, an address or a token."""
    if failure is not None:
        delay = policy.after_no_answer(attempt, request.idempotent)
        if delay is None:
            raise ConnectionFailed(
                f"no answer to {request.operation} ({failure.kind}) after {attempt} attempt(s)",
                details={"operation": request.operation, "attempts": attempt},
            ) from None
        outcome = failure.kind
    else:
        assert answer is not None
        error = error_from_answer(answer.status, answer.body, answer.headers)
        delay = policy.after_answer(attempt, answer.status, error.retry_after)
        if delay is None:
            raise error
        outcome = f"{answer.status} {error.code}"
    logger.info(
        "memvault %s: %s; attempt %d of %d, next in %.2fs",
        request.operation,
        outcome,
        attempt,
        policy.max_attempts,
        delay,
    )
    return delay
