"""Helpers more than one test file uses (test files never import each other)."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from typing import Any

from agentflow_env.paper_flow.toolbox import (
    GENERALIST,
    GOOGLE_SEARCH,
    PYTHON_CODER,
    WEB_RAG,
    WIKIPEDIA,
    GeneralistTool,
    PaperTool,
    SearchStandIn,
    WebPageStandIn,
)
from agentflow_env.tools.base import BaseTool
from agentflow_env.types import Task, ToolResult

HANG_S = 60  # the guard: a step this long is a hang


@contextlib.contextmanager
def hang_guard(seconds: int) -> Iterator[None]:
    """Fail (rather than hang) if the block runs past ``seconds``; a no-op off the main thread."""
    if not hasattr(signal, "SIGALRM") or threading.current_thread() is not threading.main_thread():
        yield
        return

    def _raise(signum: int, frame: object) -> None:
        raise TimeoutError(f"env.step ran for over {seconds} s: a hang")

    previous = signal.signal(signal.SIGALRM, _raise)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def repeat_to(unit: str, size: int) -> str:
    return (unit * (size // max(len(unit), 1) + 1))[:size]


def cpu_step_seconds(env: Any, action: str) -> float:
    """This process's CPU seconds for one step: unlike wall time, it does not grow while a busy machine
    (other tests, a training run) keeps the process waiting, so growth ratios measure the parser alone."""
    with hang_guard(HANG_S):
        start = time.process_time()
        env.step(action)
        return time.process_time() - start


class FakeSearch(BaseTool):
    """A search backend that answers from a dict and remembers its queries."""

    name = "fake_search"

    def __init__(self, answers: dict[str, str] | None = None):
        self.answers = answers or {}
        self.queries: list[str] = []

    def _run(self, command: str, timeout: float) -> ToolResult:
        self.queries.append(command)
        for key, text in self.answers.items():
            if key in command:
                return ToolResult(text=text)
        return ToolResult(text="no passage found")


def paper_toolbox(engine: Any, search: FakeSearch) -> dict[str, PaperTool]:
    from agentflow_env.engines.base import SamplingParams

    return {
        GENERALIST: GeneralistTool(engine, SamplingParams(max_tokens=2048), "sys"),
        GOOGLE_SEARCH: SearchStandIn(GOOGLE_SEARCH, search, ("query", "add_citations")),
        PYTHON_CODER: SearchStandIn(PYTHON_CODER, FakeSearch(), ("query",)),
        WEB_RAG: WebPageStandIn(search),
        WIKIPEDIA: SearchStandIn(WIKIPEDIA, search, ("query",)),
    }


def length_reward(trajectory) -> float:
    """A reward that differs between rollouts of a random model (so advantages are not all zero)."""
    return (len(trajectory.turns[0].action) % 5) / 4.0


class ConcurrentScripted:
    """The Game of 24 scripted planner, declared safe for concurrent ``act`` calls (its actions depend on the
    observation only), so rollouts with ``scheduler="auto"`` run each episode on its own."""

    concurrent_act = True

    def __init__(self) -> None:
        from agents.policies.baselines import ScriptedGameOf24Planner

        self.inner = ScriptedGameOf24Planner()

    def act(self, observations: Any) -> list[str]:
        return self.inner.act(observations)


def flat_groups(groups: Any) -> list[tuple[Any, ...]]:
    """Group rollouts as comparable tuples: task, group, sample, every turn, answer and score."""
    return [
        (t.task_id, t.group, t.sample, [(u.prompt, u.action, u.result, u.reward) for u in t.turns], t.answer, t.score)
        for g in groups
        for t in g
    ]


# ------------------------------------------------------------------------- loopback HTTP servers
def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_port(port: int, seconds: float = 60.0) -> None:
    """Return once something listens on 127.0.0.1:``port`` (or ``seconds`` have passed: the caller's request fails)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.2)


Response = tuple[int, dict[str, str], bytes]


class LoopbackServer:
    """A threaded HTTP server on 127.0.0.1 (a free port) that logs every request and answers it with
    ``handle(request)``, a (status, headers, body) triple; without ``handle``, with ``routes[(method, path)]``.
    A request is a dict: method, path, query, headers and the JSON body (None when empty). Use it as a context
    manager (it serves inside the block)."""

    def __init__(self, handle: Callable[[dict[str, Any]], Response] | None = None) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        self.routes: dict[tuple[str, str], Callable[[dict[str, Any]], Response]] = {}
        handle = handle or (lambda request: self.routes[(request["method"], request["path"])](request))
        self.log: list[dict[str, Any]] = []
        lock, log = threading.Lock(), self.log

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _serve(self, method: str) -> None:
                url = urllib.parse.urlsplit(self.path)
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                request = {
                    "method": method,
                    "path": url.path,
                    "query": dict(urllib.parse.parse_qsl(url.query)),
                    "headers": self.headers,  # case-insensitive, as HTTP names are
                    "json": json.loads(body) if body else None,
                }
                with lock:
                    log.append(request)
                status, headers, data = handle(request)
                self.send_response(status)
                for key, value in headers.items():
                    self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                with contextlib.suppress(BrokenPipeError):  # the client gave up (a timeout test)
                    self.wfile.write(data)

            def do_GET(self) -> None:
                self._serve("GET")

            def do_POST(self) -> None:
                self._serve("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    @property
    def bodies(self) -> list[Any]:
        """The JSON bodies of the requests so far, in order."""
        return [r["json"] for r in list(self.log)]

    def __enter__(self) -> LoopbackServer:
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def json_response(data: Any, status: int = 200) -> Response:
    return status, {"Content-Type": "application/json"}, json.dumps(data).encode()


def chat_completion(body: dict[str, Any], content: str | None) -> Response:
    """A chat-completions reply to the request ``body`` whose assistant message is ``content``."""
    message = {"role": "assistant", "content": content}
    return json_response(
        {
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
    )


def chat_server(reply: Callable[[dict[str, Any]], str]) -> LoopbackServer:
    """An OpenAI-compatible chat-completions server: each request body gets ``reply(body)`` as the assistant's
    message. The bodies are in ``server.bodies``; ``server.url`` ends in ``/v1``, as engine specs want it."""

    def handle(request: dict[str, Any]) -> Response:
        return chat_completion(request["json"], reply(request["json"]))

    server = LoopbackServer(handle)
    server.url += "/v1"
    return server


# ------------------------------------------------------------------------- the paper flow with echo tools
class EchoTool(PaperTool):
    """Returns its query; ``sleep=True`` first sleeps for its whole timeout (a tool that runs to its limit)."""

    def __init__(self, name: str, sleep: bool = False):
        super().__init__(name, ("query",))
        self.sleep = sleep
        self.timeouts: list[float] = []

    def _call(self, **kwargs: Any) -> Any:
        self.timeouts.append(self.timeout)
        if self.sleep:
            time.sleep(self.timeout)
        return f"echo: {str(kwargs.get('query'))[:200]}"


ACME_TASK = Task(id="t1", question="In which year was the founder of Acme Corp born?", answer="1871")
WIKI_PLAN = "Context: none\nSub-Goal: Find the founder.\nTool Name: Wikipedia_RAG_Search_Tool"


def echo_paper_env(engine: Any, sleep: bool = False, **kwargs: Any) -> Any:
    """A paper-flow env on :data:`ACME_TASK` whose stated tools echo their query."""
    from agentflow_env.paper_flow import PaperFlowEnv
    from agentflow_env.paper_flow.toolbox import STATED_TOOLS

    tools = {name: EchoTool(name, sleep) for name in STATED_TOOLS}
    return PaperFlowEnv(
        [ACME_TASK], lambda p, t: float(t.answer in p), engine=engine, toolbox="as_stated", tools=tools, **kwargs
    )


class RecordingJudge:
    """Says CORRECT to everything, and keeps the candidate block of every prompt."""

    def __init__(self):
        self.candidates: list[str] = []

    def generate(self, prompts, sampling=None):
        for prompt in prompts:
            block = prompt[-1]["content"].split("⟦BEGIN CANDIDATE")[1].split("⟦END CANDIDATE")[0]
            self.candidates.append("\n".join(line[2:] for line in block.split("\n")[1:-1]))
        return ["Looks right.\nVERDICT: CORRECT"] * len(prompts)
