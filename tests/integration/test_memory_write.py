"""Writing memory: idempotency, versioning by compare-and-set, and the write policy
enforced before anything is stored. Runs on moto's DynamoDB with tables created from
the shared definitions."""

from __future__ import annotations

from typing import Any

import pytest

from memvault.services.memory import MemoryService
from memvault_wire.errors import (
    ConsentRequired,
    IdempotencyKeyReused,
    NotFound,
    SecretDetected,
    VersionConflict,
)
from memvault_wire.memory import MemoryPatch, MemoryStatus, Sensitivity
from tests.support.harness import a_write, ctx
from tests.support.scan import all_items, count, stored_text


def test_a_replay_returns_the_same_memory_and_writes_nothing(
    service: MemoryService, ddb: Any
) -> None:
    first = service.write(ctx(), "u-1", a_write())
    before = all_items(ddb)["memory"]

    replay = service.write(ctx(), "u-1", a_write())

    assert first.created and not replay.created
    assert replay.memory == first.memory
    assert all_items(ddb)["memory"] == before


def test_same_request_id_with_other_payload_is_rejected_and_nothing_written(
    service: MemoryService, ddb: Any
) -> None:
    service.write(ctx(), "u-1", a_write())
    before = all_items(ddb)

    with pytest.raises(IdempotencyKeyReused):
        service.write(ctx(), "u-1", a_write(content="Prefers English for everything"))

    assert all_items(ddb) == before


def test_request_ids_are_scoped_to_tenant_and_subject(service: MemoryService) -> None:
    a = service.write(ctx("acme", "u-1"), "u-1", a_write())
    b = service.write(ctx("acme", "u-2"), "u-2", a_write())
    c = service.write(ctx("globex", "u-1"), "u-1", a_write())
    assert len({a.memory.memory_id, b.memory.memory_id, c.memory.memory_id}) == 3
    assert a.created and b.created and c.created


def test_a_crash_after_commit_then_retry_leaves_exactly_one_memory(
    service: MemoryService, ddb: Any
) -> None:
    """The transaction commits but the answer is lost (network fault); the client retries."""
    real = ddb._client.transact_write_items
    calls = {"n": 0}

    def commit_then_lose_answer(**kwargs: Any) -> Any:
        calls["n"] += 1
        out = real(**kwargs)
        if calls["n"] == 1:
            raise ConnectionError("connection reset after commit")
        return out

    ddb._client.transact_write_items = commit_then_lose_answer
    with pytest.raises(ConnectionError):
        service.write(ctx(), "u-1", a_write())
    retry = service.write(ctx(), "u-1", a_write())

    versions = [i for i in all_items(ddb)["memory"] if i["sk"]["S"].startswith("MEM#")]
    assert len(versions) == 1
    assert versions[0]["memory_id"]["S"] == retry.memory.memory_id


def test_a_crash_before_commit_then_retry_leaves_exactly_one_memory(
    service: MemoryService, ddb: Any
) -> None:
    real = ddb._client.transact_write_items
    calls = {"n": 0}

    def fail_first(**kwargs: Any) -> Any:
        calls["n"] += 1
        if calls["n"] == 1:
            raise ConnectionError("connection refused")
        return real(**kwargs)

    ddb._client.transact_write_items = fail_first
    with pytest.raises(ConnectionError):
        service.write(ctx(), "u-1", a_write())
    assert count(ddb, "memory") == 0
    retry = service.write(ctx(), "u-1", a_write())
    assert retry.created
    # The idempotency record is the version itself (its id derives from the request id).
    (version,) = [i for i in all_items(ddb)["memory"] if i["sk"]["S"].startswith("MEM#")]
    assert version["memory_id"]["S"] == retry.memory.memory_id
    assert version["payload_hash"]["S"]
    assert count(ddb, "idempotency") == 0


def test_a_write_with_an_existing_canonical_key_supersedes_the_old_version(
    service: MemoryService,
) -> None:
    v1 = service.write(ctx(), "u-1", a_write()).memory
    v2 = service.write(ctx(), "u-1", a_write(request_id="req-2", content="Prefers English")).memory

    assert (v2.version, v2.supersedes_id, v2.chain_id) == (2, v1.memory_id, v1.chain_id)
    history = service.history(ctx(), "u-1", v2.memory_id)
    assert [(m.version, m.status) for m in history] == [
        (1, MemoryStatus.SUPERSEDED),
        (2, MemoryStatus.ACTIVE),
    ]
    assert service.get(ctx(), "u-1", v1.memory_id).memory_id == v2.memory_id
    assert [m.memory_id for m in service.list_memories(ctx(), "u-1").items] == [v2.memory_id]


