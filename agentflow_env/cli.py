"""The ``agentflow-env`` command: subcommands are looked up in a table and imported only when run.

Every subcommand shares one surface: kebab-case flags, logging that
never tears a progress bar, and one ``error: ...`` line (exit status 1, or 2 for bad settings) instead of a
traceback; ``--debug`` anywhere on the line shows the traceback.
"""

from __future__ import annotations

import argparse
import difflib
import importlib
import logging
import os
import sys
from collections.abc import Sequence
from typing import NoReturn

__all__ = [
    "COMMANDS",
    "build_parser",
    "describe_error",
    "main",
    "require_env_id",
]

# name -> ("module:configure", help). ``configure(parser)`` adds arguments and sets ``func``.
COMMANDS: dict[str, tuple[str, str]] = {
    "list": ("benchmarks.cli:configure_list", "list the registered env ids with size, tools and source"),
    "eval": ("leaderboards.cli:configure_eval", "evaluate a policy on a leaderboard protocol (resumable)"),
    "leaderboard": ("leaderboards.cli:configure_leaderboard", "render or show the leaderboard from stored results"),
    "judge-check": ("leaderboards.judge_check:configure", "check an LLM judge on a labelled set of answers"),
    "play": ("agentflow_env.terminal.play:configure", "play an env in the terminal: you are the planner"),
    "train": ("agents.training.train_cli:configure_train", "train the planner with Flow-GRPO from a config file"),
    "build-index": ("agentflow_env.tools.wikipedia:configure", "build a BM25 index folder from a Wikipedia dump"),
    "sft": (
        "agents.training.sft:configure",
        "fine-tune a planner LM (the tiny LM by default) on scripted demonstrations",
    ),
    "tiny-lm": ("agents.tiny_lm_cli:configure", "build the tiny offline LM or print its folder (hf:tiny)"),
    "serve": (
        "agentflow_env.engines.serve_cli:configure",
        "serve an engine (hf:, vllm:, ...) over the OpenAI HTTP API",
    ),
    "env-server": ("agentflow_env.remote.server:configure", "serve reset/step of any agentflow/* id over HTTP"),
    "sandbox-server": (
        "agentflow_env.remote.sandbox_server:configure",
        "serve the Python sandbox over SandboxFusion's /run_code API (for hosts that forbid namespaces)",
    ),
    "retrieval-server": (
        "agentflow_env.remote.retrieval_server:configure",
        "serve an index folder in Search-R1's /retrieve format (BM25 or dense)",
    ),
    "mcp-server": (
        "agentflow_env.remote.mcp_server:configure",
        "serve the env's tools (Python, search, calculator) over MCP",
    ),
}

# the top-level packages whose commands need agentflow-env's own ``agents`` package
_NEEDS_AGENTS = ("agents.", "leaderboards.")

DEBUG_FLAG = "--debug"
DEBUG_ENV = "AGENTFLOW_DEBUG"


# ---------------------------------------------------------------------------------------------- env ids
def require_env_id(env_id: str) -> str:
    """``env_id`` when it is registered; else a ConfigError naming close matches and `agentflow-env list`."""
    import gymnasium as gym

    import agentflow_env  # noqa: F401  (registers the env ids)
    from agentflow_env.error import ConfigError
    from agentflow_env.registration import registered_ids

    if env_id in gym.registry:
        return env_id
    ids = registered_ids(latest_only=True)  # suggest current versions, not superseded ones
    # compare whole ids and bare names, case-insensitively: "gameof24", "Gen-GameOf24-v2", "agentflow/gen-gameof24"
    keys: dict[str, str] = {}
    for known in ids:
        bare = known.split("/")[-1]
        for key in (known, bare, bare.rsplit("-v", 1)[0]):
            keys.setdefault(key.lower(), known)
    wanted = env_id.split("/")[-1].lower()
    close = [keys[k] for k in difflib.get_close_matches(wanted, list(keys), n=6, cutoff=0.6)]
    close += [known for known in ids if wanted.rsplit("-v", 1)[0] in known.lower()]
    close = list(dict.fromkeys(close))[:3]
    hint = f"did you mean {' or '.join(close)}? " if close else ""
    raise ConfigError(f"unknown env id {env_id!r}; {hint}run `agentflow-env list` to see the registered ids")


