"""SandboxFusion's ``/run_code`` format, as the remote backend and ``sandbox-server`` speak it.

Request: ``{"code", "language": "python", "run_timeout", "compile_timeout", "memory_limit_MB", "stdin", "files",
"fetch_files"}`` (``files``: path -> base64 content). Reply: ``{"status": "Success" | "Failed" | "SandboxError",
"message", "run_result": {"status": "Finished" | "TimeLimitExceeded" | "Error", "execution_time", "return_code",
"stdout", "stderr"}, "files"}``.

Two programs travel as ``code``, both built here:

- :func:`replay_program` (client to any SandboxFusion service, which runs ``code`` as a fresh script): the
  episode's earlier cells, each in fresh globals with their output thrown away, then the new cell with the local
  tool's notebook semantics (its last expression's value shown, one stream for stdout and stderr, the
  traceback cut as locally). It is built from the very functions the sandbox's kernel runs cells with
  (``sandbox/zygote.py``), so a cell reads the same. Its outcome comes back as one marked line on stderr.
- :func:`script_program` (``sandbox-server`` to its own worker, for a plain SandboxFusion request): ``code`` run
  as ``python main.py`` would (no value shown, stdout and stderr apart, exit code, ``stdin``, ``files`` written
  before and ``fetch_files`` read after), its result printed as one marked JSON line.
"""

from __future__ import annotations

import inspect
import json
from functools import lru_cache
from typing import Any

from agentflow_env.tools.python.outcome import CellOutcome, describe_status
from agentflow_env.tools.python.sandbox import zygote

__all__ = [
    "MARK",
    "parse_replay_reply",
    "parse_script_output",
    "replay_program",
    "script_program",
]

#: the marker of a program's result line (never printed by the cells: the program writes it last)
MARK = "@@agentflow-sandbox-result@@ "

_KERNEL_PARTS = (zygote.clean_text, zygote.CappedStream, zygote._compile_cell, zygote._format_error)


@lru_cache(maxsize=1)
def _kernel_source() -> str:
    """The kernel's cell functions as source (``run_cell`` and what it calls), for a program sent to a service."""
    parts = [inspect.getsource(obj) for obj in _KERNEL_PARTS]
    parts.append("_PRISTINE_BUILTINS = dict(builtins.__dict__)\n")
    parts.append(inspect.getsource(zygote._restore_builtins))
    parts.append(inspect.getsource(zygote.run_cell))
    head = (
        "from __future__ import annotations\n"
        "import ast, builtins, io, json, linecache, os, sys, traceback\n"
        "from typing import Any\n"
        f"CELL = {zygote.CELL!r}\nTRACEBACK_LINES = {zygote.TRACEBACK_LINES}\n"
        f"TRACEBACK_CHARS = {zygote.TRACEBACK_CHARS}\n"
    )
    return head + "\n".join(parts)


_REPLAY_DRIVER = """
_job = json.loads({job!r})
if _job["replay"]:  # the episode's earlier cells, output thrown away (also what subprocesses write)
    sys.stdout.flush(); sys.stderr.flush()
    _null, _saved = os.open(os.devnull, os.O_WRONLY), (os.dup(1), os.dup(2))
    os.dup2(_null, 1); os.dup2(_null, 2)
    for _cell in _job["replay"]:
        run_cell(_cell, 0)
    os.dup2(_saved[0], 1); os.dup2(_saved[1], 2)
_reply = run_cell(_job["cell"], _job["limit"])
sys.stdout.write(_reply["output"]); sys.stdout.flush()
_reply.pop("output")
sys.stderr.write("\\n" + {mark!r} + json.dumps(_reply) + "\\n"); sys.stderr.flush()
"""


def replay_program(replay: list[str], cell: str, limit: int) -> str:
    """A script that replays ``replay`` silently, then runs ``cell`` as the local tool would (see the module)."""
    job = json.dumps({"replay": list(replay), "cell": cell, "limit": int(limit)}, ensure_ascii=False)
    return _kernel_source() + _REPLAY_DRIVER.format(job=job, mark=MARK)


def _describe_return_code(code: Any) -> str:
    if isinstance(code, int) and not isinstance(code, bool):
        if code < 0 or code > 128:  # killed by a signal: -N (Python's subprocess) or 128+N (a shell)
            return describe_status((-code if code < 0 else code - 128) & 0x7F)  # a wait status: the signal's bits
        return f"exited with code {code}"
    return "exit status unknown"


