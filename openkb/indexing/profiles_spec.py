"""What a Milvus index profile is made of: collection name, vector size and function shapes.

A profile is the in-memory form of a ``milvus_index_profiles`` row (see ``to_metadata`` /
``from_metadata``). It never carries provider credentials: Milvus reads embedding and rerank
keys from its own deployment config (``milvus.yaml`` credential labels or env such as
``OPENAI_API_KEY``), and ``refuse_secrets`` rejects any parameter that looks like one, so a key
cannot reach the OpenKB database or a collection's function params by accident
(docs/retrieval.md#principles).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from openkb.errors import ValidationError
from openkb.indexing.lexical import LEXICAL_FIELDS, LEXICAL_V2

Backend = Literal["lite", "server"]

# Milvus Lite 3.x knows only the ``standard`` and ``jieba`` tokenizers (plus a ``stop`` filter)
# and refuses the 2.6 server's built-in ``{"type": "chinese"}`` analyzer (measured), so the
# default differs per backend. Lite's jieba keeps punctuation and function words as terms, and
# its BM25 runs in Python, where a term found in most rows is expensive (100k rows: ~400 ms for
# a query of frequent terms vs ~110 ms for rare ones) while adding nothing to the ranking. With
# the stop list "how do I get the value of the object" took 45 instead of 71 ms at 20k rows.
LITE_STOP_WORDS = (
    (
        "a an and are as at be by for from has have in is it its of on or that the this to was were will with "
        "how what when where which who why do does can i you we they he she not no if then than so"
    ).split()
    + list("的了是在和与及或也就都而被把这那之其个着过吗呢吧啊")
    + list("，。、；：？！“”‘’（）《》【】…—·,.;:?!\"'()[]{}<>/\\|-_+=*&^%$#@~`")
)
LITE_ANALYZER: dict[str, Any] = {"tokenizer": "jieba", "filter": [{"type": "stop", "stop_words": LITE_STOP_WORDS}]}
# A 2.6 server analyzes every chunk with the analyzer of its language (Milvus' multi-language
# analyzers, 2.5.11+): ``english`` (lowercase, stop words, Snowball stemming) for Latin-script
# chunks, ``chinese`` (jieba) for chunks with Chinese in them, which keeps Latin words as plain
# tokens. OpenKB writes each row's ``language`` (openkb/indexing/lexical.py
# ``analyzer_language``) and names the query's analyzer the same way
# (docs/retrieval.md#lexical-analysis).
LANGUAGE_FIELD = "language"
SERVER_ANALYZER: dict[str, Any] = {
    "analyzers": {"english": {"type": "english"}, "chinese": {"type": "chinese"}, "default": {"type": "chinese"}},
    "by_field": LANGUAGE_FIELD,
}


def is_multi_analyzer(params: Mapping[str, Any]) -> bool:
    """Milvus' ``multi_analyzer_params`` shape (``analyzers`` + ``by_field``), not one analyzer."""
    return "analyzers" in params


# Key words that mark a credential. Matched per word of the key ("api_key" -> api, key), so
# "max_tokens" or "truncate_prompt_tokens" are fine while "access_token" or "X-Api-Key" are not.
_SECRET_WORDS = {"token", "secret", "password", "passwd", "authorization", "apikey", "credentials", "bearer"}
_SECRET_VALUE = re.compile(r"^\s*(bearer\s+\S+|sk-[A-Za-z0-9_-]{8,}|basic\s+[A-Za-z0-9+/=]{8,})", re.IGNORECASE)


def _key_words(key: str) -> list[str]:
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", key)  # camelCase -> camel Case
    return [w for w in re.split(r"[^a-z0-9]+", spaced.lower()) if w]


def _looks_secret_key(key: str) -> bool:
    words = _key_words(key)
    if not words:
        return False
    if any(w in _SECRET_WORDS for w in words):
        return True
    return words[-1] == "key"  # key, api_key, access_key, secret_key, X-Api-Key


def refuse_secrets(params: Mapping[str, Any], *, where: str = "params") -> None:
    """Raise ``ValidationError`` if any key (at any depth) names a credential, or a string value
    looks like one (``Bearer ...``, ``sk-...``). Milvus ``credential`` labels stay allowed: they
    name an entry of ``milvus.yaml``, not the secret itself."""

    def walk(value: Any, path: str) -> None:
        if isinstance(value, Mapping):
            for k, v in value.items():
                sub = f"{path}.{k}"
                if isinstance(k, str) and _looks_secret_key(k):
                    raise ValidationError(
                        f"{sub} looks like a credential; OpenKB never stores embedding or rerank keys: "
                        "configure them in Milvus (milvus.yaml credential or provider env) instead",
                        field=sub,
                    )
                walk(v, sub)
        elif isinstance(value, (list, tuple)):
            for i, v in enumerate(value):
                walk(v, f"{path}[{i}]")
        elif isinstance(value, str) and _SECRET_VALUE.match(value):
            raise ValidationError(
                f"{path} holds what looks like a credential value; OpenKB never stores keys", field=path
            )

    walk(params, where)


