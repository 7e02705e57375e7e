"""The local stack's embedding model, changed on a populated store (issue 30).

``memvault reindex --model M --switch`` builds M's embedded index from the store with the
stack stopped and records M as the model ``memvault run`` uses; the old index stays, and
``--switch`` back to the old model rolls back. A stack started with a model the store has
no index for builds it from the store before it serves: before, it served from an empty
index and every recall missed. A store whose index folder holds a MiniLM index (the
default before e5-small-v2) and records no model keeps MiniLM. Run against real
``memvault run`` subprocesses; the models are the hashing embedder, e5-small-v2 (the
default) and MiniLM.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path

from memvault_local.client import ApiClient
from memvault_local.devkeys import DevKey
from memvault_local.local_index import chinese_model_for
from memvault_local.process import RunningStack, start_stack

SCOPES = "memory:read memory:write"
SUBJECT = "reindexed"


def _client(stack: RunningStack) -> ApiClient:
    token = DevKey.load_or_create(stack.home).mint(tenant="local", subject=SUBJECT, scope=SCOPES)
    return ApiClient(stack.url, token)


def _write(stack: RunningStack, content: str) -> None:
    answer = _client(stack).call(
        "POST",
        f"/v1/subjects/{SUBJECT}/memories",
        body={
            "request_id": uuid.uuid4().hex,
            "kind": "semantic",
            "content": content,
            "source": {"type": "user_statement", "ref": "test"},
            "consent": True,
        },
    )
    assert answer.status == 201, answer.body


def _recalled(stack: RunningStack, query: str) -> list[str]:
    answer = _client(stack).call(
        "POST", f"/v1/subjects/{SUBJECT}/recall", body={"query": query, "mode": "keyword"}
    )
    assert answer.status == 200, answer.body
    return [item["memory"]["content"] for item in answer.body["items"]]


def _reindex(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "MEMVAULT_"))}
    env["MEMVAULT_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "memvault_local.cli", "reindex", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def _wait_indexed(stack: RunningStack, query: str, want: str) -> None:
    import time

    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if want in _recalled(stack, query):
            return
        time.sleep(0.2)
    raise AssertionError(f"{want!r} never became recallable")


def test_switch_to_another_model_and_back_on_a_populated_store(tmp_path: Path) -> None:
    home = tmp_path / "home"
    stack = start_stack(home)  # the default model (e5-small-v2)
    try:
        assert "embeddings: e5-small-v2" in stack.banner
        _write(stack, "The staging database moved to Frankfurt in March")
        _wait_indexed(
            stack, "staging database Frankfurt", "The staging database moved to Frankfurt in March"
        )
        refused = _reindex(home, "--model", "hashing", "--switch")
        assert refused.returncode == 2 and "stop it" in refused.stderr
    finally:
        stack.stop()

    switched = _reindex(home, "--model", "hashing", "--switch")
    assert switched.returncode == 0, switched.stderr
    assert "now uses hashing (was e5-small-v2)" in switched.stdout
    assert "memvault reindex --model e5-small-v2 --switch" in switched.stdout
    assert (home / "data" / "index" / "embedding-model").read_text().strip() == "hashing"

    stack = start_stack(home)
    try:
        assert "embeddings: hashing" in stack.banner
        assert "The staging database moved to Frankfurt in March" in _recalled(
            stack, "staging database Frankfurt"
        )
        _write(stack, "Release trains leave every second Tuesday")
        _wait_indexed(stack, "release trains Tuesday", "Release trains leave every second Tuesday")
    finally:
        stack.stop()

    back = _reindex(home, "--model", "e5-small-v2", "--switch")
    assert back.returncode == 0, back.stderr
    stack = start_stack(home)
    try:
        assert "embeddings: e5-small-v2" in stack.banner
        # Rebuilt from the store: the memory written while on hashing is there too.
        assert "Release trains leave every second Tuesday" in _recalled(
            stack, "release trains Tuesday"
        )
    finally:
        stack.stop()


def test_a_model_the_store_has_no_index_for_is_built_before_serving(tmp_path: Path) -> None:
    home = tmp_path / "home"
    stack = start_stack(home, MEMVAULT_EMBEDDING_MODEL="hashing")
    try:
        _write(stack, "Quarterly numbers are reviewed by the finance guild")
        _wait_indexed(stack, "finance guild", "Quarterly numbers are reviewed by the finance guild")
    finally:
        stack.stop()
    stack = start_stack(home)  # e5-small-v2: no index for it yet
    try:
        models = "e5-small-v2"
        if chinese_model_for(models) != "none":  # installed by make install
            models += f" + {chinese_model_for(models)}"
        assert f"building the {models} index from the store" in stack.banner
        assert "Quarterly numbers are reviewed by the finance guild" in _recalled(
            stack, "finance guild"
        )
    finally:
        stack.stop()


def test_a_store_indexed_with_minilm_before_the_default_changed_keeps_minilm(
    tmp_path: Path,
) -> None:
    """A data folder from before e5-small-v2 became the default holds a MiniLM index and
    no recorded model: the next plain start keeps MiniLM (no surprise rebuild, the same
    rankings as before), until ``memvault reindex --switch`` says otherwise."""
    home = tmp_path / "home"
    stack = start_stack(home, MEMVAULT_EMBEDDING_MODEL="minilm")
    try:
        _write(stack, "The design review moved to Thursday mornings")
        _wait_indexed(stack, "design review", "The design review moved to Thursday mornings")
    finally:
        stack.stop()
    assert not (home / "data" / "index" / "embedding-model").exists()
    stack = start_stack(home)
    try:
        assert "embeddings: minilm" in stack.banner
        assert "building" not in stack.banner
        assert "The design review moved to Thursday mornings" in _recalled(stack, "design review")
    finally:
        stack.stop()
