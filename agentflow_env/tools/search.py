"""``BM25SearchTool``: search over a local index folder (:mod:`agentflow_env.tools.bm25`, dense) or a retrieval
server in Search-R1's format (``retriever="http://HOST:PORT/retrieve"``), as a tool."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from agentflow_env.error import ToolError
from agentflow_env.tools.base import BaseTool
from agentflow_env.tools.bm25 import BM25Index, SearchHit
from agentflow_env.tools.retrieval import RETRIEVER_ENV, RemoteRetriever, index_fingerprint, open_index
from agentflow_env.types import ToolResult

__all__ = ["BM25SearchTool", "format_hits"]


def format_hits(hits: Sequence[SearchHit], max_chars: int = 2000) -> str:
    """Numbered passages with titles; the whole text is trimmed to ``max_chars`` with a visible notice."""
    if not hits:
        return "No passage matched the query; try other keywords (names, dates, distinctive words)."
    blocks = []
    for hit in hits:
        head = f"[{hit.rank}] {hit.title}".rstrip() if hit.title else f"[{hit.rank}]"
        blocks.append(f"{head}\n{hit.text.strip()}")
    text = "\n\n".join(blocks)
    if len(text) <= max_chars:
        return text
    notice = f"\n... [cut: results trimmed to {max_chars} of {len(text)} characters]"
    keep = max(0, max_chars - len(notice))
    return text[:keep].rstrip() + notice


class BM25SearchTool(BaseTool):
    """Keyword (BM25) search over a local passage corpus; returns numbered passages with titles.

    An index folder is checked when first opened (see :meth:`BM25Index.load`); ``verify=False`` skips only the
    checksums, for a very large index on a slow disk. A damaged folder makes every call answer with an error.
    """

    name = "Local_Search_Tool"
    description = (
        "Searches a local collection of passages with BM25 keyword matching and returns the best "
        "passages, numbered, with their titles. Use short keyword queries naming the entity and fact."
    )
    input_spec = "a search query (keywords or a short question)"
    examples = ("capital city of Australia", "who founded the Acme Corporation")
    env_var = "AGENTFLOW_SEARCH_INDEX"

    def __init__(
        self,
        index: BM25Index | None = None,
        *,
        index_path: str | os.PathLike[str] | None = None,
        passages: Iterable[dict[str, Any]] | None = None,
        top_k: int = 3,
        max_chars: int = 2000,
        name: str | None = None,
        description: str | None = None,
        verify: bool = True,
        retriever: str | RemoteRetriever | None = None,
    ):
        if name is not None:
            self.name = name
        if description is not None:
            self.description = description
        self.top_k = max(1, int(top_k))
        self.max_chars = max(80, int(max_chars))
        self._index = index
        self._owns_index = False  # an index handed in may be shared (e.g. cached per world): never close it
        self._index_path = Path(index_path) if index_path is not None else None
        self._passages = passages
        self._verify = verify  # check an index folder's checksums on opening (its structure is always checked)
        self._load_error: str | None = None
        self._retriever = RemoteRetriever(retriever) if isinstance(retriever, str) else retriever

    @property
    def index(self) -> Any:
        """The index, built or opened on first use."""
        if self._index is None and self._load_error is None:
            try:
                self._index = self._open()
                self._owns_index = self._index is not None
            except Exception as exc:  # reported in run(), never raised there
                self._load_error = f"{type(exc).__name__}: {exc}"
        return self._index

    def _default_path(self) -> Path | None:
        if self._index_path is not None:
            return self._index_path
        env = os.environ.get(self.env_var)
        return Path(env) if env else None

    def _open(self) -> Any:
        if self._passages is not None:
            passages, self._passages = self._passages, None
            return BM25Index.build(passages)
        if self._retriever is not None and self._index_path is None:
            return self._retriever
        path = self._default_path()
        if path is not None:
            return open_index(path, verify=self._verify)
        url = os.environ.get(RETRIEVER_ENV)
        return RemoteRetriever(url) if url else None

    def backend(self) -> dict[str, Any]:
        """What answers this tool's searches: ``{"backend": "local"|"remote"|"missing", "fingerprint": {...}}``.

        The fingerprint holds the corpus hash, retriever kind and model, index type and this tool's top-k.
        """
        index = self.index
        if index is None:
            return {"backend": "missing", "error": self._load_error or "no index and no retriever", "fingerprint": None}
        try:
            fingerprint = index_fingerprint(index)
        except Exception as exc:  # an unreachable server still states what it is
            fingerprint = {"retriever": "remote", "error": f"{type(exc).__name__}: {exc}"}
        kind = "remote" if isinstance(index, RemoteRetriever) else "local"
        return {"backend": kind, "fingerprint": {**fingerprint, "top_k": self.top_k}}

    def _missing_message(self) -> str:
        return (
            f"Error: {self.name} has no corpus. Give it one with make_tool('search', index=BM25Index...), "
            f"passages=[{{'title': ..., 'text': ...}}], index_path=DIR, or set ${self.env_var} to an index "
            f"folder (build one with `agentflow-env build-index`)."
        )

    def _run(self, command: str, timeout: float) -> ToolResult:
        index = self.index
        if index is None:
            if self._load_error:
                msg = f"Error: {self.name} could not open its index ({self._load_error})"
                return ToolResult(text=msg, ok=False, error=self._load_error)
            return ToolResult(text=self._missing_message(), ok=False, error="no search index")
        query = " ".join(command.split())
        if not query:
            return ToolResult(text="Error: empty query; give keywords to search for.", ok=False, error="empty query")
        tokenize = getattr(index, "tokenize", None)
        if tokenize is not None and not tokenize(query):
            return ToolResult(
                text="Error: the query has no searchable words (only stopwords or symbols).",
                ok=False,
                error="no searchable words",
            )
        try:
            hits = index.search(query, k=self.top_k)
        except ToolError as exc:  # a retrieval server down or answering garbage: the turn reports it
            return ToolResult(text=f"Error: {self.name}: {exc}", ok=False, error=str(exc))
        return ToolResult(text=format_hits(hits, self.max_chars), ok=True)

    def close(self) -> None:
        if self._index is not None and self._owns_index:
            self._index.close()