def parse_replay_reply(reply: Any, limit: int) -> CellOutcome:
    """A plain SandboxFusion service's reply to :func:`replay_program`, as the cell's outcome."""
    if not isinstance(reply, dict):
        return CellOutcome(failure="remote", detail="the sandbox service answered with something that is not a reply")
    run = reply.get("run_result")
    status = reply.get("status")
    if status == "SandboxError" or not isinstance(run, dict):
        message = str(reply.get("message") or "no run result")[:500]
        return CellOutcome(failure="remote", detail=f"the sandbox service could not run the code: {message}")
    if run.get("status") == "TimeLimitExceeded":
        return CellOutcome(failure="timeout")
    stdout, stderr = run.get("stdout"), run.get("stderr")
    stdout = stdout if isinstance(stdout, str) else ""
    stderr = stderr if isinstance(stderr, str) else ""
    at = stderr.rfind(MARK)
    if at < 0:  # the program did not get to its last line: the process died (os._exit, a signal, a limit)
        how = _describe_return_code(run.get("return_code"))
        return CellOutcome(failure="died", detail=f"{how}; the sandbox service reported no result")
    try:
        fields = json.loads(stderr[at + len(MARK) :].strip().splitlines()[0])
    except (ValueError, IndexError):
        fields = None
    outcome = CellOutcome.from_wire(dict(fields, output=stdout) if isinstance(fields, dict) else None, limit)
    if outcome is None:
        return CellOutcome(failure="remote", detail="the sandbox service returned a result that cannot be read")
    return outcome


_SCRIPT = """
def __agentflow_script():
    import base64, builtins, io, json, linecache, os, sys, traceback
    job = json.loads({job!r})
    limit = job["limit"]

    class Capped(io.TextIOBase):
        def __init__(self):
            self.parts, self.kept, self.dropped = [], 0, 0
        def write(self, s):
            if not isinstance(s, str):
                raise TypeError("write() argument must be str, not " + type(s).__name__)
            piece = s[: max(limit - self.kept, 0)]
            self.parts.append(piece)
            self.kept += len(piece)
            self.dropped += len(s) - len(piece)
            return len(s)
        def writable(self):
            return True

    try:
        for path, data in job["files"].items():
            if data is None:
                continue
            folder = os.path.dirname(path)
            if folder:
                os.makedirs(folder, exist_ok=True)
            with open(path, "wb") as handle:
                handle.write(base64.b64decode(data))
    except Exception as exc:
        print({mark!r} + json.dumps({{"sandbox_error": "could not write the request's files: " + repr(exc)}}))
        return
    out, err = Capped(), Capped()
    saved = sys.stdout, sys.stderr, sys.stdin, sys.argv
    sys.stdout, sys.stderr, sys.stdin, sys.argv = out, err, io.StringIO(job["stdin"]), ["main.py"]
    linecache.cache["main.py"] = (len(job["code"]), None, job["code"].splitlines(True), "main.py")
    code = 0
    try:
        exec(compile(job["code"], "main.py", "exec"), {{"__name__": "__main__", "__builtins__": builtins}})
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            code = exc.code or 0
        else:
            err.write(str(exc.code) + "\\n")
            code = 1
    except BaseException as exc:
        traceback.print_exception(type(exc), exc, exc.__traceback__.tb_next, file=err)
        code = 1
    finally:
        sys.stdout, sys.stderr, sys.stdin, sys.argv = saved
    files = {{}}
    for path in job["fetch_files"]:
        try:
            with open(path, "rb") as handle:
                files[path] = base64.b64encode(handle.read(limit + 1)[:limit]).decode("ascii")
        except OSError:
            pass
    print({mark!r} + json.dumps({{
        "stdout": "".join(out.parts), "stderr": "".join(err.parts), "return_code": code, "files": files,
        "dropped": out.dropped + err.dropped,
    }}))
__agentflow_script()
"""


def script_program(code: str, stdin: str, files: dict[str, str | None], fetch: list[str], limit: int) -> str:
    """A cell that runs ``code`` as a script the way SandboxFusion does (see the module)."""
    job = json.dumps(
        {"code": code, "stdin": stdin, "files": files, "fetch_files": fetch, "limit": int(limit)}, ensure_ascii=False
    )
    return _SCRIPT.format(job=job, mark=MARK)


def parse_script_output(output: str) -> dict[str, Any] | None:
    """The result line :func:`script_program` printed (what ran before it wrote to the raw descriptors first, as
    ``"prefix"``); ``None`` when there is none (the output went past the cap, or the cell never got there)."""
    at = output.rfind(MARK)
    if at < 0:
        return None
    try:
        result = json.loads(output[at + len(MARK) :].strip().splitlines()[0])
    except (ValueError, IndexError):
        return None
    if not isinstance(result, dict):
        return None
    result["prefix"] = output[:at]
    return result
