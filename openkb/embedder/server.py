"""OpenAI-compatible ``/v1/embeddings`` over ``http.server`` (no framework: starts in ~1.5 s).

Routes:

* ``GET /health`` -> 200 once the model is loaded (the process only binds after loading).
* ``GET /v1/models``, ``GET /v1/models/<name>`` -> the one served model.
* ``POST /v1/embeddings`` -> ``{"input": str | [str], "model": str, "dimensions"?: int,
  "encoding_format"?: "float" | "base64"}`` in, OpenAI's ``{"object": "list", "data": [...]}`` out.
* ``POST /v1/rerank`` -> Cohere's v2 rerank shape, scored by embedding cosine similarity. It
  exists so Milvus' RERANK function (provider ``cohere`` with ``base_url``, the only rerank
  provider Milvus Lite has) can be exercised end to end without a cross-encoder; it is no
  quality win over the dense route and is not meant for production reranking.

Errors use OpenAI's shape ``{"error": {"message", "type", "param", "code"}}`` with status 400
(413 for an oversized body, 404 for an unknown route). The served model name is enforced: a
request naming another model is refused rather than answered with vectors from a different
space (see ``models.py``). ``dimensions`` must equal the model's native size: these models are
not Matryoshka-trained, so truncating would silently degrade them.

One encode runs at a time (the tokenisers hold the GIL anyway); big requests are cut into
``batch_size`` slices and the lock is released between slices, so a search query waits for
at most one slice of a concurrent bulk insert.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np

from openkb.embedder.models import LoadedModel, estimate_tokens

log = logging.getLogger("openkb.embedder")

MAX_BODY_BYTES = 32 * 1024 * 1024
MAX_INPUTS = 2048  # OpenAI's own per-request limit; Milvus chunks its batches to it


class RequestError(Exception):
    def __init__(
        self,
        message: str,
        *,
        param: str | None = None,
        code: str = "invalid_request",
        status: int = 400,
        type_: str = "invalid_request_error",
    ) -> None:
        super().__init__(message)
        self.message, self.param, self.code, self.status, self.type = message, param, code, status, type_

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class RawJSON(str):
    """A pre-rendered JSON fragment that ``dumps`` splices in verbatim."""


def float_rows_json(vectors: np.ndarray) -> list[str]:
    """Each row as a JSON array with float32 precision (7 significant digits).

    ``json.dumps(vectors.tolist())`` spends ~0.7 ms per 512-d row printing 17-digit doubles,
    about a tenth of the encode time; ``savetxt`` is 3x faster and halves the response size."""
    if not np.isfinite(vectors).all():
        raise RequestError(
            "the model produced a non-finite vector", code="internal_error", status=500, type_="server_error"
        )
    if len(vectors) == 0:
        return []
    buf = io.StringIO()
    np.savetxt(buf, vectors.reshape(len(vectors), -1), fmt="%.7g", delimiter=",")
    return ["[" + line + "]" for line in buf.getvalue().splitlines()]


def dumps(payload: Any) -> bytes:
    """``json.dumps`` that writes ``RawJSON`` values as they are."""
    parts: list[str] = []

    def walk(v: Any) -> None:
        if isinstance(v, RawJSON):
            parts.append(v)
        elif isinstance(v, dict):
            parts.append("{")
            for n, (k, item) in enumerate(v.items()):
                parts.append(("," if n else "") + json.dumps(str(k)) + ":")
                walk(item)
            parts.append("}")
        elif isinstance(v, (list, tuple)):
            parts.append("[")
            for n, item in enumerate(v):
                if n:
                    parts.append(",")
                walk(item)
            parts.append("]")
        else:
            parts.append(json.dumps(v, ensure_ascii=False))

    walk(payload)
    return "".join(parts).encode("utf-8")


class EmbeddingService:
    """The HTTP-independent part: validates bodies and runs the model."""

    def __init__(self, model: LoadedModel) -> None:
        self.model = model
        self._lock = threading.Lock()

    # --- helpers ------------------------------------------------------------------------------
    def _check_model(self, body: dict[str, Any]) -> None:
        name = body.get("model")
        if name is None:
            return  # OpenAI requires it; being lenient costs nothing since only one model is served
        if name != self.model.name:
            raise RequestError(
                f"model {name!r} is not served here (this service runs {self.model.name!r}); "
                "a collection built with another model must be rebuilt, not pointed at this one",
                param="model",
                code="model_not_found",
            )

    def encode(self, texts: list[str]) -> np.ndarray:
        out = np.empty((len(texts), self.model.dim), dtype=np.float32)
        step = self.model.info.batch_size
        for start in range(0, len(texts), step):
            with self._lock:
                out[start : start + step] = self.model.encode(texts[start : start + step])
        return out

    # --- endpoints ----------------------------------------------------------------------------
    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [self.model_card()]}

    def model_card(self) -> dict[str, Any]:
        return {
            "id": self.model.name,
            "object": "model",
            "created": 0,
            "owned_by": "openkb",
            "dimensions": self.model.dim,
            "description": self.model.info.description,
        }

    def embeddings(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise RequestError("request body must be a JSON object")
        self._check_model(body)
        raw = body.get("input")
        if isinstance(raw, str):
            texts = [raw]
        elif isinstance(raw, list) and raw and all(isinstance(t, str) for t in raw):
            texts = raw
        elif isinstance(raw, list) and not raw:
            raise RequestError("'input' must not be empty", param="input")
        else:
            raise RequestError(
                "'input' must be a string or a list of strings (token arrays are not supported)", param="input"
            )
        if len(texts) > MAX_INPUTS:
            raise RequestError(f"'input' has {len(texts)} items; at most {MAX_INPUTS} per request", param="input")
        dims = body.get("dimensions")
        if dims is not None and (isinstance(dims, bool) or not isinstance(dims, int) or dims != self.model.dim):
            raise RequestError(
                f"model {self.model.name!r} produces {self.model.dim}-dimensional vectors; "
                f"'dimensions' must be {self.model.dim} or omitted (got {dims!r})",
                param="dimensions",
            )
        fmt = body.get("encoding_format", "float")
        if fmt not in ("float", "base64"):
            raise RequestError("'encoding_format' must be 'float' or 'base64'", param="encoding_format")

        vectors = self.encode(texts)
        if fmt == "base64":
            items: list[Any] = [base64.b64encode(v.astype("<f4").tobytes()).decode("ascii") for v in vectors]
        else:
            items = [RawJSON(row) for row in float_rows_json(vectors)]
        tokens = sum(estimate_tokens(t) for t in texts)
        return {
            "object": "list",
            "data": [{"object": "embedding", "index": i, "embedding": e} for i, e in enumerate(items)],
            "model": self.model.name,
            "usage": {"prompt_tokens": tokens, "total_tokens": tokens},
        }

    def rerank(self, body: Any) -> dict[str, Any]:
        if not isinstance(body, dict):
            raise RequestError("request body must be a JSON object")
        self._check_model(body)
        query, docs = body.get("query"), body.get("documents")
        if not isinstance(query, str) or not query:
            raise RequestError("'query' must be a non-empty string", param="query")
        if not isinstance(docs, list) or len(docs) > MAX_INPUTS:
            raise RequestError(f"'documents' must be a list of at most {MAX_INPUTS} items", param="documents")
        texts: list[str] = []
        for d in docs:
            text = d.get("text") if isinstance(d, dict) else d
            if not isinstance(text, str):
                raise RequestError('each document must be a string or {"text": str}', param="documents")
            texts.append(text)
        top_n = body.get("top_n")
        if top_n is not None and (isinstance(top_n, bool) or not isinstance(top_n, int) or top_n < 1):
            raise RequestError("'top_n' must be a positive integer", param="top_n")
        if not texts:
            return {"results": [], "meta": {"billed_units": {"search_units": 0}}}
        vecs = self.encode([query, *texts])
        scores = (vecs[1:] @ vecs[0] + 1.0) / 2.0  # cosine in [-1, 1] -> relevance in [0, 1]
        order = np.argsort(-scores, kind="stable")[: top_n or len(texts)]
        return {
            "results": [{"index": int(i), "relevance_score": float(scores[i])} for i in order],
            "meta": {"billed_units": {"search_units": 1}},
        }


class _Handler(BaseHTTPRequestHandler):
    server_version = "openkb-embedder"
    protocol_version = "HTTP/1.1"  # keep-alive: Milvus sends one request per insert batch/query
    # Headers and body go out in two writes; with Nagle on, the body waits for the client's
    # delayed ACK of the headers (up to 40 ms on Linux), which was most of a query's latency.
    disable_nagle_algorithm = True
    service: EmbeddingService  # set on the subclass made by make_server

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = dumps(payload)
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        svc = self.service
        if path == "/health":
            self._send(200, {"status": "ok", "model": svc.model.name, "dimensions": svc.model.dim})
        elif path == "/v1/models":
            self._send(200, svc.models())
        elif path == f"/v1/models/{svc.model.name}":
            self._send(200, svc.model_card())
        else:
            self._send(404, RequestError(f"no route GET {path}", code="not_found", status=404).body())

    def do_POST(self) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        started = time.perf_counter()
        try:
            if path not in ("/v1/embeddings", "/v1/rerank"):
                raise RequestError(f"no route POST {path}", code="not_found", status=404)
            length = int(self.headers.get("Content-Length") or 0)
            if length > MAX_BODY_BYTES:
                self.close_connection = True  # the unread body would poison a kept-alive connection
                raise RequestError(
                    f"request body is {length} bytes; at most {MAX_BODY_BYTES}", code="payload_too_large", status=413
                )
            try:
                body = json.loads(self.rfile.read(length) or b"null")
            except (ValueError, UnicodeDecodeError) as exc:
                raise RequestError(f"request body is not valid JSON: {exc}") from exc
            result = self.service.embeddings(body) if path == "/v1/embeddings" else self.service.rerank(body)
        except RequestError as exc:
            log.info("POST %s -> %d %s", path, exc.status, exc.message)
            self._send(exc.status, exc.body())
            return
        except Exception as exc:  # report, keep serving
            log.exception("POST %s failed", path)
            self._send(
                500,
                RequestError(
                    f"internal error: {type(exc).__name__}", code="internal_error", status=500, type_="server_error"
                ).body(),
            )
            return
        log.debug(
            "POST %s %d items in %.1f ms",
            path,
            len(result.get("data") or result.get("results") or []),
            (time.perf_counter() - started) * 1000,
        )
        self._send(200, result)


def make_server(model: LoadedModel, host: str, port: int) -> ThreadingHTTPServer:
    handler = type("Handler", (_Handler,), {"service": EmbeddingService(model)})
    server = ThreadingHTTPServer((host, port), handler)
    server.daemon_threads = True
    return server
