"""The local stack's embedded index: which embedding model it uses, and building an index
for a model from the embedded store.

Each model has its own index file (``<alias>--<model slug>.sqlite3`` under the index
folder); the store is the source of truth and any index can be rebuilt from it. The
model in use is, in order: ``MEMVAULT_EMBEDDING_MODEL``; the one ``memvault reindex
--switch`` recorded in the index folder (``embedding-model``); MiniLM for a folder that
already holds a MiniLM index (the default before e5-small-v2); e5-small-v2.

An index that does not exist yet for the model in use is built from the store when the
stack starts, before it serves (a store written with another model is never left with an
empty index, which would make every recall miss).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TextIO

from memvault.clock import SystemClock
from memvault.config import ENGLISH_ONLY_MODELS, Settings
from memvault.embeddings import Embedder
from memvault.indexing.indexer import Indexer
from memvault.indexing.rebuild import RebuildReport, rebuild
from memvault.search.backend import SearchIndex
from memvault.storage.ports.memory import MemoryStore

#: The file in the index folder that names the model ``reindex --switch`` chose.
MODEL_FILE = "embedding-model"
#: The model of a new store. It became the default when it led MiniLM on LoCoMo and
#: matched it on the shared evaluation set (docs/recall.md).
DEFAULT_MODEL = "e5-small-v2"
#: The default before it: a store whose index folder holds a MiniLM index and records no
#: model was written with it, and keeps it until ``memvault reindex --switch``.
EARLIER_DEFAULT = "minilm"


def recorded_model(index_dir: Path) -> str | None:
    path = index_dir / MODEL_FILE
    if not path.exists():
        return None
    name = path.read_text(encoding="utf-8").strip()
    return name or None


def model_in_use(index_dir: Path) -> str:
    """The model ``memvault run`` uses when the environment names none."""
    recorded = recorded_model(index_dir)
    if recorded is not None:
        return recorded
    if any(index_dir.glob("*--minilm-*.sqlite3")):
        return EARLIER_DEFAULT
    return DEFAULT_MODEL


CHINESE_MODEL = "bge-small-zh-v1.5"


def chinese_model_for(model: str) -> str:
    """The ``embedding_model_zh`` of a local stack on ``model``: the Chinese model beside
    an English-only model when it is installed (``make install`` installs it), else
    ``none`` (MiniLM's index, the hashing embedder and Titan keep one model)."""
    if model not in ENGLISH_ONLY_MODELS:
        return "none"
    from memvault.embeddings.onnx import OnnxEmbedder

    chinese = OnnxEmbedder(CHINESE_MODEL)
    spec = chinese.spec
    installed = all((chinese.model_dir / f).exists() for f in (spec.onnx_file, spec.tokenizer_file))
    return CHINESE_MODEL if installed else "none"


def with_model(settings: Settings, model: str) -> Settings:
    """``settings`` on ``model``, with the Chinese model that goes with it locally (unless
    ``MEMVAULT_EMBEDDING_MODEL_ZH`` names one)."""
    chinese: str = settings.embedding_model_zh  # validated with the settings
    if "MEMVAULT_EMBEDDING_MODEL_ZH" not in os.environ:
        chinese = chinese_model_for(model)
    return settings.model_copy(update={"embedding_model": model, "embedding_model_zh": chinese})


def record_model(index_dir: Path, model: str) -> None:
    index_dir.mkdir(parents=True, exist_ok=True)
    staged = index_dir / f".{MODEL_FILE}.tmp"
    staged.write_text(model + "\n", encoding="utf-8")
    staged.replace(index_dir / MODEL_FILE)


def index_path(settings: Settings, embedder: Embedder) -> Path:
    """The file of ``embedder``'s index (as ``memvault.wiring.search_index`` names it)."""
    return Path(settings.index_dir or ".") / f"{settings.search_alias}--{embedder.slug}.sqlite3"


def remove_index(path: Path) -> None:
    for suffix in ("", "-wal", "-shm"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def has_memories(store: MemoryStore) -> bool:
    return next(iter(store.rebuild_records()), None) is not None


def build(
    index: SearchIndex,
    embedder: Embedder,
    store: MemoryStore,
    out: TextIO,
    *,
    label: str,
    chinese: Embedder | None = None,
) -> RebuildReport:
    """Every version and tombstone of the store into ``index``, with a progress bar."""
    from tqdm import tqdm

    indexer = Indexer(index, embedder, store, SystemClock(), chinese=chinese)
    with tqdm(unit="item", desc=label, file=out, mininterval=1.0) as bar:
        report = rebuild(indexer, store.rebuild_records(), progress=bar.update)
    index.refresh()
    return report
