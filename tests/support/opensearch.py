"""A real single-node OpenSearch for the tests.

``opensearch_url()`` names the node to use: ``MEMVAULT_TEST_OPENSEARCH_URL`` when set, else
the one ``scripts/opensearch.sh start`` brings up (idempotent: it reuses a healthy node on
the port, and downloads and assembles OpenSearch from Maven Central only the first time).
The answer is computed once per process, so a session-scoped fixture can simply return it.
"""

from __future__ import annotations

import contextlib
import functools
import os
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPT = REPO_ROOT / "scripts" / "opensearch.sh"
# The first start downloads about 70 MB and assembles the install; later ones take seconds.
START_TIMEOUT_S = 900


@functools.cache
def opensearch_url() -> str:
    """The base URL of a healthy OpenSearch node, e.g. ``http://127.0.0.1:9200``."""
    url = os.environ.get("MEMVAULT_TEST_OPENSEARCH_URL")
    if url:
        return url.rstrip("/")
    port = os.environ.get("MEMVAULT_OPENSEARCH_PORT", "9200")
    result = subprocess.run(
        ["bash", str(SCRIPT), "start"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=START_TIMEOUT_S,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"{SCRIPT.relative_to(REPO_ROOT)} start failed (exit {result.returncode}):\n"
            f"{result.stdout}{result.stderr}"
        )
    return f"http://127.0.0.1:{port}"


@contextlib.contextmanager
def scratch_index(prefix: str, dimensions: int) -> Iterator[Any]:
    """A fresh ``OpenSearchIndex`` (model ``m``) on the test node under a unique alias
    starting with ``prefix``, made, and deleted with its indexes afterwards."""
    from opensearchpy import OpenSearch

    from memvault.search.opensearch import OpenSearchIndex

    client = OpenSearch(hosts=[opensearch_url()], timeout=30)
    idx = OpenSearchIndex(
        client,
        f"{prefix}-{uuid.uuid4().hex[:10]}",
        model_slug="m",
        model_id="m",
        model_version="1",
        dimensions=dimensions,
    )
    idx.ensure()
    try:
        yield idx
    finally:
        for name in idx.alias_target():
            client.indices.delete(index=name, ignore_unavailable=True)
