"""``memvault run`` answers once its models have loaded: the first writes and recalls of a
fresh stack run at full speed instead of sharing the cores with three model loads."""

from __future__ import annotations

import io
import threading
import time
from pathlib import Path

import pytest

from memvault.api.deps import deps
from memvault.config import Settings
from memvault.embeddings.onnx import OnnxEmbedder
from memvault_local import stack
from memvault_local.options import StackOptions


def test_waiting_for_the_warm_up_joins_each_load_and_gives_up_at_the_deadline() -> None:
    done = threading.Event()
    stuck = threading.Event()
    quick = threading.Thread(target=lambda: (time.sleep(0.2), done.set()), daemon=True)
    hung = threading.Thread(target=stuck.wait, daemon=True)
    local = stack._Local(Settings(), StackOptions(), "test")
    local.warming += [quick, hung]
    quick.start()
    hung.start()
    started = time.monotonic()
    local.wait_warm(1.0)
    waited = time.monotonic() - started
    assert done.is_set()
    assert 0.9 <= waited < 5.0  # the hung load does not hold the stack past the deadline
    stuck.set()


def test_the_embedded_stack_has_its_models_loaded_once_warm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in (
        "MEMVAULT_EMBEDDING_MODEL",
        "MEMVAULT_EMBEDDING_MODEL_ZH",
        "MEMVAULT_EMBED_WORKER",
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MEMVAULT_EMBEDDING_MODEL_ZH", "none")
    local = stack._on_embedded_store(StackOptions(), tmp_path, "http://127.0.0.1:1", io.StringIO())
    try:
        embedder = deps.services().recall.embedder
        if not isinstance(embedder, OnnxEmbedder):
            pytest.skip("the packaged model is not installed here (memvault model install)")
        # The query model and the indexer's worker processes load in the background ...
        assert len(local.warming) == 2
        local.wait_warm(120)
        # ... and waiting for them leaves both loaded.
        assert not any(t.is_alive() for t in local.warming)
        assert embedder._session is not None
    finally:
        local.close()
        deps.use(None)
