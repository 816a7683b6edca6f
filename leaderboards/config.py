"""What ``agentflow-env eval`` runs and where it writes: :class:`EvalConfig`, one field per command-line flag.

:mod:`leaderboards.runner` resolves a config's protocol into a :class:`~leaderboards.protocol.RunPlan` and executes
it; :mod:`leaderboards.cli` makes the flags from these fields.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentflow_env.config import doc_field
from leaderboards.store import run_name_for, validate_run_name

__all__ = ["EvalConfig"]


@dataclass
class EvalConfig:
    """What ``agentflow-env eval`` runs and where it writes; the command has one flag per field (see
    :func:`leaderboards.cli.configure_eval`), so a field's help here is the flag's help."""

    policy: str = doc_field("policy spec")
    protocol: str = doc_field("protocol name or path to a .toml file", default="offline-v2")
    out: Path = doc_field(  # under the current directory; references are written by --leaderboard-record
        "results folder; the run goes to OUTPUT_DIR/PROTOCOL/NAME",
        flag="--output-dir",
        default=Path("runs/leaderboard"),
    )
    name: str | None = doc_field("run name (None: from the policy spec), e.g. tiny-lm-sft", default=None)
    data_dir: str | None = doc_field(
        "folder of the paper benchmarks' test sets (None: $AGENTFLOW_DATA_DIR)", default=None
    )
    engine: str | None = doc_field(
        "engine spec of the env's LLM modules (llm modes, or the paper flow's query analysis, executor, verifier, "
        "final output and LLM tools), overriding the protocol's (recorded in the result)",
        default=None,
    )
    judge_engine: str | None = doc_field(
        'engine spec of the LLM judge for benchmarks with scorer = "judge", overriding the protocol\'s [judge] '
        "engine (recorded in the result), e.g. openai:gpt-4o@https://api.openai.com/v1",
        default=None,
    )
    concurrency: int | None = doc_field(
        "episodes in flight, each on its own (None: 64 when an HTTP server does the work: an HTTP planner, the "
        "paper flow or llm modes; else 16). The planner's engine allows as many requests in flight",
        default=None,
    )
    batch_window_s: float = doc_field(
        "seconds a planner batch waits for more ready episodes (never longer; not a barrier); an HTTP planner is "
        "asked per episode, without a window",
        flag="--batch-window",
        default=0.005,
    )
    judge_concurrency: int = doc_field("the LLM judge's own limit on requests in flight", default=16)
    control_engine: str | None = doc_field(
        "policy-only control: run every non-planner LLM (modules, LLM tools) on this fixed engine spec, or "
        "'offline' for the env's offline modules (not the paper flow); recorded in run.json",
        default=None,
    )
    ray: str | None = doc_field(
        "spread the episodes' envs over a Ray cluster: auto, an address (ray://HOST:10001), or local; the planner "
        "and the result files stay here (needs the ray extra, and this package on the workers)",
        default=None,
    )
    ray_workers: int | None = doc_field("Ray env actors (None: the cluster's CPUs)", default=None)
    agentflow_src: str | None = doc_field(
        "AgentFlow checkout whose prompts and judge a protocol such as paper-v2 reads (None: $AGENTFLOW_SRC); "
        "without it such a run uses this project's wording and is labelled not comparable",
        default=None,
    )
    fast: bool = doc_field("only the protocol's fast_tasks tasks per benchmark", switch=True, default=False)
    tool_calling: bool = doc_field(
        "the planner calls tools natively: hf: and engine planners get the env's tools as function schemas, "
        "rendered by the model's own chat template (tools=), and answer with Hermes <tool_call> blocks or plain "
        "content as the final answer; scripted planners emit their actions as Hermes calls (the run is named "
        "...-tools by default; docs/tool-calling.md)",
        switch=True,
        default=False,
    )
    # with ``fast``: tasks per benchmark instead of the protocol's (the sized score guard); not a flag
    fast_tasks: dict[str, int] | None = doc_field("", cli=False, default=None)
    # whose git state the record names (default: agentflow-env's own checkout); not a flag
    code_dir: Path | None = doc_field("", cli=False, default=None)
    overwrite: bool = doc_field("discard a stored run of the same name first", switch=True, default=False)
    allow_missing_tools: bool = doc_field(
        "run a protocol such as paper-v2 even when its search tools have no backend (the run is marked on the board "
        "and never labelled comparable)",
        switch=True,
        default=False,
    )
    progress: bool = doc_field("hide the progress bar", flag="--no-progress", switch=True, default=True)
    notes: str = doc_field("free text kept in the result record", default="")
    # env_id -> policy (tests); not a flag
    policy_factory: Callable[[str], Any] | None = doc_field("", cli=False, default=None, repr=False)

    @property
    def run_name(self) -> str:
        """The run's folder name under ``out/<protocol>/``: ``name`` (checked) or one made from the policy spec."""
        if self.name is None:
            return run_name_for(self.policy) + ("-tools" if self.tool_calling else "") + ("-fast" if self.fast else "")
        return validate_run_name(self.name)
