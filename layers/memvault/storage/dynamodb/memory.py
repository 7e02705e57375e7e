"""The memory store on DynamoDB: the memory table and its companions (idempotency,
audit, deletions), behind ``MemoryStore``, ``DeletionJobs`` and ``AuditLog``.

Each write that changes what may be read is one DynamoDB transaction, so that a crash
at any point leaves either all of it or none of it. Key layout: ``storage/dynamodb/keys.py``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime
from typing import Any

from memvault.clock import iso, parse_iso
from memvault.storage.codecs.memory import (
    job_from_item,
    job_to_item,
    memory_from_item,
    memory_to_item,
)
from memvault.storage.dynamodb import keys, subjects
from memvault.storage.dynamodb.artifacts import add_reference
from memvault.storage.dynamodb.dynamo import Dynamo, TransactionConflict, Tx, key, to_attr, to_item
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.ports.memory import (
    LIVE,
    TOMBSTONED,
    AuditEvent,
    Chain,
    DeletionLogEntry,
    ForgetState,
    IdempotencyRecord,
    IndexStatusUpdate,
    ListFilter,
    NewVersion,
    StoredVersion,
    keyed_chain_slot,
    request_memory_id,
)
from memvault_wire.memory import (
    CopyState,
    DeletionJob,
    DeletionState,
    Memory,
    MemoryStatus,
)

#: What each labelled transaction item's failed condition means.
_CAUSES = {
    "idempotency": Conflict.IDEMPOTENCY,
    "chain": Conflict.VERSION,
    "pointer": Conflict.POINTER,
    "previous": Conflict.PREVIOUS,
    "epoch": Conflict.EPOCH,
    "artifact": Conflict.ARTIFACT,
    "version": Conflict.EXISTS,
    "current": Conflict.ABSENT,
    "job": Conflict.EXISTS,
    "log": Conflict.EXISTS,
}


def _transact(db: Dynamo, tx: Tx) -> None:
    try:
        db.transact(tx)
    except TransactionConflict as err:
        causes = (_CAUSES.get(label, Conflict.STATE) for label in err.failed)
        raise ConditionFailed(*causes) from err


_LOOKUPS: ThreadPoolExecutor | None = None
_LOOKUPS_LOCK = threading.Lock()


def _lookups() -> ThreadPoolExecutor:
    """Threads for reads that DynamoDB cannot batch (a fact's newest generation is a
    query), made on first use and shared by the process."""
    global _LOOKUPS
    with _LOOKUPS_LOCK:
        if _LOOKUPS is None:
            _LOOKUPS = ThreadPoolExecutor(max_workers=8, thread_name_prefix="memvault-lookup")
        return _LOOKUPS


def _pointer_sk(fact: str | None) -> str | None:
    return f"{keys.POINTER_PREFIX}{fact}" if fact else None


def chain_from_item(item: dict[str, Any]) -> Chain:
    return Chain(
        chain_id=item["chain_id"],
        state=item["state"],
        current_memory_id=item["current_memory_id"],
        current_version=item["current_version"],
        versions=item.get("versions", []),
        fact=(item.get("pointer_sk") or "").removeprefix(keys.POINTER_PREFIX) or None,
        subject_epoch=item.get("subject_epoch", 0),
        deletion_id=item.get("deletion_id"),
        ttl=item.get("ttl"),
        artifact_ids=tuple(sorted(item.get("artifact_ids") or ())),
    )


class DynamoMemoryStore:
    """``MemoryStore``, ``DeletionJobs`` and ``AuditLog`` on the DynamoDB tables."""

    def __init__(self, dynamo: Dynamo) -> None:
        self.db = dynamo

    @staticmethod
    def _version_item(m: Memory) -> dict[str, Any]:
        return {
            "pk": keys.subject_pk(m.tenant_id, m.subject_id),
            "sk": keys.version_sk(m.memory_id),
            **memory_to_item(m),
        }

    @staticmethod
    def _job_item(job: DeletionJob) -> dict[str, Any]:
        return {
            "pk": keys.deletion_pk(job.tenant_id, job.deletion_id),
            "sk": keys.JOB_SK,
            **job_to_item(job),
        }

    # -- reads

    def reachable(self) -> bool:
        """Whether the memory table answers (health checks)."""
        try:
            self.db.client.describe_table(TableName=self.db.names["memory"])
        except Exception:
            return False
        return True

    def subject_epoch(self, tenant_id: str, subject_id: str) -> int:
        return subjects.subject_epoch(self.db, tenant_id, subject_id)

    def forgotten_at(self, tenant_id: str, subject_id: str) -> datetime | None:
        item = self.db.get("memory", keys.subject_pk(tenant_id, subject_id), keys.SUBJECT_META_SK)
        return parse_iso(item["forgotten_at"]) if item and item.get("forgotten_at") else None

    def forget_state(self, tenant_id: str, subject_id: str) -> ForgetState:
        item = self.db.get("memory", keys.subject_pk(tenant_id, subject_id), keys.SUBJECT_META_SK)
        if not item:
            return ForgetState(epoch=0, forgotten_at=None)
        at = item.get("forgotten_at")
        return ForgetState(epoch=int(item["epoch"]), forgotten_at=parse_iso(at) if at else None)

    def locate(self, tenant_id: str, subject_id: str, memory_id: str) -> tuple[str, int] | None:
        """The chain and subject epoch of a version, purged (tombstone) or not."""
        item = self.db.get(
            "memory", keys.subject_pk(tenant_id, subject_id), keys.version_sk(memory_id)
        )
        return (item["chain_id"], int(item.get("subject_epoch", 0))) if item else None

    def version(self, tenant_id: str, subject_id: str, memory_id: str) -> Memory | None:
        """A version with its content; ``None`` when absent or purged."""
        item = self.db.get(
            "memory", keys.subject_pk(tenant_id, subject_id), keys.version_sk(memory_id)
        )
        return memory_from_item(item) if item and item.get("type") == "memory" else None

    def versions(self, tenant_id: str, subject_id: str, memory_ids: list[str]) -> list[Memory]:
        pk = keys.subject_pk(tenant_id, subject_id)
        items = self.db.get_many("memory", [(pk, keys.version_sk(m)) for m in memory_ids])
        return [memory_from_item(i) for i in items if i.get("type") == "memory"]

    def chain(self, tenant_id: str, subject_id: str, chain_id: str) -> Chain | None:
        item = self.db.get(
            "memory", keys.subject_pk(tenant_id, subject_id), keys.chain_sk(chain_id)
        )
        # A keyed chain's slot may hold another chain of the same generation (one made
        # after this one's head expired and was removed by TTL).
        return chain_from_item(item) if item and item["chain_id"] == chain_id else None

    def pointer(self, tenant_id: str, subject_id: str, fact: str) -> str | None:
        """The fact's newest chain, live or not: the head keyed by the highest generation;
        for a fact with none, the chain a pointer item of the earlier layout names."""
        return self._newest_chains(tenant_id, subject_id, [fact])[fact]

    def pointers(self, tenant_id: str, subject_id: str, facts: Sequence[str]) -> list[str]:
        found = self._newest_chains(tenant_id, subject_id, facts).values()
        return [c for c in found if c is not None]

    def _newest_chains(
        self, tenant_id: str, subject_id: str, facts: Sequence[str]
    ) -> dict[str, str | None]:
        """Per fact, its newest chain (see ``pointer``). A fact's generations are found by
        a query each, which DynamoDB cannot batch: the queries run side by side, beside one
        batch read of the earlier layout's pointer items, so that the answer takes about one
        round trip (recall names up to 30 facts)."""
        pk = keys.subject_pk(tenant_id, subject_id)
        unique = list(dict.fromkeys(facts))
        if not unique:
            return {}
        newest = {
            fact: _lookups().submit(
                self.db.query,
                "memory",
                pk,
                keys.fact_chains_prefix(fact),
                limit=1,
                newest_first=True,
            )
            for fact in unique
        }
        legacy = {
            str(item["sk"]).removeprefix(keys.POINTER_PREFIX): str(item["chain_id"])
            for item in self.db.get_many(
                "memory", [(pk, f"{keys.POINTER_PREFIX}{fact}") for fact in unique]
            )
        }
        found: dict[str, str | None] = {}
        for fact, query in newest.items():
            items, _ = query.result()
            found[fact] = str(items[0]["chain_id"]) if items else legacy.get(fact)
        return found

    def revalidation(
        self,
        tenant_id: str,
        subject_id: str,
        memory_ids: Sequence[str],
        chain_ids: Sequence[str],
    ) -> tuple[int, dict[str, StoredVersion], list[Chain]]:
        """One batch read: the subject's epoch, versions and chain heads."""
        pk = keys.subject_pk(tenant_id, subject_id)
        wanted = [(pk, keys.SUBJECT_META_SK)]
        wanted += [(pk, keys.version_sk(m)) for m in memory_ids]
        wanted += [(pk, keys.chain_sk(c)) for c in chain_ids]
        epoch = 0
        versions: dict[str, StoredVersion] = {}
        chains: list[Chain] = []
        asked = set(chain_ids)
        for item in self.db.get_many("memory", wanted):
            sk = str(item["sk"])
            if sk == keys.SUBJECT_META_SK:
                epoch = int(item["epoch"])
            elif sk.startswith(keys.CHAIN_PREFIX):
                if item["chain_id"] in asked:
                    chains.append(chain_from_item(item))
            else:
                versions[str(item["memory_id"])] = StoredVersion(
                    memory_id=str(item["memory_id"]),
                    chain_id=str(item["chain_id"]),
                    memory=memory_from_item(item) if item.get("type") == "memory" else None,
                    superseded_by=item.get("superseded_by"),
                )
        return epoch, versions, chains

    def subject_version_ids(self, tenant_id: str, subject_id: str) -> list[tuple[str, str]]:
        pk = keys.subject_pk(tenant_id, subject_id)
        return [
            (str(i["memory_id"]), str(i["chain_id"]))
            for i in self.db.query_all("memory", pk, keys.VERSION_PREFIX)
        ]

    def idempotency(
        self, tenant_id: str, subject_id: str, request_id: str
    ) -> IdempotencyRecord | None:
        """A memory write's record is the version it created (or that version's ids-only
        tombstone once purged, which has no payload hash): its id derives from the request
        id, so the lookup is one read and the record costs no write of its own."""
        memory_id = request_memory_id(tenant_id, subject_id, request_id)
        pk = keys.subject_pk(tenant_id, subject_id)
        # One batch read, with the record the earlier layout kept in its own table (7 days).
        version, legacy = self.db.get_across(
            [
                ("memory", pk, keys.version_sk(memory_id)),
                ("idempotency", pk, keys.idempotency_sk(request_id)),
            ]
        )
        if legacy is not None:
            return IdempotencyRecord(request_id, legacy["payload_hash"], legacy["memory_id"])
        if version is None:
            return None
        return IdempotencyRecord(request_id, str(version.get("payload_hash") or ""), memory_id)

    def list_versions(
        self,
        tenant_id: str,
        subject_id: str,
        *,
        now: datetime,
        where: ListFilter,
        cursor: str | None,
        page_size: int,
    ) -> tuple[list[Memory], str | None]:
        """One page of unexpired versions in the statuses asked for; the cursor is the
        memory id the previous page stopped after."""
        names = {"#status": "status", "#ttl": "ttl"}
        values: dict[str, Any] = {":now": int(now.timestamp())}
        clauses = ["#ttl > :now"]
        status_keys = []
        for i, status in enumerate(where.statuses):
            values[f":s{i}"] = status
            status_keys.append(f":s{i}")
        clauses.append(f"#status IN ({', '.join(status_keys)})")
        if where.kind:
            names["#kind"] = "kind"
            values[":kind"] = where.kind
            clauses.append("#kind = :kind")
        if where.canonical_key:
            values[":ckey"] = where.canonical_key
            clauses.append("canonical_key = :ckey")
        if where.tag:
            values[":tag"] = where.tag
            clauses.append("contains(tags, :tag)")
        items, last = self.db.query(
            "memory",
            keys.subject_pk(tenant_id, subject_id),
            keys.VERSION_PREFIX,
            start_sk=keys.version_sk(cursor) if cursor else None,
            limit=page_size,
            filter_expression=" AND ".join(clauses),
            names=names,
            values=values,
        )
        return [memory_from_item(i) for i in items], (
            last.removeprefix(keys.VERSION_PREFIX) if last else None
        )

    def subject_items(self, tenant_id: str, subject_id: str) -> tuple[list[Memory], list[Chain]]:
        """Every version and chain head of a subject (export, forget)."""
        pk = keys.subject_pk(tenant_id, subject_id)
        versions = [
            memory_from_item(i)
            for i in self.db.query_all("memory", pk, keys.VERSION_PREFIX)
            if i.get("type") == "memory"
        ]
        chains = [chain_from_item(i) for i in self.db.query_all("memory", pk, keys.CHAIN_PREFIX)]
        return versions, chains

    def rebuild_records(self, tenant_id: str | None = None) -> Iterator[dict[str, Any]]:
        """The memory table scanned page by page (a large table streams, never loads)."""
        prefix = f"{tenant_id}#" if tenant_id is not None else ""
        for item in self.db.scan_prefix("memory", prefix):
            if item.get("type") == "chain":
                owner, _, subject = str(item["pk"]).partition("#")
                yield {**item, "tenant_id": owner, "subject_id": subject}
            else:
                yield item

    # -- writes

    def commit_version(self, new: NewVersion) -> None:
        """New version (its own idempotency record), chain head (compare-and-set; a new
        keyed chain's head is its fact's pointer), old version superseded, artifact
        reference, subject epoch unchanged, audit event: all or nothing.

        A new governed write is three written items (version, head, audit) and one
        condition check. Raises ``ConditionFailed`` naming what failed.
        """
        m = new.memory
        pk = keys.subject_pk(m.tenant_id, m.subject_id)
        table = self.db.names["memory"]
        version_item = self._version_item(m)
        if new.idempotency is not None:
            expected_id = request_memory_id(m.tenant_id, m.subject_id, new.idempotency.request_id)
            if m.memory_id != expected_id or new.idempotency.memory_id != m.memory_id:
                raise ValueError("an idempotent write's memory id must derive from its request id")
            version_item["payload_hash"] = new.idempotency.payload_hash
            if new.previous is not None and new.previous.memory_id == m.memory_id:
                # A retry that read the chain its first attempt made: that is the replay.
                raise ConditionFailed(Conflict.IDEMPOTENCY)
        tx = Tx()
        # The version's id derives from the request id: an existing item is a replay.
        tx.add(
            "idempotency" if new.idempotency is not None else "version",
            {
                "Put": {
                    "TableName": table,
                    "Item": to_item(version_item),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        )
        ttl = new.head_ttl
        if new.expected_version is None:
            if new.fact is not None and not keys.chain_sk(m.chain_id).startswith(
                keys.fact_chains_prefix(new.fact)
            ):
                raise ValueError("a new keyed chain's id must name its fact (keyed_chain_id)")
            # A keyed head's key is its fact and generation: creating it claims the fact.
            tx.add("pointer" if new.fact is not None else "chain", self._new_head(new, pk, ttl))
        else:
            tx.add("chain", self._advanced_head(new, pk, ttl))
            if new.fact is not None and keyed_chain_slot(m.chain_id) is None:
                # A keyed chain of the earlier layout: its pointer item lives as long as it.
                tx.add("pointer", self._old_layout_pointer(new.fact, m.chain_id, pk, ttl))
        if new.previous is not None:
            tx.add("previous", self._superseded(new.previous, m, pk))
        if m.artifact_id and (new.previous is None or new.previous.artifact_id != m.artifact_id):
            tx.add(
                "artifact",
                add_reference(
                    self.db.names["artifacts"],
                    m.tenant_id,
                    m.subject_id,
                    m.artifact_id,
                    f"memory:{m.chain_id}",
                    made_after=new.artifacts_after,
                    made_under=m.subject_epoch,
                ),
            )
        tx.add("epoch", self._epoch_check(pk, m.subject_epoch))
        tx.add("audit", self._audit_put(new.audit, new.audit_expires_at))
        _transact(self.db, tx)

    def _new_head(self, new: NewVersion, pk: str, ttl: int | None) -> dict[str, Any]:
        """The head of a new chain, whose first version is ``new.memory``."""
        m = new.memory
        return {
            "Put": {
                "TableName": self.db.names["memory"],
                "Item": to_item(
                    {
                        "pk": pk,
                        "sk": keys.chain_sk(m.chain_id),
                        "type": "chain",
                        "chain_id": m.chain_id,
                        "state": LIVE,
                        "current_memory_id": m.memory_id,
                        "current_version": m.version,
                        "versions": [m.memory_id],
                        "pointer_sk": _pointer_sk(new.fact),
                        "artifact_ids": {m.artifact_id} if m.artifact_id else None,
                        "subject_epoch": m.subject_epoch,
                        "created_at": iso(m.created_at),
                        "updated_at": iso(m.updated_at),
                        "ttl": ttl,
                    }
                ),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def _advanced_head(self, new: NewVersion, pk: str, ttl: int | None) -> dict[str, Any]:
        """The compare-and-set of a live chain's head from ``new.expected_version`` to
        ``new.memory``, adding its artifact (if any) to the chain's."""
        m = new.memory
        expression = (
            "SET current_memory_id = :mid, current_version = :v, "
            "versions = list_append(versions, :mids), updated_at = :now, #ttl = :ttl"
        )
        values: dict[str, Any] = {
            ":cid": to_attr(m.chain_id),
            ":mid": to_attr(m.memory_id),
            ":v": to_attr(m.version),
            ":mids": to_attr([m.memory_id]),
            ":now": to_attr(iso(m.updated_at)),
            ":ttl": to_attr(ttl),
            ":live": to_attr(LIVE),
            ":expected": to_attr(new.expected_version),
        }
        if m.artifact_id:
            expression += " ADD artifact_ids :aid"
            values[":aid"] = {"SS": [m.artifact_id]}
        return {
            "Update": {
                "TableName": self.db.names["memory"],
                "Key": key(pk, keys.chain_sk(m.chain_id)),
                "UpdateExpression": expression,
                "ConditionExpression": (
                    "chain_id = :cid AND #state = :live AND current_version = :expected"
                ),
                "ExpressionAttributeNames": {"#state": "state", "#ttl": "ttl"},
                "ExpressionAttributeValues": values,
            }
        }

    def _old_layout_pointer(
        self, fact: str, chain_id: str, pk: str, ttl: int | None
    ) -> dict[str, Any]:
        """The pointer item of a keyed chain of the earlier layout, kept as long as it."""
        return {
            "Put": {
                "TableName": self.db.names["memory"],
                "Item": to_item(
                    {
                        "pk": pk,
                        "sk": _pointer_sk(fact),
                        "type": "pointer",
                        "chain_id": chain_id,
                        "ttl": ttl,
                    }
                ),
                "ConditionExpression": "attribute_not_exists(pk) OR chain_id = :old",
                "ExpressionAttributeValues": {":old": to_attr(chain_id)},
            }
        }

    def _superseded(self, prev: Memory, m: Memory, pk: str) -> dict[str, Any]:
        """The previous version marked superseded by ``m``, if it is still what was read."""
        return {
            "Update": {
                "TableName": self.db.names["memory"],
                "Key": key(pk, keys.version_sk(prev.memory_id)),
                "UpdateExpression": (
                    "SET #status = :superseded, superseded_by = :mid, updated_at = :now"
                ),
                "ConditionExpression": "#status IN (:active, :candidate) AND version = :pv",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {
                    ":superseded": to_attr(MemoryStatus.SUPERSEDED.value),
                    ":mid": to_attr(m.memory_id),
                    ":now": to_attr(iso(m.updated_at)),
                    ":active": to_attr(MemoryStatus.ACTIVE.value),
                    ":candidate": to_attr(MemoryStatus.CANDIDATE.value),
                    ":pv": to_attr(prev.version),
                },
            }
        }

    def _epoch_check(self, pk: str, epoch: int) -> dict[str, Any]:
        check: dict[str, Any] = {
            "TableName": self.db.names["memory"],
            "Key": key(pk, keys.SUBJECT_META_SK),
        }
        if epoch == 0:
            check["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            check["ConditionExpression"] = "epoch = :epoch"
            check["ExpressionAttributeValues"] = {":epoch": to_attr(epoch)}
        return {"ConditionCheck": check}

    def _audit_put(self, event: AuditEvent, expires_at: datetime) -> dict[str, Any]:
        return {
            "Put": {
                "TableName": self.db.names["audit"],
                "Item": to_item(
                    {
                        "pk": keys.subject_pk(event.tenant_id, event.subject_id),
                        "sk": f"{iso(event.at)}#{event.event_id}",
                        "event_id": event.event_id,
                        "at": iso(event.at),
                        "action": event.action,
                        "actor": event.actor,
                        "tenant_id": event.tenant_id,
                        "subject_id": event.subject_id,
                        "memory_id": event.memory_id,
                        "chain_id": event.chain_id,
                        "version": event.version,
                        "deletion_id": event.deletion_id,
                        "request_id": event.request_id,
                        "detail": dict(event.detail) if event.detail else None,
                        "ttl": int(expires_at.timestamp()),
                    }
                ),
            }
        }

    def _deletion_log_put(self, job: DeletionJob) -> dict[str, Any]:
        # The deletion log lives apart from the memory table and has no expiry, so that
        # a memory table restored from backup can have it replayed.
        return {
            "Put": {
                "TableName": self.db.names["audit"],
                "Item": to_item(
                    {
                        "pk": keys.deletion_log_pk(job.tenant_id),
                        "sk": f"{iso(job.requested_at)}#{job.deletion_id}",
                        "deletion_id": job.deletion_id,
                        "tenant_id": job.tenant_id,
                        "subject_id": job.subject_id,
                        "scope": job.scope.value,
                        "target": job.target,
                        "requested_by": job.requested_by,
                        "requested_at": iso(job.requested_at),
                    }
                ),
                "ConditionExpression": "attribute_not_exists(pk)",
            }
        }

    def tombstone_chain(
        self,
        tenant_id: str,
        subject_id: str,
        chain: Chain,
        deletion_id: str,
        at: datetime,
        *,
        release_pointer: bool,
        job: DeletionJob | None,
        audit: AuditEvent | None,
        audit_expires_at: datetime | None,
    ) -> None:
        """Block every version of a chain at once: the head becomes a tombstone (kept without
        expiry), the current version is marked deleted, and (``release_pointer``) the canonical
        pointer is released so that the key can start a new chain.
        With ``job``, the deletion job and its log entry commit in the same transaction."""
        pk = keys.subject_pk(tenant_id, subject_id)
        tx = Tx()
        tx.add("chain", self._tombstoned_head(chain, pk, deletion_id, at))
        tx.add("current", self._deleted_current(chain, pk, deletion_id, at))
        # ``release_pointer`` needs no write for a keyed chain: a fact's pointer is its newest
        # chain, and a tombstoned newest chain lets the next write start the next generation.
        if release_pointer and chain.fact and keyed_chain_slot(chain.chain_id) is None:
            # A chain of the earlier layout: its pointer item is released.
            tx.add("pointer", self._released_pointer(chain, pk))
        if job is not None:
            tx.add(
                "job",
                {
                    "Put": {
                        "TableName": self.db.names["deletions"],
                        "Item": to_item(self._job_item(job)),
                        "ConditionExpression": "attribute_not_exists(pk)",
                    }
                },
            )
            tx.add("log", self._deletion_log_put(job))
        if audit is not None:
            assert audit_expires_at is not None
            tx.add("audit", self._audit_put(audit, audit_expires_at))
        _transact(self.db, tx)

    def _tombstoned_head(
        self, chain: Chain, pk: str, deletion_id: str, at: datetime
    ) -> dict[str, Any]:
        """The chain head turned into a tombstone (kept without expiry), if it is still
        live at the version that was read."""
        return {
            "Update": {
                "TableName": self.db.names["memory"],
                "Key": key(pk, keys.chain_sk(chain.chain_id)),
                "UpdateExpression": (
                    "SET #state = :deleted, deletion_id = :did, updated_at = :now REMOVE #ttl"
                ),
                "ConditionExpression": (
                    "chain_id = :cid AND #state = :live AND current_version = :v"
                ),
                "ExpressionAttributeNames": {"#state": "state", "#ttl": "ttl"},
                "ExpressionAttributeValues": {
                    ":cid": to_attr(chain.chain_id),
                    ":deleted": to_attr(TOMBSTONED),
                    ":did": to_attr(deletion_id),
                    ":now": to_attr(iso(at)),
                    ":live": to_attr(LIVE),
                    ":v": to_attr(chain.current_version),
                },
            }
        }

    def _deleted_current(
        self, chain: Chain, pk: str, deletion_id: str, at: datetime
    ) -> dict[str, Any]:
        """The chain's current version marked deleted, if it exists."""
        return {
            "Update": {
                "TableName": self.db.names["memory"],
                "Key": key(pk, keys.version_sk(chain.current_memory_id)),
                "UpdateExpression": (
                    "SET #status = :deleted, deletion_id = :did, updated_at = :now"
                ),
                "ConditionExpression": "attribute_exists(pk)",
                "ExpressionAttributeNames": {"#status": "status"},
                "ExpressionAttributeValues": {
                    ":deleted": to_attr(MemoryStatus.DELETED.value),
                    ":did": to_attr(deletion_id),
                    ":now": to_attr(iso(at)),
                },
            }
        }

    def _released_pointer(self, chain: Chain, pk: str) -> dict[str, Any]:
        """The pointer item of a keyed chain of the earlier layout deleted, if it still
        names the chain."""
        return {
            "Delete": {
                "TableName": self.db.names["memory"],
                "Key": key(pk, f"{keys.POINTER_PREFIX}{chain.fact}"),
                "ConditionExpression": "chain_id = :cid",
                "ExpressionAttributeValues": {":cid": to_attr(chain.chain_id)},
            }
        }

    def retire_subject_epoch(
        self,
        tenant_id: str,
        subject_id: str,
        epoch: int,
        job: DeletionJob,
        audit: AuditEvent,
        audit_expires_at: datetime,
    ) -> None:
        """Forget a subject at once: every memory written under ``epoch`` stops being readable.

        Writes racing with this fail their epoch check and re-read the new epoch."""
        pk = keys.subject_pk(tenant_id, subject_id)
        tx = Tx()
        update: dict[str, Any] = {
            "TableName": self.db.names["memory"],
            "Key": key(pk, keys.SUBJECT_META_SK),
            "UpdateExpression": "SET epoch = :next, forgotten_at = :now, deletion_id = :did, "
            "#type = :type",
            "ExpressionAttributeNames": {"#type": "type"},
            "ExpressionAttributeValues": {
                ":next": to_attr(epoch + 1),
                ":now": to_attr(iso(job.requested_at)),
                ":did": to_attr(job.deletion_id),
                ":type": to_attr("subject"),
            },
        }
        if epoch == 0:
            update["ConditionExpression"] = "attribute_not_exists(pk)"
        else:
            update["ConditionExpression"] = "epoch = :epoch"
            update["ExpressionAttributeValues"][":epoch"] = to_attr(epoch)
        tx.add("epoch", {"Update": update})
        tx.add(
            "job",
            {
                "Put": {
                    "TableName": self.db.names["deletions"],
                    "Item": to_item(self._job_item(job)),
                    "ConditionExpression": "attribute_not_exists(pk)",
                }
            },
        )
        tx.add("log", self._deletion_log_put(job))
        tx.add("audit", self._audit_put(audit, audit_expires_at))
        _transact(self.db, tx)

    def raise_epoch(
        self, tenant_id: str, subject_id: str, above: int, deletion_id: str, at: datetime
    ) -> None:
        try:
            # An epoch at or below ``above`` was forgotten before the replayed forget (or
            # never): ``at`` is its latest forget time.
            self.db.update(
                "memory",
                keys.subject_pk(tenant_id, subject_id),
                keys.SUBJECT_META_SK,
                "SET epoch = :next, deletion_id = :did, forgotten_at = :at, #type = :type",
                names={"#type": "type"},
                values={
                    ":next": above + 1,
                    ":retired": above,
                    ":did": deletion_id,
                    ":at": iso(at),
                    ":type": "subject",
                },
                condition="attribute_not_exists(epoch) OR epoch <= :retired",
            )
        except TransactionConflict:
            return  # already past it

    def purge_version(
        self,
        tenant_id: str,
        subject_id: str,
        memory_id: str,
        chain_id: str,
        deletion_id: str,
        at: datetime,
    ) -> None:
        """Replace one version of a tombstoned chain by an ids-only tombstone (idempotent).

        Content and every descriptive attribute are gone; the ids stay, so that a retried
        delete finds its job and a late index event finds the version deleted. A version
        that no longer exists (expired and removed by TTL) is left absent."""
        try:
            self.db.put(
                "memory",
                {
                    "pk": keys.subject_pk(tenant_id, subject_id),
                    "sk": keys.version_sk(memory_id),
                    "type": "memory-tombstone",
                    "memory_id": memory_id,
                    "chain_id": chain_id,
                    "status": MemoryStatus.DELETED.value,
                    "deletion_id": deletion_id,
                    "purged_at": iso(at),
                },
                condition="chain_id = :cid",
                values={":cid": chain_id},
            )
        except TransactionConflict:
            return  # absent already: nothing to purge

    # -- deletion jobs

    def job(self, tenant_id: str, deletion_id: str) -> DeletionJob | None:
        item = self.db.get("deletions", keys.deletion_pk(tenant_id, deletion_id), keys.JOB_SK)
        return job_from_item(item) if item else None

    def set_copy(
        self,
        tenant_id: str,
        deletion_id: str,
        copy: str,
        state: CopyState,
        at: datetime,
        reason: str | None = None,
        *,
        attempt: bool = False,
    ) -> None:
        """Record a copy's state and append it to the copy's history; ``attempt`` counts
        one more try at the copy."""
        event = {"status": state.value, "at": iso(at), "reason": reason}
        pk, sk = keys.deletion_pk(tenant_id, deletion_id), keys.JOB_SK
        try:
            self.db.update(
                "deletions",
                pk,
                sk,
                "SET copies.#copy.#status = :s, copies.#copy.updated_at = :at, "
                "copies.#copy.reason = :r, "
                "copies.#copy.attempts = if_not_exists(copies.#copy.attempts, :zero) + :inc, "
                "copies.#copy.history = "
                "list_append(if_not_exists(copies.#copy.history, :none), :e)",
                names={"#copy": copy, "#status": "status"},
                values={
                    ":s": state.value,
                    ":at": iso(at),
                    ":r": reason,
                    ":zero": 0,
                    ":inc": 1 if attempt else 0,
                    ":none": [],
                    ":e": [event],
                },
                condition="attribute_exists(copies.#copy)",
            )
        except TransactionConflict:
            # A job recorded before this copy existed: start its entry.
            self.db.update(
                "deletions",
                pk,
                sk,
                "SET copies.#copy = :c",
                names={"#copy": copy},
                values={
                    ":c": {
                        "status": state.value,
                        "updated_at": iso(at),
                        "reason": reason,
                        "attempts": 1 if attempt else 0,
                        "history": [event],
                    }
                },
            )

    def set_job_state(
        self,
        tenant_id: str,
        deletion_id: str,
        state: DeletionState,
        at: datetime,
    ) -> None:
        completed = iso(at) if state is DeletionState.COMPLETED else None
        self.db.update(
            "deletions",
            keys.deletion_pk(tenant_id, deletion_id),
            keys.JOB_SK,
            "SET #status = :s, completed_at = :c, updated_at = :now",
            names={"#status": "status"},
            values={":s": state.value, ":c": completed, ":now": iso(at)},
        )

    def put_job(self, job: DeletionJob) -> None:
        self.db.put("deletions", self._job_item(job))

    # -- index status

    def record_index_statuses(self, updates: Sequence[IndexStatusUpdate]) -> list[bool]:
        """One conditional update per version (DynamoDB has no cheaper batch for them)."""
        return [self._record_index_status(u) for u in updates]

    def _record_index_status(self, u: IndexStatusUpdate) -> bool:
        try:
            self.db.update(
                "memory",
                keys.subject_pk(u.tenant_id, u.subject_id),
                keys.version_sk(u.memory_id),
                "SET index_status = :s, indexed_version = :v, embedding_model = :m, "
                "indexed_at = :now",
                names={"#status": "status"},
                values={
                    ":s": u.index_status,
                    ":v": u.indexed_version,
                    ":m": u.embedding_model,
                    ":now": iso(u.at),
                    ":status": u.status,
                    ":version": u.version,
                },
                condition="#status = :status AND version = :version "
                "AND (attribute_not_exists(indexed_version) OR indexed_version <= :v)",
            )
        except TransactionConflict:
            return False
        return True

    # -- audit

    def events(self, tenant_id: str, subject_id: str) -> list[AuditEvent]:
        return [
            AuditEvent(
                event_id=i["event_id"],
                at=parse_iso(i["at"]),
                action=i["action"],
                actor=i["actor"],
                tenant_id=i["tenant_id"],
                subject_id=i["subject_id"],
                memory_id=i.get("memory_id"),
                chain_id=i.get("chain_id"),
                version=i.get("version"),
                deletion_id=i.get("deletion_id"),
                request_id=i.get("request_id"),
                detail=i.get("detail"),
            )
            for i in self.db.query_all("audit", keys.subject_pk(tenant_id, subject_id), "")
        ]

    def deletion_log(self, tenant_id: str | None) -> list[DeletionLogEntry]:
        """The deletion log (ids only, no expiry), oldest first, for one tenant or all."""
        if tenant_id is not None:
            items = list(self.db.query_all("audit", keys.deletion_log_pk(tenant_id), ""))
        else:
            items = [
                i
                for i in self.db.scan_prefix("audit", "")
                if str(i["pk"]).endswith(keys.deletion_log_pk(""))
            ]
        entries = [
            DeletionLogEntry(
                deletion_id=i["deletion_id"],
                tenant_id=i["tenant_id"],
                subject_id=i["subject_id"],
                scope=i["scope"],
                target=i["target"],
                requested_by=i["requested_by"],
                requested_at=parse_iso(i["requested_at"]),
            )
            for i in items
        ]
        return sorted(entries, key=lambda e: (e.requested_at, e.deletion_id))
