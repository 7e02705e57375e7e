"""Recall's contract, run against both search backends (embedded and a real OpenSearch).

Every memory reaches the index the way it would on AWS: our write commits to DynamoDB
(moto), the stream carries the record, the stream pump hands real-shaped batches to the
indexer handler. Ranking here uses the deterministic hashing embedder (unit-test only);
recall quality with the real model is measured by ``make bench``.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from moto import mock_aws

from memvault.embeddings.hashing import HashingEmbedder
from memvault.models.access import Scope
from memvault.search.documents import Stage, op_from_images
from memvault.storage.dynamodb import keys
from memvault.storage.dynamodb.dynamo import from_item
from memvault_wire.errors import Forbidden
from memvault_wire.memory import MemoryPatch, MemoryStatus, Sensitivity
from memvault_wire.recall import RecallRequest
from tests.support.harness import a_write, ctx
from tests.support.opensearch import opensearch_url
from tests.support.recall import BACKENDS, RecallRig, drop_opensearch_index, make_rig

EMBEDDER = HashingEmbedder()


@pytest.fixture(params=BACKENDS)
def rig(request: pytest.FixtureRequest) -> Iterator[RecallRig]:
    with mock_aws():
        url = opensearch_url() if request.param == "opensearch" else None
        built = make_rig(request.param, EMBEDDER, opensearch_url=url, recall_relevance_floor=0.1)
        try:
            yield built
        finally:
            if request.param == "opensearch":
                drop_opensearch_index(built.index)


def write(
    rig: RecallRig, content: str, subject: str = "u-1", tenant: str = "acme", **kw: Any
) -> Any:
    body = {"request_id": uuid.uuid4().hex, "canonical_key": None, "scope": {}, "tags": []}
    return rig.services.memory.write(
        ctx(tenant, subject), subject, a_write(content=content, **{**body, **kw})
    ).memory


def recall(
    rig: RecallRig, query: str, subject: str = "u-1", tenant: str = "acme", **kw: Any
) -> Any:
    caller_kw = {k: kw.pop(k) for k in ("agent_role", "max_sensitivity") if k in kw}
    return rig.services.recall.recall(
        ctx(tenant, subject, **caller_kw), subject, RecallRequest(query=query, **kw)
    )


def ids(result: Any) -> list[str]:
    return [i.memory.memory_id for i in result.items]


def test_a_written_memory_is_indexed_and_recalled_with_its_reasons(rig: RecallRig) -> None:
    target = write(rig, "Lin deploys the billing service on Thursdays")
    write(rig, "The office coffee machine is on the third floor")
    rig.sync()

    result = recall(rig, "when does Lin deploy billing")

    assert ids(result)[0] == target.memory_id
    top = result.items[0]
    assert "keyword" in top.why.matched_by and "vector" in top.why.matched_by
    assert top.provenance.version == 1 and top.provenance.source_type == target.source.type
    assert "authorization" in result.notice
    stored = rig.services.memory.get(ctx(), "u-1", target.memory_id)
    assert stored.index_status.value == "indexed"
    assert stored.embedding_model == f"{EMBEDDER.model_id}@{EMBEDDER.model_version}"


def test_hard_filters_hold_inside_the_search(rig: RecallRig) -> None:
    mine = write(rig, "invoice cache warms at midnight")
    write(rig, "invoice cache warms at midnight", subject="u-2")
    write(rig, "invoice cache warms at midnight", tenant="globex")
    oncall = write(rig, "invoice cache pager rota for oncall", visibility=["oncall"])
    pii = write(rig, "invoice cache owner phone is private", sensitivity="pii", consent=True)
    scoped = write(rig, "invoice cache settings for workspace w1", scope={"workspace": "w1"})
    rig.sync()

    plain = ids(recall(rig, "invoice cache", agent_role="planner"))
    assert mine.memory_id in plain
    assert oncall.memory_id not in plain and pii.memory_id not in plain
    assert len(plain) == len(set(plain)) == 2  # no other subject's or tenant's copy
    # A visibility list restricts agents: a person (no agent role) reads it.
    assert oncall.memory_id in ids(recall(rig, "invoice cache"))

    assert oncall.memory_id in ids(recall(rig, "invoice cache", agent_role="oncall"))
    assert pii.memory_id in ids(recall(rig, "invoice cache", max_sensitivity=Sensitivity.PII))
    assert ids(recall(rig, "invoice cache", scope={"workspace": "w1"})) == [scoped.memory_id]
    assert ids(recall(rig, "invoice cache", scope={"workspace": "w9"})) == []
    assert ids(recall(rig, "invoice cache", kinds=["procedural"])) == []
    assert ids(recall(rig, "invoice cache", tags=["nope"])) == []


def test_only_the_current_version_is_recalled(rig: RecallRig) -> None:
    old = write(rig, "Lin prefers answers in English", canonical_key="reply-language")
    rig.sync()
    new = rig.services.memory.correct(
        ctx(),
        "u-1",
        old.memory_id,
        MemoryPatch(expected_version=1, content="Lin prefers answers in Chinese"),
    )
    rig.sync()

    result = ids(recall(rig, "which language does Lin prefer for answers"))

    assert result == [new.memory_id]
    held = rig.index.get("acme", old.chain_id)
    assert held is not None and held[1]["memory_id"] == new.memory_id


def test_candidates_and_expired_memories_are_not_recalled(rig: RecallRig) -> None:
    write(rig, "Lin might like dark mode", source={"type": "model_inferred", "ref": "m"})
    short = write(rig, "Lin is on call this weekend", ttl_seconds=60)
    rig.sync()
    assert ids(recall(rig, "Lin on call weekend")) == [short.memory_id]

    rig.clock.advance(seconds=61)
    assert ids(recall(rig, "Lin on call weekend")) == []
    assert ids(recall(rig, "dark mode")) == []


def test_a_deleted_memory_stays_gone_when_an_old_insert_is_replayed(rig: RecallRig) -> None:
    """Replays the memory's own INSERT record after the delete reached the index: the
    tombstone's external version refuses it, however long after (no gc_deletes window)."""
    m = write(rig, "Lin's badge number is 4411")
    records = _stream_records(rig)
    insert = next(
        r for r in records if r["eventName"] == "INSERT" and _sk(r) == f"MEM#{m.memory_id}"
    )
    rig.sync()
    rig.services.memory.delete(ctx(), "u-1", m.memory_id)
    rig.sync()
    held = rig.index.get("acme", m.chain_id)
    assert held is not None and held[1]["doc_type"] == "tombstone"

    answer = rig.pump.handler({"Records": [insert]})
    rig.index.refresh()

    assert answer == {"batchItemFailures": []}
    after = rig.index.get("acme", m.chain_id)
    assert after is not None and after[1]["doc_type"] == "tombstone"
    assert ids(recall(rig, "badge number")) == []


