"""Evaluation protocols: what a leaderboard row was measured on, loaded from ``protocols/*.toml``.

A protocol fixes env ids and splits, task counts, seeds, samples per task, the turn budget, the
env's flow (``[env] flow = "paper"``: AgentFlow's solver module by module, with the prompt source, toolbox
and planner sampling preset of ``[paper]``; otherwise the env's own modes, offline or llm, with engine specs),
the scorer (and the judge engine of ``scorer = "judge"``) and which loader option receives each trial's
seed; its hash keys results.

A new version is a copy of the old file with a new ``name``; the old file gets ``superseded_by``.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentflow_env.config import FLOWS, MODES_ONLY
from agentflow_env.error import ConfigError
from agentflow_env.scoring import SCORER_NAMES

__all__ = [
    "CATEGORIES",
    "PAPER_DEFAULTS",
    "PROTOCOL_DIR",
    "BenchmarkEntry",
    "PlannedBenchmark",
    "PlannerSetup",
    "Protocol",
    "RunPlan",
    "WorkUnit",
    "list_protocols",
    "load_protocol",
]

PROTOCOL_DIR = Path(__file__).resolve().parent / "protocols"
# The paper's four categories, in the order its tables report them.
CATEGORIES = ("search", "agentic", "math", "science")
MODES = ("offline", "paper")
SCORERS = ("default", *SCORER_NAMES)  # "default": the benchmark's own scorer
_UNHASHED = ("description", "fast_tasks", "superseded_by")
# [paper]: what the paper flow runs with (agentflow_env.paper_flow): prompt source, toolbox, planner sampling
PAPER_DEFAULTS = {"prompts": "builtin", "toolbox": "as_coded", "sampling": "as_coded"}
# `prompts = "agentflow_src"` and `[judge] rules = "agentflow_src"`: AgentFlow's own text, read from the checkout
# the run names (--agentflow-src PATH or $AGENTFLOW_SRC); the path is not part of the protocol (or its hash)
AGENTFLOW_SRC = "agentflow_src"
JUDGE_RULES = ("builtin", AGENTFLOW_SRC)  # or "agentflow:PATH"
COMPARABLE = "comparable: AgentFlow's prompts and judge"
NOT_COMPARABLE = "own wording: not comparable with the reported rows"


def _toml_loads(text: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib  # a dependency on Python < 3.11 (pyproject)
    return tomllib.loads(text)


@dataclass(frozen=True)
class BenchmarkEntry:
    """One benchmark of a protocol: which env, which split, how many tasks, how it is scored."""

    env_id: str
    label: str
    category: str
    split: str = "test"
    num_tasks: int | None = None  # None: every task of the split
    scorer: str = "default"  # "default": the benchmark's own scorer; "judge": the LLM judge; or a rule by name
    options: dict[str, Any] = field(default_factory=dict)  # loader/tool kwargs given to gymnasium.make


@dataclass(frozen=True)
class PlannerSetup:
    """What the planner policy sends on every call: its sampling, extra request fields and system prompt.

    In the paper flow these are AgentFlow's planner settings (the ``[paper] sampling`` preset, its
    frequency penalty as ``extra_body``, the prompt source's planner system prompt); otherwise ``[sampling]``.
    """

    sampling: dict[str, Any]
    extra_body: dict[str, Any] = field(default_factory=dict)
    system_prompt: str | None = None


@dataclass(frozen=True)
class WorkUnit:
    """One episode to run: task ``index`` of ``benchmark`` under trial ``seed``, sample ``sample``."""

    env_id: str
    index: int
    seed: int
    sample: int

    @property
    def key(self) -> str:
        return f"{self.env_id}#{self.index}#s{self.seed}#k{self.sample}"

    def episode_seed(self) -> int:
        """A reset seed that differs per task, trial and sample, and never depends on run order."""
        digest = hashlib.sha256(self.key.encode("utf-8")).hexdigest()
        return int(digest[:8], 16)


@dataclass(frozen=True)
class Protocol:
    """A parsed protocol file (see ``leaderboards/protocols/offline-v2.toml`` for every field)."""

    name: str
    description: str
    mode: str
    max_turns: int
    seeds: tuple[int, ...]
    samples_per_task: int
    fast_tasks: int
    env: dict[str, Any]
    sampling: dict[str, Any]
    benchmarks: tuple[BenchmarkEntry, ...]
    source: str = ""
    judge: dict[str, Any] = field(default_factory=dict)  # [judge]: engine spec and JudgeScorer options
    trial_seed_option: str | None = None  # loader option given each trial's seed (None: trials share tasks)
    superseded_by: str | None = None
    paper: dict[str, Any] = field(default_factory=dict)  # [paper] of the paper flow, defaults filled in
    raw: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)
    # the AgentFlow checkout this run reads "agentflow_src" from (set by the runner; not hashed)
    agentflow_src: str | None = field(default=None, compare=False)

    @property
    def wants_agentflow_src(self) -> bool:
        """The protocol reads AgentFlow's prompts or judge from a checkout the run names."""
        return self.paper.get("prompts") == AGENTFLOW_SRC or self.judge.get("rules") == AGENTFLOW_SRC

    def with_agentflow_src(self, path: str | None) -> Protocol:
        """This protocol reading ``"agentflow_src"`` from ``path`` (``None``: this project's own wording)."""
        if path is not None:
            from agentflow_env.paper_flow.agentflow_source import find_package_dir

            find_package_dir(path)  # not a checkout: a clear error before anything runs
            path = str(Path(path).expanduser().resolve())
        return dataclasses.replace(self, agentflow_src=path)

    def _resolve(self, value: str) -> str:
        if value != AGENTFLOW_SRC:
            return value
        return f"agentflow:{self.agentflow_src}" if self.agentflow_src else "builtin"

    @property
    def paper_resolved(self) -> dict[str, Any]:
        """``[paper]`` as this run uses it: ``"agentflow_src"`` becomes ``agentflow:PATH``, or ``builtin``."""
        if not self.paper:
            return {}
        return {**self.paper, "prompts": self._resolve(str(self.paper["prompts"]))}

    @property
    def judge_rules(self) -> str:
        """The judge this run uses: ``builtin`` (this project's fenced judge, with the hedge rule) or
        ``agentflow:PATH`` (AgentFlow's test/calculate_score_unified.py)."""
        return self._resolve(str(self.judge.get("rules", "builtin")))

    @property
    def comparability(self) -> str | None:
        """For a protocol that reads AgentFlow's text: whether this run used it (``None`` for other protocols)."""
        if not self.wants_agentflow_src:
            return None
        return COMPARABLE if self.agentflow_src else NOT_COMPARABLE

    @property
    def clock(self) -> str:
        """The clock the episodes' time budget counts on: ``"wall"`` or ``"tokens"`` (``[env] budget_clock``)."""
        return str(self.env.get("budget_clock", "wall"))

    @property
    def flow(self) -> str:
        """``"paper"`` (AgentFlow's solver, :mod:`agentflow_env.paper_flow`) or ``"modes"`` (the env's own)."""
        return str(self.env.get("flow", "modes"))

    @property
    def hash(self) -> str:
        """sha256 (first 16 hex digits) of the canonical JSON of the parsed file.

        Comments, layout, ``description`` and ``fast_tasks`` don't count: they change no episode of a full run.
        In the paper flow ``[paper]`` counts with its defaults filled in, so stating a default changes nothing.
        """
        scored = {k: v for k, v in self.raw.items() if k not in _UNHASHED}
        if "env" in scored:  # budget_clock = "wall" (the default) stated or not: the same protocol
            from leaderboards.budgets import hashed_env

            scored["env"] = hashed_env(scored["env"])
        if self.flow == "paper":
            scored["paper"] = dict(self.paper)
        blob = json.dumps(scored, sort_keys=True, separators=(",", ":"), ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

    def benchmark(self, env_id: str) -> BenchmarkEntry:
        for entry in self.benchmarks:
            if entry.env_id == env_id:
                return entry
        raise ConfigError(f"{env_id} is not in protocol {self.name}; it has {', '.join(self.env_ids)}")

    @property
    def env_ids(self) -> list[str]:
        return [b.env_id for b in self.benchmarks]

    def env_kwargs(self, engine: str | None = None) -> dict[str, Any]:
        """Env constructor kwargs of this protocol (flow or modes, turn budget, engine) for ``gymnasium.make``."""
        kwargs = {k: v for k, v in self.env.items() if k != "engine"}
        kwargs["max_turns"] = self.max_turns
        chosen = engine or self.env.get("engine")
        if self.flow == "paper":
            kwargs.update(self.paper_resolved)
            if not chosen:
                raise ConfigError(
                    f'protocol {self.name} runs AgentFlow\'s modules (flow = "paper") and needs their engine: '
                    "`--engine SPEC` (e.g. openai:Qwen/Qwen2.5-7B-Instruct@http://127.0.0.1:8000/v1) or [env] engine"
                )
            kwargs["engine"] = chosen
        elif chosen and "llm" in (kwargs.get("executor"), kwargs.get("verifier"), kwargs.get("generator")):
            kwargs["engine"] = chosen
        return kwargs

    def planner(self) -> PlannerSetup:
        """The planner's sampling, extra request fields and system prompt under this protocol."""
        if self.flow != "paper":
            return PlannerSetup(sampling=dict(self.sampling))
        from agentflow_env.paper_flow import planner_sampling, planner_system_prompt

        preset = planner_sampling(self.paper["sampling"])
        params = {"temperature": preset.temperature, "top_p": preset.top_p, "max_tokens": preset.max_tokens}
        return PlannerSetup(
            sampling={**params, **self.sampling},  # [sampling] may add a seed only (checked on load)
            extra_body=preset.extra_body(),
            system_prompt=planner_system_prompt(self.paper_resolved["prompts"]),
        )

    def judge_engine(self, override: str | None = None) -> str | None:
        """The judge's engine spec: ``override`` (``--judge-engine``), else the protocol's ``[judge] engine``."""
        return override or self.judge.get("engine")

    @property
    def uses_judge(self) -> bool:
        return any(b.scorer == "judge" for b in self.benchmarks)

    @property
    def paper_comparable(self) -> bool:
        """Scored as the paper scores: a paper-mode protocol whose every benchmark uses the LLM judge."""
        return self.mode == "paper" and all(b.scorer == "judge" for b in self.benchmarks)

    def units(self, env_id: str, num_tasks: int, fast: bool = False, limit: int | None = None) -> list[WorkUnit]:
        """The episodes of one benchmark with ``num_tasks`` tasks available (``fast``: the first ``fast_tasks``,
        or the first ``limit`` when given, as the score guard sizes it)."""
        entry = self.benchmark(env_id)
        n = num_tasks if entry.num_tasks is None else min(entry.num_tasks, num_tasks)
        if fast:
            n = min(n, self.fast_tasks if limit is None else max(int(limit), 1))
        return [WorkUnit(env_id, i, s, k) for s in self.seeds for i in range(n) for k in range(self.samples_per_task)]

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d.pop("raw")
        d.pop("agentflow_src")
        d["hash"] = self.hash
        return d

    def resolve(
        self,
        *,
        engine: str | None = None,
        judge_engine: str | None = None,
        data_dir: str | None = None,
        fast: bool = False,
        fast_tasks: dict[str, int] | None = None,
    ) -> RunPlan:
        """This protocol with a run's choices, resolved once into what the runner executes (see :class:`RunPlan`).

        ``engine``/``judge_engine`` override the protocol's; ``data_dir`` goes to the loaders that take one;
        ``fast`` keeps the first ``fast_tasks`` tasks of each benchmark (or ``fast_tasks[env_id]``).
        """
        import gymnasium as gym

        import agentflow_env  # noqa: F401  (registers the env ids)

        env_kwargs = self.env_kwargs(engine)
        planned = []
        for entry in self.benchmarks:
            if entry.env_id not in gym.registry:
                from agentflow_env.registration import registered_ids

                raise ConfigError(
                    f"protocol {self.name} needs {entry.env_id}, which is not registered here; "
                    f"registered: {', '.join(registered_ids())}"
                )
            loader = _loader_options(entry.env_id)
            kwargs: dict[str, Any] = {**entry.options, **env_kwargs, "split": entry.split}
            if data_dir and "data_dir" in loader:
                kwargs["data_dir"] = data_dir
            trial = self.trial_seed_option if self.trial_seed_option in loader else None
            planned.append(PlannedBenchmark(entry, kwargs, trial))
        env = dict(self.env)
        if engine:
            env["engine"] = engine
        return RunPlan(
            protocol=self,
            benchmarks=tuple(planned),
            engine=env_kwargs.get("engine"),
            judge_engine=self.judge_engine(judge_engine) if self.uses_judge else None,
            judge_options={k: v for k, v in self.judge.items() if k not in ("engine", "rules")},
            planner=self.planner(),
            env=env,
            fast=fast,
            fast_tasks=dict(fast_tasks or {}),
        )


def _loader_options(env_id: str) -> frozenset[str]:
    """The options the benchmark's task loader states it takes (none for an env id without a benchmark)."""
    import gymnasium as gym

    bench = (gym.spec(env_id).kwargs or {}).get("benchmark")
    if bench is None:
        return frozenset()
    from benchmarks.specs import get_spec

    return frozenset(get_spec(bench).loader_options or ())


@dataclass(frozen=True)
class PlannedBenchmark:
    """One benchmark as a run makes it: the ``gymnasium.make`` kwargs (options, env settings, split, data
    folder) and the loader option that takes each trial's seed (``None``: the trials share one task set)."""

    entry: BenchmarkEntry
    make_kwargs: dict[str, Any]
    trial_option: str | None

    @property
    def env_id(self) -> str:
        return self.entry.env_id


@dataclass(frozen=True)
class RunPlan:
    """A protocol resolved once with a run's choices; :mod:`leaderboards.runner` executes it.

    It holds every fact the runner needs: per benchmark the env's kwargs and trial-seed option, the
    modules' and the judge's engines, the planner's settings, which tasks run (``fast``) and what the record
    names (``env``: the protocol's ``[env]`` with the engine override).
    """

    protocol: Protocol
    benchmarks: tuple[PlannedBenchmark, ...]
    engine: str | None  # the env modules' engine spec (None: offline modules)
    judge_engine: str | None  # None: no benchmark is judged
    judge_options: dict[str, Any]
    planner: PlannerSetup
    env: dict[str, Any]
    fast: bool = False
    fast_tasks: dict[str, int] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.protocol.name

    @property
    def env_ids(self) -> list[str]:
        return [b.env_id for b in self.benchmarks]

    def benchmark(self, env_id: str) -> PlannedBenchmark:
        for planned in self.benchmarks:
            if planned.env_id == env_id:
                return planned
        raise ConfigError(f"{env_id} is not in protocol {self.name}; it has {', '.join(self.env_ids)}")

    def make_kwargs(self, env_id: str, trial_seed: int | None = None) -> dict[str, Any]:
        """``gymnasium.make`` kwargs of ``env_id`` in trial ``trial_seed`` (the scorer and tasks come apart)."""
        planned = self.benchmark(env_id)
        kwargs = dict(planned.make_kwargs)
        if planned.trial_option and trial_seed is not None:
            kwargs[planned.trial_option] = trial_seed
        return kwargs

    def trial_key(self, env_id: str, seed: int | None) -> int | None:
        """Which task set an episode of trial ``seed`` plays: its own per trial, or one shared (``None``)."""
        return seed if self.benchmark(env_id).trial_option else None

    def units(self, env_id: str, num_tasks: int) -> list[WorkUnit]:
        """The episodes of one benchmark with ``num_tasks`` tasks available."""
        return self.protocol.units(env_id, num_tasks, fast=self.fast, limit=self.fast_tasks.get(env_id))

    @property
    def http_modules(self) -> bool:
        """Whether the env's modules call an LLM (the paper flow, or llm modes with an engine)."""
        return self.engine is not None

    def calls_per_episode(self, turns: float) -> float:
        """LLM calls of one episode of ``turns`` planner turns (the planner's included)."""
        judged = 1.0 if self.judge_engine else 0.0
        if self.protocol.flow == "paper":  # query analysis; planner, executor, tool, verifier per step; final
            return 2 + 4 * turns + judged  # (the generalist tool's call counted; other tools call none)
        env = self.env
        per_turn = 1 + sum(env.get(k) == "llm" for k in ("executor", "verifier"))
        return per_turn * turns + (env.get("generator") == "llm") + judged

    def describe(self, episodes: dict[str, int], concurrency: int, latency_s: float) -> str:
        """The plan in words, with the wall-time estimate of ``episodes`` at ``latency_s`` per LLM call."""
        total = sum(episodes.values())
        lines = [f"protocol {self.name} (hash {self.protocol.hash}), flow {self.protocol.flow}"]
        lines.append(f"  modules' engine: {self.engine or 'none (offline modules)'}")
        lines.append(f"  judge: {self.judge_engine or 'none'}")
        for planned in self.benchmarks:
            trial = f", trial seed -> {planned.trial_option}" if planned.trial_option else ""
            lines.append(f"  {planned.env_id}: {episodes.get(planned.env_id, 0)} episodes{trial}")
        lines.append(f"  {total} episodes, {concurrency} in flight, max {self.protocol.max_turns} turns")
        for label, turns in (("typical (2 turns)", 2.0), ("worst case", float(self.protocol.max_turns))):
            k = self.calls_per_episode(turns)
            seconds = total * k * latency_s / concurrency
            lines.append(
                f"  {label}: {k:g} LLM calls per episode, at {latency_s:g} s per call about "
                f"{_duration(seconds)} (bound: {concurrency} in flight / ({k:g} calls x {latency_s:g} s))"
            )
        return "\n".join(lines)


def _duration(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def list_protocols(directory: Path = PROTOCOL_DIR) -> list[str]:
    return sorted(p.stem for p in Path(directory).glob("*.toml"))


def load_protocol(name_or_path: str | Path) -> Protocol:
    """A protocol by name (``offline-v2``) from ``leaderboards/protocols`` or by path to a ``.toml`` file."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = PROTOCOL_DIR / f"{name_or_path}.toml"
    if not path.is_file():
        raise ConfigError(
            f"no protocol {name_or_path!r}; known: {', '.join(list_protocols())} (or give the path of a .toml file)"
        )
    try:
        raw = _toml_loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        raise ConfigError(f"{path} is not valid TOML: {exc}") from exc
    return _parse(raw, str(path))


def _require(raw: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    if key not in raw:
        raise ConfigError(f"{where}: missing required field {key!r}")
    value = raw[key]
    if not isinstance(value, kind):
        raise ConfigError(f"{where}: field {key!r} must be {kind}, got {type(value).__name__}")
    return value


def _parse(raw: dict[str, Any], source: str) -> Protocol:
    name = _require(raw, "name", str, source)
    mode = raw.get("mode", "offline")
    if mode not in MODES:
        raise ConfigError(f"{source}: mode={mode!r}; choose one of {', '.join(MODES)}")
    max_turns = int(_require(raw, "max_turns", int, source))
    seeds = tuple(int(s) for s in raw.get("seeds", [0]))
    samples = int(raw.get("samples_per_task", 1))
    if max_turns < 1 or samples < 1 or not seeds:
        raise ConfigError(f"{source}: max_turns and samples_per_task must be >= 1 and seeds non-empty")
    entries = []
    for i, b in enumerate(_require(raw, "benchmarks", list, source)):
        where = f"{source} benchmarks[{i}]"
        env_id = _require(b, "env_id", str, where)
        category = _require(b, "category", str, where)
        if category not in CATEGORIES:
            raise ConfigError(f"{where}: category={category!r}; choose one of {', '.join(CATEGORIES)}")
        num = b.get("num_tasks")
        if num is not None and (not isinstance(num, int) or num < 1):
            raise ConfigError(f"{where}: num_tasks must be a positive integer or absent (all tasks)")
        scorer = str(b.get("scorer", "default"))
        if scorer not in SCORERS:
            raise ConfigError(f"{where}: scorer={scorer!r}; choose one of {', '.join(SCORERS)}")
        options = dict(b.get("options", {}))
        trial_option = raw.get("trial_seed_option")
        if trial_option is not None and trial_option in options:
            raise ConfigError(
                f"{where}: options sets {trial_option!r}, which trial_seed_option gives each trial's seed; "
                "remove one of them"
            )
        entries.append(
            BenchmarkEntry(
                env_id=env_id,
                label=str(b.get("label", env_id.split("/")[-1])),
                category=category,
                split=str(b.get("split", "test")),
                num_tasks=num,
                scorer=scorer,
                options=options,
            )
        )
    if len({e.env_id for e in entries}) != len(entries):
        raise ConfigError(f"{source}: an env id is listed twice")
    judge = dict(raw.get("judge", {}))
    if not isinstance(judge.get("engine", ""), str):
        raise ConfigError(f"{source}: [judge] engine must be an engine spec string")
    rules = judge.get("rules", "builtin")
    if not isinstance(rules, str) or not (rules in JUDGE_RULES or rules.startswith("agentflow:")):
        raise ConfigError(
            f'{source}: [judge] rules={rules!r}; use "builtin" (this project\'s judge, with the hedge rule), '
            '"agentflow_src" (AgentFlow\'s, from --agentflow-src) or "agentflow:PATH"'
        )
    trial_seed_option = raw.get("trial_seed_option")
    if trial_seed_option is not None and not (isinstance(trial_seed_option, str) and trial_seed_option):
        raise ConfigError(f'{source}: trial_seed_option must name a loader option (e.g. "seed") or be absent')
    env = dict(raw.get("env", {}))
    from leaderboards.budgets import check_clock

    check_clock(env, source)
    sampling = dict(raw.get("sampling", {}))
    paper = _paper_settings(raw, env, sampling, source)
    return Protocol(
        name=name,
        description=str(raw.get("description", "")),
        mode=mode,
        max_turns=max_turns,
        seeds=seeds,
        samples_per_task=samples,
        fast_tasks=int(raw.get("fast_tasks", 10)),
        env=env,
        sampling=sampling,
        benchmarks=tuple(entries),
        source=source,
        judge=judge,
        trial_seed_option=trial_seed_option,
        superseded_by=raw.get("superseded_by"),
        paper=paper,
        raw=raw,
    )


def _paper_settings(raw: dict[str, Any], env: dict[str, Any], sampling: dict[str, Any], source: str) -> dict[str, Any]:
    """``[paper]`` with its defaults, checked against the paper flow's presets (empty outside the paper flow)."""
    flow = env.get("flow", "modes")
    if flow not in FLOWS:
        raise ConfigError(f"{source}: [env] flow={flow!r}; choose one of {', '.join(FLOWS)}")
    given = raw.get("paper", {})
    if flow != "paper":
        if given:
            raise ConfigError(f'{source}: [paper] applies to the paper flow only; add flow = "paper" to [env]')
        return {}
    if not isinstance(given, dict):
        raise ConfigError(f"{source}: [paper] must be a table (prompts, toolbox, sampling)")
    misplaced = sorted(k for k in env if k in MODES_ONLY)
    if misplaced:
        raise ConfigError(
            f'{source}: [env] {", ".join(misplaced)} do not apply to flow = "paper", which runs AgentFlow\'s own '
            "modules and budgets; remove them (the prompt source, toolbox and sampling go in [paper])"
        )
    unknown = sorted(set(given) - set(PAPER_DEFAULTS))
    if unknown:
        raise ConfigError(f"{source}: [paper] has no field {', '.join(unknown)}; it takes {', '.join(PAPER_DEFAULTS)}")
    from agentflow_env.paper_flow import SAMPLING_PRESETS, TOOLBOX_PRESETS

    paper = {**PAPER_DEFAULTS, **given}
    prompts = paper["prompts"]
    if not isinstance(prompts, str) or not (prompts in ("builtin", AGENTFLOW_SRC) or prompts.startswith("agentflow:")):
        raise ConfigError(
            f'{source}: [paper] prompts={prompts!r}; use "builtin", "agentflow_src" (the checkout of '
            '--agentflow-src) or "agentflow:PATH"'
        )
    for key, allowed in (("toolbox", TOOLBOX_PRESETS), ("sampling", SAMPLING_PRESETS)):
        if paper[key] not in allowed:
            raise ConfigError(f"{source}: [paper] {key}={paper[key]!r}; choose one of {', '.join(allowed)}")
    fixed = sorted(set(sampling) - {"seed"})
    if fixed:
        raise ConfigError(
            f"{source}: [sampling] {', '.join(fixed)} would override AgentFlow's planner sampling; in the paper "
            f'flow the preset [paper] sampling = "as_coded" or "as_stated" sets it ([sampling] may give a seed)'
        )
    return paper
