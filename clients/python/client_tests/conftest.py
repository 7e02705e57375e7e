"""The client package's own tests: the SDK, the LangGraph adapters and the MCP server
against a running memvault, with nothing of the server imported.

Where the server is:

- ``MEMVAULT_TEST_ENDPOINT`` and ``MEMVAULT_TEST_MINT``: a running stack's URL and a
  command that prints a token for it (``--subject S`` is appended), e.g.
  ``memvault dev-token --tenant clients --scope "..."`` from a server install. This is how
  the tests run from the package's wheel alone (tests/e2e/test_packaging.py).
- otherwise, in a checkout with the server installed, a stack started here (``memvault
  run`` as a subprocess, on the hashing embedder).
"""

from __future__ import annotations

import importlib.util
import os
import shlex
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

SCOPES = "memory:read memory:write memory:delete sessions:write runs:write artifacts:write"


@dataclass(frozen=True)
class Server:
    url: str
    #: A command that prints a token; ``--subject S`` is appended.
    mint_command: tuple[str, ...]
    env: dict[str, str]

    def token(self, subject: str, *extra: str) -> str:
        done = subprocess.run(
            [*self.mint_command, "--subject", subject, *extra],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=60,
            check=True,
        )
        return done.stdout.strip()


def _started_here() -> Iterator[Server]:
    if importlib.util.find_spec("memvault_local") is None:
        pytest.skip(
            "no server: set MEMVAULT_TEST_ENDPOINT and MEMVAULT_TEST_MINT, or install memvault"
        )
    from memvault_local.process import start_stack

    with tempfile.TemporaryDirectory(prefix="client-tests-") as home:
        running = start_stack(
            Path(home), MEMVAULT_EMBEDDING_MODEL="hashing", MEMVAULT_EMBED_WORKER="off"
        )
        try:
            env = {**os.environ, "MEMVAULT_HOME": home}
            mint = (sys.executable, "-m", "memvault_local.cli", "dev-token", "--tenant", "clients")
            yield Server(running.url, (*mint, "--scope", SCOPES), env)
        finally:
            running.stop()


@pytest.fixture(scope="session")
def server() -> Iterator[Server]:
    url = os.environ.get("MEMVAULT_TEST_ENDPOINT")
    mint = os.environ.get("MEMVAULT_TEST_MINT")
    if url:
        if not mint:
            pytest.fail("MEMVAULT_TEST_ENDPOINT is set without MEMVAULT_TEST_MINT")
        yield Server(url.rstrip("/"), (*shlex.split(mint), "--scope", SCOPES), dict(os.environ))
    else:
        yield from _started_here()


@pytest.fixture
def subject() -> str:
    return f"c-{uuid.uuid4().hex[:12]}"
