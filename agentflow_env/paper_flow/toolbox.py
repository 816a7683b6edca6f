"""AgentFlow's toolbox for the paper mode: the same tool names and call signatures, run by this project's
tools. Where AgentFlow calls a web service, the tool here is a named stand-in (see ``STAND_INS``).

Tools are called with ``execute(**kwargs)`` as AgentFlow's commands do (``tool.execute(query=...)``) and
return what AgentFlow's tools return: text, or a dict for the Python coder.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import unquote, urlparse

from agentflow_env.engines.base import Engine, SamplingParams
from agentflow_env.tools.base import BaseTool, Tool
from agentflow_env.turn.memory import shorten
from agentflow_env.types import ToolResult

__all__ = [
    "GENERALIST",
    "GOOGLE_SEARCH",
    "PYTHON_CODER",
    "STAND_INS",
    "STATED_TOOLS",
    "WEB_RAG",
    "WIKIPEDIA",
    "GeneralistTool",
    "PaperTool",
    "PythonCodeGeneratorTool",
    "SearchStandIn",
    "WebPageStandIn",
    "build_toolbox",
    "builtin_metadata",
]

GENERALIST = "Generalist_Solution_Generator_Tool"
GOOGLE_SEARCH = "Ground_Google_Search_Tool"
PYTHON_CODER = "Python_Code_Generator_Tool"
WEB_RAG = "Web_RAG_Search_Tool"
WIKIPEDIA = "Wikipedia_RAG_Search_Tool"

# the four tools every AgentFlow test script enables; AgentFlow's loader also lists WEB_RAG, which the
# Wikipedia tool's module imports (toolbox="as_coded")
STATED_TOOLS = (GENERALIST, GOOGLE_SEARCH, PYTHON_CODER, WIKIPEDIA)

# what runs each tool here, and how it differs from AgentFlow's
STAND_INS: dict[str, str] = {
    GENERALIST: "same role: one LLM call on the query (BaseGeneratorTool on the tool engine)",
    PYTHON_CODER: "same role: the tool engine writes Python from the query; the code runs in the sandboxed "
    "Python tool (AgentFlow exec()s it in-process); 'variables' is not reported",
    GOOGLE_SEARCH: "stand-in: WebSearchTool (Serper/Tavily/Google CSE hits) for Gemini's Google-grounded answer",
    WIKIPEDIA: "offline stand-in: BM25 over a local Wikipedia index (AgentFlow: live Wikipedia + LLM page "
    "selection + web RAG)",
    WEB_RAG: "offline stand-in: a Wikipedia address is read from the local index (AgentFlow: fetches any URL and "
    "answers with embeddings + an LLM)",
}

# the code is stripped after: no \s* around the group, whose backtracking was cubic in a whitespace run
_PYTHON_BLOCK = re.compile(r"```python(.*?)```", re.DOTALL)
_OUTPUT_LIMIT = 3500  # AgentFlow's Python coder keeps this much printed output


class PaperTool(BaseTool):
    """A toolbox entry: ``execute(**kwargs)`` as AgentFlow calls it; ``run(text)`` passes ``query=text``.

    ``timeout`` (seconds) is set by the env before each call; subclasses implement ``_call``.
    """

    parameters: tuple[str, ...] = ("query",)

    def __init__(self, name: str, parameters: tuple[str, ...], owned: Any = None):
        self.name = name
        self.description = STAND_INS.get(name, "")
        self.input_spec = ", ".join(parameters)
        self.examples = ()
        self.parameters = parameters
        self.timeout = 120.0
        self._owned = owned

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        if len(args) > len(self.parameters):
            raise TypeError(f"{self.name}.execute() takes at most {len(self.parameters)} positional arguments")
        for name, value in zip(self.parameters, args):
            if name in kwargs:
                raise TypeError(f"{self.name}.execute() got two values for {name!r}")
            kwargs[name] = value
        unknown = set(kwargs) - set(self.parameters)
        if unknown:
            raise TypeError(f"{self.name}.execute() got unexpected keyword argument(s) {', '.join(sorted(unknown))}")
        return self._call(**kwargs)

    def _call(self, **kwargs: Any) -> Any:
        raise NotImplementedError

    def _required(self, kwargs: dict[str, Any], name: str) -> Any:
        if kwargs.get(name) is None:
            raise TypeError(f"{self.name}.execute() missing required argument {name!r}")
        return kwargs[name]

    def _run(self, command: str, timeout: float) -> ToolResult:
        self.timeout = timeout
        out = self.execute(query=command)
        return ToolResult(text=out if isinstance(out, str) else str(out), ok=True)

    def reset(self) -> None:
        reset = getattr(self._owned, "reset", None)
        if callable(reset):
            reset()

    def close(self) -> None:
        close = getattr(self._owned, "close", None)
        if callable(close):
            close()


class GeneralistTool(PaperTool):
    """``Generalist_Solution_Generator_Tool``: one LLM call on the query (AgentFlow's Base_Generator_Tool)."""

    def __init__(self, engine: Engine | str | None, sampling: SamplingParams, system_prompt: str):
        from agentflow_env.tools.generator import BaseGeneratorTool

        self.generator = BaseGeneratorTool(
            engine, sampling=sampling, system_prompt=system_prompt, max_chars=10**9, name=GENERALIST
        )
        super().__init__(GENERALIST, ("query", "image"), owned=self.generator)

    def _call(self, **kwargs: Any) -> Any:
        query = self._required(kwargs, "query")
        return self.generator.run(str(query), self.timeout).text


class PythonCodeGeneratorTool(PaperTool):
    """``Python_Code_Generator_Tool``: the tool engine writes Python for the query; the sandbox runs it."""

    def __init__(
        self,
        engine: Engine | str | None,
        sampling: SamplingParams,
        system_prompt: str,
        code_request: Callable[[str], str],
        sandbox: str = "auto",
    ):
        from agentflow_env.tools.python.tool import PythonCoderTool

        self.writer = GeneralistTool(engine, sampling, system_prompt)
        self.writer.generator.ledger_name = PYTHON_CODER  # its LLM calls are this tool's
        # sandbox: the Python tool's ("auto", "bwrap", "namespaces", "remote:URL"; AGENTFLOW_SANDBOX for "auto")
        self.runner = PythonCoderTool(max_output_chars=2 * _OUTPUT_LIMIT, sandbox=sandbox)
        self.code_request = code_request
        super().__init__(PYTHON_CODER, ("query",), owned=self.runner)

    def _call(self, **kwargs: Any) -> Any:
        query = self._required(kwargs, "query")
        self.writer.timeout = self.timeout
        reply = self.writer.execute(query=self.code_request(str(query)))
        found = _PYTHON_BLOCK.search(reply)
        if not found:
            return {"error": "No Python code block found in the response"}
        code = found.group(1).strip()
        self.runner.warm_up()  # starting the sandbox is not the code's time
        result = self.runner.run(code, min(self.timeout, 10.0))  # AgentFlow gives the code 10 s
        if not result.ok:
            return {"error": result.error or result.text}
        return {"printed_output": shorten(result.text, _OUTPUT_LIMIT), "variables": {}, "execution_code": code}


class SearchStandIn(PaperTool):
    """A search tool of AgentFlow's run by one of this project's search tools (its text is the result)."""

    def __init__(self, name: str, backend: Tool, parameters: tuple[str, ...]):
        self.backend = backend
        super().__init__(name, parameters, owned=backend)

    def _call(self, **kwargs: Any) -> Any:
        query = self._required(kwargs, "query")
        return self.backend.run(str(query), self.timeout).text


class WebPageStandIn(PaperTool):
    """``Web_RAG_Search_Tool`` offline: a Wikipedia address is looked up in the local Wikipedia index."""

    def __init__(self, backend: Tool):
        self.backend = backend
        super().__init__(WEB_RAG, ("query", "url"))

    def _call(self, **kwargs: Any) -> Any:
        query, url = self._required(kwargs, "query"), self._required(kwargs, "url")
        parsed = urlparse(str(url))
        if not parsed.netloc.endswith("wikipedia.org") or "/wiki/" not in parsed.path:
            return (
                f"Error: {WEB_RAG} runs offline here and reads Wikipedia addresses only "
                f"(https://en.wikipedia.org/wiki/TITLE) from the local index; {str(url)[:200]!r} is not one."
            )
        title = unquote(parsed.path.split("/wiki/", 1)[1]).replace("_", " ")
        return self.backend.run(f"{title} {query}", self.timeout).text


def build_toolbox(
    names: list[str],
    *,
    engine: Engine | str | None,
    sampling: SamplingParams,
    system_prompt: str,
    code_request: Callable[[str], str],
    web_search: Tool | None = None,
    wikipedia: Tool | None = None,
    engines: Mapping[str, Engine | str] | None = None,
    python_sandbox: str = "auto",
) -> dict[str, PaperTool]:
    """The runnable tools for ``names`` (AgentFlow's long names); unknown names raise ``KeyError``.

    ``engines`` gives a tool its own LLM by name (AgentFlow's scripts: gpt-4o-mini for the generalist,
    Qwen2.5-Coder-7B for the Python coder); the others use ``engine``. ``python_sandbox`` is the Python coder's
    isolation (``"remote:URL"``: a sandbox service, see docs/remote-sandbox.md).
    """
    engines = dict(engines or {})
    wiki: Any = wikipedia
    if wiki is None and (WIKIPEDIA in names or WEB_RAG in names):
        from agentflow_env.tools.wikipedia import WikipediaSearchTool

        wiki = WikipediaSearchTool()
    out: dict[str, PaperTool] = {}
    for name in names:
        if name == GENERALIST:
            out[name] = GeneralistTool(engines.get(name, engine), sampling, system_prompt)
        elif name == PYTHON_CODER:
            out[name] = PythonCodeGeneratorTool(
                engines.get(name, engine), sampling, system_prompt, code_request, sandbox=python_sandbox
            )
        elif name == GOOGLE_SEARCH:
            search: Any = web_search
            if search is None:
                from agentflow_env.tools.web_search import WebSearchTool

                search = WebSearchTool()
            out[name] = SearchStandIn(name, search, ("query", "add_citations"))
        elif name in (WIKIPEDIA, WEB_RAG):
            assert wiki is not None
            out[name] = SearchStandIn(name, wiki, ("query",)) if name == WIKIPEDIA else WebPageStandIn(wiki)
        else:
            raise KeyError(name)
    return out


def builtin_metadata() -> dict[str, dict[str, Any]]:
    """Tool metadata in this project's words, with AgentFlow's fields, sorted by name as AgentFlow sorts it."""
    table = {
        GENERALIST: {
            "tool_name": GENERALIST,
            "tool_description": "A general-purpose tool that reads the user's query and works out an answer step "
            "by step as well as it can. It can take an image too.",
            "tool_version": "1.0.0",
            "input_types": {
                "query": "str - the request, including what the user asked, that the answer should follow."
            },
            "output_type": "str - the answer it generated for the query",
            "demo_commands": [
                {
                    "command": 'execution = tool.execute(query="Give a short summary of the text below")',
                    "description": "Summarise a text the user supplies.",
                }
            ],
            "user_metadata": {
                "limitation": f"\nAnswers from {GENERALIST} can be made up or wrong.\n",
                "best_practice": f"\nTo get the most from {GENERALIST}:\n"
                "1. Use it for general questions that need no special knowledge or dedicated tool.\n"
                "2. Ask a clear, specific query.\n"
                "3. Let it reason step by step on the original query when the task is not multi-step.\n"
                "4. Split complex queries into parts and call it once per part.\n"
                "5. Use it for a first draft, then refine with the specialised tools.\n"
                "6. Check important facts it gives.\n",
            },
            "require_llm_engine": True,
        },
        GOOGLE_SEARCH: {
            "tool_name": GOOGLE_SEARCH,
            "tool_description": "A web search tool that returns up-to-date information from the internet, with "
            "sources cited.",
            "tool_version": "1.0.0",
            "input_types": {
                "query": "str - what to search the web for.",
                "add_citations": "bool - whether the results carry citations (default True).",
            },
            "output_type": "str - what the search found for the query.",
            "demo_commands": [
                {
                    "command": 'execution = tool.execute(query="What is the tallest mountain in Africa?")',
                    "description": "Look up a general fact, with citations (the default).",
                },
                {
                    "command": 'execution = tool.execute(query="Who won the 2022 World Cup?", add_citations=False)',
                    "description": "Look up a recent event without citations.",
                },
            ],
            "user_metadata": {
                "limitations": "\n1. Meant for general information.\n2. Holds little specialised domain "
                "knowledge.\n3. Cannot search or watch videos.\n",
                "best_practices": "\n1. Use it to look up general facts about a topic.\n2. Ask it plain "
                'questions such as "What is the capital of Peru?".\n3. It answers with a summary.\n4. Best for '
                "definitions, world knowledge and general facts.\n",
            },
            "require_llm_engine": False,
        },
        PYTHON_CODER: {
            "tool_name": PYTHON_CODER,
            "tool_description": "Writes and runs short Python snippets for arithmetic and simple maths problems, "
            "in a restricted environment with basic maths only.",
            "tool_version": "1.0.0",
            "input_types": {
                "query": "str - a clear description of the calculation or maths problem, with every number it needs."
            },
            "output_type": "dict - the generated code, its result and any error message.",
            "demo_commands": [
                {
                    "command": 'execution = tool.execute(query="Add up the squares of the integers from 1 to 20")',
                    "description": "Write and run code for a sum of squares.",
                },
                {
                    "command": 'query="For the list [3, 8, 1, 9, 4], find the product of the even numbers"\n'
                    "execution = tool.execute(query=query)",
                    "description": "Write and run code for an operation on a given list.",
                },
            ],
            "user_metadata": {
                "limitations": f"\n{PYTHON_CODER} is limited: basic Python arithmetic and built-in maths only; no "
                "imports or external libraries; simple calculations only; no string or data-structure work; no "
                "files, system or network; all input must be in the query; output should be one number or a "
                "short list of numbers; do not print in loops.\n",
                "best_practices": f"\nTo get the most from {PYTHON_CODER}: describe the calculation clearly, put "
                "every number in the query, keep to arithmetic, algebra or simple algorithms, and check that the "
                "generated code uses basic operations only.\n",
            },
            "require_llm_engine": True,
        },
        WEB_RAG: {
            "tool_name": WEB_RAG,
            "tool_description": "Answers a question from the content of one given web page, by retrieving the "
            "relevant passages of that page.",
            "tool_version": "1.0.0",
            "input_types": {
                "query": "str - what to look for on the page.",
                "url": "str - the address of the page to read.",
            },
            "output_type": "str - the answer drawn from the page's content.",
            "demo_commands": [
                {
                    "command": 'execution = tool.execute(query="How long is the Nile?", '
                    'url="https://en.wikipedia.org/wiki/Nile")',
                    "description": "Read the length of the Nile from its Wikipedia page.",
                }
            ],
            "user_metadata": {
                "limitation": f"\n{WEB_RAG} needs a reachable address with text on it; pages built by scripts or "
                "behind a login may fail; answers are only as good as the page; passage retrieval can miss "
                "context.\n",
                "best_practice": f"\nTo get the most from {WEB_RAG}: ask targeted questions, give an address that "
                "holds the answer, prefer text-rich pages, split complex questions, and call it after a search "
                "tool has found real addresses.\n",
            },
            "require_llm_engine": True,
        },
        WIKIPEDIA: {
            "tool_name": WIKIPEDIA,
            "tool_description": "Searches Wikipedia and returns the matching pages with their titles, addresses, "
            "abstracts and the information retrieved for the query.",
            "tool_version": "1.0.0",
            "input_types": {"query": "str - what to search Wikipedia for."},
            "output_type": "dict - the search results: matching pages with their content, addresses and metadata.",
            "demo_commands": [
                {
                    "command": 'execution = tool.execute(query="How tall is the Eiffel Tower")',
                    "description": "Search Wikipedia for the height of the Eiffel Tower.",
                },
                {
                    "command": 'execution = tool.execute(query="When did the Berlin Wall fall?")',
                    "description": "Search Wikipedia for when the Berlin Wall fell.",
                },
            ],
            "user_metadata": {
                "limitation": f"\n{WIKIPEDIA} retrieves from Wikipedia pages only; choosing the relevant pages can "
                "miss; accuracy depends on Wikipedia's content.\n",
                "best_practice": f"\nTo get the most from {WIKIPEDIA}: ask specific questions, trust the pages it "
                "marks relevant, look at the other pages when those fall short, and use it as one step of a "
                "longer search.\n",
            },
            "require_llm_engine": False,
        },
    }
    return {k: table[k] for k in sorted(table)}
