"""The action parser: AgentFlow's text format, JSON, markdown, case, order, prose, last-wins; fuzzing."""

from __future__ import annotations

import json

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentflow_env.parsing import parse_action

# Strings up to 100,000 characters: a random piece (often field-like) repeated.
_PIECES = st.text(max_size=300) | st.sampled_from(
    ["Tool Name: ", "**Final Answer:** ", "Command:\n```", '{"command": ', "Sub-Goal: ", "\n", "}", "`"]
)
LONG_TEXT = st.builds(lambda piece, n: (piece * n)[:100_000], _PIECES, st.integers(1, 100_000))


def test_plain_agentflow_format():
    p = parse_action(
        "Justification: need a number\nContext: none\nSub-Goal: multiply\nTool Name: Calculator_Tool\nCommand: 3*8"
    )
    assert (p.justification, p.context, p.sub_goal, p.tool_name, p.command) == (
        "need a number",
        "none",
        "multiply",
        "Calculator_Tool",
        "3*8",
    )
    assert p.format == "text" and not p.problems and not p.is_final


def test_markdown_case_order_and_prose():
    action = (
        "Sure, here is what I will do next.\n\n"
        "**command:** `2+2`\n"
        "### TOOL NAME: **Calculator_Tool**\n"
        "- *sub-goal*: add things\n"
        "Thanks!"
    )
    p = parse_action(action)
    assert p.tool_name == "Calculator_Tool"
    assert p.command.startswith("2+2")
    assert p.sub_goal.startswith("add things")


def test_multiline_command_in_code_fence():
    p = parse_action("Tool Name: Python_Coder_Tool\nCommand:\n```python\nx = 1\nprint(x + 1)\n```\n")
    assert p.command == "x = 1\nprint(x + 1)"


def test_last_occurrence_wins():
    p = parse_action("Tool Name: A\nCommand: 1\nTool Name: B\nCommand: 2")
    assert (p.tool_name, p.command) == ("B", "2")


def test_final_answer_variants():
    assert parse_action("Final Answer: 42").final_answer == "42"
    assert parse_action("**Final answer:** Paris").final_answer == "Paris"
    assert parse_action("I think <answer>7</answer>").final_answer == "7"
    assert parse_action("final_answer: x").final_answer == "x"


def test_json_keys():
    p = parse_action(json.dumps({"Tool Name": "Calculator_Tool", "Sub-Goal": "s", "command": "1+1"}))
    assert (p.format, p.tool_name, p.command, p.sub_goal) == ("json", "Calculator_Tool", "1+1", "s")
    p = parse_action('Here you go:\n```json\n{"final_answer": "24"}\n```')
    assert p.format == "json" and p.final_answer == "24"
    # a JSON value that is not a string is kept as JSON text
    assert parse_action('{"final_answer": 12}').final_answer == "12"


def test_junk_reports_a_problem_and_never_raises():
    for junk in ["", "hello world", "{not json", "Tool Name:", None, 12, b"bytes", ["x"]]:
        p = parse_action(junk)
        assert not p.is_final
        if junk not in ("Tool Name:",):
            assert p.problems or p.format != "none"


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.text(max_size=2000))
def test_fuzz_parser_any_text(text):
    p = parse_action(text)
    assert isinstance(p.problems, list)
    json.dumps(p.to_dict())


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(LONG_TEXT)
def test_fuzz_parser_long_text(text):
    assert len(text) <= 100_000
    parse_action(text)
