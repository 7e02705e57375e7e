"""A moto server that answers one request at a time, in its own process.

moto is a test double, and it is not atomic under threads: two conditional writes that
reach it at once can both pass their condition. On AWS each DynamoDB request is atomic.
Serving one request at a time gives back that atomicity per request, so that races run
through memvault's threaded API are decided by memvault's conditional writes and
transactions, as on AWS, and not by moto's thread safety. moto still ignores TTL, IAM
conditions and transaction tokens (none of which these races use).
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def serial_moto(port: int) -> Iterator[str]:
    """Start the server on ``port``; yield its endpoint; stop it."""
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.moto_server", str(port)],
        cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=2).read()
                break
            except OSError:
                if process.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the moto server did not start") from None
                time.sleep(0.1)
        yield endpoint
    finally:
        process.kill()
        process.wait()


def main(port: int) -> None:
    from moto.server import DomainDispatcherApplication, create_backend_app
    from werkzeug.serving import make_server

    app = DomainDispatcherApplication(create_backend_app)
    make_server("127.0.0.1", port, app, threaded=False).serve_forever()


if __name__ == "__main__":
    main(int(sys.argv[1]))
