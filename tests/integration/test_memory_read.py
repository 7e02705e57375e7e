"""Reading memory: hard filters on tenant, subject, status, expiry (checked at read time),
visibility and sensitivity, whatever is still physically in the table."""

from __future__ import annotations

from typing import Any

import pytest

from memvault.models.access import Scope
from memvault.services.memory import MemoryService
from memvault.storage.ports.memory import request_memory_id
from memvault_wire.errors import Forbidden, NotFound, ValidationFailed
from memvault_wire.memory import Sensitivity
from tests.support.harness import FakeClock, a_write, ctx
from tests.support.scan import all_items


def test_another_tenants_memory_id_is_not_found(service: MemoryService) -> None:
    mine = service.write(ctx("acme"), "u-1", a_write()).memory
    intruder = ctx("globex", "u-1")
    for read in (
        lambda: service.get(intruder, "u-1", mine.memory_id),
        lambda: service.history(intruder, "u-1", mine.memory_id),
        lambda: service.delete(intruder, "u-1", mine.memory_id),
    ):
        with pytest.raises(NotFound):
            read()
    assert service.list_memories(intruder, "u-1").items == []
    assert service.export(intruder, "u-1")["memories"] == []


def test_a_token_bound_to_one_subject_cannot_act_for_another(service: MemoryService) -> None:
    service.write(ctx("acme", "u-2"), "u-2", a_write())
    with pytest.raises(Forbidden):
        service.list_memories(ctx("acme", "u-1"), "u-2")
    with pytest.raises(Forbidden):
        service.write(ctx("acme", "u-1"), "u-2", a_write(request_id="x"))
    tenant_service = ctx("acme", None, scopes=frozenset(Scope))
    assert len(service.list_memories(tenant_service, "u-2").items) == 1


def test_each_operation_needs_its_scope(service: MemoryService) -> None:
    read_only = ctx(scopes=frozenset({Scope.MEMORY_READ}))
    with pytest.raises(Forbidden) as raised:
        service.write(read_only, "u-1", a_write())
    assert raised.value.details == {"required_scope": "memory:write"}
    written = service.write(ctx(), "u-1", a_write()).memory
    with pytest.raises(Forbidden):
        service.delete(read_only, "u-1", written.memory_id)
    with pytest.raises(Forbidden):
        service.get(ctx(scopes=frozenset({Scope.MEMORY_WRITE})), "u-1", written.memory_id)


def test_an_expired_memory_is_never_returned_though_still_in_the_table(
    service: MemoryService, ddb: Any, clock: FakeClock
) -> None:
    short = service.write(ctx(), "u-1", a_write(ttl_seconds=60)).memory
    clock.advance(seconds=61)

    with pytest.raises(NotFound):
        service.get(ctx(), "u-1", short.memory_id)
    with pytest.raises(NotFound):
        service.history(ctx(), "u-1", short.memory_id)
    assert service.list_memories(ctx(), "u-1").items == []
    assert service.export(ctx(), "u-1")["memories"] == []
    # moto never runs TTL, and DynamoDB may take days: the item is still there.
    stored = [i for i in all_items(ddb)["memory"] if i["sk"]["S"] == f"MEM#{short.memory_id}"]
    assert len(stored) == 1


def test_a_memory_is_readable_up_to_the_instant_it_expires(
    service: MemoryService, clock: FakeClock
) -> None:
    m = service.write(ctx(), "u-1", a_write(ttl_seconds=60)).memory
    clock.advance(seconds=59)
    assert service.get(ctx(), "u-1", m.memory_id) == m


def test_a_deleted_memory_is_never_returned(service: MemoryService) -> None:
    v1 = service.write(ctx(), "u-1", a_write()).memory
    v2 = service.write(ctx(), "u-1", a_write(request_id="r2", content="Prefers English")).memory
    service.delete(ctx(), "u-1", v2.memory_id)

    for memory_id in (v1.memory_id, v2.memory_id):
        with pytest.raises(NotFound):
            service.get(ctx(), "u-1", memory_id)
        with pytest.raises(NotFound):
            service.history(ctx(), "u-1", memory_id)
    assert service.list_memories(ctx(), "u-1").items == []
    assert service.export(ctx(), "u-1")["memories"] == []


def test_visibility_limits_which_agent_roles_may_read(service: MemoryService) -> None:
    m = service.write(ctx(), "u-1", a_write(visibility=["payments"])).memory
    with pytest.raises(NotFound):
        service.get(ctx(agent_role="writer"), "u-1", m.memory_id)
    assert service.list_memories(ctx(agent_role="writer"), "u-1").items == []
    assert service.get(ctx(agent_role="payments"), "u-1", m.memory_id) == m


