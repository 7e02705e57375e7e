"""Recall quality on the labelled evaluation set, through the HTTP API of the local stack.

Starts ``memvault run`` (moto, the stream pump, MiniLM) against a real OpenSearch (or the
embedded index), loads ``tests/data/recall_eval.json`` (a copy of shared/eval) over HTTP
with its lifecycles, then asks all 171 queries in keyword, vector and hybrid mode.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import uuid
from functools import cache
from pathlib import Path
from typing import Any

from cleanup import drop_indexes

from memvault_local.client import ApiClient
from memvault_local.devkeys import DEFAULT_SCOPES
from memvault_local.evaluation import EvalSet, load, score
from memvault_local.process import start_stack

ROOT = Path(__file__).resolve().parents[1]
EVAL = ROOT / "tests" / "data" / "recall_eval.json"


def stack_env(backend: str, opensearch_url: str | None, model: str = "minilm") -> dict[str, str]:
    env = {"MEMVAULT_EMBEDDING_MODEL": model}
    for passed in (
        "MEMVAULT_MODEL_DIR",
        "PYTHONPATH",
        "MEMVAULT_RECALL_VECTOR_WEIGHT",
        "MEMVAULT_EMBEDDING_MODEL_ZH",
    ):
        if os.environ.get(passed):
            env[passed] = os.environ[passed]
    if backend == "opensearch":
        assert opensearch_url, "the OpenSearch backend needs a URL"
        env |= {
            "MEMVAULT_SEARCH_BACKEND": "opensearch",
            "MEMVAULT_SEARCH_ENDPOINT": opensearch_url,
            "MEMVAULT_SEARCH_AUTH": "none",
            "MEMVAULT_SEARCH_ALIAS": f"bench-{uuid.uuid4().hex[:8]}",
        }
    return env


def run(
    backend: str = "opensearch", opensearch_url: str | None = None, model: str = "minilm"
) -> dict[str, Any]:
    evalset = EvalSet.read(EVAL)
    env = stack_env(backend, opensearch_url, model)
    with tempfile.TemporaryDirectory() as home:
        stack = start_stack(Path(home), **env)
        try:

            @cache
            def client_for(
                tenant: str, subject: str | None, role: str | None, sensitivity: str | None
            ) -> ApiClient:
                if subject is None:  # a reviewer, for any subject of the tenant
                    return stack.client(
                        tenant,
                        None,
                        scope=f"{DEFAULT_SCOPES} subjects:any",
                        max_sensitivity=sensitivity,
                    )
                return stack.client(tenant, subject, agent_role=role, max_sensitivity=sensitivity)

            loaded = load(evalset, client_for)
            report = score(evalset, client_for, loaded)
        finally:
            stack.stop()
            if opensearch_url and "MEMVAULT_SEARCH_ALIAS" in env:
                drop_indexes(opensearch_url, env["MEMVAULT_SEARCH_ALIAS"])
    return {
        "backend": backend,
        "model": model,
        "memories_written": len(loaded.ids),
        "refused_by_write_policy": loaded.refused,
        "load_seconds": round(loaded.seconds, 1),
        "modes": report,
    }


if __name__ == "__main__":
    url = sys.argv[2] if len(sys.argv) > 2 else "http://127.0.0.1:9200"
    model = sys.argv[3] if len(sys.argv) > 3 else "minilm"
    print(json.dumps(run(sys.argv[1] if len(sys.argv) > 1 else "opensearch", url, model), indent=2))
