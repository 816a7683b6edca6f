"""``agentflow-env eval``'s flags are generated from :class:`EvalConfig`: every field a user can set has a flag,
and each flag lands in its field with the field's type."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest

from agentflow_env.config import flag_of, flag_values
from leaderboards.cli import configure_eval
from leaderboards.runner import EvalConfig


def _parse(*argv: str) -> tuple[argparse.Namespace, EvalConfig]:
    parser = argparse.ArgumentParser()
    configure_eval(parser)
    args = parser.parse_args(list(argv))
    return args, EvalConfig(**flag_values(args, EvalConfig))


def test_every_user_field_has_a_flag() -> None:
    parser = argparse.ArgumentParser()
    configure_eval(parser)
    flags = {s for a in parser._actions for s in a.option_strings}
    for f in dataclasses.fields(EvalConfig):
        if f.metadata.get("cli", True):
            assert flag_of(f) in flags, f.name
    code_only = {f.name for f in dataclasses.fields(EvalConfig) if not f.metadata.get("cli", True)}
    assert code_only == {"fast_tasks", "code_dir", "policy_factory"}


def test_defaults_are_the_config_defaults() -> None:
    args, config = _parse("--policy", "scripted")
    assert config == EvalConfig(policy="scripted")
    assert config.out == Path("runs/leaderboard") and config.progress and not config.fast
    assert not args.dry_run and args.latency == 1.5 and not args.json


def test_flags_land_in_their_fields_typed() -> None:
    _, config = _parse(
        "--policy", "random:3", "--protocol", "offline-v1", "--output-dir", "out", "--batch-window", "0.02",
        "--concurrency", "8", "--judge-concurrency", "4", "--no-progress", "--fast", "--overwrite",
        "--notes", "a note", "--ray-workers", "2",
    )  # fmt: skip
    assert config.out == Path("out") and isinstance(config.out, Path)
    assert config.batch_window_s == 0.02 and config.concurrency == 8 and config.judge_concurrency == 4
    assert config.progress is False and config.fast is True and config.overwrite is True
    assert (config.protocol, config.notes, config.ray_workers) == ("offline-v1", "a note", 2)


def test_policy_is_required_and_bad_numbers_are_refused(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        _parse()
    assert "--policy" in capsys.readouterr().err
    with pytest.raises(Exception, match="concurrency"):
        _parse("--policy", "scripted", "--concurrency", "many")
