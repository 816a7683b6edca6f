"""Operator and policy input that becomes paths or numbers in results: run names, token counts."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from agentflow_env.error import ConfigError
from leaderboards.episodes import MAX_TOKENS_PER_ACTION, normalize_actions
from leaderboards.runner import EvalConfig, evaluate
from leaderboards.store import run_name_for, validate_run_name


@pytest.mark.parametrize("name", ["tiny-lm-sft", "run.1", "A_b-c.d", "x" * 80, run_name_for("hf:runs/x")])
def test_good_run_names_pass(name: str) -> None:
    assert validate_run_name(name) == name


@pytest.mark.parametrize(
    "name", ["../escape", "/abs/path", "a/b", "..", ".", ".hidden", "-x", "", "x" * 81, "a\x00b", "a b", "ok.lock", 7]
)
def test_run_names_that_would_leave_the_results_folder_are_refused(name) -> None:
    with pytest.raises(ConfigError, match=r"run name .* is not allowed"):
        validate_run_name(name)


def test_eval_refuses_a_bad_name_before_writing_anything(tmp_path: Path) -> None:
    out = tmp_path / "board"
    config = EvalConfig(policy="scripted", out=out, name="../../outside", progress=False)
    with pytest.raises(ConfigError, match="is not allowed"):
        evaluate(config)
    assert not out.exists() and not (tmp_path / "outside").exists() and not Path("outside").exists()


class _Item:
    def __init__(self, **fields):
        self.__dict__.update(fields)


@pytest.mark.parametrize(
    ("fields", "problem"),
    [
        ({"prompt_tokens": -3, "completion_tokens": 2}, "outside"),
        ({"prompt_tokens": 5, "completion_tokens": MAX_TOKENS_PER_ACTION + 1}, "outside"),
        ({"prompt_tokens": "12", "completion_tokens": 2}, "not a whole number"),
        ({"prompt_tokens": 1.5, "completion_tokens": 2}, "not a whole number"),
        ({"prompt_tokens": float("nan"), "completion_tokens": 2}, "not a whole number"),
        ({"prompt_tokens": True, "completion_tokens": 2}, "not a whole number"),
        ({"prompt_ids": 7, "action_ids": 3}, "without a length"),
    ],
)
def test_bad_token_counts_from_a_policy_are_unknown_not_recorded(fields, problem, caplog) -> None:
    with caplog.at_level(logging.WARNING):
        texts, tokens = normalize_actions(None, [_Item(text="a", **fields)], 1)
    assert texts == ["a"] and tokens == [None]
    assert any(problem in r.getMessage() for r in caplog.records), [r.getMessage() for r in caplog.records]


def test_good_token_counts_pass() -> None:
    items = [_Item(text="a", prompt_tokens=7, completion_tokens=0), _Item(text="b", prompt_tokens=3.0)]
    assert normalize_actions(None, items, 2)[1] == [{"prompt": 7, "completion": 0}, {"prompt": 3, "completion": 0}]
    ids = _Item(text="c", prompt_ids=[1, 2, 3], action_ids=[4])
    assert normalize_actions(None, [ids], 1)[1] == [{"prompt": 3, "completion": 1}]
