"""Real backends for AgentFlow's three search tools, for users with keys and network (``tool_backends="online"``);
the offline stand-ins stay the default.

- :class:`GeminiGroundingTool` (``Ground_Google_Search_Tool``): Gemini with Google Search grounding through the
  ``google-genai`` client (``GOOGLE_API_KEY``), citations ``[n](uri)`` inserted at each grounded segment's end
  and redirect links resolved, as AgentFlow's tool does.
- :class:`WebRagTool` (``Web_RAG_Search_Tool``): fetch the URL, keep the page's text, split it into 200-word
  chunks overlapping by 20, embed query and chunks (an OpenAI-compatible ``/embeddings`` endpoint,
  ``text-embedding-3-small``), keep the 10 closest chunks by cosine, and have the tool's LLM answer from them.
- :class:`MediaWikiTool` (``Wikipedia_RAG_Search_Tool``): the MediaWiki API's search (10 titles), each page's
  extract and address, the LLM's page selection (AgentFlow's step: up to 3 titles), then the Web RAG tool on
  each selected page.

The LLM prompts of the last two are AgentFlow's own (read from the checkout) under ``prompts="agentflow:PATH"``,
else this project's wording (:class:`OnlineTexts`). Failures come back as text, never raise, as in AgentFlow.
"""

from __future__ import annotations

import html.parser
import json
import math
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentflow_env.engines.base import SamplingParams
from agentflow_env.engines.ledger import generate_as
from agentflow_env.error import ConfigError
from agentflow_env.paper_flow.toolbox import PaperTool

__all__ = ["GeminiGroundingTool", "MediaWikiTool", "OnlineTexts", "WebRagTool", "chunk_words", "online_toolbox"]

USER_AGENT = "agentflow-env/0.1 (+https://github.com/; research tool)"
WIKIPEDIA_API = "https://en.wikipedia.org/w/api.php"


@dataclass(frozen=True)
class OnlineTexts:
    """The two LLM prompts of the online tools: the Web RAG summary and the Wikipedia page selection."""

    summarize: Callable[[str, str], str]  # (query, numbered chunks) -> prompt
    select: Callable[[str, str], str]  # (query, numbered titles) -> prompt


def _builtin_summarize(query: str, reference: str) -> str:
    return (
        "Answer the query from the reference chunks of one web page below.\n"
        "Use only facts the chunks state; write one short paragraph in your own words, and say so when the "
        f"chunks do not answer it.\n\nQuery: {query}\n\nReference chunks:\n{reference}\n\nAnswer:"
    )


def _builtin_select(query: str, candidates: str) -> str:
    return (
        "Pick the Wikipedia pages most likely to answer the query (at most 3) from the numbered search "
        f"results.\n\nQuery: {query}\nSearch results:\n{candidates}\n\n"
        'Reply with JSON: {"matched_queries": [titles], "matched_query_ids": [numbers]}'
    )


BUILTIN_TEXTS = OnlineTexts(_builtin_summarize, _builtin_select)


# ------------------------------------------------------------------ HTTP
def _get(url: str, timeout: float, params: dict[str, Any] | None = None) -> tuple[str, bytes]:
    """``(final url, body)`` of a GET (redirects followed)."""
    if params:
        url = url + ("&" if "?" in url else "?") + urllib.parse.urlencode(params)
    request = urllib.request.Request(url, headers={"User-Agent": USER_AGENT})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return response.geturl(), response.read(5_000_000)


class _Text(html.parser.HTMLParser):
    """The visible text of a page, one stripped piece per line (scripts and styles dropped)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.pieces: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: Any) -> None:
        if tag in ("script", "style", "noscript"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("script", "style", "noscript") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip and data.strip():
            self.pieces.append(data.strip())


def page_text(body: bytes) -> str:
    parser = _Text()
    parser.feed(body.decode("utf-8", "replace"))
    return "\n".join(parser.pieces)


def chunk_words(text: str, size: int = 200, overlap: int = 20) -> list[str]:
    """AgentFlow's chunking: ``size`` words a chunk, each starting ``overlap`` words before the last one ended."""
    words = text.split()
    chunks, at = [], 0
    while True:
        end = min(at + size, len(words))
        chunks.append(" ".join(words[at:end]))
        if end >= len(words):
            return chunks
        at = end - overlap


