"""`memvault run` / `make run`: the whole service on one machine.

- by default the embedded store: one SQLite file under ``~/.memvault/data`` (WAL, one
  transaction per operation) with its outbox as the change feed, encrypted objects
  beside it, and the embedded search index; it survives restarts and crashes. Or, with
  ``MEMVAULT_DYNAMODB_ENDPOINT`` set, that DynamoDB (DynamoDB Local, a test double); or,
  with ``MEMVAULT_BACKEND=aws``, the tables the CDK app deployed in a real account;
- the change-feed pump feeding the indexer, and a sweeper playing DynamoDB TTL;
- the API Gateway stand-in on ``127.0.0.1:8787`` calling the same Lambda handler, on
  threads, with the local object server for signed upload and download URLs.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import secrets
import signal
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TextIO

import boto3
from werkzeug.middleware.dispatcher import DispatcherMiddleware
from werkzeug.serving import WSGIRequestHandler, make_server

from memvault import __version__
from memvault.api.deps import deps
from memvault.clock import SystemClock
from memvault.config import Settings
from memvault.embeddings import Embedder, embedder_from_settings
from memvault.embeddings.minilm import MiniLmEmbedder
from memvault.embeddings.onnx import OnnxEmbedder
from memvault.handlers.api import handler as lambda_handler
from memvault.handlers.indexer import handle
from memvault.indexing.indexer import Indexer
from memvault.observability import logger
from memvault.services.deletion import resume_unfinished
from memvault.storage.dynamodb.tables import MEMORY, create_tables, physical_name, table_names
from memvault.storage.sqlite.db import PAGE_BYTES, NotConverted, OutboxFeed, convert_page_size
from memvault.storage.stores import store_file
from memvault.wiring import build_indexer, build_services
from memvault_local.adapter import ApiGatewayAdapter
from memvault_local.bodies import GuardedServer
from memvault_local.console_app import ConsoleApp
from memvault_local.devkeys import DevKey, data_home
from memvault_local.embed_worker import WorkerEmbedder
from memvault_local.local_index import (
    build,
    chinese_model_for,
    has_memories,
    index_path,
    model_in_use,
)
from memvault_local.objects_app import ObjectsApp
from memvault_local.options import StackOptions
from memvault_local.outbox_pump import OutboxPump
from memvault_local.stream_pump import StreamPump
from memvault_local.sweeper import TtlSweeper
from memvault_local.threads import make_resolver_thread_safe

LOCAL_TENANT = "local"
#: How long ``memvault run`` waits for its models to load before it serves anyway.
WARM_UP_SECONDS = 60.0
LOCAL_SUBJECT = "user-1"


class AlreadyRunning(Exception):
    pass


@contextlib.contextmanager
def _single_instance(home: Path) -> Iterator[IO[str]]:
    """Hold an exclusive lock for the life of the stack; a second start learns who runs."""
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    lock = (home / "run.lock").open("a+")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        lock.close()
        info = home / "run.json"
        detail = info.read_text() if info.exists() else "{}"
        raise AlreadyRunning(detail) from None
    try:
        yield lock
    finally:
        fcntl.flock(lock, fcntl.LOCK_UN)
        lock.close()


def _port_free(host: str, port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((host, port))
        except OSError:
            return False
    return True


class _QuietHandler(WSGIRequestHandler):
    """Request lines of every call would drown the API's logs; errors are still logged.

    A connection that sends nothing for ``timeout`` seconds is closed (a body shorter than
    its ``Content-Length`` answers ``400`` then, instead of holding the connection and its
    thread until the client gives up). ``timeout`` is set per run, from
    ``StackOptions.read_idle_seconds`` (``MEMVAULT_READ_IDLE_SECONDS``), its one default."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return None

    def version_string(self) -> str:
        """The ``Server`` header names the service, not the Python and werkzeug versions."""
        return "memvault"

    def parse_request(self) -> bool:
        if not super().parse_request():
            return False
        # A request that gives both lengths is how requests are smuggled past a proxy:
        # RFC 9112 section 6.3 lets a server refuse it, and we do.
        if "Transfer-Encoding" in self.headers and "Content-Length" in self.headers:
            self.send_error(400, "both Transfer-Encoding and Content-Length")
            return False
        return True

    def send_error(self, code: int, message: str | None = None, explain: str | None = None) -> None:
        """The API's JSON error envelope for what the HTTP layer refuses before the API sees
        the request (a malformed request line, a URI or headers too long), never an HTML
        page."""
        error, text = _HTTP_ERRORS.get(code, ("validation_failed", "the request is malformed"))
        self.log_error("code %d, message %s", code, message)
        # A line too malformed to name its version leaves HTTP/0.9, which has no status
        # line or headers: nobody speaks it, so the answer is HTTP/1.1's.
        if self.request_version == "HTTP/0.9":
            self.request_version = "HTTP/1.1"
        self.send_response(code)
        self.send_header("Connection", "close")
        body = json.dumps({"error": {"code": error, "message": text, "details": {}}}).encode()
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


