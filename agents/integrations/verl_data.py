"""verl's parquet rows for ``agentflow/*`` envs, from env ids or a leaderboard protocol file.

    python -m agents.integrations.verl_data --env-id agentflow/Gen-GameOf24-v2 --split train --out data/train.parquet
    python -m agents.integrations.verl_data --protocol leaderboards/protocols/offline-v2.toml --out data/test.parquet
    python -m agents.integrations.verl_data --env-id agentflow/Bamboogle-v2 --train-set combined \
        --train-path data/train/combined_train.parquet --out data/train.parquet   # AgentFlow's training set

Each row is one task: ``prompt`` (the env's first planner prompt as a chat), ``data_source`` (the env
id), ``agent_name`` (``agentflow_agent``, the loop in :mod:`agents.integrations.verl_agent_loop`) and
``extra_info`` (env id, split, task id, env kwargs, emit mode). The gold answer is not written: the
env scores the episode itself, so no reward-model column can leak it. With ``--train-set`` the tasks are one
of AgentFlow's training sets (:mod:`benchmarks.training_data`) played in ``--env-id``'s flow, tools and scorer;
``extra_info["train_set"]`` names the set, and each rollout worker loads it once (:func:`train_set_tasks`).
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.error import ConfigError
from agents.integrations.chat import first_prompts

__all__ = ["make_row_env", "protocol_sources", "train_set_tasks", "verl_rows", "write_parquet"]

AGENT_NAME = "agentflow_agent"


def verl_rows(
    env_id: str,
    split: str = "train",
    num_tasks: int | None = None,
    env_kwargs: dict[str, Any] | None = None,
    emit: str = "turns",
    tool_calling: bool = False,
    train_set: dict[str, Any] | None = None,
) -> list[dict[str, Any]]:
    """One verl row per task of ``env_id``'s ``split`` (the first ``num_tasks``), or of ``train_set``
    (``{"name": ..., "path": ..., "seed": ...}``, see :func:`train_set_tasks`) played in ``env_id``;
    ``tool_calling`` rows (with ``emit="trajectory"``) train the native tool-calling format."""
    kwargs = dict(env_kwargs or {})
    train_json = json.dumps(train_set, sort_keys=True) if train_set else ""
    env = make_row_env(env_id, split, kwargs, train_json)
    try:
        rows = []
        for index, prompt, task_id in first_prompts(env, num_tasks):
            rows.append(
                {
                    "data_source": env_id,
                    "agent_name": AGENT_NAME,
                    "prompt": [{"role": "user", "content": prompt}],
                    "ability": "agentflow",
                    "reward_model": {"style": "env", "ground_truth": ""},
                    "extra_info": {
                        "env_id": env_id,
                        "split": split,
                        "task_id": task_id,
                        "index": index,
                        "env_kwargs": json.dumps(kwargs, sort_keys=True),
                        "emit": emit,
                        "train_set": train_json,
                        **({"tool_calling": True} if tool_calling else {}),
                    },
                }
            )
        return rows
    finally:
        env.close()


@functools.lru_cache(maxsize=4)
def train_set_tasks(train_json: str) -> list[Any]:
    """The tasks of a training set named by ``extra_info["train_set"]`` (JSON of ``name``, ``path``,
    ``dataset``, ``seed``, ``limit``), loaded once per process."""
    from benchmarks.training_data import load_train_tasks

    spec = json.loads(train_json)
    if not isinstance(spec, dict) or "name" not in spec:
        raise ConfigError(f"train_set {train_json!r} is not an object with a name (nq, deepmath or combined)")
    allowed = {"name", "path", "dataset", "seed", "limit"}
    if set(spec) - allowed:
        raise ConfigError(f"train_set has unknown keys {sorted(set(spec) - allowed)}; use {sorted(allowed)}")
    return load_train_tasks(**spec)


def make_row_env(env_id: str, split: str, env_kwargs: dict[str, Any], train_json: str = "") -> Any:
    """The env a row plays in: ``env_id`` with its own tasks, or with the training set's (``train_json``)."""
    extra = {"tasks": train_set_tasks(train_json)} if train_json else {}
    return gym.make(env_id, split=split, **env_kwargs, **extra)