@dataclass(frozen=True)
class EmbeddingSpec:
    """A TEXTEMBEDDING function: Milvus embeds ``content_text`` on insert and the query on search."""

    provider: str
    model_name: str
    base_url: str | None
    dimensions: int
    extra: Mapping[str, Any] = field(default_factory=dict)  # further provider params, never keys

    def __post_init__(self) -> None:
        if not self.provider or not self.model_name:
            raise ValidationError("embedding provider and model_name are required")
        if self.dimensions <= 0:
            raise ValidationError(f"embedding dimensions must be positive (got {self.dimensions})")
        refuse_secrets(dict(self.extra), where="embedding")

    def function_params(self) -> dict[str, Any]:
        """Milvus TEXTEMBEDDING params. The trap: providers name the service URL differently.
        OpenAI-compatible ones take ``base_url`` plus ``model_name``; Milvus 2.6's ``TEI``
        provider takes ``endpoint`` and serves the one model TEI was started with (no
        ``model_name``), so a TEI profile's URL goes out as ``endpoint`` (docs/deployment.md#milvus-26)."""
        if self.provider.lower() == "tei":
            params: dict[str, Any] = {"provider": self.provider, **self.extra}
            if self.base_url:
                params["endpoint"] = self.base_url
        else:
            params = {
                "provider": self.provider,
                "model_name": self.model_name,
                "dimensions": self.dimensions,
                **self.extra,
            }
            if self.base_url:
                params["base_url"] = self.base_url
        refuse_secrets(params, where="embedding")
        return params


@dataclass(frozen=True)
class RerankSpec:
    """A RERANK model ranker applied at search time (never stored in the collection schema).

    Milvus Lite has only provider ``cohere`` (called at ``<endpoint>/rerank`` with ``base_url``);
    a 2.6 server also has ``tei``/``vllm``/... which take ``endpoint``.
    """

    provider: str
    endpoint: str
    model_name: str | None = None
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.provider or not self.endpoint:
            raise ValidationError("rerank provider and endpoint are required")
        refuse_secrets(dict(self.extra), where="rerank")

    def function_params(self, query: str) -> dict[str, Any]:
        params: dict[str, Any] = {"reranker": "model", "provider": self.provider, "queries": [query], **self.extra}
        if self.provider == "cohere":
            params["base_url"] = self.endpoint
        else:
            params["endpoint"] = self.endpoint
        if self.model_name:
            params["model_name"] = self.model_name
        refuse_secrets({k: v for k, v in params.items() if k != "queries"}, where="rerank")
        return params


