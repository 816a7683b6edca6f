"""pytest plugin (entry point ``pytest11``): score-regression checks against stored references.

``@pytest.mark.leaderboard(policy=..., protocol=...)`` plus the ``leaderboard`` fixture runs the
policy and fails when a benchmark's 95% interval excludes the stored reference; options select
protocols (``--leaderboard-protocol``) and record new references (``--leaderboard-record``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

MARKER_HELP = (
    "leaderboard(policy, protocol='offline-v1', reference=None, fast=True, tolerance=0.0): "
    "score-regression check of a policy against a stored reference, run through the `leaderboard` fixture"
)


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
        help="folder of stored references (default: leaderboards/results)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER_HELP)


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
    ) -> Any:
        """Evaluate ``policy`` on ``protocol`` and compare with the stored ``reference`` run.

        Arguments default to the test's ``leaderboard`` marker. Returns the
        :class:`leaderboards.check.CheckReport`; calls ``pytest.fail`` with the table when it fails.
        """
        from leaderboards.check import compare_to_reference, default_reference_name, load_reference
        from leaderboards.protocol import load_protocol
        from leaderboards.runner import EvalConfig, evaluate
        from leaderboards.store import RESULTS_DIR

        kw = self.marker_kwargs
        policy = policy or kw.get("policy")
        if not policy:
            raise pytest.UsageError("leaderboard check needs a policy: @pytest.mark.leaderboard(policy='scripted')")
        protocol = str(protocol or kw.get("protocol", "offline-v1"))
        name = load_protocol(protocol).name  # a protocol given by path is stored under its name
        selected = self.config.getoption("--leaderboard-protocol")
        if selected and protocol not in selected and name not in selected:
            pytest.skip(f"protocol {protocol} not selected by --leaderboard-protocol {' '.join(selected)}")
        reference = reference or kw.get("reference") or default_reference_name(policy)
        results = Path(self.config.getoption("--leaderboard-results") or RESULTS_DIR)
        tolerance = float(kw.get("tolerance", 0.0) if tolerance is None else tolerance)
        if self.config.getoption("--leaderboard-record"):
            return self._record(policy, protocol, reference, results)
        fast = bool(kw.get("fast", True) if fast is None else fast) and not self.config.getoption("--leaderboard-full")
        ref = load_reference(name, reference, results)
        new = evaluate(
            EvalConfig(
                policy=policy,
                protocol=protocol,
                out=self.workdir,
                fast=fast,
                overwrite=True,
                progress=False,
                name=f"check-{default_reference_name(policy)}",
            )
        )
        report = compare_to_reference(new, ref, tolerance=tolerance)
        if not report.ok:
            pytest.fail(report.message(), pytrace=False)
        return report

    def _record(self, policy: str, protocol: str, reference: str, results: Path) -> Any:
        from leaderboards.runner import EvalConfig, evaluate
        from leaderboards.store import git_state

        commit, dirty = git_state()
        if dirty or commit is None:
            pytest.fail(
                "refusing to record a leaderboard reference: the git tree is "
                f"{'not a checkout' if commit is None else 'dirty'}; commit your changes first so the "
                "reference names the code that produced it",
                pytrace=False,
            )
        return evaluate(
            EvalConfig(
                policy=policy,
                protocol=protocol,
                out=results,
                name=reference,
                overwrite=True,
                progress=False,
                notes="recorded by pytest --leaderboard-record",
            )
        )


@pytest.fixture
def leaderboard(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> LeaderboardGuard:
    """Score-regression guard; configure with ``@pytest.mark.leaderboard(...)`` and call ``leaderboard.check()``."""
    marker = request.node.get_closest_marker("leaderboard")
    kwargs = dict(marker.kwargs) if marker else {}
    if marker and marker.args:
        kwargs.setdefault("policy", marker.args[0])
    return LeaderboardGuard(request.config, kwargs, tmp_path_factory.mktemp("leaderboard"))
