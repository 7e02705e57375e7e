"""``memvault mcp`` as a process: where its token and subject come from, what a missing or
refused token and an unreachable endpoint do (one line, exit 2, no traceback), where the
HTTP transport listens and the bearer secret it requires, and that ``import memvault``
never needs the MCP SDK."""

from __future__ import annotations

import stat
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import httpx
import mcp_types as types
import pytest

from memvault_local.devkeys import DevKey
from memvault_local.process import RunningStack, free_port
from tests.client.conftest import TENANT, mint
from tests.mcp_server.conftest import (
    MEMVAULT,
    HttpServer,
    accepts,
    error_of,
    fact,
    ok,
    server_env,
    stdio_connection,
    text_of,
    write_token,
)


def start_and_fail(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``memvault mcp`` that must not start: it exits by itself, stdin closed."""
    return subprocess.run(
        [*MEMVAULT, "mcp", *args],
        env=env,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def clean_refusal(done: subprocess.CompletedProcess[str], says: str) -> None:
    assert done.returncode == 2, done.stderr
    assert done.stdout == ""  # stdout is the stdio transport's: nothing else goes there
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("memvault mcp: ")
    assert says in lines[0]


def foreign_token(tmp_path: Path, subject: str) -> str:
    """A well-formed token signed by a key the stack does not trust."""
    return DevKey.load_or_create(tmp_path / "other-key").mint(tenant=TENANT, subject=subject)


def test_a_missing_token_is_a_clean_exit(stack: RunningStack) -> None:
    clean_refusal(start_and_fail(server_env(stack)), "no token: set MEMVAULT_TOKEN")


def test_a_refused_token_is_a_clean_exit(stack: RunningStack, tmp_path: Path) -> None:
    token = foreign_token(tmp_path, "u-1")
    done = start_and_fail(server_env(stack, MEMVAULT_TOKEN=token))
    clean_refusal(done, "the memvault API refused the token")
    assert token not in done.stderr
    garbage = start_and_fail(server_env(stack, MEMVAULT_TOKEN="not-a-token"))
    clean_refusal(garbage, "refused the token")


def test_an_unreachable_endpoint_is_a_clean_exit(stack: RunningStack) -> None:
    env = server_env(stack, MEMVAULT_TOKEN=mint(stack, "u-1"))
    env["MEMVAULT_ENDPOINT"] = f"http://127.0.0.1:{free_port()}"
    clean_refusal(start_and_fail(env), "could not reach the memvault API")


def test_a_subject_other_than_the_tokens_is_refused(stack: RunningStack) -> None:
    env = server_env(stack, MEMVAULT_TOKEN=mint(stack, "u-a"), MEMVAULT_SUBJECT="u-b")
    clean_refusal(start_and_fail(env), "the token acts for subject 'u-a' only")


def test_the_token_file_is_read_per_request_and_a_refused_token_is_a_tool_error(
    stack: RunningStack, tmp_path: Path
) -> None:
    subject = f"file-{uuid.uuid4().hex[:8]}"
    path = write_token(tmp_path / "token", mint(stack, subject))
    conn = stdio_connection(server_env(stack), "--token-file", str(path))
    try:
        assert ok(conn.call("remember", fact("Likes plain yoghurt")))["subject_id"] == subject

        write_token(path, foreign_token(tmp_path, subject))  # the token changes in place
        refused = conn.call("remember", fact("Likes sour cherries"))
        error = error_of(refused)
        assert error["code"] == "unauthorized"
        assert text_of(refused).startswith("memvault error unauthorized (401): ")

        write_token(path, mint(stack, subject))
        assert not conn.call("recall", {"query": "yoghurt"}).is_error
    finally:
        conn.close()


def test_a_token_without_a_subject_lets_the_model_name_one(stack: RunningStack) -> None:
    service = mint(stack, None, scope="memory:read memory:write runs:write subjects:any")
    conn = stdio_connection(server_env(stack, MEMVAULT_TOKEN=service))
    try:
        tools = conn.tools()
        for tool in tools.values():
            assert tool.input_schema["required"][0] == "subject_id", tool.name
            assert tool.input_schema["properties"]["subject_id"]["pattern"]
        subject = f"svc-{uuid.uuid4().hex[:8]}"
        written = ok(conn.call("remember", {"subject_id": subject, **fact("Uses a standing desk")}))
        assert written["subject_id"] == subject
        missing = error_of(conn.call("remember", fact("Uses a standing desk")))
        assert missing["code"] == "validation_failed"
        assert missing["details"]["errors"][0]["location"] == "subject_id"
    finally:
        conn.close()


def test_a_configured_subject_fixes_it_for_a_token_without_one(stack: RunningStack) -> None:
    subject = f"cfg-{uuid.uuid4().hex[:8]}"
    service = mint(stack, None, scope="memory:read memory:write subjects:any")
    conn = stdio_connection(server_env(stack, MEMVAULT_TOKEN=service), "--subject", subject)
    try:
        assert "subject_id" not in conn.tools()["remember"].input_schema["properties"]
        assert ok(conn.call("remember", fact("Walks to work")))["subject_id"] == subject
    finally:
        conn.close()


@pytest.mark.skipif(sys.platform != "linux", reason="127.0.0.2 is loopback on Linux")
def test_the_http_transport_binds_loopback_by_default(stack: RunningStack) -> None:
    server = HttpServer(server_env(stack, MEMVAULT_TOKEN=mint(stack, "u-http")))
    try:
        assert accepts("127.0.0.1", server.port)
        # Bound to 127.0.0.1 itself, not to every address: another address of this very
        # machine (all of 127/8 is loopback on Linux) finds nothing listening.
        assert not accepts("127.0.0.2", server.port)
        conn = server.connection()
        try:
            assert "remember" in conn.tools()
        finally:
            conn.close()
    finally:
        server.stop()


def test_the_http_transport_binds_another_host_when_told(stack: RunningStack) -> None:
    env = server_env(stack, MEMVAULT_TOKEN=mint(stack, "u-http"))
    server = HttpServer(env, "--host", "0.0.0.0")  # noqa: S104 - the point of the test
    try:
        assert accepts("127.0.0.2", server.port) or sys.platform != "linux"
    finally:
        server.stop()
    assert "warning: serving on 0.0.0.0" in server.stderr()


def initialize(url: str, **headers: str) -> httpx.Response:
    """An MCP ``initialize`` request as any local process could send it."""
    body: dict[str, Any] = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": types.LATEST_PROTOCOL_VERSION,
            "capabilities": {},
            "clientInfo": {"name": "probe", "version": "0"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream", **headers}
    return httpx.post(url, json=body, headers=headers, timeout=30)


def refused(answer: httpx.Response, *, invalid_token: bool) -> None:
    """401 with a JSON-RPC error that says what to send, and a Bearer challenge."""
    assert answer.status_code == 401, answer.text
    challenge = answer.headers["www-authenticate"]
    assert challenge.startswith("Bearer ")
    assert ('error="invalid_token"' in challenge) is invalid_token
    body = answer.json()
    assert body["jsonrpc"] == "2.0" and body["id"] is None
    assert body["error"]["code"] == types.INVALID_REQUEST
    assert body["error"]["data"] == {"code": "unauthorized"}
    assert "Authorization: Bearer <secret>" in body["error"]["message"]
    assert "mcp-session-id" not in answer.headers


def test_the_http_transport_refuses_a_request_without_its_secret(stack: RunningStack) -> None:
    server = HttpServer(server_env(stack, MEMVAULT_TOKEN=mint(stack, "u-http")))
    assert server.secret is not None
    try:
        refused(initialize(server.url), invalid_token=False)
        wrong = server.secret[:-1] + ("A" if server.secret[-1] != "A" else "B")
        refused(initialize(server.url, Authorization=f"Bearer {wrong}"), invalid_token=True)
        refused(initialize(server.url, Authorization="Bearer"), invalid_token=True)
        refused(initialize(server.url, Authorization=f"Basic {server.secret}"), invalid_token=True)
        refused(httpx.get(server.url, timeout=30), invalid_token=False)
        refused(httpx.delete(server.url, timeout=30), invalid_token=False)

        good = f"Bearer {server.secret}"
        assert initialize(server.url, Authorization=good).status_code == 200
        assert initialize(server.url, Authorization=f"bearer  {server.secret}").status_code == 200
        # With the secret, the DNS-rebinding checks still hold.
        foreign = initialize(server.url, Authorization=good, Host="evil.example:80")
        assert foreign.status_code == 421
        origin = initialize(server.url, Authorization=good, Origin="http://evil.example")
        assert origin.status_code == 403
        conn = server.connection()
        try:
            assert not conn.call("recall", {"query": "anything"}).is_error
        finally:
            conn.close()
    finally:
        server.stop()
    assert server.secret not in server.stderr()  # configured: named, never printed


def test_a_secret_made_at_start_goes_to_a_private_file(stack: RunningStack, tmp_path: Path) -> None:
    env = server_env(stack, MEMVAULT_TOKEN=mint(stack, "u-http"), MEMVAULT_HOME=str(tmp_path))
    server = HttpServer(env, configure_secret=False)  # stderr is a pipe, not a terminal
    secret_file = tmp_path / f"mcp-auth-token-{server.port}"
    try:
        assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
        server.secret = secret_file.read_text(encoding="utf-8").strip()
        assert len(server.secret) >= 32
        refused(initialize(server.url), invalid_token=False)
        conn = server.connection()
        try:
            assert "recall" in conn.tools()
        finally:
            conn.close()
    finally:
        server.stop()
    said = server.stderr()
    assert f"Authorization: Bearer <the secret in {secret_file}>" in said
    assert server.secret not in said
    assert not secret_file.exists()  # gone with the server


def test_a_bad_http_secret_is_a_clean_exit(stack: RunningStack, tmp_path: Path) -> None:
    env = server_env(stack, MEMVAULT_TOKEN=mint(stack, "u-http"), MEMVAULT_MCP_AUTH_TOKEN="short")
    done = start_and_fail(env, "--transport", "http", "--port", str(free_port()))
    clean_refusal(done, "MEMVAULT_MCP_AUTH_TOKEN: the HTTP transport's secret must be")
    missing = tmp_path / "no-such-file"
    done = start_and_fail(
        server_env(stack, MEMVAULT_TOKEN=mint(stack, "u-http")),
        *("--transport", "http", "--auth-token-file", str(missing)),
    )
    clean_refusal(done, f"auth token file {missing}: unreadable")


def test_memvault_never_needs_the_mcp_sdk(stack: RunningStack) -> None:
    # Block the SDK, then import what the Lambda layer and the CLI import.
    program = (
        "import sys\n"
        "sys.modules['mcp'] = sys.modules['mcp_types'] = None\n"
        "import memvault, memvault_client, memvault_client.mcp, memvault_client.mcp.tools\n"
        "from memvault_local.cli import _parser, main\n"
        "_parser().parse_args(['mcp'])\n"
        "sys.exit(main(['mcp']))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        env=server_env(stack, MEMVAULT_TOKEN=mint(stack, "u-1")),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    clean_refusal(done, "the MCP SDK is not installed (mcp")
