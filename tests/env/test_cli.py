"""The ``agentflow-env`` command as users meet it: flags and their aliases, where outputs go, ``module:attr``
policies from the current directory, progress and logging, one-line errors, the tiny LM, ``list`` and the
``agents`` name clash with openai-agents.

Commands run in fresh processes from temporary folders, through ``python -I`` so the current directory is on
``sys.path`` only when the CLI itself puts it there (as the installed console script behaves).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agentflow_env.cli import COMMANDS, build_parser, main, require_env_id
from agentflow_env.error import ConfigError
from agentflow_env.registration import registered_ids

ROOT = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-I", "-c", "import sys; from agentflow_env.cli import main; sys.exit(main())"]
GEN24 = next(i for i in registered_ids(latest_only=True) if i.startswith("agentflow/Gen-GameOf24-"))
PAPER24 = next(i for i in registered_ids(latest_only=True) if i.startswith("agentflow/GameOf24-"))

TINY_PROTOCOL = f"""
name = "cli-test"
description = "Gen-GameOf24 only, for the CLI tests"
max_turns = 3
seeds = [0]
samples_per_task = 1
fast_tasks = 2
[env]
executor = "direct"
verifier = "rule"
generator = "planner"
[[benchmarks]]
env_id = "{GEN24}"
label = "G24"
category = "math"
num_tasks = 4
options = {{ seed = 1 }}
"""


def run_cli(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 300
) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    full_env.pop("AGENTFLOW_DEBUG", None)
    return subprocess.run(
        [*CLI, *args], cwd=cwd, env=full_env, capture_output=True, text=True, timeout=timeout, check=False
    )


@pytest.fixture
def protocol(tmp_path: Path) -> Path:
    path = tmp_path / "cli-test.toml"
    path.write_text(TINY_PROTOCOL, encoding="utf-8")
    return path


# ---------------------------------------------------------------------------------------------- flags
def _subparsers(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()):
    """(command path, parser) for every parser that takes options, nested ones included."""
    nested = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    yield path, parser
    for action in nested:
        for name, sub in action.choices.items():
            yield from _subparsers(sub, (*path, name))


def _command_parsers() -> dict[tuple[str, ...], argparse.ArgumentParser]:
    parsers = {}
    for name in COMMANDS:
        top = build_parser(name)
        sub = next(a for a in top._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
        for path, parser in _subparsers(sub, (name,)):
            parsers[path] = parser
    return parsers


# what a command needs besides the option under test
REQUIRED = {
    ("eval",): ["--policy", "random"],
    ("play",): [GEN24],
    ("build-index",): ["--format", "dpr", "--input", "x.tsv", "--output-dir", "idx"],
    ("serve",): ["hf:tiny"],
    ("judge-check",): ["--judge-engine", "scripted:echo"],
    ("leaderboard", "compare"): ["run-a", "run-b"],
    ("retrieval-server",): ["--index", "idx"],
}


def _value(action: argparse.Action) -> list[str]:
    if action.nargs == 0:
        return []
    if action.choices:
        return [str(next(iter(action.choices)))]
    if "json" in getattr(action.type, "__name__", ""):
        return ["{}"]
    return ["1"]


def test_every_flag_parses() -> None:
    checked = 0
    for path, parser in _command_parsers().items():
        base = list(path) + REQUIRED.get(path, [])
        table = parser._option_string_actions
        for option, action in table.items():
            if option in ("-h", "--help"):
                continue
            canonical = next(o for o in action.option_strings if o.startswith("--"))
            args = _value(action)
            got = build_parser(path[0]).parse_args([*base, option, *args])
            want = build_parser(path[0]).parse_args([*base, canonical, *args])
            assert vars(got) == vars(want), (path, option)
            assert hasattr(got, action.dest), (path, option)
            checked += 1
    assert checked > 100


def test_flags_are_kebab_case_with_no_hidden_spellings() -> None:
    for path, parser in _command_parsers().items():
        visible = [o for a in parser._actions for o in a.option_strings]
        assert not [o for o in visible if "_" in o], path
        hidden = [o for o, a in parser._option_string_actions.items() if o not in a.option_strings]
        assert hidden == [], (path, hidden)


@pytest.mark.parametrize(
    ("command", "old"),
    [(("train",), "--output_dir"), (("sft",), "--out"), (("eval",), "--out"), (("build-index",), "--out")],
)
def test_old_spellings_are_refused(command: tuple[str, ...], old: str) -> None:
    parser = _command_parsers()[command]
    assert old not in parser._option_string_actions


def test_every_flag_the_docs_document_exists() -> None:
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    if not pages[0].is_file():
        pytest.skip("no README next to the package (installed, not a clone)")
    parsers = _command_parsers()
    found = 0
    for page in pages:
        for match in re.findall(r"agentflow-env ([a-z][^`|#\n]*)", page.read_text(encoding="utf-8")):
            line = match.split("&&")[0]  # a chained command is checked on its own
            words = line.split()
            path = (words[0], words[1]) if len(words) > 1 and (words[0], words[1]) in parsers else (words[0],)
            if path not in parsers:
                assert words[0] not in COMMANDS, f"{page.name} shows `agentflow-env {line}` with an unknown subcommand"
                continue
            for flag in re.findall(r"(?<![\w-])--[A-Za-z][\w-]*", line):
                if flag in parsers[path]._option_string_actions:
                    found += 1
                else:
                    raise AssertionError(f"{page.name}: `agentflow-env {line.strip()}`: {flag} does not exist")
    assert found >= 30


# ---------------------------------------------------------------------------------------------- outputs
def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    return {str(p.relative_to(folder)): (p.stat().st_mtime_ns, p.stat().st_size) for p in folder.rglob("*")}


def test_eval_and_render_write_under_the_current_directory(tmp_path: Path, protocol: Path) -> None:
    before = {name: _snapshot(ROOT / "leaderboards" / name) for name in ("results", "site")}
    work = tmp_path / "work"
    work.mkdir()
    done = run_cli("eval", "--policy", "random", "--protocol", str(protocol), "--fast", "--json", cwd=work)
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert (work / summary["run"]).resolve().is_relative_to((work / "runs" / "leaderboard").resolve())
    assert (work / "runs" / "leaderboard" / "cli-test").is_dir()
    assert "score=" in done.stderr  # the progress bar carries the running score
    shown = run_cli("leaderboard", "render", "--no-charts", cwd=work)
    assert shown.returncode == 0, shown.stderr
    assert (work / "runs" / "site" / "index.html").is_file()
    assert "cli-test" in (work / "runs" / "site" / "leaderboard.json").read_text(encoding="utf-8")
    after = {name: _snapshot(ROOT / "leaderboards" / name) for name in ("results", "site")}
    assert after == before, "a command without --output-dir wrote into the checkout"


def test_sft_shows_loss_writes_under_runs_and_prints_json(tmp_path: Path) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    done = run_cli("sft", "--episodes", "4", "--max-steps", "2", "--threads", "1", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    summary = json.loads(done.stdout)
    assert summary["steps"] == 2 and summary["final_loss"] > 0
    assert (tmp_path / "runs" / "sft-tiny" / "sft_metrics.json").is_file()
    assert re.search(r"sft \(\d+ turns\).*loss=\d+\.\d{4}", done.stderr)


# ---------------------------------------------------------------------------------------------- module:attr
MY_POLICY = """
import re


