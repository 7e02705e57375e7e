"""memvault and Mem0 side by side, in this process, over the same OpenSearch and embedder.

Both systems are driven through one small call surface, the HTTP API's routes as the
evaluation loader and scorer use them (``memvault_local.evaluation``): ``POST`` a memory,
``DELETE`` one, ``GET`` one, ``POST`` a recall. :class:`MemvaultSystem` answers them with
memvault's own services (the embedded SQLite store, its change feed pumped into the
index, recall with its hard filters and re-validation); :class:`Mem0Caller` answers
them with Mem0's public ``Memory`` API, the calls a Mem0 user would make for the same
intent. Recall latency is what each system's recall call takes in this process, query
embedding included ("server-side"; Mem0 open source has no server of its own).

The embedder is the same object for both: all-MiniLM-L6-v2 on numpy, with a cache of
precomputed vectors (:class:`CachedEmbedder`) so that synthetic corpora need not be
embedded twice and both systems index identical vectors.

Mem0 wiring, as Mem0 2.2 needs it here (``mem0ai`` 2.2.x, ``infer=False``: no LLM):

- telemetry off (``MEM0_TELEMETRY=False``), its home in a temporary folder;
- its OpenSearch vector store pointed at our local node. Mem0 creates its index with the
  nmslib engine, whose native library this node lacks, so :func:`create_mem0_index` makes
  the index first with Mem0's own mapping and the Lucene HNSW engine; Mem0 then uses it
  unchanged (it only creates an index that does not exist);
- its embedder replaced after construction (its config accepts only built-in providers)
  by an adapter over the shared embedder; its LLM is configured but never called;
- no spaCy (the ``mem0ai[nlp]`` extra): Mem0 then keys BM25 on the raw text and skips
  entity boosts, as it does for any user without that extra.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
from werkzeug.serving import ThreadedWSGIServer, WSGIRequestHandler

from memvault.clock import RandomIds, SystemClock
from memvault.config import Settings
from memvault.indexing.indexer import Indexer
from memvault.models.access import AccessContext, Scope, Sensitivity
from memvault.search.backend import SearchFilter, SearchResult
from memvault.search.opensearch import _RETURN, OpenSearchIndex, filter_clauses, vector_query
from memvault.search.opensearch import _hit as _os_hit
from memvault.services.bundle import Services
from memvault.services.deletion import PurgeRunner, default_steps
from memvault.services.memory import MemoryService
from memvault.services.recall import RecallService
from memvault.storage.sqlite.db import OutboxFeed
from memvault.wiring import _launcher, build_services, search_index
from memvault_local.outbox_pump import OutboxPump
from memvault_wire.errors import MemvaultError
from memvault_wire.memory import MemoryWrite
from memvault_wire.recall import RecallRequest

ALL_SCOPES = frozenset(Scope)
DIM = 384


@dataclass
class Answer:
    status: int
    body: Any
    headers: dict[str, str] = field(default_factory=dict)


class CachedEmbedder:
    """The shared embedder: precomputed vectors by text, the model for anything else.

    Thread-safe; a text the model embeds once is remembered (the eval set's texts and
    queries recur across systems and runs)."""

    def __init__(self, model: Any) -> None:
        self.model = model
        # float32 arrays: 100,000 cached vectors as Python lists would be about 1 GB.
        self.vectors: dict[str, Any] = {}
        self._lock = threading.Lock()

    model_id = property(lambda self: self.model.model_id)
    model_version = property(lambda self: self.model.model_version)
    dimensions = property(lambda self: self.model.dimensions)
    slug = property(lambda self: self.model.slug)

    @property
    def setting(self) -> str:
        """The model's name in memvault's ``embedding_model`` setting."""
        spec = getattr(self.model, "spec", None)
        return spec.name if spec is not None else "minilm"

    def put(self, text: str, vector: Any) -> None:
        self.vectors[text] = np.asarray(vector, dtype=np.float32)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        missing = [t for t in dict.fromkeys(texts) if t not in self.vectors]
        if missing:
            got = self.model.embed(missing)
            with self._lock:
                for text, vector in zip(missing, got, strict=True):
                    self.put(text, vector)
        return [self.vectors[t].tolist() for t in texts]

    def embed_one(self, text: str) -> list[float]:
        return self.embed([text])[0]

    def embed_query(self, text: str) -> list[float]:
        key = "\0query\0" + text  # a query's vector may differ from the same text's
        if key not in self.vectors:
            vector = self.model.embed_query(text)
            with self._lock:
                self.put(key, vector)
        out: list[float] = self.vectors[key].tolist()
        return out

    def embed_uncached(self, text: str) -> list[float]:
        """A query's vector computed by the model every time (latency figures), asked as
        a query (e5's ``query: `` prefix; MiniLM has none)."""
        vector: list[float] = self.model.embed_query(text)
        return vector

    def for_queries(self) -> _QueryEmbedder:
        """The same model with no cache: what recall embeds its query with, so that
        latency includes a real embedding for both systems."""
        return _QueryEmbedder(self)


class _QueryEmbedder:
    def __init__(self, cached: CachedEmbedder) -> None:
        self.cached = cached

    model_id = property(lambda self: self.cached.model_id)
    model_version = property(lambda self: self.cached.model_version)
    dimensions = property(lambda self: self.cached.dimensions)
    slug = property(lambda self: self.cached.slug)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        out: list[list[float]] = self.cached.model.embed(list(texts))
        return out

    def embed_one(self, text: str) -> list[float]:
        out: list[float] = self.cached.model.embed_one(text)
        return out

    def embed_query(self, text: str) -> list[float]:
        return self.cached.embed_uncached(text)


def _path_parts(path: str) -> list[str]:
    return [p for p in path.split("/") if p]


# ---------------------------------------------------------------------------- memvault


class MemvaultSystem:
    """memvault's services in this process: one embedded store, one or two indexes.

    ``backends`` are ``embedded`` (the index file under ``home``) and ``opensearch``.
    Writes land in the store and its outbox; each index has its own indexer and cursor on
    that outbox, as two event source mappings on one stream would. :meth:`sync` pumps the
    outbox into every index and refreshes OpenSearch; :meth:`start_pumps` runs the pumps
    in the background as the local stack does. :meth:`view` is one backend's recall.
    """

    def __init__(
        self,
        home: Path,
        embedder: CachedEmbedder,
        backends: Sequence[str] = ("embedded",),
        *,
        opensearch_url: str | None = None,
        alias: str = "peer-memvault",
        purge_launch: str = "inline",
    ) -> None:
        def settings_for(backend: str) -> Settings:
            return Settings(
                store="sqlite",
                data_dir=str(home / "data"),
                search_backend=backend,
                index_dir=str(home / "index"),
                search_endpoint=opensearch_url if backend == "opensearch" else None,
                search_auth="none",
                search_alias=alias,
                embedding_model=embedder.setting,  # type: ignore[arg-type]
                search_refresh_interval="500ms",  # the local stack's default
                purge_launch=purge_launch,  # type: ignore[arg-type]
            )

        queries = embedder.for_queries()
        first = backends[0]
        self.services: Services = build_services(settings_for(first), embedder=queries)
        repo = self.services.stores.memory
        self.recalls = {first: self.services.recall}
        #: Per backend, the memory service whose deletions purge that backend's index.
        self.memories: dict[str, MemoryService] = {first: self.services.memory}
        stores = self.services.stores
        for backend in backends[1:]:
            settings = settings_for(backend)
            index = search_index(settings, queries)
            clock = SystemClock()
            self.recalls[backend] = RecallService(repo, index, queries, settings, clock)
            steps = default_steps(
                repo,
                clock,
                self.services.artifacts,
                index,
                sessions=stores.sessions,
                runs=stores.runs,
            )
            launcher = _launcher(settings, PurgeRunner(repo, clock, steps), clock)
            self.memories[backend] = MemoryService(repo, settings, clock, RandomIds(), launcher)
        self.pumps: dict[str, OutboxPump] = {}
        for backend, recall in self.recalls.items():
            index = recall.index
            assert index is not None, "no index configured"
            if hasattr(index, "ensure"):
                index.ensure()
            self.pumps[backend] = OutboxPump(
                OutboxFeed(self.services.stores.database),
                Indexer(index, embedder, repo, SystemClock()),
                consumer=f"indexer-{backend}",
                batch_size=500,
            )
        self._ctx: dict[tuple[Any, ...], AccessContext] = {}
        self.home = home

    def ctx(
        self,
        tenant: str,
        subject: str | None,
        role: str | None = None,
        sensitivity: str | None = None,
    ) -> AccessContext:
        key = (tenant, subject, role, sensitivity)
        if key not in self._ctx:
            scopes = ALL_SCOPES if subject is None else ALL_SCOPES - {Scope.SUBJECTS_ANY}
            self._ctx[key] = AccessContext(
                tenant_id=tenant,
                principal="reviewer-1" if subject is None else f"agent-{subject}",
                subject_id=subject,
                scopes=frozenset(scopes),
                agent_role=role,
                max_sensitivity=Sensitivity(sensitivity or "internal"),
            )
        return self._ctx[key]

    def view(self, backend: str) -> MemvaultView:
        return MemvaultView(self, backend)

    def sync(self) -> None:
        for backend, pump in self.pumps.items():
            pump.drain()
            index = self.recalls[backend].index
            if hasattr(index, "refresh"):
                index.refresh()

    def start_pumps(self) -> None:
        for pump in self.pumps.values():
            pump.start()

    def stop_pumps(self) -> None:
        for pump in self.pumps.values():
            pump.stop()

    def close(self) -> None:
        self.stop_pumps()
        self.services.stores.database.close()


class HttpView:
    """The system's services behind the local stack's HTTP front (the API Gateway adapter
    and the Lambda handler, as ``memvault run`` serves them) on a loopback port, for
    recall as a client sees it: end to end."""

    def __init__(self, system: MemvaultSystem) -> None:
        class Quiet(WSGIRequestHandler):
            def log_request(self, *args: Any, **kwargs: Any) -> None:
                pass

        from memvault.api.deps import deps
        from memvault.handlers.api import handler as lambda_handler
        from memvault_local.adapter import ApiGatewayAdapter
        from memvault_local.devkeys import DevKey
        from memvault_local.threads import make_resolver_thread_safe

        self.system = system
        deps.use(system.services)
        make_resolver_thread_safe()
        self.key = DevKey.load_or_create(system.home)
        app = ApiGatewayAdapter(self.key.verifier(), lambda_handler)
        self.server = _SettlingServer("127.0.0.1", 0, app, handler=Quiet)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self._clients: dict[str, Any] = {}

    def client_for(
        self, tenant: str, subject: str | None, role: str | None, sensitivity: str | None
    ) -> Any:
        from memvault_local.client import ApiClient

        assert subject is not None
        if subject not in self._clients:
            token = self.key.mint(
                tenant=tenant, subject=subject, ttl=86_000
            )  # this stack's longest lifetime: a day
            self._clients[subject] = _TimedClient(
                ApiClient(self.url, token), self.server, self.system.services.stores.traces
            )
        return self._clients[subject]

    def close(self) -> None:
        self.server.shutdown()


def balanced_orders(n: int) -> list[list[int]]:
    """The rows of a Williams design for ``n`` systems: across the rows, each system comes
    right after each other one equally often within a row (once in ``n`` rows when ``n`` is
    even; the rows and their mirrors, ``2n`` rows, when it is odd), and holds each place in
    the row equally often."""
    first, low, high = [0], 1, n - 1
    while len(first) < n:
        first.append(low)
        low += 1
        if len(first) < n:
            first.append(high)
            high -= 1
    rows = [[(x + shift) % n for x in first] for shift in range(n)]
    return rows + [row[::-1] for row in rows] if n % 2 else rows


class ModeView:
    """A view whose recalls all ask in one ``mode``: ``vector`` is the k-NN query alone,
    the one query Mem0 sends, where memvault's default (``hybrid``) adds a keyword query."""

    def __init__(self, view: Any, mode: str) -> None:
        self.view = view
        self.mode = mode

    def client_for(
        self, tenant: str, subject: str | None, role: str | None, sensitivity: str | None
    ) -> _ModeClient:
        return _ModeClient(self.view.client_for(tenant, subject, role, sensitivity), self.mode)


class _ModeClient:
    def __init__(self, client: Any, mode: str) -> None:
        self.client = client
        self.mode = mode

    def call(self, method: str, path: str, *, body: Any = None) -> Answer:
        if method == "POST" and path.endswith("/recall") and isinstance(body, dict):
            body = {**body, "mode": self.mode}
        answer: Answer = self.client.call(method, path, body=body)
        return answer


class _SettlingServer(ThreadedWSGIServer):
    """``memvault run``'s threaded server, which also tells when each request it took has
    been finished off (answered, its connection closed; the handler's thread then only
    ends). The benchmark's client (``memvault_local.client``) closes each connection.

    This server shares the benchmark's process, and so its GIL, with the systems timed in
    process, where ``memvault run`` is a process of its own: its work after an answer
    would otherwise run inside whichever system's call is timed next."""

    def __init__(self, host: str, port: int, app: Any, handler: Any) -> None:
        super().__init__(host, port, app, handler=handler)
        self._busy = 0
        self._settled = threading.Condition()

    def _done(self) -> None:
        with self._settled:
            self._busy -= 1
            self._settled.notify_all()

    def process_request(self, request: Any, client_address: Any) -> None:
        with self._settled:
            self._busy += 1
        try:
            super().process_request(request, client_address)
        except BaseException:
            self._done()  # no thread started: nothing will finish it off
            raise

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        try:
            super().process_request_thread(request, client_address)
        finally:
            self._done()

    def wait_settled(self, timeout: float = 5.0) -> None:
        with self._settled:
            if not self._settled.wait_for(lambda: self._busy == 0, timeout):
                raise RuntimeError(f"the HTTP front did not finish its requests in {timeout} s")


class _TimedClient:
    """An HTTP client whose answers carry the round trip as ``Server-Timing``'s total, so
    the same timing loop reads end-to-end figures. After each answer it waits, untimed,
    until the server has finished the request off and its trace is written."""

    def __init__(self, client: Any, server: _SettlingServer, traces: Any) -> None:
        self.client = client
        self.server = server
        self.traces = traces

    def call(self, method: str, path: str, *, body: Any = None) -> Answer:
        started = time.perf_counter()
        got = self.client.call(method, path, body=body)
        took = (time.perf_counter() - started) * 1000
        self.server.wait_settled()
        self.traces.flush()  # a recall's trace, committed after the answer
        return Answer(got.status, got.body, {"Server-Timing": f"total;dur={took:.2f}"})


class MemvaultView:
    """One backend of a :class:`MemvaultSystem`, as the evaluation's ``client_for``."""

    def __init__(self, system: MemvaultSystem, backend: str) -> None:
        self.system = system
        self.backend = backend
        self.recall = system.recalls[backend]

    def client_for(
        self, tenant: str, subject: str | None, role: str | None, sensitivity: str | None
    ) -> _MemvaultClient:
        return _MemvaultClient(self, self.system.ctx(tenant, subject, role, sensitivity))


class _MemvaultClient:
    def __init__(self, view: MemvaultView, ctx: AccessContext) -> None:
        self.view = view
        self.system = view.system
        self.ctx = ctx

    def call(self, method: str, path: str, *, body: Any = None) -> Answer:
        parts = _path_parts(path)  # v1 subjects {s} memories [id] | recall
        subject = parts[2]
        services = self.system.services
        try:
            memories = self.system.memories[self.view.backend]
            if method == "POST" and parts[3] == "memories":
                written = memories.write(self.ctx, subject, MemoryWrite.model_validate(body))
                return Answer(201, {"memory_id": written.memory.memory_id})
            if method == "DELETE":
                job = memories.delete(self.ctx, subject, parts[4])
                return Answer(202, {"deletion_id": job.deletion_id})
            if method == "GET":
                self.system.sync()
                got = services.memory.get(self.ctx, subject, parts[4])
                return Answer(200, got.model_dump(mode="json"))
            if method == "POST" and parts[3] == "recall":
                # Timed as Mem0's is: the whole call, request validation and the answer's
                # models included (RecallResult.timings starts later).
                started = time.perf_counter()
                result = self.view.recall.recall(
                    self.ctx, subject, RecallRequest.model_validate(body)
                )
                total = round((time.perf_counter() - started) * 1000, 2)
                # The trace is committed off the request path; wait for it, untimed, so
                # that its commit lands in no other system's (or the floor's) next call.
                self.system.services.stores.traces.flush()
                return Answer(
                    200,
                    {
                        "items": [
                            {"memory": {"memory_id": i.memory.memory_id}} for i in result.items
                        ]
                    },
                    {"Server-Timing": f"total;dur={total}"},
                )
        except MemvaultError as error:
            return Answer(error.status, {"error": {"code": error.code, "message": str(error)}})
        raise ValueError(f"no such call: {method} {path}")


class FloorView:
    """The floor under any recall on one backend of a :class:`MemvaultSystem`: the query
    embedded by the same embedder, then one search round trip on memvault's own index
    with the same hard filter and depth (one ``_msearch`` on OpenSearch, one in-process
    search on the embedded index). Nothing else: no re-validation against the table, no
    fusion, relevance floor, trace or answer models. A recall cannot cost less than this
    on its index; memvault's recall time over it is what memvault itself adds."""

    def __init__(self, system: MemvaultSystem, backend: str) -> None:
        self.system = system
        self.recall = system.recalls[backend]

    def client_for(
        self, tenant: str, subject: str | None, role: str | None, sensitivity: str | None
    ) -> _FloorClient:
        return _FloorClient(self, self.system.ctx(tenant, subject, role, sensitivity))


class _FloorClient:
    def __init__(self, view: FloorView, ctx: AccessContext) -> None:
        self.view = view
        self.ctx = ctx

    def call(self, method: str, path: str, *, body: Any = None) -> Answer:
        parts = _path_parts(path)
        if method != "POST" or parts[3] != "recall":
            raise ValueError(f"the floor answers recalls only, not {method} {path}")
        recall = self.view.recall
        assert recall.index is not None
        started = time.perf_counter()
        req = RecallRequest.model_validate(body)
        vector = recall.embedder.embed_query(req.query)
        flt = RecallService._filter(self.ctx, parts[2], req, recall.clock.now())
        depth = max(recall.settings.recall_candidates, req.limit * 2)
        if isinstance(recall.index, OpenSearchIndex):
            found = _one_msearch(recall.index, flt, req.query, vector, depth)
        else:
            found = recall.index.search(flt, req.query, vector, depth)
        total = round((time.perf_counter() - started) * 1000, 2)
        hits = found.vector[: req.limit] or found.keyword[: req.limit]
        return Answer(
            200,
            {"items": [{"memory": {"memory_id": h.memory_id}} for h in hits]},
            {"Server-Timing": f"total;dur={total}"},
        )


def bm25_query(flt: SearchFilter, text: str, k: int) -> dict[str, Any]:
    """A plain BM25 keyword search under the hard filter, scored by the shard's own
    statistics: what memvault's adapter sent before it counted its statistics under the
    filter (``opensearch.KeywordStatistics``), and what a raw search round trip sends."""
    return {
        "size": k,
        "track_total_hits": False,
        **_RETURN,
        "query": {
            "bool": {
                "filter": filter_clauses(flt),
                "must": {
                    "multi_match": {
                        "query": text,
                        "fields": ["content", "content.cjk", "key_text"],
                        "type": "best_fields",
                        "tie_breaker": 0.3,
                    }
                },
            }
        },
    }


def _one_msearch(
    index: OpenSearchIndex, flt: SearchFilter, text: str, vector: list[float], k: int
) -> SearchResult:
    """One ``_msearch`` of a plain BM25 query and memvault's own vector query (exact or
    by the graph, as memvault's recall would search the same filter): the floor's round
    trip. memvault's recall also counts its keyword statistics under the filter, while
    the query is embedded; that count is its own cost, not the floor's."""
    started = time.perf_counter()
    header = {"index": index.alias, "routing": flt.tenant_id}
    exact = index.scores_exactly(flt)
    body = [header, bm25_query(flt, text, k), header, vector_query(flt, vector, k, exact=exact)]
    out = index.client.msearch(body=body)
    keyword, near = out["responses"]
    return SearchResult(
        keyword=[_os_hit(h) for h in keyword["hits"]["hits"]],
        vector=[_os_hit(h, exact=exact) for h in near["hits"]["hits"]],
        took_ms=(time.perf_counter() - started) * 1000,
    )


# -------------------------------------------------------------------------------- Mem0


def _opensearch(url: str, method: str, path: str, body: Any = None) -> Any:
    data = json.dumps(body).encode() if body is not None else None
    request = urllib.request.Request(  # noqa: S310 (the local node)
        url + path, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=120) as raw:  # noqa: S310
            return json.loads(raw.read() or b"{}")
    except urllib.error.HTTPError as error:
        if method == "DELETE" and error.code == 404:
            return {}
        detail = error.read()[:300]
        raise RuntimeError(f"OpenSearch {method} {path}: {error.code} {detail!r}") from None


def create_mem0_index(url: str, name: str) -> None:
    """Mem0's ``OpenSearchDB.create_col`` mapping, with the Lucene HNSW engine."""
    _opensearch(url, "DELETE", f"/{name}")
    _opensearch(
        url,
        "PUT",
        f"/{name}",
        {
            # Mem0's settings, with the refresh interval memvault's local index uses, so
            # that freshness compares the systems rather than two refresh settings.
            "settings": {"index.knn": True, "index.refresh_interval": "500ms"},
            "mappings": {
                "properties": {
                    "vector_field": {
                        "type": "knn_vector",
                        "dimension": DIM,
                        "method": {"engine": "lucene", "name": "hnsw", "space_type": "cosinesimil"},
                    },
                    "payload": {"type": "object"},
                    "id": {"type": "keyword"},
                }
            },
        },
    )


class _Mem0Embedder:
    """Mem0's embedder interface (``embed``, ``embed_batch``) over the shared embedder."""

    def __init__(self, embedder: CachedEmbedder) -> None:
        self.embedder = embedder
        self.config = None
        self.query_uncached = False

    def embed(self, text: str, memory_action: str | None = None) -> list[float]:
        # Mem0 names the action: a search is embedded as a query (e5's ``query: ``
        # prefix), as memvault's recall embeds it; anything else as a stored text.
        if memory_action == "search":
            if self.query_uncached:
                return self.embedder.embed_uncached(text)
            return self.embedder.embed_query(text)
        return self.embedder.embed_one(text)

    def embed_batch(self, texts: list[str], memory_action: str | None = None) -> list[list[float]]:
        return self.embedder.embed(texts)


def mem0_user(tenant: str, subject: str) -> str:
    """Mem0 has users, not tenants: a platform would name a user by both."""
    return f"{tenant}__{subject}"


class Mem0System:
    """Mem0's ``Memory`` on its OpenSearch vector store, in this process."""

    def __init__(self, home: Path, url: str, embedder: CachedEmbedder, collection: str) -> None:
        home.mkdir(parents=True, exist_ok=True)
        os.environ["MEM0_TELEMETRY"] = "False"
        os.environ["MEM0_DIR"] = str(home / "mem0")
        os.environ.setdefault("OPENAI_API_KEY", "unused-no-llm-call-is-made")
        from mem0 import Memory
        from mem0.configs.base import MemoryConfig

        match = re.match(r"https?://([^:/]+):(\d+)", url)
        assert match, url
        create_mem0_index(url, collection)
        config = MemoryConfig(
            vector_store={
                "provider": "opensearch",
                "config": {
                    "host": match.group(1),
                    "port": int(match.group(2)),
                    "collection_name": collection,
                    "embedding_model_dims": DIM,
                    "use_ssl": False,
                    "verify_certs": False,
                },
            },
            history_db_path=str(home / "mem0-history.db"),
        )
        self.url = url
        self.collection = collection
        self.memory = Memory(config)
        self.embedding = _Mem0Embedder(embedder)
        self.embedding.query_uncached = True
        self.memory.embedding_model = self.embedding
        self._buffer: list[dict[str, Any]] | None = None
        self.keys: dict[tuple[str, str, str], str] = {}  # (tenant, subject, canonical key) -> id

    def client_for(
        self, tenant: str, subject: str | None, role: str | None, sensitivity: str | None
    ) -> _Mem0Client:
        return _Mem0Client(self, tenant)

    def refresh(self) -> None:
        _opensearch(self.url, "POST", f"/{self.collection}/_refresh")

    # Loading at scale: Mem0's own ``add`` builds each document (payload, hash, history
    # row); only its one-request-per-document index call is batched into ``_bulk``
    # requests, which changes nothing about the documents or how they are searched.
    def begin_bulk(self) -> None:
        store = self.memory.vector_store
        self._buffer = []
        buffer = self._buffer

        def insert(vectors: Any, payloads: Any = None, ids: Any = None) -> list[Any]:
            for vector, payload, id_ in zip(vectors, payloads, ids, strict=True):
                buffer.append({"vector_field": vector, "payload": payload, "id": id_})
            return []

        store.insert = insert

    def flush_bulk(self) -> None:
        assert self._buffer is not None
        for start in range(0, len(self._buffer), 500):
            lines = []
            for doc in self._buffer[start : start + 500]:
                lines.append(json.dumps({"index": {"_index": self.collection}}))
                lines.append(json.dumps(doc, ensure_ascii=False))
            data = ("\n".join(lines) + "\n").encode()
            request = urllib.request.Request(  # noqa: S310
                f"{self.url}/_bulk",
                data=data,
                method="POST",
                headers={"Content-Type": "application/x-ndjson"},
            )
            for attempt in range(6):
                try:
                    with urllib.request.urlopen(request, timeout=300) as raw:  # noqa: S310
                        answer = json.loads(raw.read())
                except urllib.error.HTTPError as error:
                    if error.code != 429 or attempt == 5:
                        raise
                    time.sleep(2**attempt)
                    continue
                if answer.get("errors"):
                    raise RuntimeError("a Mem0 bulk load had errors")
                break
        self._buffer.clear()
        del self.memory.vector_store.insert  # back to OpenSearchDB.insert
        self._buffer = None
        self.refresh()

    def close(self) -> None:
        _opensearch(self.url, "DELETE", f"/{self.collection}")


class _Mem0Client:
    """The same four calls, made the way a Mem0 user makes them."""

    def __init__(self, system: Mem0System, tenant: str) -> None:
        self.system = system
        self.tenant = tenant

    def call(self, method: str, path: str, *, body: Any = None) -> Answer:
        parts = _path_parts(path)
        subject = parts[2]
        memory = self.system.memory
        user = mem0_user(self.tenant, subject)
        if method == "POST" and parts[3] == "memories":
            # Mem0 keeps what it is given: no consent, sensitivity, visibility or candidate
            # state of its own; they ride along as metadata.
            # Scope keys are stored as metadata so that a recall can filter on them, as
            # Mem0's exact-match metadata filters allow.
            meta = {
                "kind": body["kind"],
                "tags": ",".join(body.get("tags", [])),
                "sensitivity": body.get("sensitivity", "internal"),
                "source_type": body["source"]["type"],
                **(body.get("scope") or {}),
            }
            expires = None
            if body.get("ttl_seconds"):
                # Mem0's expiry is a date: a memory is hidden from the day after it.
                expires = (
                    (datetime.now(UTC) + timedelta(seconds=body["ttl_seconds"])).date().isoformat()
                )
            key = body.get("canonical_key")
            if key and (self.tenant, subject, key) in self.system.keys:
                # A correction: a Mem0 user updates the memory in place.
                mid = self.system.keys[(self.tenant, subject, key)]
                self.system.refresh()  # Mem0 finds a memory by a search on its id
                memory.update(mid, text=body["content"], metadata=meta, expiration_date=expires)
                return Answer(201, {"memory_id": mid})
            added = memory.add(
                body["content"],
                user_id=user,
                metadata=meta,
                expiration_date=expires,
                infer=False,
            )
            mid = added["results"][0]["id"]
            if key:
                self.system.keys[(self.tenant, subject, key)] = mid
            return Answer(201, {"memory_id": mid})
        if method == "DELETE":
            self.system.refresh()
            memory.delete(parts[4])
            return Answer(202, {})
        if method == "GET":
            self.system.refresh()
            return Answer(200, {"index_status": "indexed"})
        if method == "POST" and parts[3] == "recall":
            started = time.perf_counter()
            found = memory.search(
                body["query"],
                filters={"user_id": user, **(body.get("scope") or {})},
                top_k=body.get("limit", 10),
            )
            took = (time.perf_counter() - started) * 1000
            return Answer(
                200,
                {"items": [{"memory": {"memory_id": r["id"]}} for r in found["results"]]},
                {"Server-Timing": f"total;dur={took:.2f}"},
            )
        raise ValueError(f"no such call: {method} {path}")


class NoPeer:
    """Stands in for Mem0 where a profile loads memvault alone through ``peer_compare``."""

    def begin_bulk(self) -> None: ...

    def flush_bulk(self) -> None: ...

    def client_for(self, *args: Any) -> Any:
        class _Nothing:
            def call(self, *args: Any, **kwargs: Any) -> None: ...

        return _Nothing()


def temp_home() -> tempfile.TemporaryDirectory[str]:
    return tempfile.TemporaryDirectory(prefix="memvault-peer-")
