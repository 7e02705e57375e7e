"""Traces and feedback: why a memory exists and what used it, read from the audit trail
and the trace store; feedback on a recall, with an optional correction through the normal
compare-and-set path. Every answer is ids, versions, counts and reasons: never content.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

from memvault.clock import Clock, IdSource
from memvault.config import Settings
from memvault.models.access import AccessContext, Scope
from memvault.models.trace_records import (
    Feedback,
    ServedLink,
    feedback_out,
    last_use_out,
    recall_trace_out,
    served_by_out,
)
from memvault.observability import logger
from memvault.policy.pii import find_pii
from memvault.policy.secrets import refuse_secrets
from memvault.services.memory import MemoryService
from memvault.storage.ports.memory import Chain, MemoryRecords
from memvault.storage.ports.traces import TraceStore
from memvault_wire.errors import NotFound, ValidationFailed
from memvault_wire.memory import Memory, Sensitivity
from memvault_wire.trace import (
    FeedbackOut,
    FeedbackRequest,
    MemoryTraceOut,
    RecallTraceOut,
    ServedByOut,
    TraceEventOut,
    TraceVersionOut,
)

_NO_RECALL = "no recall with this id for this subject"
_NO_MEMORY = "no readable memory with this id for this subject"


class TraceService:
    def __init__(
        self,
        repo: MemoryRecords,
        memory: MemoryService,
        traces: TraceStore,
        settings: Settings,
        clock: Clock,
        ids: IdSource,
    ) -> None:
        self.repo = repo
        self.memory = memory
        self.traces = traces
        self.settings = settings
        self.clock = clock
        self.ids = ids

    @staticmethod
    def _subject(ctx: AccessContext, subject_id: str | None) -> str:
        """As for runs (:meth:`AccessContext.named_subject`)."""
        return ctx.named_subject(
            subject_id,
            "a token without a subject names the recall's subject with the query "
            "parameter subject_id",
        )

    # ------------------------------------------------------------------- reads

    def recall_trace(
        self, ctx: AccessContext, recall_id: str, subject_id: str | None = None
    ) -> RecallTraceOut:
        ctx.require(Scope.MEMORY_READ)
        subject = self._subject(ctx, subject_id)
        now = self.clock.now()
        trace = self.traces.recall(ctx.tenant_id, subject, recall_id, now)
        if trace is None:
            raise NotFound(_NO_RECALL, {"recall_id": recall_id})
        # Ids of what the reader may not read now are withheld, as its history would
        # withhold them: another agent's recall, a memory above this token's ceiling or
        # outside its role, a version of a fact reclassified so since or deleted, one
        # whose versions were purged. Reasons and counts stay.
        named = [s.memory_id for s in trace.returned]
        named += [d.memory_id for d in trace.dropped if d.memory_id]
        return recall_trace_out(trace, self.memory.shown_versions(ctx, subject, named))

    def memory_trace(self, ctx: AccessContext, subject_id: str, memory_id: str) -> MemoryTraceOut:
        ctx.require(Scope.MEMORY_READ)
        ctx.require_subject(subject_id)
        t = ctx.tenant_id
        located = self.repo.locate(t, subject_id, memory_id)
        chain = self.repo.chain(t, subject_id, located[0]) if located else None
        if chain is None or chain.subject_epoch != self.repo.subject_epoch(t, subject_id):
            # Forgetting the subject erased the chain for every reader, trail included.
            raise NotFound(_NO_MEMORY, {"memory_id": memory_id})
        now = self.clock.now()
        history, shown = self._traced_versions(ctx, subject_id, memory_id, chain)

        def visible(version_id: str | None) -> bool:
            return shown is None or version_id is None or version_id in shown

        links = self._served_links(ctx, subject_id, chain.chain_id, now, visible)
        versions = self._trace_versions(history, links)
        job = self.repo.job(t, chain.deletion_id) if chain.deletion_id else None
        events = self._trace_events(t, subject_id, chain.chain_id, visible)
        return MemoryTraceOut(
            memory_id=memory_id,
            chain_id=chain.chain_id,
            state="live" if chain.live else "deleted",
            current_version=chain.current_version,
            versions=versions,
            events=events,
            last_used=last_use_out(links[0]) if links else None,
            feedback=[
                feedback_out(f)
                for f in self.traces.feedback(t, subject_id, now, chain_id=chain.chain_id)
                if visible(f.memory_id)
            ],
            deletion=job.public_view() if job else None,
        )

    def _traced_versions(
        self, ctx: AccessContext, subject_id: str, memory_id: str, chain: Chain
    ) -> tuple[list[Memory], set[str] | None]:
        """The versions the trace lists, and the ids of those whose trail it shows (None:
        every version's); NotFound when the reader may see none of it."""
        if chain.live:
            # The readable versions, as history shows them (NotFound when none is); the
            # trail shows only what concerns them.
            history = self.memory.history(ctx, subject_id, memory_id)
            return history, {m.memory_id for m in history}
        if ctx.agent_role is None and ctx.may_read(Sensitivity.PII, []):
            return [], None  # a reader who may read every memory of the subject sees it all
        # The versions are gone, so what they held cannot be checked against this
        # token: their trail (writers, personal-data classes, versions) would say
        # more than the memory ever showed it.
        raise NotFound(_NO_MEMORY, {"memory_id": memory_id})

    def _served_links(
        self,
        ctx: AccessContext,
        subject_id: str,
        chain_id: str,
        now: datetime,
        visible: Callable[[str | None], bool],
    ) -> list[ServedLink]:
        """Of the chain's latest 200 recall links (newest first), those that served a
        ``visible`` version in a recall this reader may see."""
        t = ctx.tenant_id
        callers: dict[str, str | None] = {}
        everything = ctx.agent_role is None and ctx.may_read(Sensitivity.PII, [])

        def own(recall_id: str) -> bool:
            """Whether this reader made the recall: another caller's recall ids (and the
            runs and tasks they name) are that caller's, shown only to a reader who sees
            everything of the subject."""
            if everything:
                return True
            if recall_id not in callers:
                trace = self.traces.recall(t, subject_id, recall_id, now)
                callers[recall_id] = trace.caller if trace is not None else None
            return callers[recall_id] == ctx.principal

        return [
            link
            for link in self.traces.served(t, subject_id, chain_id, now, limit=200)
            if visible(link.memory_id) and own(link.recall_id)
        ]

    @staticmethod
    def _trace_versions(history: list[Memory], links: list[ServedLink]) -> list[TraceVersionOut]:
        """Each version listed, with the recalls that served it."""
        by_version: dict[str, list[ServedByOut]] = {}
        for link in links:
            by_version.setdefault(link.memory_id, []).append(served_by_out(link))
        return [
            TraceVersionOut(
                memory_id=m.memory_id,
                version=m.version,
                status=m.status.value,
                created_by=m.created_by,
                created_at=m.created_at,
                expires_at=m.expires_at,
                supersedes_id=m.supersedes_id,
                source_type=m.source.type.value,
                index_status=m.index_status.value,
                embedding_model=m.embedding_model,
                served_by=by_version.get(m.memory_id, []),
            )
            for m in history
        ]

    def _trace_events(
        self, t: str, subject_id: str, chain_id: str, visible: Callable[[str | None], bool]
    ) -> list[TraceEventOut]:
        """The chain's audit trail, as far as it concerns ``visible`` versions."""
        return [
            TraceEventOut(
                event_id=e.event_id,
                at=e.at,
                action=e.action,
                actor=e.actor,
                memory_id=e.memory_id,
                version=e.version,
                deletion_id=e.deletion_id,
                detail=dict(e.detail) if e.detail else None,
            )
            for e in self.repo.events(t, subject_id)
            if e.chain_id == chain_id and visible(e.memory_id)
        ]

    def list_feedback(self, ctx: AccessContext, subject_id: str, limit: int) -> list[FeedbackOut]:
        ctx.require(Scope.MEMORY_READ)
        ctx.require_subject(subject_id)
        found = self.traces.feedback(ctx.tenant_id, subject_id, self.clock.now(), limit=limit)
        return [feedback_out(f) for f in found if self._may_read(ctx, subject_id, f.memory_id)]

    def _may_read(self, ctx: AccessContext, subject_id: str, memory_id: str) -> bool:
        """Feedback shows to those who may read its memory now, as the memory would."""
        try:
            self.memory.readable(ctx, subject_id, memory_id)
        except NotFound:
            return False
        return True

    # ----------------------------------------------------------------- feedback

    def give_feedback(
        self, ctx: AccessContext, subject_id: str, req: FeedbackRequest
    ) -> FeedbackOut:
        """Feedback on a memory a recall served (named by the recall, or by the run it was
        for); a correction sent with it goes through ``MemoryService.correct`` and names
        this feedback as its cause. Nothing is stored when the correction is refused."""
        ctx.require(Scope.MEMORY_WRITE)
        ctx.require_subject(subject_id)
        _check_note(req.note)
        t = ctx.tenant_id
        now = self.clock.now()
        # Only about what the caller may read now: otherwise the answer would tell a
        # token that cannot see the memory that it exists.
        judged = self.memory.readable(ctx, subject_id, req.memory_id)
        chain_id = judged.chain_id
        recall_id, version = self._served_version(t, subject_id, chain_id, req, now)
        feedback_id = self.ids.new_id("fbk")
        corrected = None
        if req.correction is not None:
            corrected = self.memory.correct(
                ctx, subject_id, req.memory_id, req.correction, prompted_by=feedback_id
            )
        feedback = Feedback(
            feedback_id=feedback_id,
            tenant_id=t,
            subject_id=subject_id,
            at=now,
            expires_at=now + timedelta(days=self.settings.trace_retention_days),
            actor=ctx.principal,
            verdict=req.verdict,
            memory_id=req.memory_id,
            chain_id=chain_id,
            version=version,
            recall_id=recall_id,
            run_id=req.run_id,
            correction_memory_id=corrected.memory_id if corrected else None,
            correction_version=corrected.version if corrected else None,
            note=req.note,
            subject_epoch=judged.subject_epoch,
        )
        self.traces.add_feedback(feedback)
        logger.info(
            "feedback recorded",
            extra={
                "tenant_id": t,
                "subject_id": subject_id,
                "feedback_id": feedback_id,
                "recall_id": recall_id,
                "chain_id": chain_id,
                "verdict": req.verdict,
            },
        )
        return feedback_out(feedback)

    def _served_version(
        self, t: str, subject_id: str, chain_id: str, req: FeedbackRequest, now: datetime
    ) -> tuple[str, int]:
        """The recall the feedback is about and the version of the chain it served: the
        recall named, which must have returned the chain (and been made for the run, when
        one is named too), or else the latest recall for the run that returned it."""
        if req.recall_id is not None:
            trace = self.traces.recall(t, subject_id, req.recall_id, now)
            if trace is None:
                raise NotFound(_NO_RECALL, {"recall_id": req.recall_id})
            served = [s for s in trace.returned if s.chain_id == chain_id]
            if not served:
                raise ValidationFailed(
                    "this recall did not return that memory", {"field": "memory_id"}
                )
            if req.run_id is not None and trace.run_id != req.run_id:
                raise ValidationFailed("this recall was not made for that run", {"field": "run_id"})
            return req.recall_id, served[0].version
        links = [
            link
            for link in self.traces.served(t, subject_id, chain_id, now, limit=200)
            if link.run_id == req.run_id
        ]
        if not links:
            raise NotFound("no recall for this run returned that memory", {"run_id": req.run_id})
        return links[0].recall_id, links[0].version


def _check_note(note: str | None) -> None:
    """A feedback note is shown to every reader of the subject's feedback, whatever their
    sensitivity ceiling: it may hold no credential (``secret_detected``) and no personal
    data (422; what the memory should say goes in the correction, which is classified)."""
    if note is None:
        return
    refuse_secrets([("note", note)], "the feedback note")
    found = find_pii([("note", note)])
    if found:
        raise ValidationFailed(
            "the feedback note holds personal data; notes are shown to every reader of the "
            "subject's feedback and are not classified, so say why without it (send what the "
            "memory should say as the correction)",
            {"field": "note", "reason": "pii", "pii_types": sorted({f.pii_type for f in found})},
        )
