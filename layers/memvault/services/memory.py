"""The governed long-term memory service: write, read, correct, delete, forget, export.

Every operation starts from a verified ``AccessContext``; the tenant comes from it and
nowhere else. Reads re-check, at read time, everything that decides whether a memory
may be served: chain tombstone, subject epoch, status, expiry, visibility, sensitivity.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from memvault.clock import Clock, IdSource, iso, made_after_forget
from memvault.config import Settings
from memvault.models.access import AccessContext, Scope
from memvault.observability import logger
from memvault.policy import provenance, write_policy
from memvault.policy.pii import refuse_personal_ids
from memvault.policy.secrets import refuse_secrets
from memvault.services import paging
from memvault.services.artifacts import readable_artifacts
from memvault.services.deletion import INITIAL_COPIES, PurgeLauncher
from memvault.storage.ports.artifacts import ArtifactStore
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.ports.memory import (
    AuditEvent,
    Chain,
    IdempotencyRecord,
    ListFilter,
    MemoryRecords,
    NewVersion,
    fact_id,
    keyed_chain_id,
    request_memory_id,
)
from memvault.storage.ports.traces import TraceStore
from memvault_wire.errors import (
    ArtifactNotCommitted,
    FactNotWritable,
    Forbidden,
    IdempotencyKeyReused,
    MemvaultError,
    NotFound,
    ValidationFailed,
    VersionConflict,
)
from memvault_wire.memory import (
    CopyStatus,
    DeletionJob,
    DeletionScope,
    DeletionState,
    IndexStatus,
    Memory,
    MemoryPage,
    MemoryPatch,
    MemoryStatus,
    MemoryWrite,
    Sensitivity,
    Source,
    SourceType,
)

_MEMORY_ID = re.compile(r"mem_[0-9a-f]{32}")
_NOT_FOUND = "no readable memory with this id for this subject"
_LISTABLE = (MemoryStatus.ACTIVE.value, MemoryStatus.CANDIDATE.value)
_ARTIFACT_REFUSED = (
    "artifact_id must name a committed artifact of this subject that this token may read; "
    "commit the upload first"
)
_RETRIES = 5
_PAYLOAD_HASH_HEX = 32
#: Items DynamoDB evaluates per listing query (filters apply after).
_PAGE = 100


def _hash(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


@dataclass(frozen=True)
class WriteResult:
    memory: Memory
    #: False when this was a replay of an earlier request with the same id and payload.
    created: bool


class MemoryService:
    def __init__(
        self,
        repo: MemoryRecords,
        settings: Settings,
        clock: Clock,
        ids: IdSource,
        purge: PurgeLauncher,
        *,
        traces: TraceStore | None = None,
        artifacts: ArtifactStore | None = None,
    ) -> None:
        self.repo = repo
        self.settings = settings
        self.clock = clock
        self.ids = ids
        self.purge = purge
        self.traces = traces
        self.artifacts = artifacts

    # ------------------------------------------------------------------------ write

    def write(self, ctx: AccessContext, subject_id: str, cmd: MemoryWrite) -> WriteResult:
        """Write a new memory, or a new version of the fact its canonical key names: the
        policy's decision, then one conditional commit of the version, its chain, the
        fact's pointer, the idempotency record and the audit entry. A retry of the same
        request replays what the first one wrote."""
        ctx.require(Scope.MEMORY_WRITE)
        ctx.require_subject(subject_id)
        provenance.check_claim(ctx, cmd.source)
        refuse_secrets([("subject_id", subject_id)], "the memory")
        refuse_personal_ids(
            [("request_id", cmd.request_id), ("subject_id", subject_id)], "the memory"
        )
        # 128 bits tell two payloads apart; the record is an attribute of the version item,
        # whose size is billed by the kilobyte.
        payload_hash = _hash(cmd.fingerprint_payload())[:_PAYLOAD_HASH_HEX]
        record = self.repo.idempotency(ctx.tenant_id, subject_id, cmd.request_id)
        if record is not None:
            return WriteResult(self._replay(ctx, subject_id, record, payload_hash), created=False)
        decision = write_policy.evaluate(_draft(cmd))
        if cmd.artifact_id and not readable_artifacts(
            self.artifacts, ctx, subject_id, [cmd.artifact_id]
        ):
            raise ArtifactNotCommitted(_ARTIFACT_REFUSED, {"artifact_id": cmd.artifact_id})
        now = self.clock.now()
        epoch = self.repo.subject_epoch(ctx.tenant_id, subject_id)
        chain, previous, pointer, pointer_chain = self._current_chain(ctx, subject_id, cmd, epoch)
        if chain is not None:
            self._check_chain_length(chain)
        if previous is not None:
            _check_replacing(ctx, previous, cmd, decision)
        memory = self._new_version(
            ctx, subject_id, cmd, decision, (chain, pointer, pointer_chain), now, epoch
        )
        try:
            self.repo.commit_version(
                self._write_commit(
                    ctx,
                    subject_id,
                    cmd,
                    memory,
                    decision,
                    (chain, previous, pointer, pointer_chain),
                    payload_hash,
                    now,
                )
            )
        except ConditionFailed as conflict:
            return self._lost_write(ctx, subject_id, cmd, payload_hash, conflict)
        self._log("memory written", memory)
        return WriteResult(memory, created=True)

    def write_batch(
        self, ctx: AccessContext, subject_id: str, cmds: Sequence[MemoryWrite]
    ) -> list[WriteResult | MemvaultError]:
        """Each write of a batch as :meth:`write` makes it, in order, each on its own: one
        refused (its error, in its place) leaves the others to be written. The token's
        scope and subject are checked once, for the whole batch. A failure that is not a
        refusal (an error of the store's) ends the batch there: the writes before it are
        committed, and a retry of the batch replays them by their request ids."""
        ctx.require(Scope.MEMORY_WRITE)
        ctx.require_subject(subject_id)
        results: list[WriteResult | MemvaultError] = []
        for cmd in cmds:
            try:
                results.append(self.write(ctx, subject_id, cmd))
            except MemvaultError as refused:
                results.append(refused)
        return results

    def _write_commit(
        self,
        ctx: AccessContext,
        subject_id: str,
        cmd: MemoryWrite,
        memory: Memory,
        decision: write_policy.Decision,
        extends: tuple[Chain | None, Memory | None, str | None, str | None],
        payload_hash: str,
        now: datetime,
    ) -> NewVersion:
        """What a write commits at once: the version (after the current one of the chain it
        ``extends``, if any), the fact's pointer, the idempotency record and the audit
        entry."""
        chain, previous, pointer, pointer_chain = extends
        return NewVersion(
            memory=memory,
            expected_version=chain.current_version if chain else None,
            previous=previous,
            fact=pointer,
            fact_expected_chain=pointer_chain,
            idempotency=IdempotencyRecord(cmd.request_id, payload_hash, memory.memory_id),
            idempotency_expires_at=now + timedelta(seconds=self.settings.idempotency_ttl_seconds),
            audit=self._audit(
                ctx,
                subject_id,
                "memory.write",
                memory,
                detail={
                    **_policy_detail(decision, cmd.consent, memory),
                    "previous_version": chain.current_version if chain else None,
                    "conflict": "compare_and_set" if chain else "new_chain",
                },
            ),
            audit_expires_at=self._audit_expiry(now),
            chain_ttl=chain.ttl if chain else None,
            # Read after the epoch, which the write is conditioned on: an
            # artifact made by the subject's last forget is that forget's.
            artifacts_after=self.repo.forgotten_at(ctx.tenant_id, subject_id)
            if cmd.artifact_id
            else None,
        )

    def _new_version(
        self,
        ctx: AccessContext,
        subject_id: str,
        cmd: MemoryWrite,
        decision: write_policy.Decision,
        extends: tuple[Chain | None, str | None, str | None],
        now: datetime,
        epoch: int,
    ) -> Memory:
        """The version a write stores: the next version of the chain it extends, or the
        first of a new chain (the fact's, if keyed). ``extends`` is what
        ``_current_chain`` found: the chain, the fact's pointer and the chain it names."""
        chain, pointer, pointer_chain = extends
        if chain is not None:
            chain_id = chain.chain_id
        elif pointer is not None:
            chain_id = keyed_chain_id(pointer, pointer_chain, self.ids.new_id("chn"))
        else:
            chain_id = self.ids.new_id("chn")
        return Memory(
            # Derived from the request id: a retry that raced past the idempotency read
            # collides with the stored version and replays it.
            memory_id=request_memory_id(ctx.tenant_id, subject_id, cmd.request_id),
            tenant_id=ctx.tenant_id,
            subject_id=subject_id,
            chain_id=chain_id,
            kind=cmd.kind,
            canonical_key=cmd.canonical_key,
            content=cmd.content,
            tags=list(cmd.tags),
            scope=dict(cmd.scope),
            source=cmd.source,
            sensitivity=decision.sensitivity,
            consent=cmd.consent,
            confidence=cmd.confidence,
            visibility=list(cmd.visibility),
            status=decision.status,
            version=chain.current_version + 1 if chain else 1,
            valid_from=now,
            expires_at=write_policy.expiry(now, cmd.ttl_seconds, self.settings),
            supersedes_id=chain.current_memory_id if chain else None,
            content_hash=_hash(cmd.content),
            index_status=IndexStatus.PENDING,
            embedding_model=None,
            artifact_id=cmd.artifact_id,
            request_id=cmd.request_id,
            created_by=ctx.principal,
            created_at=now,
            updated_at=now,
            subject_epoch=epoch,
            language=cmd.language,
        )

    def _lost_write(
        self,
        ctx: AccessContext,
        subject_id: str,
        cmd: MemoryWrite,
        payload_hash: str,
        conflict: ConditionFailed,
    ) -> WriteResult:
        """What a write whose commit lost a race answers: the replay of a concurrent retry
        of the same request, or the refusal that names what changed first."""
        if Conflict.IDEMPOTENCY in conflict:
            # A concurrent retry of the same request committed first.
            again = self.repo.idempotency(ctx.tenant_id, subject_id, cmd.request_id)
            if again is None:
                raise conflict
            return WriteResult(self._replay(ctx, subject_id, again, payload_hash), False)
        if Conflict.ARTIFACT in conflict:
            raise ArtifactNotCommitted(
                _ARTIFACT_REFUSED, {"artifact_id": cmd.artifact_id}
            ) from None
        if Conflict.EPOCH in conflict:
            # Forgetting the subject won the race: what was sent before it must not
            # outlive it. Nothing was stored; the caller decides whether to write again.
            raise VersionConflict(
                "the subject was forgotten while this memory was being written; nothing was stored",
                {"reason": "subject_forgotten"},
            ) from None
        raise self._conflict(ctx, subject_id, cmd) from None

    def _current_chain(
        self, ctx: AccessContext, subject_id: str, cmd: MemoryWrite, epoch: int
    ) -> tuple[Chain | None, Memory | None, str | None, str | None]:
        """The live chain this write extends (if any) and its current version, the pointer
        to claim, and the chain the pointer names now (for the pointer's compare-and-set)."""
        if cmd.canonical_key is None:
            return None, None, None, None
        pointer = fact_id(cmd.kind.value, cmd.canonical_key, cmd.scope)
        pointer_chain = self.repo.pointer(ctx.tenant_id, subject_id, pointer)
        chain = self.repo.chain(ctx.tenant_id, subject_id, pointer_chain) if pointer_chain else None
        if chain is not None and not (chain.live and chain.subject_epoch == epoch):
            chain = None  # tombstoned or forgotten: the key starts a new chain
        head = None
        if chain is not None:
            head = self.repo.version(ctx.tenant_id, subject_id, chain.current_memory_id)
            # Checked before the version, so that a 409's details never describe a
            # fact the caller may not read.
            self._require_writable(ctx, head, cmd.canonical_key)
        if cmd.expected_version is not None:
            current = chain.current_version if chain else None
            if current != cmd.expected_version:
                raise VersionConflict(
                    "the fact's current version is not the one expected; re-read it and decide",
                    {
                        "expected_version": cmd.expected_version,
                        "current_version": current,
                        "current_memory_id": chain.current_memory_id if chain else None,
                    },
                )
        return chain, head, pointer, pointer_chain

    @staticmethod
    def _require_writable(ctx: AccessContext, head: Memory | None, canonical_key: str) -> None:
        """A caller may supersede a fact only if it may read the fact's current version
        (sensitivity ceiling and visibility list, as every read checks them)."""
        if head is not None and not ctx.may_read(head.sensitivity, head.visibility):
            raise FactNotWritable(
                "a fact this token may not read holds this canonical_key, so this token "
                "cannot change it; write under another canonical_key, or use a token that "
                "may read the fact",
                {"canonical_key": canonical_key},
            )

    def _conflict(self, ctx: AccessContext, subject_id: str, cmd: MemoryWrite) -> VersionConflict:
        details: dict[str, Any] = {"canonical_key": cmd.canonical_key}
        if cmd.canonical_key is not None:
            pointer = fact_id(cmd.kind.value, cmd.canonical_key, cmd.scope)
            chain_id = self.repo.pointer(ctx.tenant_id, subject_id, pointer)
            chain = self.repo.chain(ctx.tenant_id, subject_id, chain_id) if chain_id else None
            if chain is not None and chain.live:
                head = self.repo.version(ctx.tenant_id, subject_id, chain.current_memory_id)
                self._require_writable(ctx, head, cmd.canonical_key)
                details |= {
                    "current_version": chain.current_version,
                    "current_memory_id": chain.current_memory_id,
                }
        return VersionConflict(
            "another write changed this fact first; re-read the current version and decide",
            details,
        )

    def _replay(
        self, ctx: AccessContext, subject_id: str, record: IdempotencyRecord, payload_hash: str
    ) -> Memory:
        # Whether the memory is gone, or out of this caller's reach, is decided before the
        # payload is compared: otherwise 404 against 409 would confirm a guess of deleted
        # or unreadable content. Its fact as it stands now counts too: a version of a fact
        # reclassified above this caller since (sensitivity, visibility) is out of reach.
        memory = self.repo.version(ctx.tenant_id, subject_id, record.memory_id)
        chain = self.repo.chain(ctx.tenant_id, subject_id, memory.chain_id) if memory else None
        epoch = self.repo.subject_epoch(ctx.tenant_id, subject_id)
        if (
            memory is None
            or chain is None
            or not chain.live
            or memory.subject_epoch != epoch
            or not ctx.may_read(memory.sensitivity, memory.visibility)
            or self._withheld_by_its_fact(ctx, subject_id, chain, memory)
            # A token that may not read memories learns nothing of another's write
            # through its request id (201 against 409 would confirm a guess of it).
            or (Scope.MEMORY_READ not in ctx.scopes and memory.created_by != ctx.principal)
        ):
            raise NotFound(
                "the memory this request_id wrote is deleted or not readable with this "
                "token; use a new request_id for a new memory",
                {"request_id": record.request_id},
            )
        # Records of the earlier layout kept the whole digest.
        if record.payload_hash[:_PAYLOAD_HASH_HEX] != payload_hash:
            raise IdempotencyKeyReused(
                "this request_id was already used with a different payload; use a new "
                "request_id for a new memory",
                {"request_id": record.request_id},
            )
        return memory

    def _withheld_by_its_fact(
        self, ctx: AccessContext, subject_id: str, chain: Chain, memory: Memory
    ) -> bool:
        """Whether ``memory`` is withheld from the caller by its fact's later history, as
        history and export judge it (``_shown``): a newer version the caller may not read
        (the current one, or one in between that raised the fact and was lowered again)
        takes every older version with it, and so does a current version that is gone."""
        if chain.current_memory_id == memory.memory_id:
            return False
        versions = self.repo.versions(ctx.tenant_id, subject_id, chain.versions)
        current = next((v for v in versions if v.memory_id == chain.current_memory_id), None)
        return (
            current is None
            or not ctx.may_read(current.sensitivity, current.visibility)
            or _withheld_through(ctx, versions) >= memory.version
        )

    def _check_chain_length(self, chain: Chain) -> None:
        if len(chain.versions) >= self.settings.max_versions_per_chain:
            raise ValidationFailed(
                "this fact has reached its maximum number of versions; delete it and write it anew",
                {"max_versions": self.settings.max_versions_per_chain},
            )

    # ------------------------------------------------------------------------ read

    def _readable(self, ctx: AccessContext, m: Memory, epoch: int, now: datetime) -> bool:
        return (
            m.subject_epoch == epoch
            and m.is_live(now)
            and ctx.may_read(m.sensitivity, m.visibility)
        )

    def _resolve(
        self, ctx: AccessContext, subject_id: str, memory_id: str
    ) -> tuple[Chain, Memory, int]:
        """The live chain of ``memory_id`` and its current version, if the caller may read it."""
        version = self.repo.version(ctx.tenant_id, subject_id, memory_id)
        if version is None:
            raise NotFound(_NOT_FOUND, {"memory_id": memory_id})
        chain = self.repo.chain(ctx.tenant_id, subject_id, version.chain_id)
        if chain is None or not chain.live:
            raise NotFound(_NOT_FOUND, {"memory_id": memory_id})
        current = (
            version
            if chain.current_memory_id == memory_id
            else self.repo.version(ctx.tenant_id, subject_id, chain.current_memory_id)
        )
        epoch = self.repo.subject_epoch(ctx.tenant_id, subject_id)
        if current is None or not self._readable(ctx, current, epoch, self.clock.now()):
            raise NotFound(_NOT_FOUND, {"memory_id": memory_id})
        return chain, current, epoch

    def readable(self, ctx: AccessContext, subject_id: str, memory_id: str) -> Memory:
        """The chain's current version if the caller may read it now (no scope check:
        the caller's operation checked its own); ``NotFound`` otherwise."""
        return self._resolve(ctx, subject_id, memory_id)[1]

    def get(self, ctx: AccessContext, subject_id: str, memory_id: str) -> Memory:
        """The current version of the memory's chain, if readable now."""
        ctx.require(Scope.MEMORY_READ)
        ctx.require_subject(subject_id)
        _, current, _ = self._resolve(ctx, subject_id, memory_id)
        return current

    def list_memories(
        self,
        ctx: AccessContext,
        subject_id: str,
        *,
        kind: str | None = None,
        canonical_key: str | None = None,
        tag: str | None = None,
        status: str | None = None,
        limit: int = 20,
        next_token: str | None = None,
    ) -> MemoryPage:
        ctx.require(Scope.MEMORY_READ)
        ctx.require_subject(subject_id)
        if not 1 <= limit <= 100:
            raise ValidationFailed("limit must be between 1 and 100", {"field": "limit"})
        if status is not None and status not in _LISTABLE:
            raise ValidationFailed(
                "status may be 'active' or 'candidate'; superseded versions are in a memory's "
                "history, and expired or deleted memories are never served",
                {"field": "status"},
            )
        start = _decode_token(next_token)
        now = self.clock.now()
        epoch = self.repo.subject_epoch(ctx.tenant_id, subject_id)
        items: list[Memory] = []
        while True:
            page, last = self.repo.list_versions(
                ctx.tenant_id,
                subject_id,
                now=now,
                where=ListFilter(
                    statuses=[status] if status else list(_LISTABLE),
                    kind=kind,
                    canonical_key=canonical_key,
                    tag=tag,
                ),
                cursor=start,
                page_size=_PAGE,
            )
            for m in page:
                if not self._readable(ctx, m, epoch, now):
                    continue
                if len(items) == limit:
                    # A next page only when an item this caller may read follows: a token
                    # handed out because hidden items follow (its page then empty) told
                    # a reader below their ceiling that they exist. The read-ahead stops
                    # at the first readable item, and scans no more than the next call
                    # would; the next page starts after the last item handed out.
                    after = items[-1].memory_id
                    return MemoryPage(items=items, next_token=_encode_token(after))
                items.append(m)
            start = last
            if start is None:
                return MemoryPage(items=items, next_token=None)

    def history(self, ctx: AccessContext, subject_id: str, memory_id: str) -> list[Memory]:
        """Every version of the memory's chain still held and readable, oldest first."""
        ctx.require(Scope.MEMORY_READ)
        ctx.require_subject(subject_id)
        chain, current, epoch = self._resolve(ctx, subject_id, memory_id)
        now = self.clock.now()
        versions = self.repo.versions(ctx.tenant_id, subject_id, chain.versions)
        cut = _withheld_through(ctx, versions)
        return sorted(
            (v for v in versions if self._shown(ctx, v, current, epoch, now, cut)),
            key=lambda v: v.version,
        )

    def version_for_reproduction(
        self, ctx: AccessContext, subject_id: str, memory_id: str
    ) -> Memory:
        """One exact version, as history would show it (never one deleted or expired since)."""
        chain, current, epoch = self._resolve(ctx, subject_id, memory_id)
        version = self.repo.version(ctx.tenant_id, subject_id, memory_id)
        cut = _withheld_through(ctx, self.repo.versions(ctx.tenant_id, subject_id, chain.versions))
        if (
            version is None
            or version.chain_id != chain.chain_id
            or not self._shown(ctx, version, current, epoch, self.clock.now(), cut)
        ):
            raise NotFound(_NOT_FOUND, {"memory_id": memory_id})
        return version

    def _shown(
        self,
        ctx: AccessContext,
        m: Memory,
        current: Memory,
        epoch: int,
        now: datetime,
        cut: int,
    ) -> bool:
        """Whether version ``m`` of a live chain whose current version is ``current`` may
        be shown to this caller: only while it may read ``current`` now (what ``get``
        checks), ``m`` itself, and every version after ``m`` (``cut`` is the newest
        version it may not read: ``_withheld_through``). A reclassification above the
        caller (sensitivity or visibility) is a statement about what came before it too:
        it takes every older version with it, and they stay withheld after the fact is
        lowered or widened again with new content (which would otherwise republish the
        very text that was just redacted). Every route that shows or names old versions
        holds to this: history, export, reproduction, a recall's trace (and a write's
        replay, by sensitivity and visibility: ``_withheld_by_its_fact``)."""
        return (
            m.version > cut
            and self._readable(ctx, current, epoch, now)
            and self._shown_in_history(ctx, m, epoch, now)
        )

    def _shown_in_history(self, ctx: AccessContext, m: Memory, epoch: int, now: datetime) -> bool:
        """The version judged by itself; callers also judge its chain (``_shown``)."""
        return (
            m.subject_epoch == epoch
            and m.status is not MemoryStatus.DELETED
            and now < m.expires_at
            and ctx.may_read(m.sensitivity, m.visibility)
        )

    def shown_versions(
        self, ctx: AccessContext, subject_id: str, memory_ids: Sequence[str]
    ) -> set[str]:
        """Of ``memory_ids`` (versions of this subject), those the caller's history of
        their memory would show now (``_shown``), for answers that name versions without
        serving them, such as a recall's trace. No scope check: the caller's operation
        checked its own. Three batch reads: the versions, their chains with the subject's
        epoch, and the chains' current versions not already read."""
        if not memory_ids:
            return set()
        t = ctx.tenant_id
        held = self.repo.versions(t, subject_id, list(dict.fromkeys(memory_ids)))
        epoch, _, chains = self.repo.revalidation(
            t, subject_id, [], list(dict.fromkeys(m.chain_id for m in held))
        )
        live = {c.chain_id: c for c in chains if c.live and c.subject_epoch == epoch}
        by_id = {m.memory_id: m for m in held}
        # Every version of the chains named: a later one may withhold an earlier one.
        unread = [v for c in live.values() for v in c.versions if v not in by_id]
        by_id |= {m.memory_id: m for m in self.repo.versions(t, subject_id, unread)}
        cuts = {
            chain_id: _withheld_through(ctx, [by_id[v] for v in c.versions if v in by_id])
            for chain_id, c in live.items()
        }
        now = self.clock.now()
        shown: set[str] = set()
        for m in held:
            chain = live.get(m.chain_id)
            current = by_id.get(chain.current_memory_id) if chain else None
            if current is not None and self._shown(ctx, m, current, epoch, now, cuts[m.chain_id]):
                shown.add(m.memory_id)
        return shown

    def export(self, ctx: AccessContext, subject_id: str) -> dict[str, Any]:
        """Everything held about the subject that this caller may read: of every fact whose
        current version it may read now, every version its history shows (``_shown``).
        Each version is judged with its chain: an older version of a fact reclassified
        above the caller is not exported, whatever its own classification."""
        ctx.require(Scope.MEMORY_READ)
        ctx.require_subject(subject_id)
        now = self.clock.now()
        epoch = self.repo.subject_epoch(ctx.tenant_id, subject_id)
        versions, chains = self.repo.subject_items(ctx.tenant_id, subject_id)
        by_id = {v.memory_id: v for v in versions}
        current = {
            c.chain_id: by_id[c.current_memory_id]
            for c in chains
            if c.live and c.subject_epoch == epoch and c.current_memory_id in by_id
        }
        of_chain: dict[str, list[Memory]] = {}
        for v in versions:
            of_chain.setdefault(v.chain_id, []).append(v)
        cuts = {chain_id: _withheld_through(ctx, vs) for chain_id, vs in of_chain.items()}
        held = sorted(
            (
                v
                for v in versions
                if v.chain_id in current
                and self._shown(ctx, v, current[v.chain_id], epoch, now, cuts[v.chain_id])
            ),
            key=lambda v: (v.chain_id, v.version),
        )
        logger.info(
            "subject exported",
            extra={
                "tenant_id": ctx.tenant_id,
                "subject_id": subject_id,
                "count": len(held),
            },
        )
        return {
            "subject_id": subject_id,
            "exported_at": iso(now),
            "memories": [m.public_view() for m in held],
        }

    # ---------------------------------------------------------------------- correct

    def correct(
        self,
        ctx: AccessContext,
        subject_id: str,
        memory_id: str,
        patch: MemoryPatch,
        *,
        prompted_by: str | None = None,
    ) -> Memory:
        """``prompted_by`` is the feedback service's own (already checked); a caller's
        comes in ``patch.prompted_by`` and must name this subject's recall or feedback."""
        ctx.require(Scope.MEMORY_WRITE)
        ctx.require_subject(subject_id)
        if patch.prompted_by is not None:
            self.check_prompted_by(ctx, subject_id, patch.prompted_by)
        prompted_by = prompted_by or patch.prompted_by
        chain, current, _ = self._resolve(ctx, subject_id, memory_id)
        self._check_read_version(chain, patch.expected_version)
        content_changed = patch.content is not None and patch.content != current.content
        source = provenance.corrected_source(ctx, current.source, patch.source, content_changed)
        decision, consent = self._judge_correction(ctx, current, patch, source, content_changed)
        provenance.check_supersede(
            ctx,
            (current.status, current.source.type),
            decision.status,
            content_changed=content_changed,
        )
        self._check_chain_length(chain)
        now = self.clock.now()
        memory = self._corrected_version(
            ctx, chain, current, patch, (source, decision, consent), now
        )
        detail = {
            **_policy_detail(decision, consent, memory),
            "previous_version": chain.current_version,
            "previous_memory_id": current.memory_id,
            "conflict": "compare_and_set",
            "content_changed": content_changed,
            "prompted_by": prompted_by,
        }
        try:
            self.repo.commit_version(
                self._correction_commit(ctx, subject_id, chain, current, memory, now, detail)
            )
        except ConditionFailed:
            fresh = self.repo.chain(ctx.tenant_id, subject_id, chain.chain_id)
            raise VersionConflict(
                "another write changed this memory first; re-read it and decide",
                {
                    "expected_version": patch.expected_version,
                    "current_version": fresh.current_version if fresh and fresh.live else None,
                },
            ) from None
        self._log("memory corrected", memory)
        return memory

    @staticmethod
    def _check_read_version(chain: Chain, expected_version: int) -> None:
        """A correction is decided on the version its caller read: that must still be the
        chain's current one."""
        if expected_version != chain.current_version:
            raise VersionConflict(
                "the memory changed since you read it; re-read it and decide",
                {
                    "expected_version": expected_version,
                    "current_version": chain.current_version,
                    "current_memory_id": chain.current_memory_id,
                },
            )

    @staticmethod
    def _judge_correction(
        ctx: AccessContext,
        current: Memory,
        patch: MemoryPatch,
        source: Source,
        content_changed: bool,
    ) -> tuple[write_policy.Decision, bool]:
        """The policy's decision on the corrected memory, and its consent: a confirmation
        (a candidate or an inference turned active) is a person's, and a change of class
        or readers is checked against the caller's right to make it. Content rewritten is
        never what was confirmed, even under the same source: an agent's new inference over
        a confirmed one is a candidate, which may not replace it."""
        kept = source == current.source and not content_changed
        confirming = patch.status == "active" and not (
            kept and current.status is MemoryStatus.ACTIVE
        )
        if confirming and source.type is SourceType.MODEL_INFERRED:
            provenance.check_confirm(ctx)
        sensitivity = patch.sensitivity or current.sensitivity
        visibility = current.visibility if patch.visibility is None else patch.visibility
        provenance.check_reclassify(
            ctx, (current.sensitivity, current.visibility), (sensitivity, visibility)
        )
        consent = current.consent if patch.consent is None else patch.consent
        decision = write_policy.evaluate(
            write_policy.Draft(
                content=patch.content or current.content,
                canonical_key=current.canonical_key,
                tags=current.tags if patch.tags is None else patch.tags,
                scope=current.scope,
                source=source,
                sensitivity=sensitivity,
                consent=consent,
                confirmed=patch.status == "active"
                or (current.status is MemoryStatus.ACTIVE and kept),
                visibility=visibility,
            )
        )
        return decision, consent

    def _corrected_version(
        self,
        ctx: AccessContext,
        chain: Chain,
        current: Memory,
        patch: MemoryPatch,
        judged: tuple[Source, write_policy.Decision, bool],
        now: datetime,
    ) -> Memory:
        """The next version of ``chain``: ``current`` with the patch applied and the
        policy's ``judged`` source, decision and consent."""
        source, decision, consent = judged
        content = patch.content or current.content
        return current.model_copy(
            update={
                "memory_id": self.ids.new_id("mem"),
                "content": content,
                "tags": current.tags if patch.tags is None else list(patch.tags),
                "source": source,
                "sensitivity": decision.sensitivity,
                "consent": consent,
                "confidence": current.confidence if patch.confidence is None else patch.confidence,
                "visibility": current.visibility
                if patch.visibility is None
                else list(patch.visibility),
                "status": decision.status,
                "version": chain.current_version + 1,
                "valid_from": now,
                "expires_at": current.expires_at
                if patch.ttl_seconds is None
                else write_policy.expiry(now, patch.ttl_seconds, self.settings),
                "supersedes_id": current.memory_id,
                "content_hash": _hash(content),
                "index_status": IndexStatus.PENDING,
                "embedding_model": None,
                "request_id": None,
                "created_by": ctx.principal,
                "created_at": now,
                "updated_at": now,
                "language": current.language if patch.language is None else patch.language,
            }
        )

    def _correction_commit(
        self,
        ctx: AccessContext,
        subject_id: str,
        chain: Chain,
        current: Memory,
        memory: Memory,
        now: datetime,
        detail: dict[str, Any],
    ) -> NewVersion:
        """What a correction commits at once: ``memory`` after ``current`` (compare-and-set on
        the chain's version), the fact's pointer if the chain has one, and the audit entry
        with ``detail``."""
        return NewVersion(
            memory=memory,
            expected_version=chain.current_version,
            previous=current,
            fact=chain.fact,
            fact_expected_chain=chain.chain_id if chain.fact else None,
            idempotency=None,
            idempotency_expires_at=None,
            audit=self._audit(ctx, subject_id, "memory.correct", memory, detail=detail),
            audit_expires_at=self._audit_expiry(now),
            chain_ttl=chain.ttl,
        )

    # ----------------------------------------------------------------------- delete

    def delete(
        self,
        ctx: AccessContext,
        subject_id: str,
        memory_id: str,
        *,
        prompted_by: str | None = None,
    ) -> DeletionJob:
        """Tombstone the memory's chain (every version unreadable at once), record the job
        and its log entry in the same transaction, then launch the purge."""
        ctx.require(Scope.MEMORY_DELETE)
        ctx.require_subject(subject_id)
        if prompted_by is not None:
            self.check_prompted_by(ctx, subject_id, prompted_by)
        located = self.repo.locate(ctx.tenant_id, subject_id, memory_id)
        if located is None:
            raise NotFound(_NOT_FOUND, {"memory_id": memory_id})
        chain_id, version_epoch = located
        for _ in range(_RETRIES):
            chain = self._chain_to_delete(ctx, subject_id, chain_id, version_epoch, memory_id)
            if not chain.live:
                return self._existing_job(ctx, chain, memory_id)  # twice is one deletion
            job = self._new_job(ctx, subject_id, DeletionScope.MEMORY, chain.chain_id)
            release = (
                bool(chain.fact)
                and self.repo.pointer(ctx.tenant_id, subject_id, chain.fact or "") == chain.chain_id
            )
            try:
                self._tombstone(ctx, subject_id, chain, job, release, prompted_by)
            except ConditionFailed:
                continue  # superseded or deleted meanwhile: re-read the chain
            logger.info(
                "memory deletion requested",
                extra={
                    "tenant_id": ctx.tenant_id,
                    "subject_id": subject_id,
                    "chain_id": chain.chain_id,
                    "deletion_id": job.deletion_id,
                },
            )
            return self._launch(job)
        raise VersionConflict("the memory kept changing while deleting; retry")

    def _chain_to_delete(
        self,
        ctx: AccessContext,
        subject_id: str,
        chain_id: str,
        version_epoch: int,
        memory_id: str,
    ) -> Chain:
        """The chain ``memory_id`` belongs to, as it stands now: NotFound when it is gone,
        its subject was forgotten since, or the caller may not read its current version."""
        chain = self.repo.chain(ctx.tenant_id, subject_id, chain_id)
        epoch = self.repo.subject_epoch(ctx.tenant_id, subject_id)
        if chain is None or (chain.live and version_epoch != epoch):
            raise NotFound(_NOT_FOUND, {"memory_id": memory_id})
        if chain.live:
            current = self.repo.version(ctx.tenant_id, subject_id, chain.current_memory_id)
            # A caller who may not see a memory may not learn it exists by deleting it.
            if current is None or not ctx.may_read(current.sensitivity, current.visibility):
                raise NotFound(_NOT_FOUND, {"memory_id": memory_id})
        return chain

    def _tombstone(
        self,
        ctx: AccessContext,
        subject_id: str,
        chain: Chain,
        job: DeletionJob,
        release: bool,
        prompted_by: str | None,
    ) -> None:
        """Tombstone the chain with its deletion job and audit entry in one transaction
        (``ConditionFailed`` when the chain changed meanwhile); ``release`` frees the fact's
        pointer too."""
        self.repo.tombstone_chain(
            ctx.tenant_id,
            subject_id,
            chain,
            job.deletion_id,
            job.requested_at,
            release_pointer=release,
            job=job,
            audit=self._audit(
                ctx,
                subject_id,
                "memory.delete",
                None,
                chain_id=chain.chain_id,
                deletion_id=job.deletion_id,
                detail={"prompted_by": prompted_by} if prompted_by else None,
            ),
            audit_expires_at=self._audit_expiry(job.requested_at),
        )

    def forget(self, ctx: AccessContext, subject_id: str) -> DeletionJob:
        """Forget a subject: one conditional write retires the subject's epoch, so every
        memory of theirs is unreadable at once; the purge then clears each copy."""
        ctx.require(Scope.MEMORY_DELETE)
        ctx.require_subject(subject_id)
        self._require_reads_all(ctx, subject_id)
        for _ in range(_RETRIES):
            epoch = self.repo.subject_epoch(ctx.tenant_id, subject_id)
            # Forget times only grow, past anything made after the last forget (which is
            # stamped at least a millisecond past it): a forget covers all made before it.
            at = made_after_forget(
                self.clock.now(), self.repo.forgotten_at(ctx.tenant_id, subject_id)
            )
            job = self._new_job(ctx, subject_id, DeletionScope.SUBJECT, f"epoch:{epoch}", at)
            try:
                self.repo.retire_subject_epoch(
                    ctx.tenant_id,
                    subject_id,
                    epoch,
                    job,
                    self._audit(
                        ctx, subject_id, "subject.forget", None, deletion_id=job.deletion_id
                    ),
                    self._audit_expiry(job.requested_at),
                )
            except ConditionFailed:
                continue
            logger.info(
                "subject forget requested",
                extra={
                    "tenant_id": ctx.tenant_id,
                    "subject_id": subject_id,
                    "deletion_id": job.deletion_id,
                    "epoch": epoch,
                },
            )
            return self._launch(job)
        raise VersionConflict("the subject kept changing while forgetting; retry")

    def _require_reads_all(self, ctx: AccessContext, subject_id: str) -> None:
        """Forgetting is erasure of everything held about the subject. A person's token
        (no agent role: the subject's own, or the tenant's service acting on an erasure
        request) may always ask for it; that must never depend on what one token can read,
        or memories visible to two different agent roles could never be erased. An agent
        may only delete what it may read, so an agent's token must be able to read every
        memory held (every version not yet deleted or expired: sensitivity and
        visibility). The refusal says only that some memory is beyond the token.

        Forgetting also erases the subject's sessions, runs and artifacts, which carry a
        sensitivity of their own (no visibility). An agent below the top ceiling (pii) is
        refused outright rather than after looking for them: it could not read a pii
        session message, run or artifact, nor delete one directly, and the refusal must
        not depend on whether one exists."""
        if ctx.agent_role is None:
            return
        if ctx.max_sensitivity.rank < Sensitivity.PII.rank:
            raise Forbidden(
                "forgetting a subject erases its sessions, runs and artifacts of every "
                "sensitivity; an agent's token may ask for it only with max_sensitivity "
                "pii (and a role that reads every memory); the subject or the tenant's "
                "service may always",
                {"subject_id": subject_id, "max_sensitivity": ctx.max_sensitivity.value},
            )
        now = self.clock.now()
        epoch = self.repo.subject_epoch(ctx.tenant_id, subject_id)
        versions, chains = self.repo.subject_items(ctx.tenant_id, subject_id)
        live = {c.chain_id for c in chains if c.live and c.subject_epoch == epoch}
        for v in versions:
            held = (
                v.chain_id in live
                and v.subject_epoch == epoch
                and now < v.expires_at
                and v.status is not MemoryStatus.DELETED
            )
            if held and not ctx.may_read(v.sensitivity, v.visibility):
                raise Forbidden(
                    "the subject holds memories this agent's token may not read (above its "
                    "max_sensitivity or outside its role's visibility); an agent forgets a "
                    "subject only when it may read every memory; the subject or the "
                    "tenant's service may always",
                    {"subject_id": subject_id},
                )

    def deletion_status(self, ctx: AccessContext, deletion_id: str) -> DeletionJob:
        if not ({Scope.MEMORY_READ, Scope.MEMORY_DELETE} & ctx.scopes):
            ctx.require(Scope.MEMORY_READ)
        job = self.repo.job(ctx.tenant_id, deletion_id)
        allowed = job is not None and (
            Scope.SUBJECTS_ANY in ctx.scopes or ctx.subject_id == job.subject_id
        )
        if job is None or not allowed:
            raise NotFound("no deletion with this id", {"deletion_id": deletion_id})
        return job

    def _new_job(
        self,
        ctx: AccessContext,
        subject_id: str,
        scope: DeletionScope,
        target: str,
        at: datetime | None = None,
    ) -> DeletionJob:
        now = at or self.clock.now()
        return DeletionJob(
            deletion_id=self.ids.new_id("del"),
            tenant_id=ctx.tenant_id,
            subject_id=subject_id,
            scope=scope,
            target=target,
            # The tombstone commits with the job, so a job is born BLOCKED.
            status=DeletionState.BLOCKED,
            requested_by=ctx.requester,
            requested_at=now,
            completed_at=None,
            copies=[
                CopyStatus(name=name, status=state, updated_at=now, reason=reason)
                for name, (state, reason) in INITIAL_COPIES.items()
            ],
        )

    def _existing_job(self, ctx: AccessContext, chain: Chain, memory_id: str) -> DeletionJob:
        """Deleting again is the same deletion, for the principal that asked for it; an
        unfinished purge is resumed. To anyone else a deleted id is absent exactly as an
        id never used is (the purged versions no longer say who may read them, and a
        deletion answered to a caller who may not read the memory told it the memory
        had existed)."""
        job = self.repo.job(ctx.tenant_id, chain.deletion_id or "")
        if job is None or job.requested_by != ctx.requester:
            raise NotFound(_NOT_FOUND, {"memory_id": memory_id})
        if job.status is not DeletionState.COMPLETED:
            return self._launch(job)
        return job

    def _launch(self, job: DeletionJob) -> DeletionJob:
        self.purge.launch(job.tenant_id, job.deletion_id, resume=job.status is DeletionState.FAILED)
        fresh = self.repo.job(job.tenant_id, job.deletion_id)
        return fresh or job

    # ---------------------------------------------------------------------- helpers

    def _audit(
        self,
        ctx: AccessContext,
        subject_id: str,
        action: str,
        memory: Memory | None,
        *,
        chain_id: str | None = None,
        deletion_id: str | None = None,
        detail: dict[str, Any] | None = None,
    ) -> AuditEvent:
        return AuditEvent(
            event_id=self.ids.new_id("evt"),
            at=self.clock.now(),
            action=action,
            actor=ctx.principal,
            tenant_id=ctx.tenant_id,
            subject_id=subject_id,
            memory_id=memory.memory_id if memory else None,
            chain_id=memory.chain_id if memory else chain_id,
            version=memory.version if memory else None,
            deletion_id=deletion_id,
            request_id=memory.request_id if memory else None,
            detail=detail,
        )

    def check_prompted_by(self, ctx: AccessContext, subject_id: str, ref: str) -> None:
        """A ``prompted_by`` must name a recall or feedback of this tenant and subject;
        any other (another tenant's, another subject's, expired, unknown) is the same
        ``not_found``, so the answer tells nothing about others' traces."""
        if not re.fullmatch(r"(fbk|rcl)_[0-9a-f]{32}", ref):
            raise ValidationFailed(
                "prompted_by must be a recall id (rcl_...) or a feedback id (fbk_...)",
                {"field": "prompted_by"},
            )
        now = self.clock.now()
        found = self.traces is not None and (
            self.traces.recall(ctx.tenant_id, subject_id, ref, now) is not None
            if ref.startswith("rcl_")
            else any(
                f.feedback_id == ref
                for f in self.traces.feedback(ctx.tenant_id, subject_id, now, limit=10_000)
            )
        )
        if not found:
            raise NotFound(
                "prompted_by names no recall or feedback of this subject",
                {"field": "prompted_by"},
            )

    def _audit_expiry(self, now: datetime) -> datetime:
        return now + timedelta(days=self.settings.audit_retention_days)

    def _log(self, message: str, m: Memory) -> None:
        logger.info(
            message,
            extra={
                "tenant_id": m.tenant_id,
                "subject_id": m.subject_id,
                "memory_id": m.memory_id,
                "chain_id": m.chain_id,
                "version": m.version,
                "status": m.status.value,
                "sensitivity": m.sensitivity.value,
            },
        )


def _check_replacing(
    ctx: AccessContext, previous: Memory, cmd: MemoryWrite, decision: write_policy.Decision
) -> None:
    """Refuse the write unless the caller may replace the fact's current version
    (``previous``) with the one ``cmd`` writes, as the policy decided it: its status, its
    class and its readers."""
    provenance.check_supersede(
        ctx,
        (previous.status, previous.source.type),
        decision.status,
        content_changed=cmd.content != previous.content,
    )
    provenance.check_reclassify(
        ctx,
        (previous.sensitivity, previous.visibility),
        (decision.sensitivity, list(cmd.visibility)),
    )


def _policy_detail(
    decision: write_policy.Decision, consent: bool, memory: Memory
) -> dict[str, Any]:
    """What the write policy decided, for the audit trail: rule and class names only
    (a write that reached the store passed the secret scan; a refused one is not stored)."""
    inferred = memory.source.type is SourceType.MODEL_INFERRED
    return {
        "secret_scan": "clean",
        "pii_classes": list(decision.pii_types),
        "consent": consent,
        "sensitivity": decision.sensitivity.value,
        "status": decision.status.value,
        "source_type": memory.source.type.value,
        "rule": "model_inferred_starts_as_candidate"
        if decision.status is MemoryStatus.CANDIDATE
        else ("confirmed_inference" if inferred else "consented_write"),
    }


def _encode_token(memory_id: str | None) -> str | None:
    return paging.encode_after(memory_id, version=2)


def _decode_token(token: str | None) -> str | None:
    """The token names only the memory id a page stopped after; the owner always comes
    from the caller."""
    return paging.decode_after(token, lambda after: bool(_MEMORY_ID.fullmatch(after)))


def _draft(cmd: MemoryWrite) -> write_policy.Draft:
    """What the write policy judges of a new memory."""
    return write_policy.Draft(
        content=cmd.content,
        canonical_key=cmd.canonical_key,
        tags=cmd.tags,
        scope=cmd.scope,
        source=cmd.source,
        sensitivity=cmd.sensitivity,
        consent=cmd.consent,
        identifiers={"request_id": cmd.request_id, "artifact_id": cmd.artifact_id},
        visibility=list(cmd.visibility),
    )


def _withheld_through(ctx: AccessContext, versions: Sequence[Memory]) -> int:
    """The newest version of a chain this caller may not read by its classification
    (sensitivity or visibility), 0 if none: no version up to it may be shown."""
    return max(
        (v.version for v in versions if not ctx.may_read(v.sensitivity, v.visibility)),
        default=0,
    )
