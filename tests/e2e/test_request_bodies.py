"""Request bodies against `memvault run` on loopback, as a hostile client sends them.

A body sent with ``Transfer-Encoding: chunked`` declares no length. Before, the console's
sign-in read such a body whole before its 403 (200 MB grew the stack from 662 MB to
1,034 MB) and the API did once a token was valid. Now every body is counted while it is
read and refused past its endpoint's limit, and what is left of it is read and dropped in
small pieces: a 200 MB body grows the server process by less than 20 MB, and its sender
gets the API's 413 envelope (or the endpoint's answer, for a body nobody reads).

The stack's memory is read from ``/proc``: its peak (``VmHWM``, reset through
``clear_refs`` where the kernel lets us) and, besides, its resident size sampled while
the body streams in.
"""

from __future__ import annotations

import http.client
import json
import socket
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memvault_local.devkeys import DevKey
from memvault_local.process import RunningStack, start_stack

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="reads the server's memory from /proc"
)

BODY_BYTES = 200 * 1024 * 1024
PIECE = b"x" * (1024 * 1024)
#: How much the server may grow while a 200 MB body streams in.
MAX_GROWTH_KB = 20 * 1024
#: How long the server waits for a client that sends nothing, here.
IDLE_SECONDS = 3


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    running = start_stack(
        tmp_path_factory.mktemp("bodies-home"),
        MEMVAULT_EMBED_WORKER="off",
        MEMVAULT_EMBEDDING_MODEL="hashing",
        MEMVAULT_SWEEP_SECONDS="3600",
        MEMVAULT_READ_IDLE_SECONDS=str(IDLE_SECONDS),
    )
    yield running
    running.stop()


def _status_kb(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} for {pid}")


def _reset_peak(pid: int) -> bool:
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
    except OSError:
        return False
    return True


class Sampler(threading.Thread):
    """The process's largest resident size while it runs."""

    def __init__(self, pid: int) -> None:
        super().__init__(daemon=True)
        self.pid = pid
        self.peak = _status_kb(pid, "VmRSS")
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.005):
            self.peak = max(self.peak, _status_kb(self.pid, "VmRSS"))


def send_chunked(
    port: int, method: str, path: str, headers: dict[str, str], total: int
) -> tuple[int, bytes]:
    """Stream ``total`` bytes as a chunked body while reading the answer; the answer's
    status and body (the server may answer before the body ends)."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=120)
    head = [f"{method} {path} HTTP/1.1", f"Host: 127.0.0.1:{port}"]
    head += [f"{name}: {value}" for name, value in headers.items()]
    head += ["Transfer-Encoding: chunked", "", ""]
    sock.sendall("\r\n".join(head).encode())

    def body() -> None:
        sent = 0
        frame = f"{len(PIECE):x}\r\n".encode()
        try:
            while sent < total:
                sock.sendall(frame + PIECE + b"\r\n")
                sent += len(PIECE)
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server stopped reading: its answer says why

    sender = threading.Thread(target=body, daemon=True)
    sender.start()
    answer = http.client.HTTPResponse(sock, method=method)
    answer.begin()
    data = answer.read()
    sender.join(timeout=120)
    sock.close()
    return answer.status, data


def measured(
    stack: RunningStack, method: str, path: str, headers: dict[str, str]
) -> tuple[int, bytes, int]:
    """Send a small chunked body first (the endpoint's first use imports and caches what it
    needs), then the 200 MB one; its answer and how far the server grew meanwhile (KB)."""
    pid = stack.process.pid
    send_chunked(stack.port, method, path, headers, len(PIECE))
    time.sleep(0.2)
    before = _status_kb(pid, "VmRSS")
    peak_reset = _reset_peak(pid)
    sampler = Sampler(pid)
    sampler.start()
    status, data = send_chunked(stack.port, method, path, headers, BODY_BYTES)
    sampler.done.set()
    sampler.join()
    peak = max(sampler.peak, _status_kb(pid, "VmHWM") if peak_reset else 0)
    return status, data, peak - before


def _code(data: bytes) -> str:
    return str(json.loads(data)["error"]["code"])


def test_a_chunked_200_mb_sign_in_without_a_key_stays_bounded(stack: RunningStack) -> None:
    status, data, grown = measured(
        stack, "POST", "/console/dev-token", {"Content-Type": "application/json"}
    )
    assert (status, _code(data)) == (413, "payload_too_large")
    assert grown < MAX_GROWTH_KB, f"the stack grew by {grown} KB"


def test_a_chunked_200_mb_body_with_a_valid_token_stays_bounded(stack: RunningStack) -> None:
    token = DevKey.load_or_create(stack.home).mint(tenant="local", subject="user-1")
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    status, data, grown = measured(stack, "POST", "/v1/subjects/user-1/memories", headers)
    assert (status, _code(data)) == (413, "payload_too_large")
    assert json.loads(data)["error"]["details"] == {"max_bytes": 64 * 1024}
    assert grown < MAX_GROWTH_KB, f"the stack grew by {grown} KB"


def test_a_chunked_200_mb_body_to_a_public_route_stays_bounded(stack: RunningStack) -> None:
    # API Gateway passes a GET's body on as well, and the handler refuses it past its limit.
    status, data, grown = measured(stack, "GET", "/v1/health", {})
    assert (status, _code(data)) == (413, "payload_too_large")
    assert grown < MAX_GROWTH_KB, f"the stack grew by {grown} KB"


def test_a_chunked_200_mb_body_nobody_reads_is_dropped_in_small_pieces(
    stack: RunningStack,
) -> None:
    status, data, grown = measured(stack, "GET", "/console/config.json", {})
    assert status == 200 and "dev_sign_in" in json.loads(data)
    assert grown < MAX_GROWTH_KB, f"the stack grew by {grown} KB"


def test_a_body_shorter_than_its_length_is_answered_when_the_client_falls_silent(
    stack: RunningStack,
) -> None:
    """A probe declared ``Content-Length: 1000`` and sent 10 bytes: the server held the
    connection (and a thread) until the client gave up. Now an idle connection is cut
    after the server's idle time, with the error envelope when an answer is possible."""
    sock = socket.create_connection(("127.0.0.1", stack.port), timeout=60)
    head = [
        "POST /v1/subjects/user-1/memories HTTP/1.1",
        f"Host: 127.0.0.1:{stack.port}",
        "Content-Type: application/json",
        "Content-Length: 1000",
        "",
        "",
    ]
    sock.sendall("\r\n".join(head).encode() + b'{"request_')
    started = time.monotonic()
    answer = b""
    while piece := sock.recv(65536):
        answer += piece
    waited = time.monotonic() - started
    sock.close()
    assert waited < IDLE_SECONDS + 15, waited
    if answer:  # an answer, when one was sent, is the API's envelope, never a 500
        status = int(answer.split(b" ", 2)[1])
        assert 400 <= status < 500, answer[:200]


