"""``agentflow-env play ENV_ID``: a person is the planner, in the terminal, turn by turn (rich).

Type the action over one or more lines and finish it with an empty line. Shortcuts:
``/tool NAME COMMAND`` (one line), ``/answer TEXT``, ``/prompt`` (show the full prompt), ``/quit``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

__all__ = ["configure", "play"]

HELP = (
    "Type an action in the planner format and end it with an empty line, e.g.\n"
    "  Tool Name: Calculator_Tool\n  Command: (1+2)*8\n\n"
    "Shortcuts: /tool NAME COMMAND   /answer TEXT   /prompt   /help   /quit"
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("env_id", help="an env id, e.g. agentflow/Gen-GameOf24-v2 (see `agentflow-env list`)")
    parser.add_argument("--seed", type=int, default=None, help="seed for the task draw")
    parser.add_argument("--task-id", default=None, help="play this task id")
    parser.add_argument("--episodes", type=int, default=1, help="episodes to play before exiting")
    parser.add_argument("--split", default=None, help="task split (train, validation, test)")
    parser.add_argument(
        "--data-dir", default=None, help="data folder for the paper's benchmarks (default: $AGENTFLOW_DATA_DIR)"
    )
    parser.add_argument(
        "--env-kwargs",
        type=_json_object,
        default={},
        help='gymnasium.make kwargs as JSON, e.g. \'{"max_turns": 3}\' or \'{"source": "hub"}\'',
    )
    parser.add_argument("--no-color", action="store_true", help="plain text output")
    parser.set_defaults(func=_run)


def _json_object(text: str) -> dict[str, Any]:
    import json

    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc}); give an object like '{{\"max_turns\": 3}}'") from exc
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"{text!r} is not a JSON object; give one like '{{\"max_turns\": 3}}'")
    return value


def _run(args: argparse.Namespace) -> int:
    from agentflow_env.cli import require_env_id
    from agentflow_env.error import DataError

    env_id = require_env_id(args.env_id)
    kwargs: dict[str, Any] = dict(args.env_kwargs)
    if args.split:
        kwargs["split"] = args.split
    if args.data_dir:
        kwargs["data_dir"] = args.data_dir
    try:
        return play(
            env_id, seed=args.seed, task_id=args.task_id, episodes=args.episodes, no_color=args.no_color, **kwargs
        )
    except DataError as exc:
        raise DataError(
            f"{exc} On the command line: agentflow-env play {env_id} --data-dir DIR (a folder of AgentFlow test "
            'files), export AGENTFLOW_DATA_DIR=DIR, or --env-kwargs \'{"source": "hub"}\' (needs network)'
        ) from exc


def _read_action(stdin: TextIO, console: Any) -> str | None:
    """Lines up to an empty line; ``None`` at end of input or on /quit."""
    lines: list[str] = []
    while True:
        console.print("[bold cyan]>[/] " if not lines else "[cyan]…[/] ", end="")
        line = stdin.readline()
        if line == "":
            return None if not lines else "\n".join(lines)
        line = line.rstrip("\n")
        if not lines and line.startswith("/"):
            return line
        if line.strip() == "" and lines:
            return "\n".join(lines)
        if line.strip():
            lines.append(line)


def _expand(shortcut: str) -> str | None:
    word, _, rest = shortcut.partition(" ")
    if word == "/tool":
        name, _, command = rest.strip().partition(" ")
        return f"Sub-Goal: (typed by hand)\nTool Name: {name}\nCommand: {command}"
    if word == "/answer":
        return f"Final Answer: {rest.strip()}"
    return None


def play(
    env_id: str,
    *,
    seed: int | None = None,
    task_id: str | None = None,
    episodes: int = 1,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    no_color: bool = False,
    **env_kwargs: Any,
) -> int:
    import gymnasium as gym
    from rich.console import Console
    from rich.panel import Panel
    from rich.text import Text

    import agentflow_env  # noqa: F401  (registers ids)

    stdin = stdin or sys.stdin
    console = Console(
        file=stdout or sys.stdout,
        no_color=no_color,
        highlight=False,
        soft_wrap=True,
        force_terminal=None if not no_color else False,
    )
    env = gym.make(env_id, **env_kwargs)
    total = 0.0
    try:
        for episode in range(episodes):
            options = {"task_id": task_id} if task_id else None
            obs, info = env.reset(seed=None if seed is None else seed + episode, options=options)
            console.print(Panel(Text(obs["question"]), title=f"{env_id} · task {info['task_id']}", expand=False))
            console.print(Panel(Text(obs["tools"]), title="tools", expand=False))
            console.print(HELP)
            done = False
            while not done:
                console.print(f"[dim]turn {info['turn'] + 1}, {info['turns_left']} left[/]")
                action = _read_action(stdin, console)
                if action is None or action.strip() == "/quit":
                    console.print("bye")
                    return 0
                if action.startswith("/"):
                    if action.strip() == "/prompt":
                        console.print(Text(obs["prompt"]))
                        continue
                    expanded = _expand(action)
                    if expanded is None:
                        console.print(HELP)
                        continue
                    action = expanded
                obs, reward, terminated, truncated, info = env.step(action)
                steps = info.get("memory_steps") or []
                if steps and not terminated:
                    last = steps[-1]
                    style = "green" if last["ok"] else "red"
                    console.print(
                        Panel(
                            Text(last["result"]),
                            title=f"step {last['turn']}: {last['tool'] or 'invalid'}",
                            border_style=style,
                            expand=False,
                        )
                    )
                done = terminated or truncated
            score = float(reward)
            total += score
            verdict = "[bold green]correct[/]" if score >= 1.0 else f"[bold red]score {score:.2f}[/]"
            over = "answered" if terminated else "out of budget"
            console.print(Text(f"Episode over ({over}). Answer: {info.get('answer')!r} → "), end="")
            console.print(verdict)
    finally:
        env.close()
    console.print(f"Total reward: {total:.2f} over {episodes} episode(s)")
    return 0
