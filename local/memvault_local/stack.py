"""`memvault run` / `make run`: the whole service on one machine.

- moto in server mode on loopback (DynamoDB with Streams, S3, KMS), one request at a time
  because moto's conditional writes are not atomic under concurrent threads; or, with
  ``MEMVAULT_DYNAMODB_ENDPOINT`` set, that endpoint (DynamoDB Local, another moto); or,
  with ``MEMVAULT_BACKEND=aws``, the tables the CDK app deployed in a real account;
- a TTL sweeper (except on AWS, which runs TTL itself);
- tables created from the shared definitions;
- the API Gateway stand-in on ``127.0.0.1:8787`` calling the same Lambda handler.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import shutil
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, TextIO

import boto3
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from memvault import __version__
from memvault.api.app import lambda_handler
from memvault.api.deps import deps
from memvault.config import Settings
from memvault.indexing.handler import handle
from memvault.storage.tables import ALL_TABLES, MEMORY, create_tables, physical_name
from memvault.wiring import build_indexer, build_services
from memvault_local.adapter import ApiGatewayAdapter
from memvault_local.devkeys import DevKey, data_home
from memvault_local.keys import LocalTenantKeys, ensure_bucket
from memvault_local.stream_pump import StreamPump
from memvault_local.sweeper import TtlSweeper

#: How often the sweeper plays TTL (``MEMVAULT_SWEEP_SECONDS``): each round scans every
#: table, and moto answers nothing else meanwhile.
SWEEP_SECONDS = float(os.environ.get("MEMVAULT_SWEEP_SECONDS", "15"))

LOCAL_TENANT = "local"
LOCAL_SUBJECT = "user-1"


@dataclass(frozen=True)
class StackOptions:
    host: str = "127.0.0.1"
    port: int = 8787
    moto_port: int = 0


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


def _serve(server: BaseWSGIServer, name: str) -> threading.Thread:
    thread = threading.Thread(target=server.serve_forever, name=name, daemon=True)
    thread.start()
    return thread


class _QuietHandler(WSGIRequestHandler):
    """moto's own request lines would drown the API's; errors are still logged."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        return None


def _start_moto(host: str, port: int) -> BaseWSGIServer:
    from moto.moto_server.werkzeug_app import DomainDispatcherApplication, create_backend_app

    app = DomainDispatcherApplication(create_backend_app)
    # threaded=False: one request at a time, so moto's conditional writes stay atomic.
    return make_server(host, port, app, threaded=False, request_handler=_QuietHandler)


def _sweep_in_background(sweeps: list[Callable[[], int]], stop: threading.Event) -> None:
    """Play DynamoDB TTL (which neither moto nor DynamoDB Local runs) and the scheduled
    sweep of staged uploads never committed."""

    def loop() -> None:
        while not stop.wait(SWEEP_SECONDS):
            for sweep in sweeps:
                with contextlib.suppress(Exception):  # the next round retries
                    sweep()

    threading.Thread(target=loop, name="ttl-sweeper", daemon=True).start()


def _aws_environment(endpoint: str) -> None:
    os.environ.setdefault("AWS_ACCESS_KEY_ID", "memvault-local")
    os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "memvault-local")
    os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    # moto serves Streams only without account-id-based endpoints.
    os.environ["AWS_ACCOUNT_ID_ENDPOINT_MODE"] = "disabled"
    os.environ["MEMVAULT_DYNAMODB_ENDPOINT"] = endpoint


def _missing_tables(client: Any, settings: Settings) -> list[str]:
    names = [physical_name(s, settings.table_prefix) for s in ALL_TABLES]
    existing = set(client.list_tables().get("TableNames", []))
    return [n for n in names if n not in existing]


