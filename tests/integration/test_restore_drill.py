"""Restore drill: a point-in-time copy of the memory table, deletes after it, then
``restore-replay`` — and the whole read surface of the restored service is searched for
anything deleted.

The copy is taken after every memory is written and indexed; then one memory is deleted,
a corrected chain (two versions) is deleted, and a whole subject is forgotten. The
restored table holds all of them again, and the index rebuilt from it does too; the
replay must take every one out of every read: get (each version id), history, list (each
status), export, recall (hybrid, keyword, vector), working-memory assembly, the raw table
and the index. Memories that were not deleted must still be served, so the oracle cannot
pass by serving nothing.

moto stands in for DynamoDB: its point-in-time restore is played by copying the items
into a new table without a stream or TTL (what a real restore gives, see
``_copy_table``); the deletion log lives in its own table, which the restore leaves alone.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from memvault.embeddings.hashing import HashingEmbedder
from memvault_local.admin import restore_replay
from memvault_wire.context import ContextRequest
from memvault_wire.errors import NotFound
from memvault_wire.memory import MemoryPatch
from memvault_wire.recall import RecallRequest
from tests.integration.test_purge_pipeline import _copy_table, _services_over, make_rig_index
from tests.support import reliability
from tests.support.harness import ALL_SCOPES, a_write, ctx
from tests.support.recall import RecallRig, make_rig

EMBEDDER = HashingEmbedder()
#: Marker words, one per memory: words, not digits, which random ids and hashes contain.
KEPT = {"u-1": "Lin rides the heron ferry", "u-3": "Ana keeps bees near the lighthouse"}
DELETED = "Lin's locker code sits under the walrus poster"
CORRECTED = ("Lin's badge pin is the pelican sticker", "Lin's badge pin is the albatross sticker")
FORGOTTEN = ("Kim's spare key is under the narwhal mat", "Kim's safe opens with the ocelot dial")
GONE_WORDS = ("walrus", "pelican", "albatross", "narwhal", "ocelot")


@pytest.fixture
def rig() -> Iterator[RecallRig]:
    with mock_aws():
        yield make_rig("embedded", EMBEDDER, recall_relevance_floor=0.05)


def _write(rig: RecallRig, subject: str, content: str, n: int) -> Any:
    body = a_write(
        request_id=f"{subject}-{n}", content=content, canonical_key=None, scope={}, tags=[]
    )
    return rig.services.memory.write(ctx("acme", subject), subject, body).memory


def _surface(services: Any, subject: str, query: str) -> dict[str, str]:
    """Everything the restored service shows a subject, as one text per read."""
    me = ctx("acme", subject, scopes=ALL_SCOPES)
    memory = services.memory
    shown: dict[str, str] = {}
    for status in (None, "active", "candidate"):
        page = memory.list_memories(me, subject, status=status, limit=100)
        shown[f"list:{status or 'all'}"] = " ".join(m.content for m in page.items)
    shown["export"] = str(memory.export(me, subject))
    for mode in ("hybrid", "keyword", "vector"):
        found = services.recall.recall(me, subject, RecallRequest(query=query, mode=mode))
        shown[f"recall:{mode}"] = " ".join(i.memory.content for i in found.items)
    assembled = services.context.assemble(
        me, subject, ContextRequest(goal="answer", token_budget=8000, query=query)
    )
    shown["context"] = assembled.rendered
    return shown


def test_restore_replay_leaves_nothing_deleted_on_any_read(rig: RecallRig) -> None:
    kept = {s: _write(rig, s, text, 0) for s, text in KEPT.items()}
    deleted = _write(rig, "u-1", DELETED, 1)
    first = _write(rig, "u-1", CORRECTED[0], 2)
    second = rig.services.memory.correct(
        ctx(), "u-1", first.memory_id, MemoryPatch(expected_version=1, content=CORRECTED[1])
    )
    forgotten = [_write(rig, "u-2", text, i) for i, text in enumerate(FORGOTTEN)]
    rig.sync()
    table = rig.services.memory.repo.db.names["memory"]
    backup = f"{table}-restored"
    _copy_table(rig.client, table, backup)  # the point in time: before any delete

    rig.services.memory.delete(ctx(), "u-1", deleted.memory_id)
    rig.services.memory.delete(ctx(), "u-1", second.memory_id)
    rig.services.memory.forget(ctx("acme", "u-2"), "u-2")
    index = make_rig_index(rig, backup)  # rebuilt from the restored copy
    gone_chains = {deleted.chain_id, first.chain_id, *(m.chain_id for m in forgotten)}
    assert gone_chains <= set(index.documents("acme")), "the drill must start resurrected"

    report = restore_replay(
        rig.settings, backup, tenant_id="acme", out=io.StringIO(), client=rig.client, index=index
    )
    restored = _services_over(rig, backup, index)

    violations: list[str] = []
    checks = 0
    gone_versions = [
        ("u-1", deleted.memory_id),
        ("u-1", first.memory_id),
        ("u-1", second.memory_id),
        *(("u-2", m.memory_id) for m in forgotten),
    ]
    for subject, memory_id in gone_versions:
        for read in ("get", "history"):
            checks += 1
            try:
                getattr(restored.memory, read)(ctx("acme", subject), subject, memory_id)
                violations.append(f"{read} {memory_id}")
            except NotFound:
                pass
    queries = {"u-1": "locker code badge pin", "u-2": "spare key safe", "u-3": "bees"}
    for subject, query in queries.items():
        for read, text in _surface(restored, subject, query).items():
            checks += 1
            violations += [f"{read} of {subject} shows {w}" for w in GONE_WORDS if w in text]
    raw = str(rig.client.scan(TableName=backup)["Items"])
    checks += 1
    violations += [f"the restored table holds {w}" for w in GONE_WORDS if w in raw]
    for chain in sorted(gone_chains):
        checks += 1
        held = index.get("acme", chain)
        if held is None or held[1]["doc_type"] != "tombstone":
            violations.append(f"index document of {chain} is not a tombstone")
    # Not vacuous: what was never deleted is still there on the same reads.
    missing = [
        f"{s}: {read}"
        for s, m in kept.items()
        for read, text in _surface(restored, s, KEPT[s]).items()
        if read not in ("list:candidate",) and KEPT[s].split()[-1] not in text
    ]

    reliability.record(
        "restore-drill",
        category="deletion",
        fault="point-in-time restore of the memory table taken before a delete, a deleted "
        "corrected chain and a forgotten subject; index rebuilt from the restored copy",
        oracle="no deleted content on get, history, list, export, recall (3 modes), "
        "context, the raw table or the index; kept memories still served",
        seeds=1,
        operations=checks,
        violations=len(violations) + len(missing),
        store="dynamodb",
        details={"deletions_replayed": report.deletions, "chains": report.chains},
    )
    assert violations == []
    assert missing == [], "the restored service no longer serves memories it kept"
    assert report.deletions == 3
