"""``MemvaultStore``: LangGraph's long-term store on memvault's governed memory.

The mapping:

* a namespace names a subject and a scope. The subject is fixed (``subject_id=``, for a
  token bound to one subject) or is one label of the namespace (``subject_label=``, the
  first by default, for a tenant service); the whole namespace is the memory's scope
  (``langgraph.ns``), so one key in two namespaces is two facts;
* an item is one memory chain: the key is its canonical key, the value (a JSON object)
  its content. ``put`` is a governed write (the write policy, consent, idempotency by a
  request id kept across retries) that supersedes the current version; ``put(None)`` and
  ``delete`` delete the chain through the purge pipeline (a tombstone at once, every copy
  after);
* the namespace and each of its prefixes are tags (``lgns.<hash>``), so a listing or a
  recall is filtered by the server before anything is returned; ``search`` with a query
  is memvault's recall (hybrid search, every hit re-validated against the table), without
  one a listing; ``filter`` is applied to the values as LangGraph's own stores do;
* a TTL (minutes) is the memory's ``ttl_seconds``: it counts from the last ``put``. Reads
  never refresh it: a read that wrote a new governed version would turn every read into
  a write. ``index=False`` keeps an item out of query results.

Each operation is a generator of SDK calls (:mod:`memvault_client.langgraph._flow`), driven by
a :class:`~memvault_client.MemvaultClient` for ``batch`` and awaited on an
:class:`~memvault_client.AsyncMemvaultClient` for ``abatch``.
"""

from __future__ import annotations

import builtins
import contextlib
import hashlib
import json
import math
import re
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from langgraph.store.base import (
    BaseStore,
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
    validate_op_namespace,
)

from memvault_client import AsyncMemvaultClient, MemvaultClient
from memvault_client.errors import NotFound
from memvault_client.langgraph._flow import Flow, adrive, drive
from memvault_client.langgraph._flow import Op as Call
from memvault_wire.memory import (
    MAX_CONTENT_CHARS,
    MAX_TTL_SECONDS,
    MemoryKind,
    Sensitivity,
    SourceType,
)
from memvault_wire.schemas import MemoryOut

#: The scope key that holds an item's namespace (a JSON array of its labels).
NAMESPACE_SCOPE = "langgraph.ns"
#: Tags: every namespace prefix (the empty one included), the item's creation time, and
#: the mark of an item kept out of query results.
_PREFIX_TAG = "lgns."
_CREATED_TAG = "lgc."
_NO_INDEX_TAG = "lgx"
#: memvault allows 20 tags: one per prefix (with the empty one), plus two.
MAX_NAMESPACE_DEPTH = 17
_MAX_SCOPE_VALUE = 256
_MAX_KEY = 100
_PAGE = 100
_RECALL_MAX = 100
_SUBJECT = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,127}$")


class StoreValueError(ValueError):
    """A namespace, key or value memvault cannot hold as given (nothing was sent)."""


def _letters(number: int, width: int) -> str:
    """``number`` in base 26, a to z, ``width`` letters. Tags carry no digits: the write
    policy scans tags for personal data like any text, and a run of digits can read as a
    phone or card number, which would classify the item ``pii``."""
    out = []
    for _ in range(width):
        number, digit = divmod(number, 26)
        out.append(chr(ord("a") + digit))
    return "".join(reversed(out))


def prefix_tag(prefix: tuple[str, ...]) -> str:
    """The tag every item under ``prefix`` carries."""
    encoded = json.dumps(list(prefix), ensure_ascii=False, separators=(",", ":"))
    digest = int.from_bytes(hashlib.sha256(encoded.encode()).digest()[:16], "big")
    return _PREFIX_TAG + _letters(digest, 24)


def _created_tag(at: datetime) -> str:
    return _CREATED_TAG + _letters(int(at.timestamp() * 1000), 10)


