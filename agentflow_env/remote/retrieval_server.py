"""``agentflow-env retrieval-server --index DIR --port P``: an index folder served in Search-R1's wire format.

- ``POST /retrieve`` ``{"queries": [...], "topk": k, "return_scores": true}`` ->
  ``{"result": [[{"document": {"id", "contents": "\\"Title\\"\\ntext"}, "score": s}, ...], ...]}``, one list
  per query (with ``return_scores`` false, each list holds the bare documents, as Search-R1's server answers);
- ``GET /fingerprint``: the index's retrieval fingerprint (corpus hash, retriever kind and model, index type);
- ``GET /health``: ``{"ok", "passages", "requests", "queries"}``.

So Search-R1, SkyRL, GEM or verl recipes can use our BM25 or dense index, and our search tools can use this
server (``retriever="http://HOST:PORT/retrieve"``). All queries of a request are scored in one batched call on
the server's thread pool. Serving, limits and the token are ``agentflow_env.remote.http_serving``'s, as for
``env-server``: loopback by default; beyond it a token (``--token`` or ``$AGENTFLOW_RETRIEVER_TOKEN``) is required.
"""

from __future__ import annotations

import argparse
import asyncio
import os
from http import HTTPStatus
from typing import Any

from agentflow_env.error import ConfigError
from agentflow_env.remote.http_serving import (
    HTTPError,
    JsonHttpServer,
    add_serving_arguments,
    dumps,
    json_body,
    serving_kwargs,
)
from agentflow_env.tools.retrieval import RETRIEVER_TOKEN_ENV, index_fingerprint, open_index, search_r1_document

__all__ = ["MAX_QUERIES", "MAX_TOPK", "RetrievalServer", "configure"]

MAX_QUERIES = 4096  # queries of one request
MAX_TOPK = 1000
DEFAULT_TOPK = 3  # Search-R1's retrieval_topk


class RetrievalServer(JsonHttpServer):
    """Serves ``index`` (anything with ``search_batch(queries, k)``, e.g. a BM25 or dense index) at ``/retrieve``."""

    token_env = RETRIEVER_TOKEN_ENV
    server_name = "retrieval-server"

    def __init__(
        self, index: Any, host: str = "127.0.0.1", port: int = 8000, *, owns_index: bool = True, **kwargs: Any
    ):
        super().__init__(host, port, **kwargs)
        self.index = index
        self.owns_index = owns_index  # closed with the server (False: the caller keeps using it)
        self.requests = 0
        self.queries = 0
        self._fingerprint = index_fingerprint(index)

    def retrieve(self, body: dict[str, Any]) -> dict[str, Any]:
        """Search-R1's ``/retrieve``: one list of documents (with scores when asked) per query."""
        queries = body.get("queries")
        if isinstance(queries, str):
            queries = [queries]
        if not isinstance(queries, list) or not all(isinstance(q, str) for q in queries):
            raise HTTPError(HTTPStatus.BAD_REQUEST, "'queries' must be a list of strings")
        if len(queries) > MAX_QUERIES:
            raise HTTPError(HTTPStatus.BAD_REQUEST, f"at most {MAX_QUERIES} queries per request, got {len(queries)}")
        topk = body.get("topk") or DEFAULT_TOPK
        if not isinstance(topk, int) or isinstance(topk, bool) or not 1 <= topk <= MAX_TOPK:
            raise HTTPError(HTTPStatus.BAD_REQUEST, f"'topk' must be an integer from 1 to {MAX_TOPK}")
        scores = bool(body.get("return_scores", False))
        self.requests += 1
        self.queries += len(queries)
        result = []
        for hits in self.index.search_batch(queries, topk):
            docs = [search_r1_document(h) for h in hits]
            result.append(
                [{"document": d, "score": h.score} for d, h in zip(docs, hits, strict=True)] if scores else docs
            )
        return {"result": result}

    def health(self) -> dict[str, Any]:
        return {"ok": True, "passages": len(self.index), "requests": self.requests, "queries": self.queries}

    def fingerprint(self) -> dict[str, Any]:
        return dict(self._fingerprint)

    async def _route(self, method: str, path: str, raw: bytes) -> bytes:
        route = path.split("?")[0].rstrip("/")
        if method == "POST" and route == "/retrieve":
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(self._pool, lambda: dumps(self.retrieve(json_body(raw))))
        if method == "GET" and route == "/health":
            return dumps(self.health())
        if method == "GET" and route == "/fingerprint":
            return dumps(self.fingerprint())
        raise HTTPError(HTTPStatus.NOT_FOUND, f"no route {method[:20]} {path[:200]}; POST /retrieve is the API")

    def _on_close(self) -> None:
        super()._on_close()
        close = getattr(self.index, "close", None)
        if self.owns_index and callable(close):
            close()


# ------------------------------------------------------------------ CLI
def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Serve an index folder (agentflow-env build-index) in Search-R1's format: POST /retrieve "
        '{"queries": [...], "topk": k, "return_scores": true}.'
    )
    parser.add_argument("--index", required=True, help="index folder written by `agentflow-env build-index`")
    add_serving_arguments(parser, port=8000, token_env=RETRIEVER_TOKEN_ENV, max_connections=256)
    parser.add_argument("--workers", type=int, default=None, help="threads answering requests (default: 4 per CPU)")
    parser.add_argument("--encoder", default=None, help="a dense index's encoder folder (default: where it was built)")
    parser.add_argument("--no-verify", action="store_true", help="skip the index's checksums on opening")
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    if not os.path.isdir(args.index):
        raise ConfigError(f"--index {args.index}: no such folder; build one with `agentflow-env build-index`")
    index = open_index(args.index, verify=not args.no_verify, encoder=args.encoder)
    server = RetrievalServer(
        index,
        args.host,
        args.port,
        workers=args.workers,
        **serving_kwargs(args, RETRIEVER_TOKEN_ENV),
    )
    auth = "token required" if server.needs_token else "no token"
    print(f"agentflow retrieval server on {server.url}/retrieve ({len(index)} passages, {auth})", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0