def _cosine(a: list[float], b: list[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


# ------------------------------------------------------------------ the tools
class GeminiGroundingTool(PaperTool):
    """``Ground_Google_Search_Tool``: Gemini answers with Google Search grounding (``google-genai``)."""

    online_backend = "online: Gemini with Google Search grounding (google-genai)"

    def __init__(
        self,
        name: str,
        model: str = "gemini-2.5-flash",
        api_key: str | None = None,
        base_url: str | None = None,
        retries: int = 5,
    ):
        super().__init__(name, ("query", "add_citations"))
        key = api_key or os.environ.get("GOOGLE_API_KEY")
        if not key:
            raise ConfigError(f"{name} (online) needs GOOGLE_API_KEY, a Gemini API key")
        try:
            from google import genai
            from google.genai import types
        except ImportError:
            raise ConfigError(f"{name} (online) needs google-genai: pip install 'agentflow-env[online]'") from None
        # the Gemini API's REST version (the client picks v1 once a base URL is given)
        options = types.HttpOptions(base_url=base_url, api_version="v1beta") if base_url else None
        self.client = genai.Client(api_key=key, http_options=options)
        self.types = types
        self.model = model
        self.retries = int(retries)

    def _call(self, query: str, add_citations: bool = True) -> str:  # type: ignore[override]
        config = self.types.GenerateContentConfig(tools=[self.types.Tool(google_search=self.types.GoogleSearch())])
        last = ""
        for _ in range(self.retries):
            try:
                response = self.client.models.generate_content(model=self.model, contents=query, config=config)
                text = response.text
                break
            except Exception as exc:  # retried, then reported as the result
                last = f"{type(exc).__name__}: {exc}"
        else:
            return f"Gemini search failed after {self.retries} tries: {last}"
        if text is None:
            return "Gemini search returned no text"
        if add_citations:
            text = self._cite(response, text)
        for url in _citation_urls(text):
            text = text.replace(url, self._resolve(url))
        return text

    @staticmethod
    def _cite(response: Any, text: str) -> str:
        try:
            meta = response.candidates[0].grounding_metadata
            supports, chunks = meta.grounding_supports or [], meta.grounding_chunks or []
        except (AttributeError, IndexError, TypeError):
            return text
        for support in sorted(supports, key=lambda s: s.segment.end_index or 0, reverse=True):
            end = support.segment.end_index or 0
            links = [
                f"[{i + 1}]({chunks[i].web.uri})" for i in support.grounding_chunk_indices or [] if i < len(chunks)
            ]
            if links:
                text = text[:end] + ", ".join(links) + text[end:]
        return text

    def _resolve(self, url: str) -> str:
        try:
            return _get(url, min(8.0, self.timeout))[0]
        except (OSError, ValueError):
            return url


def _citation_urls(text: str) -> list[str]:
    import re

    return re.findall(r"\[\d+\]\((https?://[^\s)]+)\)", text)


class WebRagTool(PaperTool):
    """``Web_RAG_Search_Tool``: a page's text, chunked, embedded, the closest chunks summarised by the LLM."""

    online_backend = "online: URL fetch, embeddings, top-10 chunks summarised by the tool LLM"

    def __init__(
        self,
        name: str,
        engine: Any,
        texts: OnlineTexts = BUILTIN_TEXTS,
        embed_model: str = "text-embedding-3-small",
        embed_base_url: str | None = None,
        embed_api_key: str | None = None,
        top_k: int = 10,
        sampling: SamplingParams | None = None,
    ):
        super().__init__(name, ("query", "url"))
        key = embed_api_key or os.environ.get("OPENAI_API_KEY")
        if not key:
            raise ConfigError(f"{name} (online) needs OPENAI_API_KEY for its embeddings")
        import openai

        self.embedder = openai.OpenAI(api_key=key, base_url=embed_base_url or os.environ.get("OPENAI_BASE_URL"))
        self.engine, self.texts, self.embed_model, self.top_k = engine, texts, embed_model, int(top_k)
        self.sampling = sampling or SamplingParams(temperature=0.0, top_p=1.0, max_tokens=2048)

    def _call(self, query: str, url: str) -> str:  # type: ignore[override]
        try:
            _, body = _get(url, min(10.0, self.timeout))
            text = page_text(body)
        except (OSError, ValueError) as exc:
            return f"Error fetching {url}: {exc}"
        chunks = chunk_words(text)
        if not text.strip():
            return f"Error: no text could be read from {url}"
        try:
            vectors = [
                d.embedding
                for d in self.embedder.embeddings.create(input=[query, *chunks], model=self.embed_model).data
            ]
        except Exception as exc:  # the embeddings endpoint's failure is the result
            return f"Error embedding the page: {type(exc).__name__}: {exc}"
        order = sorted(range(len(chunks)), key=lambda i: _cosine(vectors[0], vectors[i + 1]), reverse=True)
        reference = "\n".join(f"Chunk [{n + 1}]\n{chunks[i]}" for n, i in enumerate(order[: self.top_k]))
        prompts = [self.texts.summarize(query, reference)]
        return generate_as(self.engine, prompts, self.sampling, role="tools", name=self.name)[0]


class MediaWikiTool(PaperTool):
    """``Wikipedia_RAG_Search_Tool``: MediaWiki search, the LLM's page selection, Web RAG on the chosen pages."""

    online_backend = "online: MediaWiki API search, LLM page selection, Web RAG on the selected pages"

    def __init__(
        self,
        name: str,
        engine: Any,
        web_rag: WebRagTool,
        texts: OnlineTexts = BUILTIN_TEXTS,
        api_url: str = WIKIPEDIA_API,
        max_pages: int = 10,
        abstract_chars: int = 100,
    ):
        super().__init__(name, ("query",))
        self.engine, self.web_rag, self.texts, self.api_url = engine, web_rag, texts, api_url
        self.max_pages, self.abstract_chars = int(max_pages), int(abstract_chars)

    def _api(self, **params: Any) -> dict[str, Any]:
        _, body = _get(self.api_url, min(10.0, self.timeout), {"format": "json", "formatversion": 2, **params})
        return json.loads(body)

    def _pages(self, query: str) -> list[dict[str, Any]]:
        found = self._api(action="query", list="search", srsearch=query, srlimit=self.max_pages, srprop="")
        titles = [hit["title"] for hit in found.get("query", {}).get("search", [])][: self.max_pages]
        pages = []
        for title in titles:
            try:
                data = self._api(
                    action="query", prop="extracts|info", explaintext=1, inprop="url", redirects=1, titles=title
                )
                page = data["query"]["pages"][0]
                text = page["extract"]
                cut = text[: self.abstract_chars] + "... [truncated]" if len(text) > self.abstract_chars else text
                pages.append({"title": title, "url": page["fullurl"], "abstract": cut})
            except (OSError, ValueError, KeyError, IndexError, TypeError):
                url = "https://en.wikipedia.org/wiki/" + title.replace(" ", "_")
                pages.append({"title": title, "url": url, "abstract": "Page text not read; use the URL for it."})
        return pages

    def _select(self, query: str, titles: list[str]) -> list[int]:
        listing = "\n".join(f"{i}. {t}" for i, t in enumerate(titles))
        sampling = SamplingParams(
            temperature=0.0,
            top_p=1.0,
            max_tokens=512,
            response_format={
                "type": "json_schema",
                "json_schema": {
                    "name": "Select_Relevant_Queries",
                    "strict": True,
                    "schema": {
                        "type": "object",
                        "properties": {
                            "matched_queries": {"type": "array", "items": {"type": "string"}},
                            "matched_query_ids": {"type": "array", "items": {"type": "integer"}},
                        },
                        "required": ["matched_queries", "matched_query_ids"],
                        "additionalProperties": False,
                    },
                },
            },
        )
        try:
            prompts = [self.texts.select(query, listing)]
            reply = json.loads(generate_as(self.engine, prompts, sampling, role="tools", name=self.name)[0])
            return [int(i) for i in reply["matched_query_ids"] if 0 <= int(i) < len(titles)]
        except Exception:  # as in AgentFlow: a failed selection selects nothing
            return []

    def _call(self, query: str) -> Any:  # type: ignore[override]
        try:
            pages = self._pages(query)
        except (OSError, ValueError) as exc:
            return {"query": query, "relevant_pages": [], "other_pages": [], "error": f"Wikipedia search failed: {exc}"}
        if not pages:
            return {"query": query, "relevant_pages": [], "other_pages": [], "error": f"No results for {query!r}"}
        chosen = self._select(query, [p["title"] for p in pages])
        relevant = [pages[i] for i in chosen]
        for page in relevant:
            self.web_rag.timeout = max(1.0, self.timeout)
            page["retrieved_information"] = self.web_rag.execute(query=query, url=page["url"])
        others = [p for i, p in enumerate(pages) if i not in chosen]
        return {"query": query, "relevant_pages": relevant, "other_pages": others}


def online_toolbox(
    names: list[str], engine: Any, texts: OnlineTexts = BUILTIN_TEXTS, **options: Any
) -> dict[str, PaperTool]:
    """The online backends among ``names`` (``options``: ``gemini_model``, ``gemini_base_url``,
    ``embed_model``, ``embed_base_url``, ``wikipedia_api``); missing keys are a :class:`ConfigError`."""
    from agentflow_env.paper_flow.toolbox import GOOGLE_SEARCH, WEB_RAG, WIKIPEDIA

    out: dict[str, PaperTool] = {}
    if GOOGLE_SEARCH in names:
        out[GOOGLE_SEARCH] = GeminiGroundingTool(
            GOOGLE_SEARCH, options.get("gemini_model", "gemini-2.5-flash"), base_url=options.get("gemini_base_url")
        )
    if WEB_RAG in names or WIKIPEDIA in names:
        rag = WebRagTool(
            WEB_RAG,
            engine,
            texts,
            embed_model=options.get("embed_model", "text-embedding-3-small"),
            embed_base_url=options.get("embed_base_url"),
        )
        if WEB_RAG in names:
            out[WEB_RAG] = rag
        if WIKIPEDIA in names:
            out[WIKIPEDIA] = MediaWikiTool(WIKIPEDIA, engine, rag, texts, options.get("wikipedia_api", WIKIPEDIA_API))
    return out
