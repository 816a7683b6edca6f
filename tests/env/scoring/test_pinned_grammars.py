"""Every grammar's verdicts and readings stay as they were recorded (``tests/grammar_digests.py``): a later grammar,
or any change to a scorer, must not move the scores of the ids that were measured with an older one."""

from __future__ import annotations

import pytest

from tests.grammar_digests import PAPER, READINGS, VERDICTS, VERDICTS_V3, VERDICTS_V3_SAMPLE, readings, verdicts

pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date:DeprecationWarning")


def _pins(table: dict[str, dict[str, tuple[int, ...]]]) -> list[tuple[str, str]]:
    return [
        (f"agentflow/{name}-v{v}", digest)
        for name, pinned in table.items()
        for digest, vs in pinned.items()
        for v in vs
    ]


def _data_dir(env_id: str, request: pytest.FixtureRequest) -> object:
    """AgentFlow's test sets for a paper benchmark (the test skips without them), else None."""
    name = env_id.split("/", 1)[1].rsplit("-v", 1)[0]
    return request.getfixturevalue("testsets_dir") if name in PAPER else None


@pytest.mark.parametrize(("env_id", "digest"), [(f"agentflow/{name}-v3", d) for name, d in VERDICTS_V3.items()])
def test_v3_verdicts_are_unchanged(env_id, digest, request):
    assert verdicts(env_id, _data_dir(env_id, request), **VERDICTS_V3_SAMPLE) == digest


@pytest.mark.parametrize(("env_id", "digest"), _pins(VERDICTS))
def test_verdicts_are_unchanged(env_id, digest, request):
    assert verdicts(env_id, _data_dir(env_id, request)) == digest


@pytest.mark.parametrize(("env_id", "digest"), _pins(READINGS))
def test_readings_are_unchanged(env_id, digest, request):
    assert readings(env_id, _data_dir(env_id, request)) == digest


def test_every_grammar_since_4_is_pinned_on_every_benchmark():
    from agentflow_env.registration import GRAMMAR_OF_VERSION

    pinned = {v for pins in READINGS.values() for vs in pins.values() for v in vs}
    assert pinned == set(GRAMMAR_OF_VERSION) - {3}
    for table in (VERDICTS, READINGS):
        for name, pins in table.items():
            assert sorted(v for vs in pins.values() for v in vs) == sorted(pinned), name
    assert set(READINGS) == set(VERDICTS) | set(PAPER)
