"""``MemvaultSaver``: LangGraph checkpoints as memvault run checkpoints.

The mapping:

* a LangGraph thread has a *registry* run (``lgt.<hash>``) whose state holds the thread's
  generation and the checkpoint namespaces it has used;
* each (thread, namespace, generation) is one run (``lgc.<hash>``); each LangGraph
  checkpoint is one version of it, written by compare-and-set on the version that holds
  its parent. Two writers that resume the same checkpoint can never fork the thread: one
  advances, the other gets :class:`CheckpointConflict` naming the current checkpoint;
* pending writes are merged into the head version's state, keyed by (task_id, index), so
  a repeated ``put_writes`` adds nothing; writes that arrive after later checkpoints were
  put (LangGraph sends them in the background) are kept in the head's state under the
  id of the ancestor they belong to, and read back with it;
* a version's state names the version that holds its parent (``parent_version``), so
  ``list`` and ``get_tuple`` walk the chain with ``GET /v1/runs/{id}/versions/{n}``;
* a serialized value too large for the run state (checkpoints are bounded, 32 KiB by
  default) is stored in the artifact store as JSON and referenced from ``artifact_refs``;
  reading it back checks its sha256;
* ``delete_thread`` cancels each namespace's run with an empty state (a finished run's
  history then expires with the run retention) and moves the thread to a new generation,
  so the thread starts empty and can be used again.

The logic is written once, as generators that yield the SDK calls they need (``Op``);
the sync methods drive them with a :class:`~memvault_client.MemvaultClient`, the async
ones await an :class:`~memvault_client.AsyncMemvaultClient`.
"""

from __future__ import annotations

import base64
import builtins
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from memvault_client import AsyncMemvaultClient, MemvaultClient
from memvault_client.errors import (
    Forbidden,
    IllegalTransition,
    MemvaultError,
    NotFound,
    VersionConflict,
)
from memvault_client.langgraph._flow import SLEEP, Flow, Op, T, adrive, drive
from memvault_wire.run import Checkpoint as RunCheckpoint
from memvault_wire.run import RunStatus

#: The state layout's version, kept in every state this saver writes.
_LAYOUT = 1
_MEDIA_TYPE = "application/json"
#: How long put_writes waits for its checkpoint's put to land before it gives up.
_WRITES_WAIT_S = 5.0
#: How many checkpoints back from the head writes for an earlier checkpoint are looked for.
_LATE_WRITES_DEPTH = 64
_TERMINAL = {RunStatus.SUCCEEDED, RunStatus.FAILED, RunStatus.CANCELLED}


class CheckpointConflict(VersionConflict):
    """The thread moved on: the checkpoint this put (or put_writes) builds on is no longer
    the thread's latest. Re-read the thread (``get_tuple``) and continue from
    ``current_checkpoint_id``; nothing was written."""

    def __init__(
        self,
        message: str,
        *,
        thread_id: str,
        checkpoint_ns: str,
        expected_checkpoint_id: str | None,
        current_checkpoint_id: str | None,
    ) -> None:
        super().__init__(
            message,
            details={
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "expected_checkpoint_id": expected_checkpoint_id,
                "current_checkpoint_id": current_checkpoint_id,
            },
        )
        self.thread_id = thread_id
        self.checkpoint_ns = checkpoint_ns
        self.expected_checkpoint_id = expected_checkpoint_id
        self.current_checkpoint_id = current_checkpoint_id


#: Another name for the same error: a put that would have forked the thread.
ThreadForked = CheckpointConflict


class CheckpointWithheld(Forbidden):
    """The thread's checkpoint holds personal data (it was put with ``consent=True``) and
    this saver's token may not read it: its ``max_sensitivity`` is below ``pii``. Acting
    on the empty state the server answers in its place would lose the thread, so the
    saver stops here; use a token whose ``max_sensitivity`` is ``pii``."""


class ArtifactDigestMismatch(MemvaultError):
    """An offloaded value's bytes do not have the sha256 its checkpoint names."""