#: What the HTTP layer refuses, as the API's error codes and messages that say what to fix.
_HTTP_ERRORS: dict[int, tuple[str, str]] = {
    400: (
        "validation_failed",
        "the HTTP request is malformed: send one request line, headers, and either "
        "Content-Length or Transfer-Encoding",
    ),
    408: ("validation_failed", "the request was not sent in time"),
    413: ("payload_too_large", "the request body is too large"),
    414: ("payload_too_large", "the URI is too long: send at most 65,536 bytes of request line"),
    431: ("payload_too_large", "the request headers are too long or too many"),
    501: ("validation_failed", "this HTTP method is not supported"),
    505: ("validation_failed", "send HTTP/1.0 or HTTP/1.1"),
}


def _sweep_in_background(
    sweeps: list[Callable[[], int]],
    stop: threading.Event,
    every: float,
    after: Callable[[], None] | None = None,
) -> None:
    """Play DynamoDB TTL (which neither the embedded store nor DynamoDB Local runs), sweep
    staged uploads never committed, and prune the consumed change feed; ``after`` runs
    when a round removed anything (the embedded store truncates its WAL then)."""

    def loop() -> None:
        while not stop.wait(every):
            removed = 0
            for sweep in sweeps:
                try:
                    removed += sweep()
                except Exception as err:  # the next round retries
                    logger.warning("sweep failed", extra={"error": type(err).__name__})
            if removed and after is not None:
                with contextlib.suppress(Exception):
                    after()

    threading.Thread(target=loop, name="ttl-sweeper", daemon=True).start()


def _missing_tables(client: Any, settings: Settings) -> list[str]:
    names = list(table_names(settings.table_prefix).values())
    existing = set(client.list_tables().get("TableNames", []))
    return [n for n in names if n not in existing]


def _local_defaults(home: Path, url: str) -> dict[str, Any]:
    """Local mode's embedded store under ``<home>/data`` (``MEMVAULT_DATA_DIR``), its
    object URLs on this server, and the search defaults."""
    env = os.environ
    data = Path(env.get("MEMVAULT_DATA_DIR") or home / "data")
    defaults = _local_search_defaults(home, data)
    defaults["data_dir"] = str(data)
    if "MEMVAULT_STORE" not in env:
        defaults["store"] = "sqlite"
    if "MEMVAULT_LOCAL_URL" not in env:
        defaults["local_url"] = url
    return defaults


def _local_search_defaults(home: Path, data: Path | None = None) -> dict[str, Any]:
    """Local mode recalls with the embedded index and the model ``memvault reindex
    --switch`` recorded (``model_in_use``) unless the environment names others
    (``MEMVAULT_SEARCH_ENDPOINT`` for a real OpenSearch), and purges in the background."""
    env = os.environ
    defaults: dict[str, Any] = {}
    if "MEMVAULT_SEARCH_BACKEND" not in env and "MEMVAULT_SEARCH_ENDPOINT" not in env:
        defaults["search_backend"] = "embedded"
    if "MEMVAULT_SEARCH_AUTH" not in env:
        defaults["search_auth"] = "none"
    index_dir = Path(env.get("MEMVAULT_INDEX_DIR") or (data or home) / "index")
    if "MEMVAULT_INDEX_DIR" not in env:
        defaults["index_dir"] = str(index_dir)
    if "MEMVAULT_EMBEDDING_MODEL" not in env:
        defaults["embedding_model"] = model_in_use(index_dir)
    if "MEMVAULT_EMBEDDING_MODEL_ZH" not in env:
        model = env.get("MEMVAULT_EMBEDDING_MODEL") or defaults["embedding_model"]
        defaults["embedding_model_zh"] = chinese_model_for(model)
    if "MEMVAULT_SEARCH_REFRESH_INTERVAL" not in env:
        defaults["search_refresh_interval"] = "500ms"
    if "MEMVAULT_PURGE_LAUNCH" not in env:
        # As a Step Functions execution would: the delete answers 202 at once and the
        # job reaches COMPLETED by itself.
        defaults["purge_launch"] = "background"
    return defaults


