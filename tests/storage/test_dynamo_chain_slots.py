"""The DynamoDB memory store keys a keyed chain's head by its fact and generation, so that
creating the head is the fact's pointer claim (one item, not two), and keeps an idempotent
write's record on the version whose id derives from the request id (no item of its own).

These tests read and remove items directly. moto never runs TTL, so "a head removed by TTL"
is a head deleted here by hand; the conditions are evaluated as DynamoDB would (the fixture
serialises calls, since moto is not atomic under threads).
"""

from __future__ import annotations

from typing import Any

import pytest

from memvault.storage.dynamodb import keys
from memvault.storage.dynamodb.dynamo import Dynamo
from memvault.storage.dynamodb.memory import DynamoMemoryStore
from memvault.storage.ports.errors import ConditionFailed, Conflict
from memvault.storage.ports.memory import fact_id, keyed_chain_id, request_memory_id
from tests.storage.test_memory_port import S, T, a_memory, first, next_version


@pytest.fixture
def store(dynamo: Dynamo) -> DynamoMemoryStore:
    return DynamoMemoryStore(dynamo)


def _items(store: DynamoMemoryStore) -> list[dict[str, Any]]:
    return list(store.db.query_all("memory", keys.subject_pk(T, S), ""))


def test_a_governed_write_is_three_items_and_no_pointer_or_idempotency_item(
    store: DynamoMemoryStore,
) -> None:
    m = a_memory()
    store.commit_version(first(m))

    sks = sorted(str(i["sk"]) for i in _items(store))
    assert sks == sorted([keys.version_sk(m.memory_id), keys.chain_sk(m.chain_id)])
    assert not any(sk.startswith(keys.POINTER_PREFIX) for sk in sks)
    assert not list(store.db.scan_prefix("idempotency", ""))
    version = store.db.get("memory", keys.subject_pk(T, S), keys.version_sk(m.memory_id))
    assert version is not None and version["payload_hash"] == "hash"
    assert m.memory_id == request_memory_id(T, S, "req-1")


def test_a_chain_whose_slot_another_generation_took_is_not_found_nor_extended(
    store: DynamoMemoryStore,
) -> None:
    """A live head whose TTL passed is removed by DynamoDB; the fact's next chain may then
    take the same generation's slot. The old chain id must not read the new head, and a
    stale writer of the old chain must not extend it."""
    old = a_memory()
    store.commit_version(first(old))
    store.db.client.delete_item(
        TableName=store.db.names["memory"],
        Key={
            "pk": {"S": keys.subject_pk(T, S)},
            "sk": {"S": keys.chain_sk(old.chain_id)},
        },
    )
    fact = fact_id(old.kind.value, old.canonical_key or "", old.scope)
    assert store.pointer(T, S, fact) is None
    new = a_memory("req-2")
    new = new.model_copy(update={"chain_id": keyed_chain_id(fact, None, "another")})
    assert keys.chain_sk(new.chain_id) == keys.chain_sk(old.chain_id)  # the same slot
    store.commit_version(first(new, "req-2"))

    assert store.chain(T, S, old.chain_id) is None
    assert store.chain(T, S, new.chain_id) is not None
    _, _, chains = store.revalidation(T, S, [], [old.chain_id, new.chain_id])
    assert [c.chain_id for c in chains] == [new.chain_id]
    stale = next_version(old, content="a writer that read the old chain")
    with pytest.raises(ConditionFailed) as failed:
        store.commit_version(stale)
    assert Conflict.VERSION in failed.value


def test_a_new_keyed_chain_must_name_its_fact(store: DynamoMemoryStore) -> None:
    unkeyed_id = a_memory(chain_id="chn_0123456789abcdef0123456789abcdef")
    with pytest.raises(ValueError, match="name its fact"):
        store.commit_version(first(unkeyed_id))
    other_fact = fact_id("semantic", "timezone", {})
    wrong = a_memory(chain_id=keyed_chain_id(other_fact, None, "x"))
    with pytest.raises(ValueError, match="name its fact"):
        store.commit_version(first(wrong))
    assert _items(store) == []