def test_a_poisoned_index_never_outruns_the_table(rig: RecallRig) -> None:
    """A live document left in the index on purpose for a deleted memory is filtered out
    by re-validation against the memory table."""
    m = write(rig, "the staging database password rotates monthly")
    rig.sync()
    rig.services.memory.delete(ctx(), "u-1", m.memory_id)
    rig.sync()
    op = op_from_images("INSERT", _item(rig, m), None)
    assert op is not None and op.document is not None
    doc = dataclasses.replace(op.document, embedding=EMBEDDER.embed([op.document.content])[0])
    forced = dataclasses.replace(op, document=doc, memory_version=10**6, stage=Stage.ACTIVE)
    rig.index.apply([forced])
    rig.index.refresh()

    searched = rig.index.search(_filter(rig), "staging database password", None, 10)
    assert [h.chain_id for h in searched.keyword] == [m.chain_id]  # the poison is there
    assert ids(recall(rig, "staging database password")) == []


def test_forged_live_documents_for_expired_and_candidate_memories_are_refused(
    rig: RecallRig,
) -> None:
    """The index claims both are active and unexpired; the table says otherwise."""
    expired = write(rig, "the deploy freeze lasts until Friday", ttl_seconds=60)
    candidate = write(
        rig, "the deploy freeze may be extended", source={"type": "model_inferred", "ref": "m"}
    )
    rig.sync()
    rig.clock.advance(seconds=120)
    forged = []
    for m in (expired, candidate):
        op = op_from_images("INSERT", _item(rig, m), None)
        assert op is not None and op.document is not None
        doc = dataclasses.replace(
            op.document,
            status="active",
            expires_at="2999-01-01T00:00:00Z",
            embedding=EMBEDDER.embed([op.document.content])[0],
        )
        forged.append(dataclasses.replace(op, document=doc, memory_version=10**6))
    rig.index.apply(forged)
    rig.index.refresh()

    searched = rig.index.search(_filter(rig), "deploy freeze", None, 10)
    assert {h.chain_id for h in searched.keyword} == {expired.chain_id, candidate.chain_id}
    assert ids(recall(rig, "deploy freeze")) == []


def test_conflicting_facts_come_back_as_conflicts(rig: RecallRig) -> None:
    a = write(rig, "deploy day is Thursday", canonical_key="deploy-day")
    b = write(
        rig, "deploy day is Monday in w1", canonical_key="deploy-day", scope={"workspace": "w1"}
    )
    rig.sync()

    result = recall(rig, "which deploy day")

    assert {a.memory_id, b.memory_id} <= set(ids(result))
    assert [(c.canonical_key, sorted(c.memory_ids)) for c in result.conflicts] == [
        ("deploy-day", sorted([a.memory_id, b.memory_id]))
    ]


def test_the_exact_canonical_key_is_a_candidate_even_without_matching_words(rig: RecallRig) -> None:
    m = write(rig, "Go", canonical_key="primary-language")
    rig.sync()
    result = recall(rig, "primary-language")
    assert ids(result) == [m.memory_id]
    assert "canonical_key" in result.items[0].why.matched_by


