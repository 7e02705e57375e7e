"""The SDK's tests run against the real local stack (``memvault run`` as a subprocess,
one for the whole folder) over HTTP. Faults the stack cannot be asked for (a 503, a lost
answer, a dropped connection) come from :class:`FaultProxy`, a real HTTP server in front
of the stack that answers or misbehaves as scripted and otherwise forwards."""

from __future__ import annotations

import http.client
import json
import threading
import uuid
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import pytest

from memvault_local.cli import main
from memvault_local.devkeys import DevKey
from memvault_local.process import RunningStack, start_stack

TENANT = "sdk"
SCOPES = "memory:read memory:write memory:delete sessions:write runs:write artifacts:write"


@pytest.fixture(scope="package")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    # The hashing embedder keeps start-up fast; nothing here is about ranking quality.
    running = start_stack(
        tmp_path_factory.mktemp("sdk-home"),
        MEMVAULT_EMBEDDING_MODEL="hashing",
        MEMVAULT_EMBED_WORKER="off",
    )
    yield running
    running.stop()


#: ``cli(*argv)`` runs the ``memvault`` CLI in-process against the stack: (exit code, stdout,
#: stderr).
Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(
    stack: RunningStack, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> Cli:
    # The CLI mints its own dev token against a local endpoint, with the stack's key; no
    # token or subject from the environment.
    monkeypatch.setenv("MEMVAULT_HOME", str(stack.home))
    monkeypatch.delenv("MEMVAULT_TOKEN", raising=False)
    monkeypatch.delenv("MEMVAULT_SUBJECT", raising=False)

    def run(*argv: str) -> tuple[int, str, str]:
        code = main([*argv, "--endpoint", stack.url, "--tenant", "sdk"])
        out = capsys.readouterr()
        return code, out.out, out.err

    return run


def mint(stack: RunningStack, subject: str | None, **claims: Any) -> str:
    """A dev token the stack accepts (the CLI's ``dev-token``)."""
    claims.setdefault("scope", SCOPES)
    return DevKey.load_or_create(stack.home).mint(tenant=TENANT, subject=subject, **claims)


def new_subject(prefix: str = "u") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def memory(content: str, **fields: Any) -> dict[str, Any]:
    """A write body without a request_id: the SDK adds one."""
    return {
        "kind": "semantic",
        "content": content,
        "source": {"type": "user_statement", "ref": "sdk-test"},
        "consent": True,
        **fields,
    }


# ----------------------------------------------------------------------- the proxy


@dataclass(frozen=True)
class Fault:
    """What the proxy does with one request instead of forwarding it.

    ``status``: answer it with that status (429 with the API's ``throttled`` body, 503
    with API Gateway's plain one), with ``Retry-After`` when given. ``lost``: forward it,
    then throw the stack's answer away and answer 503 (the write happened, the caller
    never heard). ``drop``: close the connection without an answer."""

    kind: str = "status"
    status: int = 429
    retry_after: str | None = None


LOST = Fault("lost")
DROP = Fault("drop")


@dataclass
class Seen:
    """One request the proxy received, and what the stack answered when forwarded."""

    method: str
    path: str
    body: Any
    authorization: str | None
    upstream_status: int | None = None
    upstream_replay: str | None = None


class FaultProxy:
    def __init__(self, upstream: str) -> None:
        target = urlsplit(upstream)
        self.upstream = (target.hostname or "127.0.0.1", target.port or 80)
        self.script: deque[Fault] = deque()
        self.seen: list[Seen] = []
        self.lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                return None

            def do_GET(self) -> None:
                proxy.handle(self)

            do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def fail(self, *faults: Fault) -> None:
        with self.lock:
            self.script.extend(faults)

    def reset(self) -> None:
        with self.lock:
            self.script.clear()
            self.seen.clear()

    def requests(self, method: str | None = None, contains: str = "") -> list[Seen]:
        with self.lock:
            return [
                s
                for s in self.seen
                if (method is None or s.method == method) and contains in s.path
            ]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def handle(self, req: BaseHTTPRequestHandler) -> None:
        raw = req.rfile.read(int(req.headers.get("Content-Length") or 0))
        seen = Seen(
            req.command,
            req.path,
            json.loads(raw) if raw else None,
            req.headers.get("Authorization"),
        )
        with self.lock:
            self.seen.append(seen)
            fault = self.script.popleft() if self.script else None
        if fault is not None and fault.kind == "drop":
            req.close_connection = True
            return
        if fault is not None and fault.kind == "status":
            self._answer(req, fault.status, _fault_body(fault.status), fault.retry_after)
            return
        status, headers, body = self._forward(req, raw)
        seen.upstream_status = status
        seen.upstream_replay = headers.get("Idempotent-Replay")
        if fault is not None and fault.kind == "lost":
            self._answer(req, 503, _fault_body(503), None)
            return
        req.send_response(status)
        for name, value in headers.items():
            if name.lower() not in ("content-length", "connection", "date", "server"):
                req.send_header(name, value)
        req.send_header("Content-Length", str(len(body)))
        req.end_headers()
        req.wfile.write(body)

    def _forward(
        self, req: BaseHTTPRequestHandler, raw: bytes
    ) -> tuple[int, dict[str, str], bytes]:
        conn = http.client.HTTPConnection(*self.upstream, timeout=60)
        try:
            names = ("Authorization", "Content-Type", "Accept", "User-Agent")
            headers = {n: req.headers[n] for n in names if req.headers.get(n)}
            conn.request(req.command, req.path, body=raw or None, headers=headers)
            answer = conn.getresponse()
            return answer.status, dict(answer.getheaders()), answer.read()
        finally:
            conn.close()

    @staticmethod
    def _answer(
        req: BaseHTTPRequestHandler, status: int, body: bytes, retry_after: str | None
    ) -> None:
        req.send_response(status)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(body)))
        if retry_after is not None:
            req.send_header("Retry-After", retry_after)
        req.end_headers()
        req.wfile.write(body)


def _fault_body(status: int) -> bytes:
    if status == 429:
        error = {"code": "throttled", "message": "slow down", "details": {"retryable": True}}
        return json.dumps({"error": error}).encode()
    return json.dumps({"message": "Service Unavailable"}).encode()  # API Gateway's own


@pytest.fixture(scope="package")
def proxy(stack: RunningStack) -> Iterator[FaultProxy]:
    running = FaultProxy(stack.url)
    yield running
    running.close()


@pytest.fixture
def faults(proxy: FaultProxy) -> Iterator[FaultProxy]:
    """The proxy, with an empty script and record for this test."""
    proxy.reset()
    yield proxy
    proxy.reset()