def test_generations_follow_each_other_and_two_claims_of_one_win_once(
    store: DynamoMemoryStore,
) -> None:
    first_chain = a_memory()
    store.commit_version(first(first_chain))
    fact = fact_id(first_chain.kind.value, first_chain.canonical_key or "", first_chain.scope)
    head = store.chain(T, S, first_chain.chain_id)
    assert head is not None
    store.tombstone_chain(
        T,
        S,
        head,
        "del_1",
        first_chain.created_at,
        release_pointer=True,
        job=None,
        audit=None,
        audit_expires_at=None,
    )
    dead = store.pointer(T, S, fact)
    assert dead == first_chain.chain_id

    claims = []
    for req in ("req-a", "req-b"):
        m = a_memory(req)
        claims.append(m.model_copy(update={"chain_id": keyed_chain_id(fact, dead, req)}))
    store.commit_version(first(claims[0], "req-a", fact_expected_chain=dead))
    with pytest.raises(ConditionFailed) as lost:
        store.commit_version(first(claims[1], "req-b", fact_expected_chain=dead))
    assert lost.value.causes == {Conflict.POINTER}
    assert store.pointer(T, S, fact) == claims[0].chain_id
    assert claims[0].chain_id.split("_")[2] == "000001"


def test_chains_and_records_of_the_earlier_layout_are_still_honoured(
    store: DynamoMemoryStore,
) -> None:
    """Tables written before the layout change hold ``KEY#`` pointer items, chains with
    random ids and idempotency records in their own table (kept 7 days): the fact keeps
    its chain, and a retried request still replays."""
    legacy = a_memory(None, chain_id="chn_0123456789abcdef0123456789abcdef")
    fact = fact_id(legacy.kind.value, legacy.canonical_key or "", legacy.scope)
    v1 = first(legacy, None)
    store.commit_version(
        v1.__class__(**{**v1.__dict__, "fact": None})  # the head, without a keyed claim
    )
    pk = keys.subject_pk(T, S)
    store.db.update(
        "memory",
        pk,
        keys.chain_sk(legacy.chain_id),
        "SET pointer_sk = :p",
        values={":p": f"{keys.POINTER_PREFIX}{fact}"},
    )
    store.db.put(
        "memory",
        {
            "pk": pk,
            "sk": f"{keys.POINTER_PREFIX}{fact}",
            "type": "pointer",
            "chain_id": legacy.chain_id,
            "ttl": 1,
        },
    )
    store.db.put(
        "idempotency",
        {
            "pk": pk,
            "sk": keys.idempotency_sk("req-old"),
            "request_id": "req-old",
            "payload_hash": "old-hash",
            "memory_id": legacy.memory_id,
            "ttl": 2_000_000_000,
        },
    )

    assert store.pointer(T, S, fact) == legacy.chain_id
    record = store.idempotency(T, S, "req-old")
    assert record is not None and record.memory_id == legacy.memory_id
    assert record.payload_hash == "old-hash"

    v2 = next_version(legacy, content="corrected on the new layout")
    store.commit_version(v2)
    pointer = store.db.get("memory", pk, f"{keys.POINTER_PREFIX}{fact}")
    assert pointer is not None and int(pointer["ttl"]) == v2.head_ttl  # kept alive with it
    head = store.chain(T, S, legacy.chain_id)
    assert head is not None and head.current_memory_id == v2.memory.memory_id

    store.tombstone_chain(
        T,
        S,
        head,
        "del_legacy",
        legacy.created_at,
        release_pointer=True,
        job=None,
        audit=None,
        audit_expires_at=None,
    )
    assert store.db.get("memory", pk, f"{keys.POINTER_PREFIX}{fact}") is None
    assert store.pointer(T, S, fact) is None