# ---------------------------------------------------------------------------------------------- errors
def describe_error(exc: BaseException) -> tuple[str, int]:
    """One line saying what went wrong and what to do, and the exit status."""
    from agentflow_env.error import AgentFlowError, ConfigError

    text = " ".join(str(exc).split()) or type(exc).__name__
    if isinstance(exc, ConfigError):
        return text, 2
    if isinstance(exc, AgentFlowError):  # DataError, DependencyNotInstalled, EngineError, ToolError: say what to do
        return text, 1
    if type(exc).__module__.startswith("gymnasium"):
        return f"{text} Run `agentflow-env list` to see the registered ids.", 2
    if isinstance(exc, ModuleNotFoundError):
        missing = exc.name or text
        return (
            f"{missing} is not installed ({text}); install the extra that provides it, e.g. "
            "pip install 'agentflow-env[train]' (see the README's install section)",
            1,
        )
    if isinstance(exc, OSError):
        return f"{text} (check the path and its permissions)", 1
    return f"{type(exc).__name__}: {text} (rerun with {DEBUG_FLAG} for the traceback)", 1


class ProgressSafeHandler(logging.Handler):
    """Writes log records above any running tqdm bar (``tqdm.write``) instead of through its line."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            message = self.format(record)
            from tqdm import tqdm

            tqdm.write(message, file=sys.stderr)
        except Exception:
            self.handleError(record)


def route_logging(level: int | str | None = None) -> None:
    """Send warnings and log records through :class:`ProgressSafeHandler` (once per process)."""
    root = logging.getLogger()
    if not any(isinstance(h, ProgressSafeHandler) for h in root.handlers):
        handler = ProgressSafeHandler()
        handler.setFormatter(logging.Formatter("%(levelname)s %(name)s: %(message)s"))
        root.addHandler(handler)
        logging.captureWarnings(True)  # warnings.warn(...) goes through the same handler
    if level is not None:
        root.setLevel(level if isinstance(level, int) else getattr(logging, str(level).upper(), logging.WARNING))


def _current_dir_on_path() -> None:
    """Make ``module:attr`` specs import modules from the current directory, as ``python -m`` does.

    The directory goes last, so a file there never shadows an installed package.
    """
    cwd = os.getcwd()
    if not any(os.path.abspath(p or ".") == cwd for p in sys.path):
        sys.path.append(cwd)


def _check_agents_package() -> None:
    """Fail clearly when ``import agents`` is another distribution's package (openai-agents installs one too)."""
    from agentflow_env.error import ConfigError

    fix = (
        "the openai-agents wheel also installs a top-level `agents` package; uninstall it "
        "(pip uninstall openai-agents) or keep it in another virtual environment, then reinstall agentflow-env"
    )
    try:
        agents = importlib.import_module("agents")
    except ImportError as exc:
        if "openai-agents" in str(exc):  # agents/__init__.py found the other wheel's files in its folder
            raise
        raise ConfigError(f"cannot import agentflow-env's `agents` package ({exc}); {fix}") from exc
    if not getattr(agents, "__agentflow_env__", False):
        where = getattr(agents, "__file__", None) or "a namespace package"
        raise ConfigError(f"`import agents` loads {where}, which is not agentflow-env's package: {fix}")


# ---------------------------------------------------------------------------------------------- parser
class _Parser(argparse.ArgumentParser):
    """Usage mistakes end like every other failure: one ``error:`` line that says where the help is."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"error: {message} (see `{self.prog} --help`)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    parser = _Parser(
        prog="agentflow-env",
        description="AgentFlow environments, agents and leaderboards",
        epilog=f"{DEBUG_FLAG} (anywhere on the line, or ${DEBUG_ENV}=1) shows tracebacks instead of one error line.",
    )
    parser.add_argument(DEBUG_FLAG, action="store_true", help="show the traceback of an error")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name, (target, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        if name == command:  # only the chosen command's module is imported
            module, _, attr = target.partition(":")
            if module.startswith(_NEEDS_AGENTS):
                _check_agents_package()
            getattr(importlib.import_module(module), attr)(p)
    return parser


def _run(argv: list[str]) -> int:
    command = next((a for a in argv if not a.startswith("-")), None)
    parser = build_parser(command if command in COMMANDS else None)
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser.print_help()
        return 2 if command is None else 1
    import agentflow_env  # noqa: F401  (registers the env ids)

    return int(args.func(args) or 0)


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = DEBUG_FLAG in argv or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    argv = [a for a in argv if a != DEBUG_FLAG]
    route_logging()
    _current_dir_on_path()
    try:
        return _run(argv)
    except KeyboardInterrupt:
        sys.stderr.write("\ninterrupted\n")
        return 130
    except Exception as exc:
        if debug:
            import traceback

            traceback.print_exc()
        message, status = describe_error(exc)
        sys.stderr.write(f"error: {message}\n")
        return status


if __name__ == "__main__":
    sys.exit(main())