def test_list_filters_by_kind_tag_and_key_and_pages_with_a_token(service: MemoryService) -> None:
    for i in range(7):
        service.write(
            ctx(),
            "u-1",
            a_write(
                request_id=f"r{i}",
                canonical_key=f"fact-{i}",
                kind="episodic" if i % 2 else "semantic",
                tags=["even"] if i % 2 == 0 else ["odd"],
            ),
        )
    assert len(service.list_memories(ctx(), "u-1", kind="episodic").items) == 3
    assert len(service.list_memories(ctx(), "u-1", tag="even").items) == 4
    assert len(service.list_memories(ctx(), "u-1", canonical_key="fact-3").items) == 1

    seen: list[str] = []
    token = None
    while True:
        page = service.list_memories(ctx(), "u-1", limit=3, next_token=token)
        assert len(page.items) <= 3
        seen += [m.memory_id for m in page.items]
        token = page.next_token
        if token is None:
            break
    assert len(seen) == len(set(seen)) == 7


def _pages(service: MemoryService, reader: Any, limit: int) -> list[list[str]]:
    pages: list[list[str]] = []
    token = None
    while True:
        page = service.list_memories(reader, "u-1", limit=limit, next_token=token)
        pages.append([m.content for m in page.items])
        token = page.next_token
        if token is None:
            return pages


@pytest.mark.parametrize("store_page", [100, 2])
def test_a_next_token_only_when_a_readable_memory_follows(
    service: MemoryService, monkeypatch: pytest.MonkeyPatch, store_page: int
) -> None:
    """A probe: one public memory whose id sorted before three pii ones, listed with
    ``limit=1`` by a public-ceiling reader, came with a ``next_token`` whose page was
    empty, so the reader learnt that memories it may not see exist. Read ahead, across
    the store's pages too (``store_page``), a token comes only when a readable one
    follows."""
    monkeypatch.setattr("memvault.services.memory._PAGE", store_page)
    owner = ctx(max_sensitivity=Sensitivity.PII)
    public_reader = ctx(max_sensitivity=Sensitivity.PUBLIC)
    # A memory's id derives from its request id: request ids whose memories list in order.
    in_order = sorted(
        (f"r{i}" for i in range(5)), key=lambda r: request_memory_id("acme", "u-1", r)
    )

    def write(n: int, sensitivity: str) -> None:
        body = a_write(
            request_id=in_order[n - 1],
            canonical_key=f"k{n}",
            content=f"m{n}",
            sensitivity=sensitivity,
        )
        service.write(owner, "u-1", body)

    write(1, "public")
    for n in (2, 3, 4):
        write(n, "pii")
    assert _pages(service, public_reader, 1) == [["m1"]]
    assert _pages(service, owner, 1) == [["m1"], ["m2"], ["m3"], ["m4"]]
    # Hidden memories between readable ones: the next page holds the next readable one.
    write(5, "public")
    assert _pages(service, public_reader, 1) == [["m1"], ["m5"]]
    assert _pages(service, public_reader, 2) == [["m1", "m5"]]
    assert _pages(service, owner, 2) == [["m1", "m2"], ["m3", "m4"], ["m5"]]


def test_a_forged_next_token_is_refused(service: MemoryService) -> None:
    for bad in ("garbage", "eyJ2IjoxLCJhZnRlciI6IktFWSMxIn0"):
        with pytest.raises(ValidationFailed):
            service.list_memories(ctx(), "u-1", next_token=bad)
    with pytest.raises(ValidationFailed):
        service.list_memories(ctx(), "u-1", limit=0)
    with pytest.raises(ValidationFailed):
        service.list_memories(ctx(), "u-1", status="deleted")


def test_export_holds_every_readable_version_and_nothing_else(service: MemoryService) -> None:
    v1 = service.write(ctx(), "u-1", a_write()).memory
    v2 = service.write(ctx(), "u-1", a_write(request_id="r2", content="Prefers English")).memory
    secret_ish = service.write(
        ctx(),
        "u-1",
        a_write(request_id="r3", canonical_key="email", content="email li.wei@example.com"),
    ).memory
    service.write(ctx("acme", "u-2"), "u-2", a_write())

    exported = service.export(ctx(max_sensitivity=Sensitivity.INTERNAL), "u-1")
    ids = [m["memory_id"] for m in exported["memories"]]
    assert ids == [v1.memory_id, v2.memory_id]
    assert "tenant_id" not in exported["memories"][0]
    with_pii = service.export(ctx(max_sensitivity=Sensitivity.PII), "u-1")
    assert secret_ish.memory_id in [m["memory_id"] for m in with_pii["memories"]]
