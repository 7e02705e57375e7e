"""Shared observability: one logger, tracer and metrics namespace for every handler.

Rule: log ids and counts, never memory content, tokens or secrets. Helpers below
take only identifiers so that a call site cannot pass content by accident.
"""

from __future__ import annotations

import warnings
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import TYPE_CHECKING, Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.tracing.base import BaseProvider, BaseSegment

if TYPE_CHECKING:
    import numbers
    import traceback
    from collections.abc import Sequence

SERVICE = "memvault"
TRACED_MODULES = ("botocore", "httplib")


class _UntracedSegment(BaseSegment):
    """What a subsegment is while tracing is off: it records nothing."""

    def close(self, end_time: int | None = None) -> None:
        return None

    def add_subsegment(self, subsegment: Any) -> None:
        return None

    def remove_subsegment(self, subsegment: Any) -> None:
        return None

    def put_annotation(self, key: str, value: str | numbers.Number | bool) -> None:
        return None

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        return None

    def add_exception(
        self, exception: BaseException, stack: list[traceback.StackSummary], remote: bool = False
    ) -> None:
        return None


class _NoTracing(BaseProvider):
    """Tracer's provider while tracing is off (outside Lambda, or ``POWERTOOLS_TRACE_DISABLED``).

    Powertools' default provider is the X-Ray SDK's recorder, whose import costs a large
    share of a cold start (it builds a botocore client for sampling) and which, switched
    off, hands out dummy segments that record nothing; this records nothing without it.
    With tracing on (in Lambda), the Tracer keeps the X-Ray recorder, patching included.
    """

    @contextmanager
    def in_subsegment(self, name: str | None = None, **kwargs: Any) -> Iterator[BaseSegment]:
        yield _UntracedSegment()

    def in_subsegment_async(
        self, name: str | None = None, **kwargs: Any
    ) -> AbstractAsyncContextManager[BaseSegment]:
        return _untraced_async()

    def put_annotation(self, key: str, value: str | numbers.Number | bool) -> None:
        return None

    def put_metadata(self, key: str, value: Any, namespace: str = "default") -> None:
        return None

    def patch(self, modules: Sequence[str]) -> None:
        return None

    def patch_all(self) -> None:
        return None


@asynccontextmanager
async def _untraced_async() -> AsyncIterator[BaseSegment]:
    yield _UntracedSegment()


def _tracer() -> Tracer:
    # The same test Tracer applies to switch itself off (not in Lambda, SAM or Chalice
    # local, or POWERTOOLS_TRACE_DISABLED); only then is the X-Ray SDK left unimported.
    if Tracer._is_tracer_disabled():
        return Tracer(service=SERVICE, disabled=True, provider=_NoTracing())
    # Only what memvault calls out through: the AWS SDK and http.client (OpenSearch, over
    # urllib3). Patching everything installed imports each patched library at start-up.
    return Tracer(service=SERVICE, patch_modules=TRACED_MODULES)


logger = Logger(service=SERVICE)
# Tracer switches itself off outside Lambda (tests, local mode).
tracer = _tracer()
metrics = Metrics(namespace="memvault", service=SERVICE)
# Read-only requests publish no metric; that is normal, not worth a warning per request.
warnings.filterwarnings("ignore", message="No application metrics to publish")