def _raw(port: int, request: bytes) -> tuple[int, dict[str, str], bytes]:
    """Send ``request`` as is and read the answer until the server closes."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(request)
    answer = b""
    while piece := sock.recv(65536):
        answer += piece
    sock.close()
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return int(lines[0].split(" ", 2)[1]), headers, body


@pytest.mark.parametrize(
    ("name", "request_bytes", "status", "code"),
    [
        ("a garbage request line", b"NOT A REQUEST\r\n\r\n", 400, "validation_failed"),
        (
            "a URI of 70,000 bytes",
            b"GET /v1/health?" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: x\r\n\r\n",
            414,
            "payload_too_large",
        ),
        (
            "150 headers",
            b"GET /v1/health HTTP/1.1\r\nHost: x\r\n"
            + b"".join(b"X-H%d: 1\r\n" % n for n in range(150))
            + b"\r\n",
            431,
            "payload_too_large",
        ),
        (
            "both Transfer-Encoding and Content-Length",
            b"POST /v1/subjects/user-1/memories HTTP/1.1\r\nHost: x\r\n"
            b"Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            400,
            "validation_failed",
        ),
    ],
)
def test_what_the_http_layer_refuses_is_answered_with_the_api_envelope(
    stack: RunningStack, name: str, request_bytes: bytes, status: int, code: str
) -> None:
    """A probe got werkzeug's HTML pages for a malformed request line (400), a long URI
    (414) and too many headers (431), and a request giving both ``Transfer-Encoding`` and
    ``Content-Length`` (the shape of request smuggling) was served. Each is now the API's
    JSON envelope with a code and a message that says what to fix, and the second refused."""
    got, headers, body = _raw(stack.port, request_bytes)
    assert got == status, (name, got, body[:200])
    assert headers["content-type"] == "application/json", name
    error = json.loads(body)["error"]
    assert error["code"] == code and error["message"], name


def test_the_server_header_names_no_versions(stack: RunningStack) -> None:
    """The ``Server`` header said ``Werkzeug/3.x Python/3.11.x``: it names the service only."""
    status, headers, _ = _raw(
        stack.port, b"GET /v1/health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    assert status == 200 and headers["server"] == "memvault"