def protocol_sources(path: str | Path) -> list[tuple[str, str, int | None, dict[str, Any]]]:
    """``(env_id, split, num_tasks, options)`` of each benchmark in a leaderboard protocol TOML file."""
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10
        import tomli as tomllib  # type: ignore[no-redef]
    try:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"cannot read protocol {path}: {exc}") from None
    out = []
    for bench in data.get("benchmarks", []):
        if "env_id" not in bench:
            raise ConfigError(f"protocol {path}: a [[benchmarks]] entry has no env_id")
        out.append(
            (
                str(bench["env_id"]),
                str(bench.get("split", "test")),
                bench.get("num_tasks"),
                dict(bench.get("options", {})),
            )
        )
    return out


def write_parquet(rows: Sequence[dict[str, Any]], out: str | Path) -> Path:
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not rows:
        raise ConfigError("no rows to write: check the env ids, split and num_tasks")
    path = Path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(list(rows)), path)
    return path


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m agents.integrations.verl_data", description=__doc__.splitlines()[0])
    ap.add_argument("--env-id", action="append", default=[], help="an agentflow/* id (repeatable)")
    ap.add_argument("--protocol", default="", help="a leaderboard protocol .toml file (its benchmarks and splits)")
    ap.add_argument("--split", default="train", help="split for --env-id (protocols name their own)")
    ap.add_argument("--num-tasks", type=int, default=None, help="first N tasks of each env (default: all)")
    ap.add_argument("--env-kwargs", default="{}", help="JSON kwargs for gymnasium.make (e.g. max_turns)")
    ap.add_argument(
        "--emit", choices=("turns", "trajectory"), default="turns", help="one sample per turn or per rollout"
    )
    ap.add_argument(
        "--tool-calling",
        action="store_true",
        help="train the native tool-calling format (Hermes <tool_call> turns; needs --emit trajectory)",
    )
    ap.add_argument(
        "--train-set",
        choices=("nq", "deepmath", "combined"),
        default=None,
        help="AgentFlow's training set, played in --env-id's flow (tools, scorer); needs one --env-id",
    )
    ap.add_argument("--train-path", default=None, help="a local file of the training set (Parquet/JSON/JSONL)")
    ap.add_argument("--train-limit", type=int, default=None, help="the first N tasks of the shuffled training set")
    ap.add_argument("--out", required=True, help="output .parquet path")
    args = ap.parse_args(argv)
    try:
        env_kwargs = json.loads(args.env_kwargs)
        sources = [(e, args.split, args.num_tasks, {}) for e in args.env_id]
        if args.protocol:
            sources += protocol_sources(args.protocol)
        if not sources:
            raise ConfigError("give --env-id or --protocol")
        train_set = None
        if args.train_set:
            if len(args.env_id) != 1 or args.protocol:
                raise ConfigError("--train-set plays the set in one env: give exactly one --env-id and no --protocol")
            train_set = {"name": args.train_set, "path": args.train_path, "limit": args.train_limit}
            train_set = {k: v for k, v in train_set.items() if v is not None}
        rows = []
        for env_id, split, num_tasks, options in sources:
            if args.tool_calling and args.emit != "trajectory":
                raise ConfigError("--tool-calling needs --emit trajectory")
            kwargs = {**options, **env_kwargs}
            rows += verl_rows(
                env_id, split, args.num_tasks or num_tasks, kwargs, args.emit, args.tool_calling, train_set=train_set
            )
        path = write_parquet(rows, args.out)
    except (ConfigError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(json.dumps({"rows": len(rows), "out": str(path)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
