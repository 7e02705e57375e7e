"""Start `memvault run` as a subprocess and wait for its banner (end-to-end tests, benchmarks)."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memvault_local.client import ApiClient
from memvault_local.devkeys import DevKey

START_TIMEOUT = 60


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class RunningStack:
    process: subprocess.Popen[str]
    url: str
    banner: str
    home: Path
    env: dict[str, str]

    def client(
        self, tenant: str = "local", subject: str | None = "user-1", **claims: Any
    ) -> ApiClient:
        key = DevKey.load_or_create(self.home)
        return ApiClient(self.url, key.mint(tenant=tenant, subject=subject, **claims))

    output: deque[str] = field(default_factory=lambda: deque(maxlen=200))
    _follower: threading.Thread | None = None

    def follow(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.output.append(line)

    def finish(self, timeout: float) -> str:
        """Wait for the process to end; everything it printed after the banner."""
        self.process.wait(timeout=timeout)
        if self._follower is not None:
            self._follower.join(timeout=5)
        return "".join(self.output)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    @property
    def port(self) -> int:
        return int(self.url.rsplit(":", 1)[1])

    def interrupt(self, timeout: float = 30) -> str:
        """Ctrl-C: SIGINT, then wait for the clean stop; what it printed after the banner."""
        self.process.send_signal(signal.SIGINT)
        return self.finish(timeout)

    def kill9(self, timeout: float = 30) -> None:
        """A crash: SIGKILL, so no clean-up of any kind runs (no commit, no checkpoint)."""
        self.process.send_signal(signal.SIGKILL)
        self.finish(timeout)


def start_stack(
    home: Path, port: int | None = None, *, python: str | None = None, **extra_env: str
) -> RunningStack:
    """Start `memvault run` with a clean environment plus ``extra_env``, on ``python``
    (this interpreter unless another, e.g. a fresh virtualenv's)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MEMVAULT_"))}
    env.update(
        {
            "MEMVAULT_HOME": str(home),
            "MEMVAULT_PORT": str(port or free_port()),
            "PYTHONUNBUFFERED": "1",
            # The banner goes to a pipe here; its token and console key are what the
            # harness reads (tests, benchmarks).
            "MEMVAULT_SHOW_CREDENTIALS": "1",
        }
    )
    env.update(extra_env)
    process = subprocess.Popen(  # noqa: S603 - an interpreter the caller names, fixed arguments
        [python or sys.executable, "-m", "memvault_local.cli", "run"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert process.stdout is not None
    lines: list[str] = []
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if line.startswith("Ctrl-C stops everything"):
            break
    banner = "".join(lines)
    match = re.search(r"API \(plays API Gateway\)\s+(http://\S+)", banner)
    if not match:
        process.kill()
        raise RuntimeError(f"memvault run did not start:\n{banner}")
    running = RunningStack(process, match.group(1), banner, home, env)
    # Keep reading what it prints, or a full pipe would stall the stack.
    running._follower = threading.Thread(target=running.follow, daemon=True)
    running._follower.start()
    return running
