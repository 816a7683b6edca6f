"""Retrievers behind the search tools: a local index folder or a Search-R1-style server, and their fingerprints.

A retriever answers ``search_batch(queries, k) -> [[SearchHit, ...], ...]`` and states :meth:`fingerprint`:
the corpus hash, retriever kind and model, and index type that decide which passages come back (with the
tool's top-k, what makes two scores comparable).

- :func:`open_index` opens an index folder written by ``agentflow-env build-index`` (BM25 or dense);
- :class:`RemoteRetriever` speaks Search-R1's wire format (``POST /retrieve {"queries", "topk",
  "return_scores"}`` -> ``{"result": [[{"document": {"id", "contents"}, "score"}, ...], ...]}``), so
  ``agentflow-env retrieval-server`` or an existing Search-R1 / SkyRL / verl retrieval server plugs in;
- :func:`search_r1_document` and :func:`hit_from_document` convert between a hit and Search-R1's
  ``contents`` (``"Title"\\ntext``).
"""

from __future__ import annotations

import hashlib
import http.client
import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlsplit

from agentflow_env.error import ConfigError, DataError, ToolError
from agentflow_env.tools.bm25 import BM25Index, SearchHit
from agentflow_env.tools.bm25.check import META_FILE

__all__ = [
    "RETRIEVER_ENV",
    "RETRIEVER_TOKEN_ENV",
    "RemoteRetriever",
    "Retriever",
    "hit_from_document",
    "index_fingerprint",
    "open_index",
    "search_r1_document",
]

#: a retriever URL every search tool without an index of its own uses (``http://HOST:PORT/retrieve``)
RETRIEVER_ENV = "AGENTFLOW_RETRIEVER_URL"
#: the bearer token sent to (and required by) ``agentflow-env retrieval-server`` beyond loopback
RETRIEVER_TOKEN_ENV = "AGENTFLOW_RETRIEVER_TOKEN"


class Retriever(Protocol):
    """What a search tool needs from its backend."""

    def search_batch(self, queries: Sequence[str], k: int = 5) -> list[list[SearchHit]]: ...

    def fingerprint(self) -> dict[str, Any]: ...


# --------------------------------------------------------------------------------------------- documents


def search_r1_document(hit: SearchHit) -> dict[str, Any]:
    """A hit as Search-R1's corpus row: ``{"id", "contents": "\\"Title\\"\\ntext"}``."""
    return {"id": hit.id, "contents": f'"{hit.title}"\n{hit.text}'}


def hit_from_document(doc: Any, rank: int, score: float | None) -> SearchHit:
    """A Search-R1 document (``contents`` is ``"Title"\\ntext``; ``title``/``text`` fields also read) as a hit."""
    if isinstance(doc, str):
        doc = {"contents": doc}
    if not isinstance(doc, dict):
        raise ToolError(f"a retrieved document must be a JSON object, got {type(doc).__name__}")
    if "contents" in doc:
        first, _, rest = str(doc["contents"]).partition("\n")
        title, text = first.strip().strip('"'), rest
    else:
        title, text = str(doc.get("title", "")), str(doc.get("text", ""))
    return SearchHit(rank, float(score if score is not None else 0.0), title, text, str(doc.get("id", rank)))


# --------------------------------------------------------------------------------------------- local indexes


def open_index(path: str | os.PathLike[str], *, verify: bool = True, encoder: str | None = None) -> Any:
    """Open an index folder by its metadata: a BM25 index or a dense (FAISS) one (``encoder``: its encoder's
    folder, when not where the build found it)."""
    folder = Path(path)
    meta_path = folder / META_FILE
    fmt = None
    if meta_path.is_file():
        try:
            fmt = json.loads(meta_path.read_bytes()).get("format")
        except (ValueError, UnicodeDecodeError, AttributeError):
            fmt = None
    if fmt == "agentflow-dense":
        from agentflow_env.tools.dense import DenseIndex

        return DenseIndex.load(folder, encoder_path=encoder)
    return BM25Index.load(folder, verify=verify)


def index_fingerprint(index: Any) -> dict[str, Any]:
    """The fingerprint of a local index: its own :meth:`fingerprint`, or one read from a BM25 index's metadata."""
    own = getattr(index, "fingerprint", None)
    if callable(own):
        return dict(own())
    if not isinstance(index, BM25Index):
        return {"retriever": type(index).__name__, "corpus_hash": None, "index_type": None, "model": None}
    p = index.params
    model = f"bm25(k1={p.get('k1')},b={p.get('b')},stopwords={p.get('stopwords')},stem={p.get('stem')})"
    return {
        "retriever": "bm25",
        "model": model,
        "index_type": "bm25-csc",
        "corpus_hash": _bm25_corpus_hash(index),
        "passages": len(index),
    }