def _search_line(settings: Settings) -> str:
    where = (
        f"embedded index in {settings.index_dir}"
        if settings.search_backend == "embedded"
        else f"OpenSearch at {settings.search_endpoint}"
    )
    return f"{where}, embeddings: {_models(settings)}; change-feed pump on"


def curl_example(url: str, token: str) -> str:
    body = json.dumps(
        {
            "request_id": "hello-1",
            "kind": "semantic",
            "canonical_key": "preferred-language",
            "content": "Prefers Chinese for internal technical documents",
            "tags": ["preference"],
            "source": {"type": "user_statement", "ref": "curl"},
            "consent": True,
        }
    )
    return (
        f"curl -s -X POST {url}/v1/subjects/{LOCAL_SUBJECT}/memories "
        f"-H 'Authorization: Bearer {token}' -H 'Content-Type: application/json' -d '{body}'"
    )


def run(options: StackOptions, out: TextIO) -> int:
    home = data_home()
    try:
        with _single_instance(home):
            return _run_locked(options, home, out)
    except AlreadyRunning as running:
        info: dict[str, Any] = json.loads(str(running) or "{}")
        where = f" at {info['url']} (pid {info['pid']})" if "url" in info else ""
        out.write(
            f"memvault is already running{where}. Stop it with Ctrl-C in its terminal, "
            "or use it as it is.\n"
        )
        return 1


def _run_locked(options: StackOptions, home: Path, out: TextIO) -> int:
    if not _port_free(options.host, options.port):
        out.write(
            f"port {options.port} on {options.host} is taken by another program; "
            "choose another with MEMVAULT_PORT=<port> (or --port).\n"
        )
        return 1
    os.environ.setdefault("POWERTOOLS_METRICS_DISABLED", "true")
    logging.getLogger("memvault").setLevel(options.log_level)
    url = f"http://{options.host}:{options.port}"
    local = _start_backend(options, home, url, out)
    if local is None:
        return 1
    local.wait_warm(WARM_UP_SECONDS)
    key = DevKey.load_or_create(home)
    make_resolver_thread_safe()
    api_app: Any = ApiGatewayAdapter(key.verifier(), lambda_handler)
    # The console's dev sign-in needs a key printed below: only whoever sees this banner
    # can mint from the page; and only when the stack listens on loopback.
    sign_in_key = secrets.token_urlsafe(24) if _is_loopback(options.host) else None
    app = _guarded_app(api_app, key, sign_in_key, local)
    # Threads: requests are served concurrently; the store's transactions keep them apart.
    handler = type("_Handler", (_QuietHandler,), {"timeout": options.read_idle_seconds})
    api = make_server(options.host, options.port, app, threaded=True, request_handler=handler)
    (home / "run.json").write_text(json.dumps({"pid": os.getpid(), "url": url}))
    # A token and the console's key are printed only to a terminal (or when asked): output
    # sent to a file or a log collector would keep them past the person who reads them.
    shown = _credentials_shown(out, options)
    if sign_in_key is not None and not shown:
        _write_private(home / "console-sign-in-key", sign_in_key)
    try_it = _try_it(key, url, shown)
    _stop_on_signals()
    # Handlers first, then the banner: whoever reads it may stop us at once.
    try:
        console = _console_line(url, sign_in_key, shown, home)
        out.write(_banner(url, local, key, console, try_it))
        out.flush()
        api.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        _shut_down(api, local, home)
    out.write("memvault stopped.\n")
    out.flush()
    return 0


