"""The paper flow's command evaluator on memory and CPU bombs: every one is a bounded, clear refusal.

Executor commands are written by an LLM the planner steers, so they are hostile input. Each block runs in a
child process with its address space capped (``RLIMIT_AS``) and its CPU capped (``RLIMIT_CPU``), so a bomb
that escapes fails the test (a ``MemoryError``, a killed child, peak RSS over the bound) instead of taking
the machine with it. The bounds are ``agentflow_env.paper_flow.command_bounds``'s (``docs/limits.md``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
AS_LIMIT = 1_500 * 2**20  # the child's address space: a bomb fails inside it
CPU_LIMIT_S = 20  # the child's CPU seconds; a bounded refusal takes milliseconds
RSS_BOUND_MB = 400  # the child's peak RSS (the interpreter and the package are ~60-100 MB)
# the child's own peak: /proc's VmHWM starts afresh at exec (ru_maxrss keeps the forking parent's peak)
_PEAK = (
    "def peak_rss_mb():\n"
    "        try:\n"
    "            with open('/proc/self/status') as fh:\n"
    "                return next(int(l.split()[1]) for l in fh if l.startswith('VmHWM:')) / 1024\n"
    "        except (OSError, StopIteration):\n"
    "            return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024"
)

_CHILD = textwrap.dedent(
    """
    import json, resource, sys
    resource.setrlimit(resource.RLIMIT_AS, ({as_limit}, {as_limit}))
    resource.setrlimit(resource.RLIMIT_CPU, ({cpu}, {cpu}))
    {peak}
    from agentflow_env.paper_flow.commands import CommandError, run_block
    block = sys.stdin.read()
    out = {{}}
    try:
        value = run_block(block, lambda *a, **k: "tool result")
        out["kind"] = "value"
        out["size"] = len(value) if hasattr(value, "__len__") else None
    except BaseException as exc:
        out["kind"] = type(exc).__name__
        out["message"] = str(exc)[:300]
    out["rss_mb"] = peak_rss_mb()
    print(json.dumps(out))
    """
).format(as_limit=AS_LIMIT, cpu=CPU_LIMIT_S, peak=_PEAK)


def run_child(code: str, stdin: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=CPU_LIMIT_S * 3,
        env=env,
        cwd=ROOT,
    )
    assert proc.returncode == 0, f"the child died (rc {proc.returncode}): {proc.stderr[-800:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


# each is a class of operation whose result size is known from its operands: refused before it runs
BOMBS = {
    "repeat_str_int": "x = 'a' * 10000000000\nexecution = tool.execute(query=x)",
    "repeat_str_100gb": "execution = 'a' * 100000000000",
    "repeat_name": "n = 10000000000\nexecution = tool.execute(query='ab' * n)",
    "repeat_int_first": "execution = 10000000000 * 'a'",
    "repeat_list_of_big": "l = ['x' * 1000000] * 1000\nexecution = str(l)",
    "repeat_bytes": "execution = b'a' * 10000000000",
    "format_width": 'execution = "{0:>999999999}".format("a")',
    "format_precision": 'execution = "{0:.999999999f}".format(1.5)',
    "format_nested_width": 'w = 999999999\nexecution = "{0:>{1}}".format("a", w)',
    "format_repeated_field": 'execution = ("{0}" * 500).format("x" * 999999)',
    "fstring_width": "execution = f\"{'a':>999999999}\"",
    "fstring_precision": 'x = 1.5\nexecution = f"{x:.999999999f}"',
    "fstring_nested_width": "w = 999999999\nexecution = f\"{'a':>{w}}\"",
    "percent_width": 'execution = "%999999999s" % "a"',
    "percent_precision": 'execution = "%.999999999f" % 1.5',
    "percent_mapping_reuse": 'execution = ("%(a)s" * 2000) % {"a": "x" * 999999}',
    "join": 'execution = "".join(["x" * 1000000] * 1000)',
    "join_separator": 'execution = ("y" * 999999).join("x" * 999999)',
    "replace": 'execution = ("x" * 100000).replace("x", "y" * 100000)',
    "replace_empty": 'execution = ("x" * 999999).replace("", "y" * 1000)',
    "int_square": "x = 3\n" + "x *= x\n" * 26 + "execution = x",
    "int_power": "execution = 7 ** 10000000000",
    "int_shift": "execution = 1 << 10000000000",
    "round_ndigits": "execution = round(5, -100000000)",
    "sum_lists_over": "execution = sum([[0]] * 400000, [])",
    "str_of_container": "s = 'x' * 999999\nl = [s, s, s, s, s, s, s, s]\nexecution = str(l)",
    "work_total": "a = 'x' * 999999\n" + "b = a + 'y'\n" * 40 + "execution = b",
}


@pytest.mark.parametrize("name", sorted(BOMBS))
def test_bomb_is_refused_before_it_runs(name: str) -> None:
    out = run_child(_CHILD, BOMBS[name])
    assert out["kind"] == "CommandError", out
    assert "limit" in out["message"] or "not run" in out["message"], out
    assert out["rss_mb"] < RSS_BOUND_MB, out


def test_sum_of_lists_within_the_bound_is_linear() -> None:
    """``sum(lists, [])`` is quadratic in Python (300,000 lists: minutes); the evaluator's is linear."""
    out = run_child(_CHILD, "execution = sum([[0]] * 300000, [])")
    assert out["kind"] == "value" and out["size"] == 300000, out


