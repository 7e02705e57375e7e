"""The trace store's port: recall traces, the "served by" links that tie a memory chain's
versions to the recalls that returned them, and feedback on recalls.

Ids, counts, versions, reasons and timings only: never memory content, never query text
(a recall trace keeps a salted hash of the query at most). Every record has its own
expiry (``MEMVAULT_TRACE_RETENTION_DAYS``); adapters check it on read, since DynamoDB
TTL deletes lazily and the embedded store's sweeper runs on its own schedule.

Layout (both adapters): one partition per (tenant, subject), sort keys
``RECALL#<recall_id>``, ``SERVED#<chain_id>#<time>#<recall_id>`` and
``FEEDBACK#<time>#<feedback_id>``. A recall is one write of its trace and one link per
returned chain (one batch); "last use" of a chain is its newest link.
"""

from __future__ import annotations

from datetime import datetime
from typing import Protocol

from memvault.models.trace_records import Feedback, RecallTrace, ServedLink


class TraceStore(Protocol):
    def record_recall(self, trace: RecallTrace) -> None:
        """The trace and one served link per returned item: one batch, not atomic (a
        lost link makes "last use" older, never wrong about content). An adapter may
        write it after returning (the embedded store does); its own reads and deletes
        then wait for it."""
        ...

    def flush(self, tenant_id: str | None = None, subject_id: str | None = None) -> None:
        """Wait until the traces recorded so far (the subject's, given one) are written:
        for a reader outside the store (a benchmark, a test reading the file). A no-op
        where ``record_recall`` writes before it returns."""
        ...

    def recall(
        self, tenant_id: str, subject_id: str, recall_id: str, now: datetime
    ) -> RecallTrace | None: ...

    def served(
        self, tenant_id: str, subject_id: str, chain_id: str, now: datetime, limit: int = 50
    ) -> list[ServedLink]:
        """Newest first."""
        ...

    def add_feedback(self, feedback: Feedback) -> None: ...

    def feedback(
        self,
        tenant_id: str,
        subject_id: str,
        now: datetime,
        *,
        chain_id: str | None = None,
        limit: int = 100,
    ) -> list[Feedback]:
        """Newest first; only the chain's when ``chain_id`` is given."""
        ...

    def forget_subject(
        self, tenant_id: str, subject_id: str, before: datetime, epoch: int | None = None
    ) -> int:
        """Remove every trace, link and feedback of the subject made by ``before``, and
        every one judged under a subject epoch up to ``epoch`` (the one the forget
        retired), made when it may: a recall or feedback that overlapped the forget."""
        ...

    def forget_chain(self, tenant_id: str, subject_id: str, chain_id: str) -> int:
        """Remove the chain's served links and the feedback about it (recall traces keep
        the ids they returned until they expire)."""
        ...
