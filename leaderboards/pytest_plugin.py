"""pytest plugin (entry point ``pytest11``): score-regression checks against stored references.

``@pytest.mark.leaderboard(policy=..., protocol=...)`` plus the ``leaderboard`` fixture runs the
policy and fails when a benchmark's 95% interval excludes the stored reference; options select
protocols (``--leaderboard-protocol``) and record new references (``--leaderboard-record``).

It works for the user's own project: policies import from the rootdir and the current folder (under the
``pytest`` console script too), references live in the project (``--leaderboard-results``, the
``leaderboard_results`` ini key, default ``<rootdir>/leaderboard-refs``; never the installed package), a
recorded reference names the project's git state and a hash of the policy's module, and the fast check is
sized by a power calculation (``drop``/``power`` marker arguments) and says what it could not detect.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

MARKER_HELP = (
    "leaderboard(policy, protocol='offline-v2', reference=None, fast=True, tolerance=0.0, drop=0.15, power=0.8): "
    "score-regression check of a policy against a stored reference, run through the `leaderboard` fixture; "
    "the fast check runs enough tasks to catch a fall of `drop` with probability `power`"
)
DEFAULT_RESULTS = "leaderboard-refs"  # under the rootdir: the user's project, never the installed package
_REPORTS = pytest.StashKey[list]()


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("leaderboard", "agentflow-env leaderboard score-regression checks")
    group.addoption(
        "--leaderboard-protocol",
        action="append",
        default=None,
        metavar="NAME",
        help="only check these protocols (repeatable); leaderboard tests of other protocols skip",
    )
    group.addoption(
        "--leaderboard-record",
        action="store_true",
        default=False,
        help="record new references (full protocol, into the results folder) instead of checking; "
        "refuses a dirty git tree",
    )
    group.addoption(
        "--leaderboard-full",
        action="store_true",
        default=False,
        help="check on the whole protocol instead of its fast subset",
    )
    group.addoption(
        "--leaderboard-results",
        default=None,
        metavar="DIR",
        help="folder of stored references (default: the leaderboard_results ini value, else "
        f"<rootdir>/{DEFAULT_RESULTS})",
    )
    parser.addini(
        "leaderboard_results",
        f"folder of stored leaderboard references, relative to the rootdir (default {DEFAULT_RESULTS})",
        default=None,
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)
    config.stash[_REPORTS] = []
    # `pytest` (the console script) puts its own folder first on sys.path, not the current one, unlike
    # `python -m pytest`: add the rootdir and the current folder so `my_policy:Planner` imports either way
    for folder in (str(config.invocation_params.dir), str(config.rootpath)):
        if folder not in sys.path:
            sys.path.append(folder)


def results_dir(config: pytest.Config) -> Path:
    """Where references are read and recorded: the option, else the ini value (rootdir-relative), else
    ``<rootdir>/leaderboard-refs``."""
    option = config.getoption("--leaderboard-results")
    if option:
        return Path(option)
    ini = config.getini("leaderboard_results")
    return Path(config.rootpath) / (ini or DEFAULT_RESULTS)


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    reports = config.stash.get(_REPORTS, [])
    if reports:
        terminalreporter.section("leaderboard guard")
        for text in reports:
            terminalreporter.write_line(text)


@dataclass
class LeaderboardGuard:
    """What the ``leaderboard`` fixture gives a test: ``check()`` runs, compares and fails on regression."""

    config: pytest.Config
    marker_kwargs: dict[str, Any]
    workdir: Path

    def check(
        self,
        policy: str | None = None,
        protocol: str | None = None,
        reference: str | None = None,
        fast: bool | None = None,
        tolerance: float | None = None,
        drop: float | None = None,
        power: float | None = None,
    ) -> Any:
        """Evaluate ``policy`` on ``protocol`` and compare with the stored ``reference`` run.

        Arguments default to the test's ``leaderboard`` marker. Returns the
        :class:`leaderboards.check.CheckReport`; calls ``pytest.fail`` with the table when it fails.
        """
        from leaderboards.check import compare_to_reference, default_reference_name, load_reference, plan_guard
        from leaderboards.protocol import load_protocol
        from leaderboards.runner import EvalConfig, evaluate

        kw = self.marker_kwargs
        policy = policy or kw.get("policy")
        if not policy:
            raise pytest.UsageError("leaderboard check needs a policy: @pytest.mark.leaderboard(policy='scripted')")
        protocol = str(protocol or kw.get("protocol", "offline-v2"))
        name = load_protocol(protocol).name  # a protocol given by path is stored under its name
        selected = self.config.getoption("--leaderboard-protocol")
        if selected and protocol not in selected and name not in selected:
            pytest.skip(f"protocol {protocol} not selected by --leaderboard-protocol {' '.join(selected)}")
        reference = reference or kw.get("reference") or default_reference_name(policy)
        results = results_dir(self.config)
        tolerance = float(kw.get("tolerance", 0.0) if tolerance is None else tolerance)
        if self.config.getoption("--leaderboard-record"):
            return self._record(policy, protocol, reference, results)
        fast = bool(kw.get("fast", True) if fast is None else fast) and not self.config.getoption("--leaderboard-full")
        from agentflow_env.error import ConfigError

        try:
            ref = load_reference(name, reference, results)
        except ConfigError as exc:
            pytest.fail(str(exc), pytrace=False)
        plan = None
        if fast:
            drop = float(kw.get("drop", 0.15) if drop is None else drop)
            power = float(kw.get("power", 0.8) if power is None else power)
            plan = plan_guard(ref, drop=drop, power=power)
        new = evaluate(
            EvalConfig(
                policy=policy,
                protocol=protocol,
                out=self.workdir,
                fast=fast,
                fast_tasks=plan.tasks if plan else None,
                code_dir=Path(self.config.rootpath),
                overwrite=True,
                progress=False,
                name=f"check-{default_reference_name(policy)}",
            )
        )
        report = compare_to_reference(new, ref, tolerance=tolerance)
        if plan is not None:
            report.notes.extend(plan.notes)
        self.config.stash[_REPORTS].append(report.message())
        if not report.ok:
            pytest.fail(report.message(), pytrace=False)
        return report

    def _record(self, policy: str, protocol: str, reference: str, results: Path) -> Any:
        from leaderboards.runner import EvalConfig, evaluate
        from leaderboards.store import git_state

        rootdir = Path(self.config.rootpath)
        commit, dirty = git_state(rootdir)
        if dirty:
            pytest.fail(
                f"refusing to record a leaderboard reference: the git tree at {rootdir.name} is dirty; commit "
                "your changes first so the reference names the code that produced it",
                pytrace=False,
            )
        notes = "recorded by pytest --leaderboard-record"
        if commit is None:  # not a checkout: the policy module's hash (run.json policy_source) names the code
            notes += "; the project is not a git checkout, so only the policy's module hash names its code"
        result = evaluate(
            EvalConfig(
                policy=policy,
                protocol=protocol,
                out=results,
                name=reference,
                code_dir=rootdir,
                overwrite=True,
                progress=False,
                notes=notes,
            )
        )
        from leaderboards.store import pack_run

        if result.path is not None:
            pack_run(result.path)  # a stored reference is kept packed (about 9x smaller)
        where = os.path.relpath(results, self.config.invocation_params.dir)
        self.config.stash[_REPORTS].append(f"recorded {reference!r} for {result.record.protocol} into {where}")
        return result


@pytest.fixture
def leaderboard(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> LeaderboardGuard:
    """Score-regression guard; configure with ``@pytest.mark.leaderboard(...)`` and call ``leaderboard.check()``."""
    marker = request.node.get_closest_marker("leaderboard")
    kwargs = dict(marker.kwargs) if marker else {}
    if marker and marker.args:
        kwargs.setdefault("policy", marker.args[0])
    return LeaderboardGuard(request.config, kwargs, tmp_path_factory.mktemp("leaderboard"))