def test_a_stale_expected_version_is_refused_and_nothing_changes(
    service: MemoryService, ddb: Any
) -> None:
    v1 = service.write(ctx(), "u-1", a_write()).memory
    service.correct(ctx(), "u-1", v1.memory_id, MemoryPatch(expected_version=1, content="v2"))
    before = all_items(ddb)

    with pytest.raises(VersionConflict) as raised:
        service.correct(ctx(), "u-1", v1.memory_id, MemoryPatch(expected_version=1, content="v3"))
    with pytest.raises(VersionConflict):
        service.write(ctx(), "u-1", a_write(request_id="req-9", expected_version=1))

    assert raised.value.details["current_version"] == 2
    assert all_items(ddb) == before


def test_a_correction_creates_the_next_version(service: MemoryService) -> None:
    v1 = service.write(ctx(), "u-1", a_write()).memory
    v2 = service.correct(
        ctx(),
        "u-1",
        v1.memory_id,
        MemoryPatch(expected_version=1, content="Prefers English", tags=["language"]),
    )
    assert (v2.version, v2.supersedes_id, v2.content, v2.tags) == (
        2,
        v1.memory_id,
        "Prefers English",
        ["language"],
    )
    assert service.get(ctx(), "u-1", v1.memory_id) == v2


def test_writes_with_different_scopes_are_different_facts(service: MemoryService) -> None:
    internal = service.write(
        ctx(),
        "u-1",
        a_write(
            request_id="r-internal",
            content="内部技术文档默认使用中文",
            scope={"workspace": "w1", "doc_type": "internal"},
        ),
    ).memory
    external = service.write(
        ctx(),
        "u-1",
        a_write(
            request_id="r-external",
            content="External API docs are written in English",
            scope={"workspace": "w1", "doc_type": "external-api"},
        ),
    ).memory

    assert internal.version == external.version == 1
    assert internal.chain_id != external.chain_id
    listed = {
        m.memory_id
        for m in service.list_memories(ctx(), "u-1", canonical_key="preferred-language").items
    }
    assert listed == {internal.memory_id, external.memory_id}


def test_model_inferred_memory_is_a_candidate_until_confirmed(service: MemoryService) -> None:
    candidate = service.write(
        ctx(), "u-1", a_write(source={"type": "model_inferred", "ref": "run-4"})
    ).memory
    assert candidate.status is MemoryStatus.CANDIDATE
    assert service.list_memories(ctx(), "u-1", status="active").items == []

    confirmed = service.correct(
        ctx(), "u-1", candidate.memory_id, MemoryPatch(expected_version=1, status="active")
    )
    assert confirmed.status is MemoryStatus.ACTIVE
    assert [m.memory_id for m in service.list_memories(ctx(), "u-1", status="active").items] == [
        confirmed.memory_id
    ]


def test_secrets_never_reach_the_table(service: MemoryService, ddb: Any) -> None:
    secret = "AKIAIOSFODNN7EXAMPLE"
    with pytest.raises(SecretDetected):
        service.write(ctx(), "u-1", a_write(content=f"use key {secret} for deploys"))
    with pytest.raises(SecretDetected):
        service.write(ctx(), "u-1", a_write(request_id="r2", tags=[secret]))
    v1 = service.write(ctx(), "u-1", a_write(request_id="r3")).memory
    with pytest.raises(SecretDetected):
        service.correct(
            ctx(), "u-1", v1.memory_id, MemoryPatch(expected_version=1, content=f"key {secret}")
        )

    assert secret not in stored_text(ddb)
    # Only the write that passed the policy left a version (which is its idempotency record).
    assert [
        i["memory_id"]["S"] for i in all_items(ddb)["memory"] if i["sk"]["S"].startswith("MEM#")
    ] == [v1.memory_id]


def test_personal_data_without_consent_is_refused_and_not_stored(
    service: MemoryService, ddb: Any
) -> None:
    with pytest.raises(ConsentRequired):
        service.write(
            ctx(), "u-1", a_write(content="my email is li.wei@example.com", consent=False)
        )
    assert "li.wei@example.com" not in stored_text(ddb)

    stored = service.write(
        ctx(),
        "u-1",
        a_write(request_id="r2", content="my email is li.wei@example.com", consent=True),
    ).memory
    assert stored.sensitivity is Sensitivity.PII


def test_personal_data_is_read_only_by_callers_cleared_for_it(service: MemoryService) -> None:
    stored = service.write(ctx(), "u-1", a_write(content="phone +1 415-555-2671")).memory
    with pytest.raises(NotFound):
        service.get(ctx(max_sensitivity=Sensitivity.INTERNAL), "u-1", stored.memory_id)
    assert service.get(ctx(max_sensitivity=Sensitivity.PII), "u-1", stored.memory_id) == stored


def test_a_replay_of_a_deleted_memory_does_not_bring_it_back(
    service: MemoryService, ddb: Any
) -> None:
    first = service.write(ctx(), "u-1", a_write()).memory
    service.delete(ctx(), "u-1", first.memory_id)

    with pytest.raises(NotFound):
        service.write(ctx(), "u-1", a_write())
    assert first.content not in stored_text(ddb)
