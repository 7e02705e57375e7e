"""The MCP server (``python -m memvault_client.mcp``) as an MCP host runs it: over stdio,
driven by the MCP SDK's own client, against a running memvault."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from typing import Any

import pytest

from client_tests.conftest import Server

pytest.importorskip("mcp", reason="the mcp extra: pip install 'memvault-client[mcp]'")
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client

SERVER = [sys.executable, "-m", "memvault_client.mcp"]


def _env(server: Server, token: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MEMVAULT_"))}
    return {**env, "MEMVAULT_ENDPOINT": server.url, "MEMVAULT_TOKEN": token}


def _structured(result: types.CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def test_remember_then_recall_over_stdio(server: Server, subject: str) -> None:
    params = StdioServerParameters(
        command=SERVER[0], args=SERVER[1:], env=_env(server, server.token(subject))
    )

    async def session() -> tuple[set[str], dict[str, Any], list[str]]:
        async with stdio_client(params) as (read, write), ClientSession(read, write) as mcp:
            await mcp.initialize()
            tools = {t.name for t in (await mcp.list_tools()).tools}
            memory = _structured(
                await mcp.call_tool(
                    "remember",
                    {
                        "kind": "semantic",
                        "content": "Takes the 7:40 train to work",
                        "source": {"type": "user_statement", "ref": "client-tests"},
                        "consent": True,
                    },
                )
            )
            found: list[str] = []
            deadline = time.monotonic() + 60
            while memory["memory_id"] not in found and time.monotonic() < deadline:
                answer = _structured(await mcp.call_tool("recall", {"query": "train to work"}))
                found = [i["memory"]["memory_id"] for i in answer["items"]]
                if memory["memory_id"] not in found:
                    await asyncio.sleep(0.5)
            return tools, memory, found

    tools, memory, found = asyncio.run(session())
    assert {"remember", "recall", "correct", "forget"} <= tools
    assert memory["subject_id"] == subject and memory["version"] == 1
    assert memory["memory_id"] in found


def test_a_refused_token_is_a_clean_exit(server: Server) -> None:
    done = subprocess.run(
        SERVER,
        env=_env(server, "not-a-token"),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert "refused the token" in done.stderr
    assert "Traceback" not in done.stderr