def _created_from(tag: str) -> datetime | None:
    letters = tag[len(_CREATED_TAG) :]
    if not tag.startswith(_CREATED_TAG) or not letters.isalpha() or not letters.islower():
        return None
    ms = 0
    for letter in letters:
        ms = ms * 26 + ord(letter) - ord("a")
    try:
        return datetime.fromtimestamp(ms / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return None


def _encode_namespace(namespace: tuple[str, ...]) -> str:
    return json.dumps(list(namespace), ensure_ascii=False, separators=(",", ":"))


def _matches_condition(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    labels = (
        namespace if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    )
    return all(p == "*" or p == n for p, n in zip(path, labels, strict=False))


def _compare(actual: Any, wanted: Any) -> bool:
    """LangGraph's filter semantics: equality, nested objects, and $eq/$ne/$gt/$gte/$lt/$lte."""
    if isinstance(wanted, dict):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(actual, op, value) for op, value in wanted.items())
        return isinstance(actual, dict) and all(
            _compare(actual.get(k), v) for k, v in wanted.items()
        )
    if isinstance(wanted, list | tuple):
        return (
            isinstance(actual, list | tuple)
            and len(actual) == len(wanted)
            and all(_compare(a, w) for a, w in zip(actual, wanted, strict=False))
        )
    return bool(actual == wanted)


def _operator(actual: Any, op: str, value: Any) -> bool:
    if op == "$eq":
        return bool(actual == value)
    if op == "$ne":
        return bool(actual != value)
    if op not in ("$gt", "$gte", "$lt", "$lte"):
        raise StoreValueError(
            f"unsupported filter operator {op!r}: use $eq, $ne, $gt, $gte, $lt or $lte"
        )
    try:
        a, b = float(actual), float(value)
    except (TypeError, ValueError):
        return False  # a missing or non-numeric field does not match
    return {"$gt": a > b, "$gte": a >= b, "$lt": a < b, "$lte": a <= b}[op]


def _matches_filter(value: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    return not wanted or all(_compare(value.get(k), v) for k, v in wanted.items())


class MemvaultStore(BaseStore):
    """A LangGraph store whose items are governed memvault memories.

    Give ``client`` for the sync methods and ``aclient`` for the async ones (either or
    both). The token needs ``memory:read`` and ``memory:write``, and ``memory:delete`` to
    delete. ``subject_id`` fixes the subject of every namespace; without it the
    namespace's label at ``subject_label`` names it (a token with ``subjects:any``).

    ``consent`` says whether the subject has consented to long-term memory: memvault keeps
    none without it, so with ``consent=False`` every put answers
    :class:`~memvault_client.errors.ConsentRequired`; it is asked for, not defaulted. Each
    item is written as a memory of ``kind`` from ``source_type`` (``tool_result`` by
    default; ``model_inferred`` makes candidates a person confirms), classified
    ``sensitivity`` (``pii`` when it holds personal data); a credential is refused
    (:class:`~memvault_client.errors.SecretDetected`), as for any write.
    ``visibility`` limits the items to those agent roles.
    """

    supports_ttl: bool = True

    def __init__(
        self,
        *,
        client: MemvaultClient | None = None,
        aclient: AsyncMemvaultClient | None = None,
        subject_id: str | None = None,
        subject_label: int = 0,
        kind: MemoryKind | str = MemoryKind.SEMANTIC,
        source_type: SourceType | str = SourceType.TOOL_RESULT,
        source_ref: str = "langgraph-store",
        sensitivity: Sensitivity | str = Sensitivity.INTERNAL,
        consent: bool,
        visibility: Iterable[str] = (),
        ttl_config: TTLConfig | None = None,
    ) -> None:
        if client is None and aclient is None:
            raise ValueError("give a MemvaultClient (client=), an AsyncMemvaultClient, or both")
        if subject_id is None and subject_label < 0:
            raise ValueError("subject_label is the index of a namespace label: 0 or more")
        self.client = client
        self.aclient = aclient
        self.subject_id = subject_id
        self.subject_label = subject_label
        self.kind = MemoryKind(kind)
        self.source = {"type": SourceType(source_type).value, "ref": source_ref}
        self.sensitivity = Sensitivity(sensitivity)
        self.consent = consent
        self.visibility = list(visibility)
        self.ttl_config = ttl_config

    # ----------------------------------------------------------------- drivers

    def batch(self, ops: Iterable[Op]) -> builtins.list[Result]:
        if self.client is None:
            raise RuntimeError("this MemvaultStore has no sync client: use the async methods")
        return [drive(self.client, self._run(op)) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> builtins.list[Result]:
        if self.aclient is None:
            raise RuntimeError("this MemvaultStore has no async client: use the sync methods")
        return [await adrive(self.aclient, self._run(op)) for op in ops]

    def _run(self, op: Op) -> Flow[Result]:
        validate_op_namespace(op)
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, PutOp):
            return self._put(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise TypeError(f"unknown store operation {type(op).__name__}")

    # ----------------------------------------------------------------- mapping

    def _subject(self, namespace: tuple[str, ...], *, what: str = "namespace") -> str:
        if self.subject_id is not None:
            return self.subject_id
        if len(namespace) <= self.subject_label:
            raise InvalidNamespaceError(
                f"this store takes the subject from label {self.subject_label} of the "
                f"{what}, and {namespace!r} has none: give a longer {what}, or subject_id="
            )
        subject = namespace[self.subject_label]
        if not _SUBJECT.match(subject):
            raise InvalidNamespaceError(
                f"namespace label {self.subject_label} names the subject, which must be 1-128 "
                "letters, digits or _.:@+- and start with a letter or digit"
            )
        return subject

    @staticmethod
    def _check_namespace(namespace: tuple[str, ...]) -> None:
        if not namespace:
            raise InvalidNamespaceError("an item's namespace cannot be empty")
        if len(namespace) > MAX_NAMESPACE_DEPTH:
            raise InvalidNamespaceError(
                f"namespaces may be at most {MAX_NAMESPACE_DEPTH} labels deep"
            )
        if len(_encode_namespace(namespace)) > _MAX_SCOPE_VALUE:
            raise InvalidNamespaceError(
                f"a namespace may take at most {_MAX_SCOPE_VALUE} characters as a JSON array"
            )

    @staticmethod
    def _check_key(key: str) -> None:
        if not isinstance(key, str) or not key or len(key) > _MAX_KEY or key != key.strip():
            raise StoreValueError(
                f"a key must be 1-{_MAX_KEY} characters with no leading or trailing whitespace"
            )

    def _item(self, memory: MemoryOut, score: float | None = None, *, search: bool = False) -> Item:
        namespace = tuple(json.loads(memory.scope[NAMESPACE_SCOPE]))
        try:
            value = json.loads(memory.content)
        except ValueError:
            value = None
        if not isinstance(value, dict):
            value = {"content": memory.content}  # written to this scope by another client
        created = memory.created_at
        for tag in memory.tags:
            created = _created_from(tag) or created
        fields: dict[str, Any] = {
            "namespace": namespace,
            "key": memory.canonical_key or memory.memory_id,
            "value": value,
            "created_at": created,
            "updated_at": memory.created_at,
        }
        if search:
            return SearchItem(score=score, **fields)
        return Item(**fields)

    def _ours(self, memory: MemoryOut) -> bool:
        encoded = memory.scope.get(NAMESPACE_SCOPE)
        if encoded is None or memory.kind != self.kind:
            return False
        try:
            labels = json.loads(encoded)
        except ValueError:
            return False
        return isinstance(labels, list) and all(isinstance(label, str) for label in labels)

    def _listing(
        self, subject: str, tag: str, key: str | None = None
    ) -> Flow[builtins.list[MemoryOut]]:
        """Every current memory of ``subject`` with ``tag`` (and canonical ``key``)."""
        found: builtins.list[MemoryOut] = []
        token: str | None = None
        while True:
            page = yield Call(
                "list_memories",
                (subject,),
                {
                    "kind": self.kind.value,
                    "canonical_key": key,
                    "tag": tag,
                    "limit": _PAGE,
                    "next_token": token,
                },
            )
            found += [m for m in page.items if self._ours(m)]
            token = page.next_token
            if not token:
                return found

    def _current(self, namespace: tuple[str, ...], key: str) -> Flow[MemoryOut | None]:
        subject = self._subject(namespace)
        encoded = _encode_namespace(namespace)
        for memory in (yield from self._listing(subject, prefix_tag(namespace), key)):
            if memory.scope.get(NAMESPACE_SCOPE) == encoded and memory.canonical_key == key:
                return memory
        return None

    # ---------------------------------------------------------------- get / put

    def _get(self, op: GetOp) -> Flow[Result]:
        self._check_namespace(op.namespace)
        self._check_key(op.key)
        memory = yield from self._current(op.namespace, op.key)
        return None if memory is None else self._item(memory)

    def _put(self, op: PutOp) -> Flow[Result]:
        self._check_namespace(op.namespace)
        self._check_key(op.key)
        subject = self._subject(op.namespace)
        current = yield from self._current(op.namespace, op.key)
        if op.value is None:
            if current is not None:
                with contextlib.suppress(NotFound):  # deleted meanwhile
                    yield Call("delete_memory", (subject, current.memory_id))
            return None
        if not isinstance(op.value, Mapping):
            raise StoreValueError("a store value must be a mapping with string keys")
        try:
            content = json.dumps(dict(op.value), ensure_ascii=False, sort_keys=True)
        except (TypeError, ValueError) as bad:
            raise StoreValueError(f"a store value must be JSON-serializable: {bad}") from None
        if len(content) > MAX_CONTENT_CHARS:
            raise StoreValueError(
                f"the value takes {len(content)} characters as JSON; memvault holds at most "
                f"{MAX_CONTENT_CHARS} per memory: keep large content in an artifact and "
                "store its id"
            )
        tags = [prefix_tag(op.namespace[:n]) for n in range(len(op.namespace) + 1)]
        if current is not None:
            # The item's creation is its first version's (a new item's is the version's own).
            tags.append(_created_tag(self._item(current).created_at))
        if op.index is False:
            tags.append(_NO_INDEX_TAG)
        body: dict[str, Any] = {
            "kind": self.kind.value,
            "canonical_key": op.key,
            "content": content,
            "tags": tags,
            "scope": {NAMESPACE_SCOPE: _encode_namespace(op.namespace)},
            "source": self.source,
            "sensitivity": self.sensitivity.value,
            "consent": self.consent,
            "visibility": self.visibility,
        }
        ttl = op.ttl
        if ttl is not None:
            seconds = math.ceil(float(ttl) * 60)
            if not 1 <= seconds <= MAX_TTL_SECONDS:
                raise StoreValueError(
                    f"ttl is in minutes, from 1/60 to {MAX_TTL_SECONDS // 60} (365 days)"
                )
            body["ttl_seconds"] = seconds
        # The SDK gives the write a request id and keeps it across its retries, so a
        # retried put stores one version.
        yield Call("write_memory", (subject, body))
        return None

    # ------------------------------------------------------------------ search

    def _search(self, op: SearchOp) -> Flow[Result]:
        prefix = tuple(op.namespace_prefix)
        subject = self._subject(prefix, what="namespace prefix")
        if op.limit < 0 or op.offset < 0:
            raise StoreValueError("limit and offset must be 0 or more")
        wanted = op.limit + op.offset
        if op.query:
            if wanted > _RECALL_MAX:
                raise StoreValueError(
                    f"a search with a query returns at most {_RECALL_MAX} items (limit + offset)"
                )
            if wanted == 0:
                return []
            # More than asked for when a filter will drop some: recall ranks, then the
            # filter applies to the values, as in LangGraph's own stores.
            ask = _RECALL_MAX if op.filter else max(wanted, 1)
            answer = yield Call(
                "recall",
                (
                    subject,
                    {
                        "query": op.query,
                        "tags": [prefix_tag(prefix)],
                        "limit": ask,
                        "kinds": [self.kind.value],
                    },
                ),
            )
            hits = [
                (hit.memory, hit.score)
                for hit in answer.items
                if self._ours(hit.memory) and _NO_INDEX_TAG not in hit.memory.tags
            ]
        else:
            listed = yield from self._listing(subject, prefix_tag(prefix))
            listed.sort(key=lambda m: (m.created_at, m.memory_id), reverse=True)
            hits = [(m, None) for m in listed]
        items = []
        for memory, score in hits:
            item = self._item(memory, score, search=True)
            if item.namespace[: len(prefix)] != prefix:
                continue  # a tag's hash collision, however unlikely
            if _matches_filter(item.value, op.filter):
                items.append(item)
        return items[op.offset : op.offset + op.limit]

    # --------------------------------------------------------- list namespaces

    def _list_namespaces(self, op: ListNamespacesOp) -> Flow[Result]:
        conditions = tuple(op.match_conditions or ())
        prefix: tuple[str, ...] = ()
        for condition in conditions:
            if condition.match_type == "prefix":
                path = tuple(condition.path)
                fixed = path[: path.index("*")] if "*" in path else path
                prefix = fixed if len(fixed) > len(prefix) else prefix
        subject = self._subject(prefix, what="prefix condition")
        listed = yield from self._listing(subject, prefix_tag(prefix))
        seen: set[tuple[str, ...]] = set()
        for memory in listed:
            namespace = tuple(json.loads(memory.scope[NAMESPACE_SCOPE]))
            if all(_matches_condition(c, namespace) for c in conditions):
                seen.add(namespace[: op.max_depth] if op.max_depth is not None else namespace)
        return sorted(seen)[op.offset : op.offset + op.limit]


__all__: builtins.list[str] = [
    "MAX_NAMESPACE_DEPTH",
    "NAMESPACE_SCOPE",
    "MemvaultStore",
    "StoreValueError",
    "prefix_tag",
]