@dataclass(frozen=True)
class ProfileSpec:
    """One collection's shape. ``vector_dim == 0`` / ``embedding is None`` means BM25-only: the
    collection then has no dense field at all (Milvus accepts the BM25 sparse field as its only
    vector field), so nothing pretends to hold vectors; moving to an embedding model is a new
    collection + alias switch like any other model change."""

    name: str
    collection_name: str
    vector_dim: int
    embedding: EmbeddingSpec | None
    bm25_analyzer: Mapping[str, Any]
    rerank: RerankSpec | None = None
    backend: Backend = "lite"
    # the BM25 text transform (openkb/indexing/lexical.py): "stem-en-1" / "stem-en-2" = a
    # ``lexical_text`` / ``lexical_text_v2`` field the BM25 function reads; None = BM25 over
    # ``content_text`` (profiles created before it, and 2.6 servers, whose own analyzers do
    # this: docs/retrieval.md#lexical-analysis)
    lexical: str | None = None

    def __post_init__(self) -> None:
        if self.lexical is not None and self.lexical not in LEXICAL_FIELDS:
            raise ValidationError(f"unknown lexical transform {self.lexical!r}")
        if (self.embedding is None) != (self.vector_dim == 0):
            raise ValidationError("a profile has an embedding exactly when vector_dim > 0")
        if self.embedding is not None and self.embedding.dimensions != self.vector_dim:
            raise ValidationError(f"embedding dimensions {self.embedding.dimensions} != vector_dim {self.vector_dim}")
        if self.vector_dim < 0:
            raise ValidationError("vector_dim must be >= 0")
        if not _COLLECTION_RE.match(self.collection_name):
            raise ValidationError(f"invalid Milvus collection name {self.collection_name!r}")
        if self.backend not in ("lite", "server"):
            raise ValidationError(f"backend must be 'lite' or 'server' (got {self.backend!r})")
        refuse_secrets(dict(self.bm25_analyzer), where="bm25_analyzer")
        if is_multi_analyzer(self.bm25_analyzer):
            self._check_multi_analyzer()

    def _check_multi_analyzer(self) -> None:
        """OpenKB fills the language field itself, with ``english`` or ``chinese``: a profile whose
        analyzers are keyed otherwise would silently analyze everything with ``default``."""
        params = self.bm25_analyzer
        analyzers = params.get("analyzers")
        if self.backend != "server":
            raise ValidationError("multi-language analyzers need a Milvus 2.6 server (Milvus Lite has none)")
        if self.lexical is not None:
            raise ValidationError("a multi-language analyzer reads content_text: it takes no lexical transform")
        if params.get("by_field") != LANGUAGE_FIELD:
            raise ValidationError(f"multi-language analyzers must be chosen by_field {LANGUAGE_FIELD!r}")
        if not isinstance(analyzers, Mapping) or not {"english", "chinese", "default"} <= set(analyzers):
            raise ValidationError("multi-language analyzers must define 'english', 'chinese' and 'default'")

    @property
    def multi_analyzer(self) -> bool:
        return is_multi_analyzer(self.bm25_analyzer)

    @property
    def has_dense(self) -> bool:
        return self.embedding is not None

    def to_metadata(self) -> dict[str, Any]:
        """JSON for ``milvus_index_profiles.function_metadata`` (already free of secrets)."""
        return {
            "name": self.name,
            "collection_name": self.collection_name,
            "vector_dim": self.vector_dim,
            "backend": self.backend,
            "bm25_analyzer": dict(self.bm25_analyzer),
            "lexical": self.lexical,
            "embedding": None
            if self.embedding is None
            else {
                "provider": self.embedding.provider,
                "model_name": self.embedding.model_name,
                "base_url": self.embedding.base_url,
                "dimensions": self.embedding.dimensions,
                "extra": dict(self.embedding.extra),
            },
            "rerank": None
            if self.rerank is None
            else {
                "provider": self.rerank.provider,
                "endpoint": self.rerank.endpoint,
                "model_name": self.rerank.model_name,
                "extra": dict(self.rerank.extra),
            },
        }

    @classmethod
    def from_metadata(cls, data: Mapping[str, Any]) -> ProfileSpec:
        refuse_secrets(data, where="function_metadata")
        emb, rr = data.get("embedding"), data.get("rerank")
        return cls(
            name=data["name"],
            collection_name=data["collection_name"],
            vector_dim=int(data.get("vector_dim") or 0),
            embedding=None
            if not emb
            else EmbeddingSpec(
                provider=emb["provider"],
                model_name=emb["model_name"],
                base_url=emb.get("base_url"),
                dimensions=int(emb["dimensions"]),
                extra=dict(emb.get("extra") or {}),
            ),
            bm25_analyzer=dict(data.get("bm25_analyzer") or default_analyzer(data.get("backend", "lite"))),
            rerank=None
            if not rr
            else RerankSpec(
                provider=rr["provider"],
                endpoint=rr["endpoint"],
                model_name=rr.get("model_name"),
                extra=dict(rr.get("extra") or {}),
            ),
            backend=data.get("backend", "lite"),
            lexical=data.get("lexical"),  # absent in profiles made before it: BM25 over content_text
        )


_COLLECTION_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,254}$")


def default_lexical(backend: Backend) -> str | None:
    """New Lite profiles get the latest transform (stemmed, dotted numbers by prefix); a 2.6
    server analyzes by itself. A profile keeps the transform it was made with (its rows mean
    that): a new one comes with a new profile and a rebuild (docs/retrieval.md#lexical-analysis)."""
    return LEXICAL_V2 if backend == "lite" else None


def default_analyzer(backend: Backend) -> dict[str, Any]:
    import copy

    return copy.deepcopy(LITE_ANALYZER if backend == "lite" else SERVER_ANALYZER)


def collection_name_for(model: str, dim: int, n: int) -> str:
    """``openkb_chunks_<model>_<dim>_v<n>``, the model part reduced to ``[a-z0-9_]`` (at most 64)."""
    if dim < 0 or n < 1:
        raise ValidationError(f"collection needs dim >= 0 and version >= 1 (got dim={dim}, n={n})")
    slug = re.sub(r"[^a-z0-9]+", "_", model.lower()).strip("_")[:64].strip("_") or "model"
    return f"openkb_chunks_{slug}_{dim}_v{n}"


def make_profile(
    *,
    model_name: str | None,
    dim: int,
    version: int = 1,
    base_url: str | None = None,
    provider: str = "openai",
    backend: Backend = "lite",
    rerank: RerankSpec | None = None,
    name: str | None = None,
    analyzer: Mapping[str, Any] | None = None,
) -> ProfileSpec:
    """The common case: ``model_name=None`` / ``dim=0`` gives a BM25-only profile."""
    embedding = None
    if model_name and dim > 0:
        embedding = EmbeddingSpec(provider=provider, model_name=model_name, base_url=base_url, dimensions=dim)
    else:
        dim = 0
    collection = collection_name_for(embedding.model_name if embedding else "bm25", dim, version)
    return ProfileSpec(
        name=name or collection,
        collection_name=collection,
        vector_dim=dim,
        embedding=embedding,
        bm25_analyzer=dict(analyzer) if analyzer is not None else default_analyzer(backend),
        rerank=rerank,
        backend=backend,
        lexical=default_lexical(backend),
    )