def test_format_fields_cannot_reach_attributes() -> None:
    out = run_child(_CHILD, 'execution = "{0.__class__.__mro__}".format("a")')
    assert out["kind"] == "CommandError" and "attribute" in out["message"], out


def test_ordinary_forms_still_run() -> None:
    from agentflow_env.paper_flow.commands import run_block

    block = (
        'n = 3\nx = 2.5\nq = f"{n:02d} at {x:.2f} {\'a\'!r}" + " %05.1f|%-4s|" % (x, "b")\n'
        'q = q + "{0:>6}".format("c") + ", ".join(["d", "e"]).replace("e", "f") + str(2 ** 10)\n'
        "execution = tool.execute(query=q, extra=sum([[1], [2]], []))"
    )
    calls = []
    run_block(block, lambda **k: calls.append(k))
    assert calls == [{"query": "03 at 2.50 'a' 002.5|b   |     cd, f1024", "extra": [1, 2]}]


_STEP_CHILD = textwrap.dedent(
    """
    import json, resource, sys, time
    resource.setrlimit(resource.RLIMIT_AS, ({as_limit}, {as_limit}))
    resource.setrlimit(resource.RLIMIT_CPU, ({cpu}, {cpu}))
    {peak}
    from agentflow_env.engines import ScriptedEngine
    from tests.helpers import WIKI_PLAN, echo_paper_env
    block = sys.stdin.read()
    executor = "Generated Command:\\n```python\\n" + block + "\\n```"
    def reply(prompt):
        if "Generated Command" in prompt:
            return executor
        if "STOP" in prompt and "CONTINUE" in prompt:
            return "Conclusion: CONTINUE"
        return "Answer: 1871"
    env = echo_paper_env(ScriptedEngine(reply), time_budget_s=10.0, max_turns=3)
    env.reset(seed=0)
    started = time.process_time()
    obs, reward, terminated, truncated, info = env.step(WIKI_PLAN)
    step = env.action_memory.get_actions()["Action Step 1"]
    print(json.dumps({{"result": str(step["result"])[:400], "cpu_s": time.process_time() - started,
                      "rss_mb": peak_rss_mb()}}))
    """
).format(as_limit=AS_LIMIT, cpu=CPU_LIMIT_S, peak=_PEAK)


@pytest.mark.parametrize(
    "name", ["repeat_str_int", "format_width", "fstring_precision", "join", "int_square", "work_total"]
)
def test_bomb_through_paper_flow_step_is_that_steps_error(name: str) -> None:
    block = BOMBS[name]
    if "tool.execute" not in block:  # the paper flow runs only blocks that call the tool
        block = block + "\nexecution = tool.execute(query='x')"
    out = run_child(_STEP_CHILD, block)
    assert "CommandError" in out["result"] and "limit" in out["result"], out
    assert out["rss_mb"] < RSS_BOUND_MB, out
    assert out["cpu_s"] < 10.0, out  # within the time budget: a bound that catches a hang, not a timing


def test_powers_shifts_and_bit_operations_run_on_v3_and_stay_refused_for_the_older_ids():
    """The -v0..-v2 paper envs' evaluator ran arithmetic only: their ids keep it, so their scores stay comparable."""
    from agentflow_env.paper_flow.commands import CommandError, run_block

    for block in ("execution = 2 ** 10", "x = 3\nx <<= 2\nexecution = x", "execution = ~5 & 7 | 1 ^ 2"):
        assert run_block(block, lambda **kw: None) is not None
        with pytest.raises(CommandError):
            run_block(block, lambda **kw: None, operators="arithmetic")
    assert run_block("execution = -(7 // 2) % 5 + 1.5 * 2 - 3 / 4", lambda **kw: None, operators="arithmetic") == 4.25
    with pytest.raises(ValueError, match="operators"):
        run_block("execution = 1", lambda **kw: None, operators="python")


def test_the_paper_ids_choose_their_evaluator_by_version():
    from agentflow_env.engines.scripted import ScriptedEngine
    from benchmarks.specs import make_env

    engine = ScriptedEngine(lambda prompt: "")
    for grammar, operators in ((2, "arithmetic"), (3, "all")):
        env = make_env("Gen-GameOf24", flow="paper", engine=engine, grammar=grammar)
        try:
            assert env.unwrapped.command_operators == operators
        finally:
            env.close()