def _local_search_defaults(home: Path) -> dict[str, Any]:
    """Local mode recalls with the embedded index and the local MiniLM model unless the
    environment names others (``MEMVAULT_SEARCH_ENDPOINT`` for a real OpenSearch), and
    purges in the background."""
    env = os.environ
    defaults: dict[str, Any] = {}
    if "MEMVAULT_SEARCH_BACKEND" not in env and "MEMVAULT_SEARCH_ENDPOINT" not in env:
        defaults["search_backend"] = "embedded"
    if "MEMVAULT_SEARCH_AUTH" not in env:
        defaults["search_auth"] = "none"
    if "MEMVAULT_EMBEDDING_MODEL" not in env:
        defaults["embedding_model"] = "minilm"
    if "MEMVAULT_INDEX_DIR" not in env:
        defaults["index_dir"] = str(home / "index")
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
    return f"{where}, embeddings: {settings.embedding_model}; stream pump on"


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
    logging.getLogger("memvault").setLevel(os.environ.get("MEMVAULT_LOG_LEVEL", "WARNING"))
    servers: list[BaseWSGIServer] = []
    endpoint = os.environ.get("MEMVAULT_DYNAMODB_ENDPOINT")
    real_aws = os.environ.get("MEMVAULT_BACKEND") == "aws"
    if real_aws:
        endpoint = None
        backend = "AWS itself (MEMVAULT_BACKEND=aws): default credentials and region"
    elif endpoint:
        backend = f"DynamoDB at {endpoint} (from MEMVAULT_DYNAMODB_ENDPOINT)"
    else:
        moto = _start_moto(options.host, options.moto_port)
        servers.append(moto)
        endpoint = f"http://{options.host}:{moto.server_port}"
        _aws_environment(endpoint)
        _serve(moto, "moto")
        backend = f"moto at {endpoint}: DynamoDB (+Streams), S3, KMS; in memory, gone when stopped"
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
            return 1
    else:
        create_tables(client, settings.table_prefix)
    keys = None
    if servers:  # our own moto also plays S3 and KMS: the bucket and tenant keys live there
        s3 = boto3.client("s3", region_name=settings.aws_region, endpoint_url=endpoint)
        ensure_bucket(s3, settings.artifacts_bucket)
        keys = LocalTenantKeys(
            boto3.client("kms", region_name=settings.aws_region, endpoint_url=endpoint),
            settings.tenant_key_alias_prefix,
        )
    if servers and settings.search_backend == "embedded" and settings.index_dir:
        # Our moto starts empty, so an index kept from an earlier run would describe
        # memories that no longer exist: start it empty too.
        shutil.rmtree(settings.index_dir, ignore_errors=True)
    services = build_services(settings, client=client, keys=keys)
    deps.use(services)
    pump = None
    if not real_aws and services.recall.index is not None:
        indexer = build_indexer(
            settings,
            client=client,
            search=services.recall.index,
            embedder=services.recall.embedder,
        )
        pump = StreamPump(
            client,
            boto3.client("dynamodbstreams", region_name=settings.aws_region, endpoint_url=endpoint),
            physical_name(MEMORY, settings.table_prefix),
            lambda event: handle(event, indexer),
            on_failure=home / "index-failures.jsonl",
        )
        pump.start()
        # Load the embedding model now rather than on the first recall.
        threading.Thread(
            target=lambda: services.recall.embedder.embed(["warm up"]), daemon=True
        ).start()
    stop_sweeping = threading.Event()
    if not real_aws:
        ttl = TtlSweeper(client, settings.table_prefix)
        # Staged uploads first: their objects go before TTL removes the rows naming them.
        sweeps: list[Callable[[], int]] = [services.artifacts.sweep_staged] if servers else []
        sweeps.append(ttl.sweep)
        _sweep_in_background(sweeps, stop_sweeping)

    key = DevKey.load_or_create(home)
    api = make_server(
        options.host,
        options.port,
        ApiGatewayAdapter(key.verifier(), lambda_handler),
        threaded=False,
    )
    servers.append(api)
    url = f"http://{options.host}:{api.server_port}"
    (home / "run.json").write_text(json.dumps({"pid": os.getpid(), "url": url}))
    tables = ", ".join(physical_name(s, settings.table_prefix) for s in ALL_TABLES)
    token = key.mint(tenant=LOCAL_TENANT, subject=LOCAL_SUBJECT)
    out.write(
        f"memvault {__version__}: local stack\n"
        f"  API (plays API Gateway)  {url}   (OpenAPI: {url}/v1/openapi.json)\n"
        f"  AWS stand-in             {backend}\n"
        f"  tables                   {tables}\n"
        f"  recall                   {_search_line(settings)}\n"
        f"  dev signing key          {key.path}\n\n"
        f"Try it: a token for tenant '{LOCAL_TENANT}', subject '{LOCAL_SUBJECT}', valid 1 hour:\n\n"
        f"{curl_example(url, token)}\n\n"
        f"More tokens: memvault dev-token --tenant {LOCAL_TENANT} --subject {LOCAL_SUBJECT}\n"
        "Ctrl-C stops everything.\n"
    )
    out.flush()

    def _stop(signum: int, frame: Any) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _stop)
    # Started in the background by a script, SIGINT may arrive ignored; Ctrl-C must stop us.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        api.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        stop_sweeping.set()
        if pump is not None:
            pump.stop()
        # A second Ctrl-C must not interrupt the clean-up.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for server in servers[:-1]:  # background servers: stop their loops first
            server.shutdown()
        for server in servers:
            server.server_close()
        deps.use(None)
        (home / "run.json").unlink(missing_ok=True)
    out.write("memvault stopped.\n")
    out.flush()
    return 0