def _hash(*parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, separators=(",", ":")).encode()).hexdigest()[:40]


def _readable(run: RunCheckpoint) -> RunCheckpoint:
    if "state" in run.withheld:
        raise CheckpointWithheld(
            "this thread's checkpoint holds personal data above this token's "
            "max_sensitivity, so the server withheld it; use a token whose max_sensitivity "
            "is pii to read or continue the thread",
            details={"run_id": run.run_id, "withheld": list(run.withheld)},
        )
    return run


def _state_size(state: dict[str, Any]) -> int:
    return len(json.dumps(state, separators=(",", ":"), ensure_ascii=False).encode())


def _pending(
    state: dict[str, Any], newer: Sequence[dict[str, Any]]
) -> builtins.list[builtins.list[Any]]:
    """A checkpoint's pending writes, ``[task_id, idx, channel, blob, task_path]`` each:
    its state's own, then those that arrived after later checkpoints were put, kept in
    the states of ``newer`` (any order). A (task_id, idx) is kept once: a regular write's
    first copy, a special channel's (negative idx) last."""
    cid = state.get("checkpoint_id")
    entries: builtins.list[builtins.list[Any]] = list(state.get("writes", []))
    for later in sorted(newer, key=lambda s: int(s.get("parent_version") or 0)):
        if later.get("parent_checkpoint_id") == cid:
            entries += later.get("parent_writes", [])  # the layout before late_writes
        entries += [w[1:] for w in later.get("late_writes", []) if w[0] == cid]
    kept: dict[tuple[str, int], builtins.list[Any]] = {}
    for entry in entries:
        key = (entry[0], entry[1])
        if key not in kept or entry[1] < 0:
            kept[key] = entry
    return list(kept.values())


def _matches(metadata: dict[str, Any], wanted: dict[str, Any] | None) -> bool:
    return not wanted or all(metadata.get(k) == v for k, v in wanted.items())