@pytest.mark.parametrize("named", [True, False], ids=["named-by-key", "found-by-words"])
def test_a_fact_corrected_more_often_than_the_index_has_seen_recalls_its_current_version(
    rig: RecallRig, named: bool
) -> None:
    """The index holds version 1; six corrections follow before it catches up. Recall
    follows the index's stale version to the chain's current one: through the versions it
    reads, and then through the chain's head, however many versions came between (it
    used to stop after four: the fact named by its key was dropped as missing; a
    generated governance run found it)."""
    first = write(rig, "Lives in Lisbon near the river", canonical_key="home-city")
    rig.sync()
    current = first
    for n in range(6):
        current = rig.services.memory.correct(
            ctx(),
            "u-1",
            current.memory_id,
            MemoryPatch(
                expected_version=n + 1, content=f"Lives in Lisbon near the river, flat {n}"
            ),
        )
    result = recall(rig, "home-city" if named else "lives in lisbon near the river")
    assert ids(result) == [current.memory_id]
    assert result.items[0].memory.version == 7


def test_a_fact_named_by_its_key_comes_first_before_the_index_has_seen_it(
    rig: RecallRig,
) -> None:
    """Among many facts worded alike, the one whose key the query names comes first, even
    when the index has not seen it yet (so it has no index score to rank by); a fresh
    probe of stop 47 found it ranked 68th of 85 after eight quick corrections."""
    for n in range(30):
        write(rig, f"The codename of team {n} is Falcon {n}", canonical_key=f"codename-team{n}")
    rig.sync()
    named = write(rig, "The codename of team 99 is Heron", canonical_key="codename-team99")
    result = recall(rig, "codename-team99", limit=5)
    assert ids(result)[0] == named.memory_id
    assert "canonical_key" in result.items[0].why.matched_by


def test_unrelated_queries_get_nothing(rig: RecallRig) -> None:
    write(rig, "Lin deploys the billing service on Thursdays")
    rig.sync()
    assert ids(recall(rig, "favourite pizza topping")) == []


def test_recall_checks_the_caller(rig: RecallRig) -> None:
    with pytest.raises(Forbidden):
        rig.services.recall.recall(ctx(subject="u-2"), "u-1", RecallRequest(query="x"))
    with pytest.raises(Forbidden):
        rig.services.recall.recall(
            ctx(scopes=frozenset({Scope.MEMORY_WRITE})), "u-1", RecallRequest(query="x")
        )


def test_chinese_memories_match_chinese_queries(rig: RecallRig) -> None:
    zh = write(rig, "用户希望回答使用中文")
    write(rig, "The user likes short answers")
    rig.sync()
    assert ids(recall(rig, "回答使用什么语言"))[0] == zh.memory_id


# ----------------------------------------------------------------------------- helpers


def _stream_records(rig: RecallRig) -> list[dict[str, Any]]:
    captured: list[dict[str, Any]] = []
    real = rig.pump.handler

    def capture(event: dict[str, Any]) -> dict[str, Any]:
        captured.extend(event["Records"])
        return real(event)

    rig.pump.handler = capture
    try:
        rig.pump.drain()
    finally:
        rig.pump.handler = real
    return captured


def _sk(record: dict[str, Any]) -> str:
    return str(record["dynamodb"]["Keys"]["sk"]["S"])


def _item(rig: RecallRig, m: Any) -> dict[str, Any]:
    name = rig.services.memory.repo.db.names["memory"]
    out = rig.client.get_item(
        TableName=name,
        Key={
            "pk": {"S": keys.subject_pk("acme", "u-1")},
            "sk": {"S": keys.version_sk(m.memory_id)},
        },
    )
    # The purge left ids only; rebuild what the INSERT carried for the forged document.
    item = from_item(out["Item"])
    return {
        **m.model_dump(mode="json"),
        **{k: item[k] for k in ("pk", "sk")},
        "type": "memory",
        "source_type": m.source.type.value,
        "status": MemoryStatus.ACTIVE.value,
    }


def _filter(rig: RecallRig) -> Any:
    from memvault.clock import iso
    from memvault.search.backend import SearchFilter

    return SearchFilter(
        tenant_id="acme",
        subject_id="u-1",
        now=iso(rig.clock.now()),
        max_sensitivity_rank=1,
        agent_role=None,
    )


def test_working_memory_takes_its_memories_from_recall_when_given_a_query(
    rig: RecallRig,
) -> None:
    from memvault_wire.context import ContextRequest

    relevant = write(rig, "Lin deploys the billing service on Thursdays")
    rig.clock.advance(minutes=5)  # without recall the newest memory would come first
    unrelated = write(rig, "The office coffee machine is on the third floor")
    rig.sync()

    assembled = rig.services.context.assemble(
        ctx(),
        "u-1",
        ContextRequest(goal="plan the deploy", token_budget=2000, query="billing deploy day"),
    )

    ids = [i.id for i in assembled.sections["memories"]]
    assert ids[0] == relevant.memory_id, (ids, unrelated.memory_id)
