"""Web search through a search API (Serper, Tavily or Google Custom Search), chosen by which key is set.

Base URLs can be overridden (kwarg or environment) so tests talk to a local server; errors name what to set.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from agentflow_env.tools.base import BaseTool
from agentflow_env.types import ToolResult

__all__ = ["PROVIDERS", "WebHit", "WebSearchTool"]


@dataclass
class WebHit:
    """One web result: title, address and snippet."""

    title: str
    url: str
    snippet: str


@dataclass(frozen=True)
class _Provider:
    name: str
    key_vars: tuple[str, ...]  # every one must be set
    base_url: str
    base_url_var: str


PROVIDERS: dict[str, _Provider] = {
    "serper": _Provider("serper", ("SERPER_API_KEY",), "https://google.serper.dev", "SERPER_BASE_URL"),
    "tavily": _Provider("tavily", ("TAVILY_API_KEY",), "https://api.tavily.com", "TAVILY_BASE_URL"),
    "google": _Provider(
        "google", ("GOOGLE_API_KEY", "GOOGLE_CSE_ID"), "https://www.googleapis.com", "GOOGLE_CSE_BASE_URL"
    ),
}
_KEY_HELP = "set SERPER_API_KEY, or TAVILY_API_KEY, or both GOOGLE_API_KEY and GOOGLE_CSE_ID"


class _SearchFailure(Exception):
    """A failed request, with the message the planner sees."""


class WebSearchTool(BaseTool):
    """Searches the web through Serper, Tavily or Google CSE and returns numbered results with snippets."""

    name = "Web_Search_Tool"
    description = (
        "Searches the web and returns the top results (title, address, snippet), plus a direct "
        "answer when the search API gives one. Use for recent or niche facts."
    )
    input_spec = "a web search query"
    examples = ("2024 Nobel Prize in Physics winners", "population of Reykjavik")

    def __init__(
        self,
        provider: str | None = None,
        *,
        api_key: str | None = None,
        cse_id: str | None = None,
        base_url: str | None = None,
        top_k: int = 5,
        max_chars: int = 3000,
        request_timeout: float = 15.0,
        name: str | None = None,
        description: str | None = None,
    ):
        if provider is not None and provider not in PROVIDERS:
            raise ValueError(f"unknown web search provider {provider!r}; use one of {', '.join(PROVIDERS)}")
        if name is not None:
            self.name = name
        if description is not None:
            self.description = description
        self.provider = provider
        self.api_key, self.cse_id, self.base_url = api_key, cse_id, base_url
        self.top_k = max(1, min(int(top_k), 10))
        self.max_chars = max(80, int(max_chars))
        self.request_timeout = float(request_timeout)

    # ---- configuration
    def _key(self, var: str) -> str | None:
        if var in ("SERPER_API_KEY", "TAVILY_API_KEY", "GOOGLE_API_KEY") and self.api_key:
            return self.api_key
        if var == "GOOGLE_CSE_ID" and self.cse_id:
            return self.cse_id
        return os.environ.get(var) or None

    def resolve(self) -> tuple[_Provider, dict[str, str]] | str:
        """The provider to use and its keys, or the message saying which variable to set."""
        names = [self.provider] if self.provider else list(PROVIDERS)
        for pname in names:
            prov = PROVIDERS[pname]
            keys = {var: self._key(var) for var in prov.key_vars}
            if all(keys.values()):
                return prov, {k: v for k, v in keys.items() if v}
            if self.provider:
                missing = " and ".join(v for v, val in keys.items() if not val)
                return f"{self.name} ({pname}) needs {missing}: set it in the environment"
        if os.environ.get("GOOGLE_API_KEY") and not os.environ.get("GOOGLE_CSE_ID"):
            return f"{self.name} found GOOGLE_API_KEY but not GOOGLE_CSE_ID: set GOOGLE_CSE_ID (or {_KEY_HELP})"
        return f"{self.name} has no search API key: {_KEY_HELP}"

    def _base(self, prov: _Provider) -> str:
        return (self.base_url or os.environ.get(prov.base_url_var) or prov.base_url).rstrip("/")

    # ---- running
    def _run(self, command: str, timeout: float) -> ToolResult:
        query = " ".join(command.split())
        if not query:
            return ToolResult(
                text="Error: empty query; give words to search the web for.", ok=False, error="empty query"
            )
        resolved = self.resolve()
        if isinstance(resolved, str):
            return ToolResult(text=f"Error: {resolved}.", ok=False, error=resolved)
        prov, keys = resolved
        limit = min(self.request_timeout, timeout) if timeout and timeout > 0 else self.request_timeout
        try:
            answer, hits = _CALLS[prov.name](self._base(prov), keys, query, self.top_k, limit)
        except _SearchFailure as exc:
            return ToolResult(text=f"Error: {exc}", ok=False, error=str(exc))
        return ToolResult(text=self._render(answer, hits), ok=True)

    def _render(self, answer: str | None, hits: list[WebHit]) -> str:
        parts = [f"Answer: {answer.strip()}"] if answer and answer.strip() else []
        for i, hit in enumerate(hits[: self.top_k], 1):
            parts.append(f"[{i}] {hit.title.strip()}\n{hit.url}\n{hit.snippet.strip()}".rstrip())
        if not parts:
            return "No web results for this query; try other keywords."
        text = "\n\n".join(parts)
        if len(text) > self.max_chars:
            notice = f"\n... [cut: results trimmed to {self.max_chars} of {len(text)} characters]"
            text = text[: max(0, self.max_chars - len(notice))].rstrip() + notice
        return text


# ------------------------------------------------------------------------------------------- HTTP + providers


def _request(
    url: str, *, key_var: str, timeout: float, body: dict[str, Any] | None = None, headers: dict[str, str] | None = None
) -> dict[str, Any]:
    """One HTTP call (no retries), JSON in and out; failures become messages naming what to check."""
    data = json.dumps(body).encode("utf-8") if body is not None else None
    hdrs = {"Accept": "application/json", "User-Agent": "agentflow-env"}
    if data is not None:
        hdrs["Content-Type"] = "application/json"
    hdrs.update(headers or {})
    req = urllib.request.Request(url, data=data, headers=hdrs, method="POST" if data is not None else "GET")
    host = urllib.parse.urlsplit(url).netloc
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            payload = resp.read(8 << 20)
    except urllib.error.HTTPError as exc:
        if exc.code in (401, 403):
            raise _SearchFailure(
                f"the search API at {host} rejected the key (HTTP {exc.code}); check {key_var}"
            ) from None
        if exc.code == 429:
            raise _SearchFailure(
                f"the search API at {host} is rate-limiting (HTTP 429); wait or check the quota of {key_var}"
            ) from None
        raise _SearchFailure(f"the search API at {host} answered HTTP {exc.code}") from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise _SearchFailure(
            f"could not reach the search API at {host} ({reason}); check the network "
            f"connection (the key in use is {key_var})"
        ) from None
    try:
        out = json.loads(payload)
    except ValueError:
        raise _SearchFailure(f"the search API at {host} did not answer JSON") from None
    if not isinstance(out, dict):
        raise _SearchFailure(f"the search API at {host} answered an unexpected JSON shape")
    return out


def _serper(base: str, keys: dict[str, str], query: str, k: int, timeout: float) -> tuple[str | None, list[WebHit]]:
    out = _request(
        f"{base}/search",
        key_var="SERPER_API_KEY",
        timeout=timeout,
        body={"q": query, "num": k},
        headers={"X-API-KEY": keys["SERPER_API_KEY"]},
    )
    box = out.get("answerBox") or {}
    answer = box.get("answer") or box.get("snippet") or (out.get("knowledgeGraph") or {}).get("description")
    hits = [
        WebHit(str(r.get("title", "")), str(r.get("link", "")), str(r.get("snippet", "")))
        for r in out.get("organic") or []
        if isinstance(r, dict)
    ]
    return answer, hits


def _tavily(base: str, keys: dict[str, str], query: str, k: int, timeout: float) -> tuple[str | None, list[WebHit]]:
    out = _request(
        f"{base}/search",
        key_var="TAVILY_API_KEY",
        timeout=timeout,
        body={"query": query, "max_results": k, "include_answer": True},
        headers={"Authorization": f"Bearer {keys['TAVILY_API_KEY']}"},
    )
    hits = [
        WebHit(str(r.get("title", "")), str(r.get("url", "")), str(r.get("content", "")))
        for r in out.get("results") or []
        if isinstance(r, dict)
    ]
    return out.get("answer"), hits


def _google(base: str, keys: dict[str, str], query: str, k: int, timeout: float) -> tuple[str | None, list[WebHit]]:
    params = urllib.parse.urlencode({"key": keys["GOOGLE_API_KEY"], "cx": keys["GOOGLE_CSE_ID"], "q": query, "num": k})
    out = _request(f"{base}/customsearch/v1?{params}", key_var="GOOGLE_API_KEY", timeout=timeout)
    hits = [
        WebHit(str(r.get("title", "")), str(r.get("link", "")), str(r.get("snippet", "")))
        for r in out.get("items") or []
        if isinstance(r, dict)
    ]
    return None, hits


_CALLS: dict[str, Callable[[str, dict[str, str], str, int, float], tuple[str | None, list[WebHit]]]] = {
    "serper": _serper,
    "tavily": _tavily,
    "google": _google,
}
