"""MemvaultStore against LangGraph's documented ``BaseStore`` behaviour, and memvault's
governance under it, on the real local stack over HTTP (no mocked transport).

LangGraph ships no conformance suite for stores; these tests follow the interface's
docstrings (``langgraph.store.base``): get / put / delete, namespaces as hierarchical
paths, search by prefix with filters (``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
``$lte``, nested objects), limit and offset, natural-language search, list_namespaces
with prefix and suffix conditions, wildcards, ``max_depth``, limit and offset, TTL in
minutes, and the async twins.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any, TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from langgraph.store.base import BaseStore, InvalidNamespaceError, Item

from memvault_client import (
    AsyncMemvaultClient,
    ConsentRequired,
    Forbidden,
    MemvaultClient,
    SecretDetected,
)
from memvault_client.langgraph import MemvaultStore, StoreValueError
from memvault_client.langgraph.store import NAMESPACE_SCOPE
from memvault_local.devkeys import DevKey
from memvault_local.process import RunningStack
from tests.langgraph_adapters.conftest import SCOPES, TENANT, mint
from tests.support.markers import marker as new_marker


@pytest.fixture
def client(stack: RunningStack, subject: str) -> Iterator[MemvaultClient]:
    with MemvaultClient(stack.url, token=mint(stack, subject)) as mv:
        yield mv


@pytest.fixture
def store(client: MemvaultClient, subject: str) -> MemvaultStore:
    return MemvaultStore(client=client, subject_id=subject, consent=True)


def _eventually(probe: Callable[[], Any], *, timeout: float = 15.0) -> Any:
    """The probe's first truthy answer: the index follows the table within about a
    second locally (recall re-validates every hit, so what it shows is always true)."""
    deadline = time.monotonic() + timeout
    while True:
        found = probe()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


# ------------------------------------------------------------------- get / put


def test_put_then_get_answers_the_item(store: MemvaultStore) -> None:
    ns = ("memories", "prefs")
    store.put(ns, "language", {"value": "Chinese for internal docs", "n": 1})
    item = store.get(ns, "language")
    assert isinstance(item, Item)
    assert item.namespace == ns and item.key == "language"
    assert item.value == {"value": "Chinese for internal docs", "n": 1}
    assert item.created_at == item.updated_at
    assert store.get(ns, "nothing-here") is None
    assert store.get(("memories", "other"), "language") is None


def test_a_second_put_is_a_new_governed_version(
    store: MemvaultStore, client: MemvaultClient, subject: str
) -> None:
    ns = ("prefs",)
    store.put(ns, "tone", {"tone": "terse"})
    first = store.get(ns, "tone")
    time.sleep(0.01)
    store.put(ns, "tone", {"tone": "friendly"})
    second = store.get(ns, "tone")
    assert first is not None and second is not None
    assert second.value == {"tone": "friendly"}
    # created_at is the item's, updated_at the version's (BaseStore's Item contract).
    assert second.created_at == first.created_at
    assert second.updated_at > first.updated_at
    [current] = [
        m
        for m in client.iter_memories(subject, canonical_key="tone")
        if m.scope.get(NAMESPACE_SCOPE)
    ]
    assert current.version == 2 and current.supersedes_id is not None
    history = client.memory_history(subject, current.memory_id).versions
    assert [h.version for h in history] == [1, 2]
    assert [h.status.value for h in history] == ["superseded", "active"]


def test_the_same_key_in_two_namespaces_is_two_items(store: MemvaultStore) -> None:
    store.put(("a", "b"), "k", {"where": "a/b"})
    store.put(("a", "bc"), "k", {"where": "a/bc"})
    store.put(("a",), "k", {"where": "a"})
    assert store.get(("a", "b"), "k").value == {"where": "a/b"}  # type: ignore[union-attr]
    assert store.get(("a", "bc"), "k").value == {"where": "a/bc"}  # type: ignore[union-attr]
    assert store.get(("a",), "k").value == {"where": "a"}  # type: ignore[union-attr]
    under_ab = store.search(("a", "b"))
    assert [(i.namespace, i.value["where"]) for i in under_ab] == [(("a", "b"), "a/b")]
    assert {i.value["where"] for i in store.search(("a",))} == {"a", "a/b", "a/bc"}


def test_delete_and_put_none_remove_the_item_at_once_and_purge_it(
    store: MemvaultStore, client: MemvaultClient, subject: str
) -> None:
    marker = f"zebra-{new_marker()}"
    store.put(("notes",), "one", {"text": f"first {marker}"})
    store.put(("notes",), "two", {"text": f"second {marker}"})
    _eventually(lambda: len(store.search(("notes",), query=marker)) == 2)
    store.delete(("notes",), "one")
    store.put(("notes",), "two", None)  # type: ignore[arg-type]
    assert store.get(("notes",), "one") is None
    assert store.get(("notes",), "two") is None
    assert store.search(("notes",)) == []
    # Recall re-validates every hit against the table: nothing deleted comes back even
    # before the index has been purged.
    assert store.search(("notes",), query=marker) == []
    store.delete(("notes",), "never-there")  # deleting a missing key is not an error

    def purged() -> bool:
        exported = client.export_subject(subject).model_dump_json()
        return marker not in exported

    assert _eventually(purged)
    # A deleted key starts a new item.
    store.put(("notes",), "one", {"text": "again"})
    again = store.get(("notes",), "one")
    assert again is not None and again.value == {"text": "again"}


# ---------------------------------------------------------------------- search


@pytest.fixture
def catalogue(store: MemvaultStore) -> MemvaultStore:
    docs = {
        "d1": {"type": "report", "score": 4.5, "meta": {"lang": "en"}, "tags": ["a", "b"]},
        "d2": {"type": "report", "score": 3.0, "meta": {"lang": "zh"}, "tags": ["a"]},
        "d3": {"type": "note", "score": 5.0, "meta": {"lang": "en"}},
        "d4": {"type": "note", "score": 1.0},
    }
    for key, value in docs.items():
        store.put(("docs", "team"), key, value)
    store.put(("other",), "d9", {"type": "report", "score": 9.9})
    return store


@pytest.mark.parametrize(
    ("flt", "keys"),
    [
        ({"type": "report"}, {"d1", "d2"}),
        ({"type": {"$eq": "note"}}, {"d3", "d4"}),
        ({"type": {"$ne": "note"}}, {"d1", "d2"}),
        ({"score": {"$gt": 4.5}}, {"d3"}),
        ({"score": {"$gte": 4.5}}, {"d1", "d3"}),
        ({"score": {"$lt": 3.0}}, {"d4"}),
        ({"score": {"$lte": 3.0}}, {"d2", "d4"}),
        ({"score": {"$gte": 3.0, "$lt": 5.0}}, {"d1", "d2"}),
        ({"meta": {"lang": "en"}}, {"d1", "d3"}),
        ({"type": "report", "meta": {"lang": "zh"}}, {"d2"}),
        ({"tags": ["a", "b"]}, {"d1"}),
        ({"missing": {"$gt": 0}}, set()),
        (None, {"d1", "d2", "d3", "d4"}),
    ],
)
def test_search_filters_values_as_langgraph_stores_do(
    catalogue: MemvaultStore, flt: dict[str, Any] | None, keys: set[str]
) -> None:
    found = catalogue.search(("docs",), filter=flt)
    assert {i.key for i in found} == keys
    assert all(i.namespace == ("docs", "team") for i in found)


def test_search_pages_with_limit_and_offset(catalogue: MemvaultStore) -> None:
    everything = catalogue.search(("docs",), limit=10)
    assert len(everything) == 4
    pages = [catalogue.search(("docs",), limit=2, offset=o) for o in (0, 2, 4)]
    assert [len(p) for p in pages] == [2, 2, 0]
    assert [i.key for p in pages for i in p] == [i.key for i in everything]


def test_search_rejects_an_unknown_operator(catalogue: MemvaultStore) -> None:
    with pytest.raises(StoreValueError, match="unsupported filter operator"):
        catalogue.search(("docs",), filter={"score": {"$regex": ".*"}})


def test_search_with_a_query_goes_through_recall(store: MemvaultStore) -> None:
    store.put(("kb",), "lang", {"text": "internal documents are written in Chinese"})
    store.put(("kb",), "food", {"text": "lunch orders go to the noodle shop"})
    store.put(("kb",), "hidden", {"text": "internal documents archive"}, index=False)
    store.put(("elsewhere",), "lang", {"text": "internal documents are written in French"})

    def ranked() -> list[Any]:
        return store.search(("kb",), query="which language for internal documents?")

    hits = _eventually(lambda: [h for h in ranked() if h.key == "lang"])
    assert hits and hits[0].namespace == ("kb",)
    assert hits[0].score is not None
    everything = ranked()
    assert all(h.namespace == ("kb",) for h in everything)  # the prefix filters first
    assert "hidden" not in {h.key for h in everything}  # index=False: never by query
    assert store.get(("kb",), "hidden") is not None  # but get still finds it
    filtered = store.search(("kb",), query="internal documents", filter={"text": {"$ne": "x"}})
    assert {h.key for h in filtered} <= {"lang", "food"}


# ------------------------------------------------------------- list_namespaces


def test_list_namespaces_matches_prefix_suffix_wildcards_and_depth(store: MemvaultStore) -> None:
    for ns in [
        ("users", "alice", "prefs"),
        ("users", "alice", "notes"),
        ("users", "bob", "prefs"),
        ("teams", "core", "prefs"),
        ("teams", "core", "v1", "notes"),
    ]:
        store.put(ns, "k", {"ns": list(ns)})
    assert store.list_namespaces() == sorted(
        [
            ("teams", "core", "prefs"),
            ("teams", "core", "v1", "notes"),
            ("users", "alice", "notes"),
            ("users", "alice", "prefs"),
            ("users", "bob", "prefs"),
        ]
    )
    assert store.list_namespaces(prefix=("users",)) == [
        ("users", "alice", "notes"),
        ("users", "alice", "prefs"),
        ("users", "bob", "prefs"),
    ]
    assert store.list_namespaces(suffix=("prefs",)) == [
        ("teams", "core", "prefs"),
        ("users", "alice", "prefs"),
        ("users", "bob", "prefs"),
    ]
    assert store.list_namespaces(prefix=("users", "*", "prefs")) == [
        ("users", "alice", "prefs"),
        ("users", "bob", "prefs"),
    ]
    assert store.list_namespaces(prefix=("teams",), suffix=("notes",)) == [
        ("teams", "core", "v1", "notes")
    ]
    assert store.list_namespaces(max_depth=2) == [
        ("teams", "core"),
        ("users", "alice"),
        ("users", "bob"),
    ]
    assert store.list_namespaces(limit=2, offset=1) == [
        ("teams", "core", "v1", "notes"),
        ("users", "alice", "notes"),
    ]


# ------------------------------------------------------------------------- TTL


def test_a_ttl_in_minutes_expires_the_item(
    store: MemvaultStore, client: MemvaultClient, subject: str
) -> None:
    assert store.supports_ttl
    started = time.monotonic()
    store.put(("tmp",), "short", {"v": 1}, ttl=2 / 60)  # two seconds
    read = store.get(("tmp",), "short")
    # On a loaded machine the put and the read may take the whole two seconds: the item is
    # then rightly gone, so its presence is asserted only when the read came in time.
    if time.monotonic() - started < 1.5:
        assert read is not None
    store.put(("tmp",), "long", {"v": 2}, ttl=60)
    [long] = [m for m in client.iter_memories(subject, canonical_key="long")]
    remaining = (long.expires_at - long.created_at).total_seconds()
    assert 3590 <= remaining <= 3610
    time.sleep(max(0.0, started + 2.5 - time.monotonic()))
    assert store.get(("tmp",), "short") is None  # reads check expiry themselves
    assert store.get(("tmp",), "long") is not None
    assert [i.key for i in store.search(("tmp",))] == ["long"]
    with pytest.raises(StoreValueError, match="ttl is in minutes"):
        store.put(("tmp",), "forever", {"v": 3}, ttl=10 * 365 * 24 * 60)


# ------------------------------------------------------------------ governance


def test_a_put_is_a_governed_write(stack: RunningStack, subject: str) -> None:
    token = DevKey.load_or_create(stack.home).mint(
        tenant=TENANT, subject=subject, scope=SCOPES, max_sensitivity="pii"
    )
    with MemvaultClient(stack.url, token=token) as mv:
        plain = MemvaultStore(client=mv, subject_id=subject, consent=False)
        with pytest.raises(ConsentRequired):
            plain.put(("prefs",), "tone", {"tone": "terse"})
        with pytest.raises(ConsentRequired):
            plain.put(("contacts",), "alice", {"email": "alice@example.com"})
        assert plain.get(("contacts",), "alice") is None
        consented = MemvaultStore(client=mv, subject_id=subject, consent=True)
        with pytest.raises(SecretDetected):
            consented.put(("ops",), "db", {"note": "password: hunter2-Secret-99"})
        assert consented.get(("ops",), "db") is None
        consented.put(("contacts",), "alice", {"email": "alice@example.com"})
        [stored] = list(mv.iter_memories(subject, canonical_key="alice"))
        assert stored.sensitivity.value == "pii" and stored.consent
        assert stored.source.type.value == "tool_result"
        # The item's own tags hold no digits, so they never read as personal data.
        consented.put(("prefs",), "tone", {"tone": "terse"})
        consented.put(("prefs",), "tone", {"tone": "friendly"})
        [tone] = list(mv.iter_memories(subject, canonical_key="tone"))
        assert tone.sensitivity.value == "internal"
        assert not any(ch.isdigit() for tag in tone.tags for ch in tag)


def test_inputs_memvault_cannot_hold_are_refused_before_anything_is_sent(
    store: MemvaultStore,
) -> None:
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put(tuple(f"l{n}" for n in range(18)), "k", {"v": 1})
    with pytest.raises(StoreValueError, match="key"):
        store.put(("a",), "x" * 101, {"v": 1})
    with pytest.raises(StoreValueError, match="key"):
        store.put(("a",), " padded ", {"v": 1})
    with pytest.raises(StoreValueError, match="at most 4000"):
        store.put(("a",), "big", {"v": "x" * 5000})
    with pytest.raises(StoreValueError, match="JSON-serializable"):
        store.put(("a",), "odd", {"v": object()})
    assert store.search(("a",)) == []


def test_a_namespace_label_names_the_subject_for_a_tenant_service(stack: RunningStack) -> None:
    alice, bob = f"alice-{uuid.uuid4().hex[:8]}", f"bob-{uuid.uuid4().hex[:8]}"
    service = DevKey.load_or_create(stack.home).mint(
        tenant=TENANT, subject=None, scope=f"{SCOPES} subjects:any"
    )
    with MemvaultClient(stack.url, token=service) as mv:
        store = MemvaultStore(client=mv, consent=True)  # the subject: label 0
        store.put((alice, "prefs"), "tone", {"tone": "terse"})
        store.put((bob, "prefs"), "tone", {"tone": "chatty"})
        assert store.get((alice, "prefs"), "tone").value == {"tone": "terse"}  # type: ignore[union-attr]
        assert [i.value for i in store.search((bob,))] == [{"tone": "chatty"}]
        assert store.list_namespaces(prefix=(alice,)) == [(alice, "prefs")]
        with pytest.raises(InvalidNamespaceError, match="subject"):
            store.search(())
        with pytest.raises(InvalidNamespaceError, match="subject"):
            store.put(("not a subject!", "prefs"), "k", {"v": 1})
        assert [m.canonical_key for m in mv.iter_memories(alice)] == ["tone"]
    # Alice's own token reads her item, and cannot reach Bob's namespace.
    with MemvaultClient(stack.url, token=mint(stack, alice)) as mine:
        own = MemvaultStore(client=mine, consent=True)
        assert own.get((alice, "prefs"), "tone").value == {"tone": "terse"}  # type: ignore[union-attr]
        with pytest.raises(Forbidden):
            own.get((bob, "prefs"), "tone")
        with pytest.raises(Forbidden):
            own.put((bob, "prefs"), "tone", {"tone": "hijacked"})
    with MemvaultClient(stack.url, token=mint(stack, bob)) as theirs:
        assert MemvaultStore(client=theirs, consent=True).get((bob, "prefs"), "tone").value == {  # type: ignore[union-attr]
            "tone": "chatty"
        }


def test_another_tenant_sees_nothing(
    stack: RunningStack, store: MemvaultStore, subject: str
) -> None:
    store.put(("prefs",), "tone", {"tone": "terse"})
    other = DevKey.load_or_create(stack.home).mint(
        tenant="elsewhere", subject=subject, scope=SCOPES
    )
    with MemvaultClient(stack.url, token=other) as mv:
        stranger = MemvaultStore(client=mv, subject_id=subject, consent=True)
        assert stranger.get(("prefs",), "tone") is None
        assert stranger.search(("prefs",)) == []
        assert stranger.list_namespaces() == []


# ----------------------------------------------------------------------- async


def test_the_async_methods_on_the_async_client(stack: RunningStack, subject: str) -> None:
    async def scenario() -> None:
        async with AsyncMemvaultClient(stack.url, token=mint(stack, subject)) as amv:
            store = MemvaultStore(aclient=amv, subject_id=subject, consent=True)
            await store.aput(("async", "ns"), "k1", {"n": 1})
            await store.aput(("async", "ns"), "k2", {"n": 2})
            got = await store.aget(("async", "ns"), "k1")
            assert got is not None and got.value == {"n": 1}
            found = await store.asearch(("async",), filter={"n": {"$gt": 1}})
            assert [i.key for i in found] == ["k2"]
            assert await store.alist_namespaces() == [("async", "ns")]
            await store.adelete(("async", "ns"), "k1")
            assert await store.aget(("async", "ns"), "k1") is None
            with pytest.raises(RuntimeError, match="no sync client"):
                store.get(("async", "ns"), "k2")

    asyncio.run(scenario())


# ------------------------------------------------------------- in a real graph


def test_a_graph_node_reads_and_writes_the_store(store: MemvaultStore) -> None:
    class State(TypedDict):
        user: str
        answer: str

    def remember(state: State, *, store: BaseStore) -> dict[str, Any]:
        store.put((state["user"], "facts"), "city", {"city": "Lisbon"})
        return {}

    def answer(state: State, *, store: BaseStore) -> dict[str, Any]:
        item = store.get((state["user"], "facts"), "city")
        return {"answer": item.value["city"] if item else "unknown"}

    builder = StateGraph(State)
    builder.add_node("remember", remember)
    builder.add_node("answer", answer)
    builder.add_edge(START, "remember")
    builder.add_edge("remember", "answer")
    builder.add_edge("answer", END)
    graph = builder.compile(store=store)
    out = graph.invoke({"user": "u1", "answer": ""})
    assert out["answer"] == "Lisbon"
    assert store.list_namespaces() == [("u1", "facts")]