class MemvaultSaver(BaseCheckpointSaver[str]):
    """A LangGraph checkpointer whose threads are memvault runs of ``subject_id``.

    Give ``client`` (a :class:`MemvaultClient`) for the sync methods (``graph.invoke``)
    and ``aclient`` (an :class:`AsyncMemvaultClient`) for the async ones
    (``graph.ainvoke``); either or both. The token needs ``runs:write``, and
    ``artifacts:write`` plus ``memory:read`` for checkpoints too large for the run state.

    ``inline_max_bytes`` bounds the run state this saver writes (the server's
    ``checkpoint_max_bytes``, 32 KiB by default, bounds the whole checkpoint); a larger
    state moves its largest values to the artifact store. ``artifact_retention_days``
    is the retention of those artifacts (the tenant's default when None).
    ``writes_wait_s`` is how long ``put_writes`` waits for the put of the checkpoint its
    writes belong to before it answers :class:`CheckpointConflict`.

    Run state is under memvault's write policy: personal data in what the saver keeps as
    text (a checkpoint namespace, a channel name) is stored only with the subject's
    consent, and is then readable only by tokens whose ``max_sensitivity`` is ``pii``.
    ``consent=True`` conveys that consent with every checkpoint this saver writes;
    without it such a put raises :class:`~memvault_client.ConsentRequired`. (Channel
    values are serialized, so they are opaque to the policy.)
    """

    def __init__(
        self,
        *,
        subject_id: str,
        client: MemvaultClient | None = None,
        aclient: AsyncMemvaultClient | None = None,
        serde: SerializerProtocol | None = None,
        plan_version: str = "langgraph",
        inline_max_bytes: int = 24 * 1024,
        artifact_retention_days: int | None = None,
        writes_wait_s: float = _WRITES_WAIT_S,
        consent: bool = False,
    ) -> None:
        super().__init__(serde=serde)
        if client is None and aclient is None:
            raise ValueError("give a MemvaultClient (client=), an AsyncMemvaultClient, or both")
        self.subject_id = subject_id
        self.client = client
        self.aclient = aclient
        self.plan_version = plan_version
        self.inline_max_bytes = inline_max_bytes
        self.artifact_retention_days = artifact_retention_days
        self.writes_wait_s = writes_wait_s
        self.consent = consent

    # ----------------------------------------------------------------- drivers

    def _sync(self, flow: Flow[T]) -> T:
        if self.client is None:
            flow.close()
            raise RuntimeError("this MemvaultSaver has no sync client: use the async methods")
        return drive(self.client, flow)

    async def _async(self, flow: Flow[T]) -> T:
        if self.aclient is None:
            flow.close()
            raise RuntimeError("this MemvaultSaver has no async client: use the sync methods")
        return await adrive(self.aclient, flow)

    # -------------------------------------------------------------- public API

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._sync(self._get_tuple(config))

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._async(self._get_tuple(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        yield from self._sync(self._list(config, filter, before, limit))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        for item in await self._async(self._list(config, filter, before, limit)):
            yield item

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return self._sync(self._put(config, checkpoint, metadata))

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._async(self._put(config, checkpoint, metadata))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._sync(self._put_writes(config, writes, task_id, task_path))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._async(self._put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._sync(self._delete_thread(str(thread_id)))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._async(self._delete_thread(str(thread_id)))

    # ---------------------------------------------------------------- run ids

    @staticmethod
    def registry_run_id(thread_id: str) -> str:
        """The run that holds a thread's generation and namespaces."""
        return f"lgt.{_hash('thread', thread_id)}"

    @staticmethod
    def checkpoint_run_id(thread_id: str, checkpoint_ns: str, generation: int) -> str:
        """The run whose versions are the checkpoints of one namespace of a thread."""
        return f"lgc.{_hash('checkpoints', thread_id, checkpoint_ns, generation)}"

    # ------------------------------------------------------------- run access

    def _read(self, run_id: str) -> Flow[RunCheckpoint | None]:
        try:
            run: RunCheckpoint = yield Op("get_run", (run_id,), {"subject_id": self.subject_id})
        except NotFound:
            return None
        return _readable(run)

    def _version(self, run_id: str, version: int) -> Flow[RunCheckpoint]:
        run: RunCheckpoint = yield Op(
            "get_run_version", (run_id, version), {"subject_id": self.subject_id}
        )
        return _readable(run)

    def _read_or_create(self, run_id: str) -> Flow[RunCheckpoint]:
        run = yield from self._read(run_id)
        if run is None:
            body = {"subject_id": self.subject_id, "plan_version": self.plan_version}
            # The same payload again answers the run: safe when two writers race here.
            run = yield Op("create_run", (run_id, body))
        assert run is not None
        return run

    def _advance(
        self,
        run_id: str,
        expected: int,
        *,
        status: RunStatus,
        step: str,
        state: dict[str, Any],
        artifact_refs: builtins.list[dict[str, str]] | None = None,
    ) -> Flow[RunCheckpoint]:
        body: dict[str, Any] = {
            "expected_version": expected,
            "status": status.value,
            "step": step,
            "state": state,
            "artifact_refs": artifact_refs or [],
        }
        if self.consent:
            body["consent"] = True
        run: RunCheckpoint = yield Op(
            "advance_run", (run_id, body), {"subject_id": self.subject_id}
        )
        return run

    def _generation(self, thread_id: str) -> Flow[int]:
        registry = yield from self._read(self.registry_run_id(thread_id))
        return int(registry.state.get("generation", 0)) if registry is not None else 0

    def _register(self, thread_id: str, checkpoint_ns: str) -> Flow[int]:
        """The thread's generation, with ``checkpoint_ns`` recorded among its namespaces
        (so that delete_thread finds it)."""
        run_id = self.registry_run_id(thread_id)
        while True:
            registry = yield from self._read_or_create(run_id)
            state = dict(registry.state)
            generation = int(state.get("generation", 0))
            namespaces = list(state.get("namespaces", []))
            if checkpoint_ns in namespaces or state.get("overflow"):
                return generation
            state = {
                "v": _LAYOUT,
                "generation": generation,
                "namespaces": [*namespaces, checkpoint_ns],
            }
            if _state_size(state) > self.inline_max_bytes:
                # Too many namespaces to list: delete_thread still hides them (the
                # generation moves on) but cannot cancel their runs one by one.
                state = {**state, "namespaces": namespaces, "overflow": True}
            try:
                yield from self._advance(
                    run_id,
                    registry.version,
                    status=RunStatus.RUNNING,
                    step="langgraph thread",
                    state=state,
                )
            except VersionConflict:
                continue  # another writer registered a namespace meanwhile: merge again
            return generation

    # ----------------------------------------------------------------- values

    def _pack(self, value: Any) -> dict[str, Any]:
        kind, data = self.serde.dumps_typed(value)
        return {"t": kind, "b": base64.b64encode(data).decode("ascii")}

    def _unpack(self, blob: dict[str, Any]) -> Flow[Any]:
        if "a" in blob:
            raw: bytes = yield Op("download_artifact", (self.subject_id, blob["a"]))
            if hashlib.sha256(raw).hexdigest() != blob["h"]:
                raise ArtifactDigestMismatch(
                    "an offloaded checkpoint value does not match its sha256",
                    details={"artifact_id": blob["a"]},
                )
            blob = json.loads(raw)
        return self.serde.loads_typed((blob["t"], base64.b64decode(blob["b"])))

    def _offload(self, state: dict[str, Any]) -> Flow[builtins.list[dict[str, str]]]:
        """Move the largest inline values to the artifact store until the state fits;
        answers the artifact references the state now holds."""
        blobs: builtins.list[dict[str, Any]] = [state["checkpoint"], state["metadata"]]
        blobs += [w[3] for w in state["writes"] + state.get("parent_writes", [])]
        blobs += [w[4] for w in state.get("late_writes", [])]
        while _state_size(state) > self.inline_max_bytes:
            inline = [b for b in blobs if "b" in b]
            if not inline:
                break  # nothing left to move: the server answers payload_too_large
            largest = max(inline, key=lambda b: len(b["b"]))
            data = json.dumps({"t": largest["t"], "b": largest["b"]}).encode()
            options: dict[str, Any] = {"media_type": _MEDIA_TYPE, "name": "langgraph-value"}
            if self.artifact_retention_days is not None:
                options["retention_days"] = self.artifact_retention_days
            artifact = yield Op("upload_artifact", (self.subject_id, data), options)
            digest = hashlib.sha256(data).hexdigest()
            largest.clear()
            largest.update({"t": "artifact", "a": artifact.artifact_id, "h": digest})
        refs = {b["a"]: b["h"] for b in blobs if "a" in b}
        return [{"artifact_id": a, "sha256": h} for a, h in sorted(refs.items())]

    # ------------------------------------------------------------------- put

    def _put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> Flow[RunnableConfig]:
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        checkpoint_ns = str(conf.get("checkpoint_ns", ""))
        parent_id: str | None = conf.get("checkpoint_id")
        checkpoint_id = checkpoint["id"]
        stored: RunnableConfig = {
            "configurable": {
                "thread_id": thread_id,
                "checkpoint_ns": checkpoint_ns,
                "checkpoint_id": checkpoint_id,
            }
        }
        generation = yield from self._register(thread_id, checkpoint_ns)
        run_id = self.checkpoint_run_id(thread_id, checkpoint_ns, generation)
        state: dict[str, Any] = {
            "v": _LAYOUT,
            "checkpoint_id": checkpoint_id,
            "parent_checkpoint_id": parent_id,
            "parent_version": None,
            "checkpoint": self._pack(checkpoint),
            "metadata": self._pack(get_serializable_checkpoint_metadata(config, metadata)),
            "writes": [],
        }
        refs: builtins.list[dict[str, str]] | None = None
        while True:
            head = yield from self._read_or_create(run_id)
            current = head.state.get("checkpoint_id")
            if current == checkpoint_id and head.state.get("parent_checkpoint_id") == parent_id:
                return stored  # a replay of this very put (its answer was lost): done
            if current != parent_id or head.status in _TERMINAL:
                raise self._conflict(thread_id, checkpoint_ns, parent_id, current)
            # The version holding the parent as it finally was (with all its writes):
            # the head this put advances from.
            state["parent_version"] = head.version if parent_id is not None else None
            if refs is None:
                refs = yield from self._offload(state)
            try:
                yield from self._advance(
                    run_id,
                    head.version,
                    status=RunStatus.RUNNING,
                    step=f"langgraph checkpoint {checkpoint_id}"[:200],
                    state=state,
                    artifact_refs=refs,
                )
            except (VersionConflict, IllegalTransition):
                continue  # re-read: writes to the parent landed (retry), or a rival won
            return stored

    @staticmethod
    def _conflict(
        thread_id: str, checkpoint_ns: str, expected: str | None, current: str | None
    ) -> CheckpointConflict:
        return CheckpointConflict(
            f"thread {thread_id!r} (namespace {checkpoint_ns!r}) is at checkpoint "
            f"{current!r}, not {expected!r}: another writer moved it on; re-read the thread "
            "and continue from its latest checkpoint",
            thread_id=thread_id,
            checkpoint_ns=checkpoint_ns,
            expected_checkpoint_id=expected,
            current_checkpoint_id=current,
        )

    # ------------------------------------------------------------- put_writes

    def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Flow[None]:
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        checkpoint_ns = str(conf.get("checkpoint_ns", ""))
        checkpoint_id = conf["checkpoint_id"]
        generation = yield from self._generation(thread_id)
        run_id = self.checkpoint_run_id(thread_id, checkpoint_ns, generation)
        packed = [(WRITES_IDX_MAP.get(c, i), c, self._pack(v)) for i, (c, v) in enumerate(writes)]
        waited = 0.0
        while True:
            head = yield from self._read(run_id)
            current = head.state.get("checkpoint_id") if head is not None else None
            found: tuple[str, builtins.list[builtins.list[Any]]] | None = None
            if head is not None and head.status not in _TERMINAL:
                found = yield from self._writes_slot(run_id, head, checkpoint_id)
            if head is None or found is None:
                # LangGraph may send a checkpoint's writes while its put is still in
                # flight (durability "async"): give that put a moment to land.
                if waited < self.writes_wait_s and (head is None or head.status not in _TERMINAL):
                    delay = min(0.2, 0.01 + waited / 4)
                    yield Op(SLEEP, (delay,))
                    waited += delay
                    continue
                raise self._conflict(thread_id, checkpoint_ns, checkpoint_id, current)
            slot, known = found
            state = json.loads(json.dumps(head.state))  # a deep copy to change
            state.setdefault(slot, [])
            # Where this checkpoint's writes stand so far: its own, and late ones kept in
            # the versions after it (the head's included).
            existing = {(w[0], w[1]): w for w in known}
            changed = False
            for idx, channel, blob in packed:
                entry = [task_id, idx, channel, blob, task_path]
                before = existing.get((task_id, idx))
                if before is not None and (idx >= 0 or before == entry):
                    continue  # written before: (task_id, index) is written once
                if slot == "writes":
                    at = next(
                        (n for n, w in enumerate(state[slot]) if (w[0], w[1]) == (task_id, idx)),
                        None,
                    )
                    if at is None:
                        state[slot].append(entry)
                    else:
                        state[slot][at] = entry  # the special channels keep the last
                else:
                    state[slot].append([checkpoint_id, *entry])
                existing[(task_id, idx)] = entry
                changed = True
            if not changed:
                return None
            refs = yield from self._offload(state)
            try:
                yield from self._advance(
                    run_id,
                    head.version,
                    status=RunStatus.RUNNING,
                    step=f"langgraph writes {checkpoint_id}"[:200],
                    state=state,
                    artifact_refs=refs,
                )
            except VersionConflict:
                continue  # another task's writes landed: merge with them and retry
            return None

    def _writes_slot(
        self, run_id: str, head: RunCheckpoint, checkpoint_id: str
    ) -> Flow[tuple[str, builtins.list[builtins.list[Any]]] | None]:
        """Where writes for ``checkpoint_id`` go in the head's state, with the writes that
        checkpoint already has; None when it is not on the thread's line (yet).

        The head's own writes go to ``writes``. LangGraph (durability "async") sends a
        task's writes without waiting for the checkpoints put after them, so the thread
        may be one or more checkpoints further on when they arrive: writes for an
        ancestor of the head are kept in the head's ``late_writes`` under that ancestor's
        id, and read back with it. Writes for a checkpoint that is not an ancestor (one
        whose put lost a race) are refused, so a fork never gets writes either.
        """
        if head.state.get("checkpoint_id") == checkpoint_id:
            return "writes", _pending(head.state, [])
        current = head.state.get("checkpoint_id")
        if current is None or (
            isinstance(current, str) and isinstance(checkpoint_id, str) and checkpoint_id > current
        ):
            return None  # newer than the head (checkpoint ids sort by time): still in flight
        states = yield from self._walk(run_id, head, checkpoint_id, depth=_LATE_WRITES_DEPTH)
        if states and states[-1]["checkpoint_id"] == checkpoint_id:
            return "late_writes", _pending(states[-1], states[:-1])
        return None

    # -------------------------------------------------------------------- read

    def _walk(
        self, run_id: str, head: RunCheckpoint, stop: str | None, *, depth: int | None = None
    ) -> Flow[builtins.list[dict[str, Any]]]:
        """The states of the namespace's checkpoints from the head back, newest first,
        as far as checkpoint ``stop`` (included) when given, else to the root; at most
        ``depth`` states when given."""
        states: builtins.list[dict[str, Any]] = []
        state: dict[str, Any] | None = head.state
        while state is not None and state.get("checkpoint_id") is not None:
            states.append(state)
            if stop is not None and state["checkpoint_id"] == stop:
                break
            if depth is not None and len(states) >= depth:
                break
            parent_version = state.get("parent_version")
            if not parent_version:
                break
            older = yield from self._version(run_id, int(parent_version))
            state = older.state
        return states

    def _tuple(
        self,
        thread_id: str,
        checkpoint_ns: str,
        state: dict[str, Any],
        newer: builtins.list[dict[str, Any]],
    ) -> Flow[CheckpointTuple]:
        checkpoint = yield from self._unpack(state["checkpoint"])
        metadata = yield from self._unpack(state["metadata"])
        writes = []
        for task_id, _idx, channel, blob, _path in _pending(state, newer):
            value = yield from self._unpack(blob)
            writes.append((task_id, channel, value))
        parent = state.get("parent_checkpoint_id")
        return CheckpointTuple(
            config={
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": checkpoint_ns,
                    "checkpoint_id": state["checkpoint_id"],
                }
            },
            checkpoint=checkpoint,
            metadata=metadata,
            parent_config=None
            if parent is None
            else {
                "configurable": {
                    "thread_id": thread_id,
                    "checkpoint_ns": checkpoint_ns,
                    "checkpoint_id": parent,
                }
            },
            pending_writes=writes,
        )

    def _get_tuple(self, config: RunnableConfig) -> Flow[CheckpointTuple | None]:
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        checkpoint_ns = str(conf.get("checkpoint_ns", ""))
        wanted = get_checkpoint_id(config)
        generation = yield from self._generation(thread_id)
        run_id = self.checkpoint_run_id(thread_id, checkpoint_ns, generation)
        head = yield from self._read(run_id)
        if head is None or head.state.get("checkpoint_id") is None:
            return None
        states = yield from self._walk(run_id, head, wanted if wanted else None)
        if not states or (wanted and states[-1]["checkpoint_id"] != wanted):
            return None
        at = len(states) - 1 if wanted else 0
        found = yield from self._tuple(thread_id, checkpoint_ns, states[at], states[:at])
        return found

    def _list(
        self,
        config: RunnableConfig | None,
        wanted: dict[str, Any] | None,
        before: RunnableConfig | None,
        limit: int | None,
    ) -> Flow[builtins.list[CheckpointTuple]]:
        if config is None:
            raise ValueError(
                "MemvaultSaver lists one thread's checkpoints: give a config with a thread_id"
            )
        conf = config["configurable"]
        thread_id = str(conf["thread_id"])
        generation = yield from self._generation(thread_id)
        if "checkpoint_ns" in conf:
            namespaces = [str(conf["checkpoint_ns"])]
        else:
            registry = yield from self._read(self.registry_run_id(thread_id))
            namespaces = list(registry.state.get("namespaces", [])) if registry else []
        only = get_checkpoint_id(config)
        before_id = get_checkpoint_id(before) if before is not None else None
        found: builtins.list[tuple[str, str, dict[str, Any], builtins.list[dict[str, Any]]]] = []
        for ns in namespaces:
            run_id = self.checkpoint_run_id(thread_id, ns, generation)
            head = yield from self._read(run_id)
            if head is None:
                continue
            states = yield from self._walk(run_id, head, None)
            for at, state in enumerate(states):
                cid = state["checkpoint_id"]
                if only is not None and cid != only:
                    continue
                if before_id is not None and cid >= before_id:
                    continue
                found.append((cid, ns, state, states[:at]))
        found.sort(key=lambda item: item[0], reverse=True)
        out: builtins.list[CheckpointTuple] = []
        for _cid, ns, state, newer in found:
            if limit is not None and len(out) >= limit:
                break
            if wanted:
                metadata = yield from self._unpack(state["metadata"])
                if not _matches(metadata, wanted):
                    continue
            item = yield from self._tuple(thread_id, ns, state, newer)
            out.append(item)
        return out

    # ----------------------------------------------------------------- delete

    def _delete_thread(self, thread_id: str) -> Flow[None]:
        registry_id = self.registry_run_id(thread_id)
        registry = yield from self._read(registry_id)
        if registry is None:
            return None
        generation = int(registry.state.get("generation", 0))
        artifacts: set[str] = set()
        for ns in registry.state.get("namespaces", []):
            run_id = self.checkpoint_run_id(thread_id, ns, generation)
            for _ in range(5):
                head = yield from self._read(run_id)
                if head is None or head.status in _TERMINAL:
                    break
                for state in (yield from self._walk(run_id, head, None)):
                    artifacts.update(self._artifacts_of(state))
                try:
                    yield from self._advance(
                        run_id,
                        head.version,
                        status=RunStatus.CANCELLED,
                        step="langgraph thread deleted",
                        state={},
                    )
                except VersionConflict:
                    continue
                break
        while True:
            try:
                yield from self._advance(
                    registry_id,
                    registry.version,
                    status=RunStatus.RUNNING,
                    step="langgraph thread",
                    state={"v": _LAYOUT, "generation": generation + 1, "namespaces": []},
                )
            except VersionConflict:
                registry = yield from self._read_or_create(registry_id)
                if int(registry.state.get("generation", 0)) > generation:
                    break  # deleted concurrently
                continue
            break
        for artifact_id in sorted(artifacts):
            # The artifact goes with its last reference; best effort.
            with contextlib.suppress(MemvaultError):
                yield Op("delete_artifact", (self.subject_id, artifact_id))
        return None

    @staticmethod
    def _artifacts_of(state: dict[str, Any]) -> set[str]:
        blobs = [state.get("checkpoint", {}), state.get("metadata", {})]
        blobs += [w[3] for w in state.get("writes", []) + state.get("parent_writes", [])]
        blobs += [w[4] for w in state.get("late_writes", [])]
        return {b["a"] for b in blobs if "a" in b}
