"""The MCP server's tests: the real local stack (``memvault run`` as a subprocess, one per
module) over HTTP, and the real server (``memvault mcp`` as a subprocess) driven by the
MCP SDK's own client, over stdio and over streamable HTTP.

An MCP client session lives in its async context managers, which must be entered and
left by one task; :class:`McpConnection` holds one open in a thread of its own, so the
tests stay plain functions that call ``conn.call("remember", {...})``.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from concurrent.futures import Future
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import httpx2
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from memvault_local.process import RunningStack, free_port, start_stack

T = TypeVar("T")
Streams = AbstractAsyncContextManager[Any]
#: ``memvault mcp`` as the entry point runs it (``memvault = memvault_local.cli:main``).
MEMVAULT = [sys.executable, "-m", "memvault_local.cli"]
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningStack]:
    # The hashing embedder keeps start-up fast; nothing here is about ranking quality.
    running = start_stack(
        tmp_path_factory.mktemp("mcp-home"),
        MEMVAULT_EMBEDDING_MODEL="hashing",
        MEMVAULT_EMBED_WORKER="off",
    )
    yield running
    running.stop()


def server_env(stack: RunningStack, **extra: str) -> dict[str, str]:
    """The environment an MCP host would give the server: endpoint and token, no more."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MEMVAULT_"))}
    env["MEMVAULT_ENDPOINT"] = stack.url
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


class McpConnection:
    """One MCP client session (``ClientSession``) over ``connect()``'s streams, held open
    on an event loop in a thread of its own until :meth:`close`."""

    def __init__(self, connect: Callable[[], Streams]) -> None:
        self._connect = connect
        self._loop = asyncio.new_event_loop()
        self._opened: Future[ClientSession] = Future()
        self._closed: Future[None] = Future()
        self._stop: asyncio.Event | None = None
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self.session = self._opened.result(timeout=TIMEOUT)

    def _run(self) -> None:
        try:
            self._loop.run_until_complete(self._hold())
            self._closed.set_result(None)
        except BaseException as err:
            if not self._opened.done():
                self._opened.set_exception(err)
            self._closed.set_exception(err)

    async def _hold(self) -> None:
        self._stop = asyncio.Event()
        async with (
            self._connect() as streams,
            ClientSession(streams[0], streams[1], read_timeout_seconds=TIMEOUT) as session,
        ):
            await session.initialize()
            self._opened.set_result(session)
            await self._stop.wait()

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result(timeout=TIMEOUT)

    def tools(self) -> dict[str, types.Tool]:
        return {t.name: t for t in self.run(self.session.list_tools()).tools}

    def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        result = self.run(self.session.call_tool(name, arguments))
        assert isinstance(result, types.CallToolResult)
        return result

    def close(self) -> None:
        stop = self._stop
        if stop is not None:
            self._loop.call_soon_threadsafe(stop.set)
        self._closed.result(timeout=TIMEOUT)
        self._thread.join(timeout=TIMEOUT)
        self._loop.close()


def stdio_connection(env: dict[str, str], *args: str) -> McpConnection:
    """``memvault mcp`` launched by the MCP SDK's stdio client, as an MCP host does."""
    params = StdioServerParameters(command=MEMVAULT[0], args=[*MEMVAULT[1:], "mcp", *args], env=env)
    return McpConnection(lambda: stdio_client(params))


class HttpServer:
    """``python -m memvault_client.mcp --transport http`` on a free port, as a subprocess. Its
    bearer secret is ``MEMVAULT_MCP_AUTH_TOKEN``, a random one unless ``configure_secret``
    is false (then the server makes one; the test sets :attr:`secret` from where it is)."""

    def __init__(self, env: dict[str, str], *args: str, configure_secret: bool = True) -> None:
        self.port = free_port()
        self.secret: str | None = None
        if configure_secret:
            self.secret = secrets.token_urlsafe(24)
            env = {**env, "MEMVAULT_MCP_AUTH_TOKEN": self.secret}
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "memvault_client.mcp",
                "--transport",
                "http",
                "--port",
                str(self.port),
                *args,
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.url = f"http://127.0.0.1:{self.port}/mcp"
        deadline = time.monotonic() + TIMEOUT
        while not accepts("127.0.0.1", self.port):
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"memvault mcp did not start: {self.stderr()}")
            time.sleep(0.1)

    def connection(self) -> McpConnection:
        """The MCP SDK's client, sending the server's secret as an MCP host is told to."""
        assert self.secret is not None
        headers = {"Authorization": f"Bearer {self.secret}"}

        @asynccontextmanager
        async def connect() -> AsyncIterator[Any]:
            async with (
                httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30, read=300)) as client,
                streamable_http_client(self.url, http_client=client) as streams,
            ):
                yield streams

        return McpConnection(connect)

    def stderr(self) -> str:
        if self.process.poll() is None:
            return ""
        assert self.process.stderr is not None
        return self.process.stderr.read()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def accepts(host: str, port: int) -> bool:
    """Something listens at (host, port)."""
    try:
        with socket.create_connection((host, port), timeout=1):
            return True
    except OSError:
        return False


# ------------------------------------------------------------------ tool results


def fact(content: str, **fields: Any) -> dict[str, Any]:
    return {
        "kind": "semantic",
        "content": content,
        "source": {"type": "user_statement", "ref": "mcp-test"},
        "consent": True,
        **fields,
    }


def ok(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, text_of(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def text_of(result: types.CallToolResult) -> str:
    block = result.content[0]
    assert isinstance(block, types.TextContent)
    return block.text


def error_of(result: types.CallToolResult) -> dict[str, Any]:
    """A tool error: the memvault code and message, as text and as structured content."""
    assert result.is_error
    assert isinstance(result.structured_content, dict)
    error: dict[str, Any] = result.structured_content["error"]
    text = text_of(result)
    assert text.startswith(f"memvault error {error['code']}")
    assert error["message"] in text
    assert "Traceback" not in text
    return error


def eventually(
    ask: Callable[[], types.CallToolResult], until: Callable[[dict[str, Any]], bool]
) -> types.CallToolResult:
    """Recall reads the index, which the stack fills from its change feed: ask again until
    it has caught up (or 20 s)."""
    deadline = time.monotonic() + 20
    while True:
        result = ask()
        if until(ok(result)) or time.monotonic() > deadline:
            return result
        time.sleep(0.2)


def recalled_ids(answer: dict[str, Any]) -> list[str]:
    return [i["memory"]["memory_id"] for i in answer["items"]]


def write_token(path: Path, token: str) -> Path:
    path.write_text(token + "\n", encoding="utf-8")
    return path