def _bm25_corpus_hash(index: BM25Index) -> str:
    cached = getattr(index, "_corpus_hash", None)
    if cached:
        return str(cached)
    checksum = None
    if index.path is not None:
        try:
            meta = json.loads((index.path / META_FILE).read_bytes())
            checksum = meta["checksums"]["files"]["passages.jsonl"]
        except (OSError, ValueError, KeyError, TypeError):
            checksum = None
    if checksum:
        value = f"crc32:{checksum['crc32']}:{checksum['bytes']}"
    else:  # built in memory: hash the records once
        digest = hashlib.sha256()
        for rec in index.store:
            digest.update(json.dumps(rec, ensure_ascii=False, sort_keys=True).encode("utf-8") + b"\n")
        value = f"sha256:{digest.hexdigest()[:16]}"
    index._corpus_hash = value  # type: ignore[attr-defined]
    return value


# --------------------------------------------------------------------------------------------- remote


class RemoteRetriever:
    """A Search-R1-style retrieval server at ``url`` (``http://HOST:PORT/retrieve``), one keep-alive connection
    per thread; a failed request is retried once on a fresh connection (retrieval is idempotent)."""

    def __init__(self, url: str, *, token: str | None = None, timeout_s: float = 30.0):
        parts = urlsplit(url)
        if parts.scheme != "http" or not parts.hostname:
            raise ConfigError(f"retriever url {url!r}: expected http://HOST:PORT/retrieve")
        self.url = url
        self.host, self.port = parts.hostname, parts.port or 80
        self.path = parts.path or "/retrieve"
        self.timeout_s = float(timeout_s)
        token = token if token is not None else os.environ.get(RETRIEVER_TOKEN_ENV) or None
        self._headers = {"Content-Type": "application/json"}
        if token:
            self._headers["Authorization"] = f"Bearer {token}"
        self._local = threading.local()
        self._fingerprint: dict[str, Any] | None = None

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout_s)
            self._local.conn = conn
        return conn

    def _request(self, method: str, path: str, body: Any = None) -> Any:
        payload = None if body is None else json.dumps(body).encode("utf-8")
        for attempt in range(2):
            conn = self._conn()
            try:
                conn.request(method, path, body=payload, headers=self._headers)
                reply = conn.getresponse()
                data = reply.read()
                if reply.getheader("Connection", "").lower() == "close" or reply.version == 10:
                    conn.close()
                break
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                self._local.conn = None
                if attempt == 0:
                    continue
                raise ToolError(
                    f"the retriever at {self.url} could not be reached ({type(exc).__name__}: {exc}); "
                    "is it running? start one with `agentflow-env retrieval-server --index DIR`"
                ) from exc
        try:
            out = json.loads(data.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise ToolError(
                f"the retriever at {self.url} answered {reply.status} with a body that is not JSON"
            ) from None
        if reply.status != 200:
            detail = out.get("error") or out.get("detail") if isinstance(out, dict) else out
            raise ToolError(f"the retriever at {self.url} refused {method} {path} ({reply.status}): {detail}")
        return out

    def search_batch(self, queries: Sequence[str], k: int = 5) -> list[list[SearchHit]]:
        if not queries:
            return []
        out = self._request("POST", self.path, {"queries": list(queries), "topk": int(k), "return_scores": True})
        result = out.get("result") if isinstance(out, dict) else None
        if not isinstance(result, list) or len(result) != len(queries):
            raise ToolError(
                f"the retriever at {self.url} did not answer Search-R1's format "
                f"({{'result': [one list per query]}} for {len(queries)} queries)"
            )
        return [self._hits(items, k) for items in result]

    @staticmethod
    def _hits(items: Any, k: int) -> list[SearchHit]:
        if not isinstance(items, list):
            raise ToolError("a retriever result must be a list of documents per query")
        hits = []
        for rank, item in enumerate(items[:k], 1):
            if isinstance(item, dict) and "document" in item:
                hits.append(hit_from_document(item["document"], rank, item.get("score")))
            else:  # return_scores ignored: bare documents
                hits.append(hit_from_document(item, rank, None))
        return hits

    def search(self, query: str, k: int = 5) -> list[SearchHit]:
        return self.search_batch([query], k)[0]

    def fingerprint(self) -> dict[str, Any]:
        """Ours answers ``GET /fingerprint``; another server's corpus and model are unknown (``None``)."""
        if self._fingerprint is None:
            base = {"retriever": "remote", "model": None, "index_type": None, "corpus_hash": None}
            try:
                got = self._request("GET", "/fingerprint")
                if isinstance(got, dict) and "retriever" in got:
                    base = {k: v for k, v in got.items() if k != "top_k"}
            except (ToolError, DataError):
                pass
            self._fingerprint = {**base, "url": self.url}
        return dict(self._fingerprint)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    def __repr__(self) -> str:
        return f"RemoteRetriever({self.url!r})"