def _start_backend(options: StackOptions, home: Path, url: str, out: TextIO) -> _Local | None:
    """DynamoDB when the options name one (``MEMVAULT_BACKEND=aws`` or
    ``MEMVAULT_DYNAMODB_ENDPOINT``), else the embedded store; None if it did not start."""
    if options.on_dynamodb:
        return _on_dynamodb(options, home, out)
    return _on_embedded_store(options, home, url, out)


def _guarded_app(api_app: Any, key: DevKey, sign_in_key: str | None, local: _Local) -> Any:
    """The API with the console (and the local object server, if any) mounted beside it."""
    mounts: dict[str, Any] = {"/console": ConsoleApp(key, sign_in_key)}
    if local.objects is not None:
        mounts["/_objects"] = ObjectsApp(local.objects, local.uploads)
    # Every body bounded while it is read and drained in small pieces, chunked or not,
    # and no error page other than the API's envelope (``bodies``).
    return GuardedServer(DispatcherMiddleware(api_app, mounts))


def _try_it(key: DevKey, url: str, shown: bool) -> str:
    """The banner's example: a curl command with a fresh token when credentials may be
    shown, else how to get a token."""
    if shown:
        token = key.mint(tenant=LOCAL_TENANT, subject=LOCAL_SUBJECT)
        return (
            f"Try it: a token for tenant '{LOCAL_TENANT}', subject '{LOCAL_SUBJECT}', "
            f"valid 1 hour:\n\n{curl_example(url, token)}\n\n"
        )
    return (
        "Try it: no token is printed here, as this output is not a terminal (set "
        "MEMVAULT_SHOW_CREDENTIALS=1 to print one); mint one with the command below.\n\n"
    )