class SumThenAnswer:
    \"\"\"Answers each question with the sum of the numbers in it (a user policy: act(observations) -> actions).\"\"\"

    def act(self, observations):
        return [
            "Final Answer: " + "+".join(re.findall(r"\\d+", obs["question"])[:4])
            for obs in observations
        ]
"""


def test_eval_imports_a_policy_from_the_current_directory(tmp_path: Path, protocol: Path) -> None:
    (tmp_path / "my_policy.py").write_text(MY_POLICY, encoding="utf-8")
    done = run_cli(
        "eval", "--policy", "my_policy:SumThenAnswer", "--protocol", str(protocol), "--fast", "--json", cwd=tmp_path
    )
    assert done.returncode == 0, done.stderr
    run = Path(json.loads(done.stdout)["run"])
    record = json.loads((tmp_path / run / "run.json").read_text(encoding="utf-8"))
    assert record["policy"] == "my_policy:SumThenAnswer"
    answers = [json.loads(line) for line in (tmp_path / run / "trajectories.jsonl").read_text().splitlines()]
    assert answers and all("+" in json.dumps(a) for a in answers)


def test_a_policy_module_that_is_not_there_says_how_to_make_it_importable(tmp_path: Path, protocol: Path) -> None:
    done = run_cli("eval", "--policy", "not_here:Policy", "--protocol", str(protocol), "--fast", cwd=tmp_path)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("error: ") and "not_here.py" in line and "PYTHONPATH" in line


# ---------------------------------------------------------------------------------------------- errors
ERROR_CASES = {
    "list": ["list", "--no-such-flag"],
    "eval-protocol": ["eval", "--policy", "random", "--protocol", "no-such-protocol"],
    "eval-policy": ["eval", "--policy", "nope"],
    "render": ["leaderboard", "render", "--results", "missing-folder"],
    "show": ["leaderboard", "show", "--results", "missing-folder"],
    "play-unknown": ["play", "agentflow/GameOf42-v1"],
    "play-no-data": ["play", PAPER24],
    "train": ["train", "--eps-low", "1.5"],
    "train-env": ["train", "--env-id", "agentflow/Nope-v1"],
    "sft": ["sft", "--env-id", "Gen-GameOf42"],
    "build-index": ["build-index", "--format", "dpr", "--input", "missing.tsv", "--output-dir", "idx"],
    "tiny-lm": ["tiny-lm", "--build", "--cache-dir", "a-file"],
    "serve": ["serve", "nobackend:model"],
    "env-server": ["env-server", "--port", "not-a-port"],
    "sandbox-server": ["sandbox-server", "--host", "0.0.0.0", "--port", "0"],
    "no-command": ["no-such-command"],
}


@pytest.mark.parametrize("case", sorted(ERROR_CASES))
def test_every_subcommand_fails_with_one_error_line(case: str, tmp_path: Path) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    env = {"AGENTFLOW_DATA_DIR": ""}  # the paper benchmarks find no data
    done = run_cli(*ERROR_CASES[case], cwd=tmp_path, env=env, timeout=120)
    assert done.returncode != 0
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "runs").exists()


def test_errors_say_what_to_do(tmp_path: Path) -> None:
    env = {"AGENTFLOW_DATA_DIR": ""}
    unknown = run_cli("play", "agentflow/Gen-GameOf42", cwd=tmp_path, env=env).stderr
    assert "agentflow-env list" in unknown and GEN24 in unknown  # the close match is offered
    no_data = run_cli("play", PAPER24, cwd=tmp_path, env=env).stderr
    assert "--data-dir" in no_data and "AGENTFLOW_DATA_DIR" in no_data
    traced = run_cli("play", PAPER24, "--debug", cwd=tmp_path, env=env)
    assert "Traceback" in traced.stderr and "DataError" in traced.stderr and "error: " in traced.stderr


def test_require_env_id_suggests_close_matches() -> None:
    assert require_env_id(GEN24) == GEN24
    with pytest.raises(ConfigError, match=re.escape(GEN24)):
        require_env_id("gen-gameof24")
    with pytest.raises(ConfigError, match="agentflow-env list"):
        require_env_id("agentflow/Zzzz-v9")


# ---------------------------------------------------------------------------------------------- logging
LOG_UNDER_BAR = """
import logging, sys, time
from tqdm import tqdm
from agentflow_env.cli import route_logging
route_logging()
bar = tqdm(total=3, file=sys.stderr, mininterval=0, desc="work")
bar.update(1)
logging.getLogger("agentflow_env.tools.python.sandbox.launcher").warning("sandbox note: a worker was replaced")
import warnings; warnings.warn("a library warning")
bar.update(2)
bar.close()
"""


def test_log_records_and_warnings_print_above_the_progress_bar() -> None:
    done = subprocess.run([sys.executable, "-c", LOG_UNDER_BAR], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    pieces = [p.strip() for p in re.split(r"[\r\n]", done.stderr)]
    # each record is a line of its own: not glued to the bar's text, and the bar continues afterwards
    assert "WARNING agentflow_env.tools.python.sandbox.launcher: sandbox note: a worker was replaced" in pieces
    assert any(p.startswith("WARNING py.warnings:") and p.endswith("a library warning") for p in pieces)
    assert any("3/3" in p for p in pieces)


# ---------------------------------------------------------------------------------------------- tiny LM
def test_tiny_lm_print_path_names_the_cache_folder(tmp_path: Path) -> None:
    done = run_cli("tiny-lm", "--print-path", "--cache-dir", str(tmp_path / "cache"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    path = Path(done.stdout.strip())
    assert path.parent == tmp_path / "cache" and path.name.startswith("tiny_lm-")
    described = json.loads(run_cli("tiny-lm", "--json", "--cache-dir", str(tmp_path / "cache"), cwd=tmp_path).stdout)
    assert described == {"path": str(path), "built": False, "spec": "hf:tiny"}


def test_tiny_lm_build_and_hf_tiny_resolve_to_the_same_folder(tmp_path: Path, monkeypatch) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from agentflow_env.engines import make_engine, resolve_model
    from agents.policies.registry import make_policy
    from agents.tiny_lm import tiny_lm_path

    built = run_cli("tiny-lm", "--build", cwd=tmp_path)
    assert built.returncode == 0, built.stderr
    path = Path(built.stdout.strip())
    assert path == tiny_lm_path() and (path / "config.json").is_file()
    monkeypatch.chdir(tmp_path)
    assert resolve_model("hf", "tiny") == str(path)
    assert Path(make_engine("hf:tiny").name) == path
    assert Path(make_policy("hf:tiny").model.config._name_or_path) == path
    (tmp_path / "tiny").mkdir()  # a folder of that name here is a path, not the alias
    assert resolve_model("hf", "tiny") == "tiny"
    assert resolve_model("hf", "org/tiny") == "org/tiny" and resolve_model("openai", "tiny") == "tiny"


# ---------------------------------------------------------------------------------------------- list
def test_list_shows_the_tool_names_actions_use(capsys) -> None:
    import gymnasium as gym

    assert main(["list", "--json", "--no-size"]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    generated = [i for i in registered_ids(latest_only=True) if i.startswith("agentflow/Gen-")]
    assert generated
    for env_id in generated:
        env = gym.make(env_id, split="test")
        tools = env.unwrapped.tools
        names = list(tools) if isinstance(tools, dict) else [t.name for t in tools]
        env.close()
        assert rows[env_id]["tools"] == ", ".join(names), env_id
    assert "Python_Coder_Tool" in rows[PAPER24]["tools"] and "python" in rows[PAPER24]["tool_keys"]


# ---------------------------------------------------------------------------------------------- agents clash
def _fake_openai_agents(site: Path, agents_dir: Path | None = None) -> None:
    """The layout the openai-agents wheel installs: site/agents/ and its dist-info RECORD naming those files."""
    agents = site / "agents"
    if agents_dir is None:
        agents.mkdir(parents=True)
        (agents / "__init__.py").write_text("from .agent import Agent\n")
        (agents / "agent.py").write_text("class Agent: ...\n")
    else:
        shutil.copytree(agents_dir, agents, ignore=shutil.ignore_patterns("__pycache__"))
        (agents / "agent.py").write_text("class Agent: ...\n")
    info = site / "openai_agents-0.6.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: openai-agents\nVersion: 0.6.0\n")
    (info / "RECORD").write_text("agents/__init__.py,,\nagents/agent.py,,\n")


def test_a_foreign_agents_package_is_named_with_the_fix(tmp_path: Path, protocol: Path) -> None:
    _fake_openai_agents(tmp_path / "site")
    env = {"PYTHONPATH": str(tmp_path / "site")}
    done = subprocess.run(
        [sys.executable, "-m", "agentflow_env.cli", "eval", "--policy", "random", "--protocol", str(protocol)],
        cwd=tmp_path,
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    [line] = done.stderr.strip().splitlines()
    assert done.returncode == 2 and line.startswith("error: ")
    assert str(tmp_path / "site" / "agents") in line and "pip uninstall openai-agents" in line


def test_openai_agents_files_in_this_packages_folder_fail_at_import(tmp_path: Path) -> None:
    import agents

    _fake_openai_agents(tmp_path / "site", Path(agents.__file__).parent)
    done = subprocess.run(
        [sys.executable, "-c", "import agents"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert "ImportError" in done.stderr and "mixes two packages" in done.stderr and "openai-agents" in done.stderr


def test_openai_agents_installed_elsewhere_warns(tmp_path: Path) -> None:
    _fake_openai_agents(tmp_path / "site")
    done = subprocess.run(
        [sys.executable, "-W", "error::RuntimeWarning", "-c", "import agents"],
        cwd=ROOT,  # the checkout's agents/ comes first on sys.path, the other one is shadowed
        env={**os.environ, "PYTHONPATH": str(tmp_path / "site")},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1 and "RuntimeWarning" in done.stderr and "openai-agents is installed too" in done.stderr