def _raise_interrupt(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt


def _stop_on_signals() -> None:
    """SIGTERM and SIGINT both stop the server as Ctrl-C does."""
    signal.signal(signal.SIGTERM, _raise_interrupt)
    # Started in the background by a script, SIGINT may arrive ignored; Ctrl-C must stop us.
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _banner(url: str, local: _Local, key: DevKey, console: str, try_it: str) -> str:
    return (
        f"memvault {__version__}: local stack\n"
        f"  API (plays API Gateway)  {url}   (OpenAPI: {url}/v1/openapi.json)\n"
        f"  store                    {local.backend}\n"
        f"  recall                   {_search_line(local.settings)}\n"
        f"  dev signing key          {key.path}\n"
        f"  console                  {console}\n\n"
        f"{try_it}"
        f"More tokens: memvault dev-token --tenant {LOCAL_TENANT} --subject {LOCAL_SUBJECT}\n"
        "Ctrl-C stops everything.\n"
    )


def _shut_down(api: Any, local: _Local, home: Path) -> None:
    """Close the server and what the run started, and remove the run's files."""
    # A second Ctrl-C must not interrupt the clean-up.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    api.server_close()
    local.close()
    deps.use(None)
    (home / "run.json").unlink(missing_ok=True)
    (home / "console-sign-in-key").unlink(missing_ok=True)


def _is_loopback(host: str) -> bool:
    return host in ("127.0.0.1", "localhost", "::1")


def _credentials_shown(out: IO[str], options: StackOptions) -> bool:
    """Whether the banner may print a token and the console's key: to a terminal, or when
    ``MEMVAULT_SHOW_CREDENTIALS=1`` asks for it (a harness that reads the banner)."""
    if options.show_credentials:
        return True
    isatty = getattr(out, "isatty", None)
    return bool(isatty and isatty())


def _write_private(path: Path, text: str) -> None:
    """Write ``text`` readable by its owner only (created so, never widened after)."""
    path.unlink(missing_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text + "\n")


def _console_line(url: str, sign_in_key: str | None, shown: bool, home: Path) -> str:
    if sign_in_key is None:
        return f"{url}/console/   (sign in with a token: the dev sign-in is loopback only)"
    if not shown:
        key_file = home / "console-sign-in-key"
        return f"{url}/console/#key=<the key in {key_file}>"
    # The key rides in the fragment, which browsers never send to a server.
    return f"{url}/console/#key={sign_in_key}"


@dataclass
class _Local:
    """What a local run started besides the API: closed in reverse on the way out."""

    settings: Settings
    options: StackOptions
    backend: str
    objects: Any = None
    #: Whether an upload URL's artifact still takes bytes (the artifact service).
    uploads: Any = None
    closers: list[Callable[[], None]] = field(default_factory=list)
    #: Models loading in the background (the query embedder, the indexer's workers).
    warming: list[threading.Thread] = field(default_factory=list)

    def wait_warm(self, seconds: float) -> None:
        """Until the models have loaded (at most ``seconds``): the stack says it is ready
        once its first write is indexed and its first recall answered at full speed, not
        while three model loads share the cores with them."""
        deadline = time.monotonic() + seconds
        for thread in self.warming:
            thread.join(max(0.0, deadline - time.monotonic()))

    def close(self) -> None:
        for closer in reversed(self.closers):
            with contextlib.suppress(Exception):
                closer()


def _convert_pages(path: Path, out: TextIO) -> None:
    """A store made before memvault gave new files 8 KB pages is rewritten in them, once,
    before anything of the stack opens it (``convert_page_size``); one that cannot be,
    now, is used as it is and tried again at the next start."""
    started = time.monotonic()

    def announce(old: int) -> None:
        size_mb = path.stat().st_size / 1e6
        what = (
            f"its {_page_words(old)} pages as {_page_words(PAGE_BYTES)} ones"
            if old < PAGE_BYTES
            else "it to cut off old pages an interrupted rewrite left past its end"
        )
        out.write(
            f"{path.name}: rewriting {what}, once ({size_mb:,.0f} MB, about "
            f"{max(1, round(size_mb * 0.006))} s)...\n"
        )
        out.flush()

    try:
        old = convert_page_size(path, before=announce)
    except NotConverted as why:
        out.write(
            f"{path.name}: not rewritten ({why}); the stack starts on it as it is and "
            "tries again at its next start (it needs the file to itself, and free space "
            "beside it up to twice the file's size).\n"
        )
        return
    if old is not None:
        out.write(f"{path.name}: done in {time.monotonic() - started:.1f} s.\n")


def _page_words(size: int) -> str:
    return f"{size // 1024} KB" if size >= 1024 else f"{size}-byte"


def _on_embedded_store(options: StackOptions, home: Path, url: str, out: TextIO) -> _Local:
    settings = Settings(**_local_defaults(home, url))
    _convert_pages(store_file(settings), out)
    new_index = (
        settings.search_backend == "embedded"
        and not index_path(settings, embedder_from_settings(settings)).exists()
    )
    services = build_services(settings)
    deps.use(services)
    stores = services.stores
    database = stores.database
    local = _Local(
        settings,
        options,
        f"embedded: {database.path} (SQLite, WAL), objects encrypted beside it",
        objects=stores.objects,
        uploads=services.artifacts,
    )
    local.closers.append(database.close)
    stop = threading.Event()
    local.closers.append(stop.set)
    pump = None
    if services.recall.index is not None:
        embedder = _indexing_embedder(services, local)
        chinese = _indexing_chinese(services, local)
        if new_index and has_memories(stores.memory):
            # A model this store has no index for yet: build it before serving.
            out.write(f"building the {_models(settings)} index from the store\n")
            build(
                services.recall.index,
                embedder,
                stores.memory,
                out,
                label="indexing",
                chinese=chinese,
            )
        indexer = Indexer(
            services.recall.index, embedder, stores.memory, SystemClock(), chinese=chinese
        )
        pump = OutboxPump(
            OutboxFeed(database),
            indexer,
            on_failure=Path(settings.data_dir or home) / "index-failures.jsonl",
        )
        pump.start()
        local.closers.append(pump.stop)
        _warm_up(services, local)
    # A purge that a crash cut short, or a job queued for the worker when the process
    # died, is finished now: the client already had its 202.
    resume_unfinished(services.purge, services.memory.purge)
    feed = OutboxFeed(database)
    sweeps: list[Callable[[], int]] = [services.artifacts.sweep_staged]
    sweeps += [_expiry_sweep(sweeper) for sweeper in stores.sweepers]
    sweeps.append(feed.prune)
    _sweep_in_background(sweeps, stop, options.sweep_seconds, after=database.purge_files)
    return local


def _expiry_sweep(sweeper: Any) -> Callable[[], int]:
    return lambda: int(sweeper.sweep_expired(int(time.time())))


def _indexing_embedder(services: Any, local: _Local) -> Embedder:
    """The indexer's embedder: a local model (MiniLM, ONNX) runs in a child process (see
    ``embed_worker``), started now in the background; other embedders (hashing, Bedrock)
    are cheap here and stay."""
    embedder: Embedder = services.recall.embedder
    if not isinstance(embedder, MiniLmEmbedder | OnnxEmbedder):
        return embedder
    if local.options.embed_worker == "off":
        return embedder
    worker = WorkerEmbedder(embedder)
    local.closers.append(worker.close)
    starting = threading.Thread(target=_start_quietly, args=(worker,), daemon=True)
    starting.start()
    local.warming.append(starting)
    return worker


def _indexing_chinese(services: Any, local: _Local) -> Embedder | None:
    """The indexer's Chinese model (``embedding_model_zh``), in one worker process of its
    own, started by the first memory that holds Chinese: a store in English never loads it."""
    chinese: Embedder | None = services.recall.chinese
    if not isinstance(chinese, OnnxEmbedder) or local.options.embed_worker == "off":
        return chinese
    worker = WorkerEmbedder(chinese, processes=1)
    local.closers.append(worker.close)
    return worker


def _models(settings: Settings) -> str:
    if settings.embedding_model_zh == "none":
        return settings.embedding_model
    return f"{settings.embedding_model} + {settings.embedding_model_zh}"


def _start_quietly(worker: WorkerEmbedder) -> None:
    try:
        worker.start()
    except Exception as err:  # the first batch retries the start and reports it
        logger.warning("embedding worker did not start", extra={"error": type(err).__name__})


def _warm_up(services: Any, local: _Local) -> None:
    """Load the embedding model now rather than on the first recall."""

    def load() -> None:
        try:
            services.recall.embedder.embed(["warm up"])
        except Exception as err:  # the first recall loads it again and reports it
            logger.warning("embedding model did not load", extra={"error": type(err).__name__})

    loading = threading.Thread(target=load, daemon=True)
    loading.start()
    local.warming.append(loading)


def _on_dynamodb(options: StackOptions, home: Path, out: TextIO) -> _Local | None:
    """DynamoDB elsewhere: a real account (``MEMVAULT_BACKEND=aws``) or another endpoint
    (``MEMVAULT_DYNAMODB_ENDPOINT``: DynamoDB Local); S3 and KMS are then AWS's own."""
    endpoint = options.dynamodb_endpoint
    real_aws = options.backend == "aws"
    if real_aws:
        endpoint = None
        backend = "AWS itself (MEMVAULT_BACKEND=aws): default credentials and region"
    else:
        backend = f"DynamoDB at {endpoint} (from MEMVAULT_DYNAMODB_ENDPOINT)"
    settings = Settings(dynamodb_endpoint=endpoint, **_local_search_defaults(home))
    client = boto3.client("dynamodb", region_name=settings.aws_region, endpoint_url=endpoint)
    if real_aws:
        missing = _missing_tables(client, settings)
        if missing:
            out.write(
                f"these tables do not exist in the account: {', '.join(missing)}; deploy "
                "them with the CDK app (make synth, cdk deploy) or set "
                "MEMVAULT_TABLE_PREFIX.\n"
            )
            return None
    else:
        create_tables(client, settings.table_prefix)
    services = build_services(settings, client=client)
    deps.use(services)
    local = _Local(settings, options, backend)
    if not real_aws and services.recall.index is not None:
        indexer = build_indexer(
            settings,
            client=client,
            search=services.recall.index,
            embedder=_indexing_embedder(services, local),
            chinese=_indexing_chinese(services, local),
        )
        pump = StreamPump(
            client,
            boto3.client("dynamodbstreams", region_name=settings.aws_region, endpoint_url=endpoint),
            physical_name(MEMORY, settings.table_prefix),
            lambda event: handle(event, indexer),
            on_failure=home / "index-failures.jsonl",
        )
        pump.start()
        local.closers.append(pump.stop)
        _warm_up(services, local)
    if not real_aws:
        stop = threading.Event()
        local.closers.append(stop.set)
        _sweep_in_background(
            [TtlSweeper(client, settings.table_prefix).sweep], stop, options.sweep_seconds
        )
    return local
