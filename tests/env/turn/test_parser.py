"""The action parser: AgentFlow's text format, JSON, markdown, case, order, prose, last-wins; fuzzing."""

from __future__ import annotations

import json
import re
import sys
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentflow_env.turn import parsing
from agentflow_env.turn.parsing import parse_action

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


# ---------------------------------------------------------------------------- linear scans, same results
# The parser's first version, as plain regexes: correct, but quadratic on long whitespace runs and
# on unclosed tags and fences. On short text they are the reference the linear scans must match.
_REF_HEADER_RE = re.compile(
    r"^[ \t]*(?:[#>]+[ \t]*|[-*+][ \t]+|\d{1,3}[.)][ \t]*)?[*_`]{0,3}[ \t]*"
    r"(justification|reasoning|rationale|context|sub[ _-]?goal|selected[ _-]?tool|tool[ _-]?name"
    r"|tool[ _-]?command|tool|command|query|final[ _-]?answer)"
    r"[ \t]*[*_`]{0,3}[ \t]*:[ \t]*[*_`]{0,3}",
    re.IGNORECASE | re.MULTILINE,
)
_REF_FENCE_RE = re.compile(r"^```[A-Za-z0-9_+-]*[ \t]*\n?(.*?)\n?```[ \t]*$", re.DOTALL)
_REF_JSON_FENCE_RE = re.compile(r"```(?:json)?[ \t]*\n(.*?)\n```", re.DOTALL | re.IGNORECASE)
_REF_ANSWER_TAG_RE = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)

# pieces that exercise every branch: markdown, emphasis, whitespace runs, case folds, fences, tags
_TRICKY = st.lists(
    st.sampled_from(
        [" ", "  ", "\t", "\n", "\n\n", "\r", "#", ">", "- ", "* ", "+", "1. ", "12)", "1234.", "*", "**", "_", "`"]
        + ["```", "```json\n", "```python\n", "\n```", "{", "}", ":", "::", "x", "<answer>", "</answer>", "<ANSWER>"]
        + ["Tool Name", "tool_name", "TOOL-NAME", "Tool", "Command", "sub goal", "Sub-Goal", "Final Answer"]
        + ["final_answer", "Selected Tool", "Reasoning", "Query", "Context", "\u017fub goal", "\u212a", "\x00"]
    ),
    max_size=40,
).map("".join)


@settings(max_examples=600, deadline=None)
@given(st.one_of(_TRICKY, st.text(max_size=200)))
def test_linear_scans_match_the_reference_regexes(text):
    assert [(m.start(), m.end(), m.group("name")) for m in parsing._HEADER_RE.finditer(text)] == [
        (m.start(), m.end(), m.group(1)) for m in _REF_HEADER_RE.finditer(text)
    ]
    assert [text[start:end] for start, end in parsing._json_fences(text)] == _REF_JSON_FENCE_RE.findall(text)
    tags = _REF_ANSWER_TAG_RE.findall(text)
    assert parsing._last_answer_tag(text) == (tags[-1] if tags else None)
    value = text.strip()
    ref = _REF_FENCE_RE.match(value)
    assert parsing._unfence(value) == (ref.group(1) if ref else None)


@pytest.mark.parametrize(
    "action",
    [
        "Tool Name: X\n" + " " * 200_000 + "\nCommand: 1",
        " \t" * 200_000,
        "#" + " " * 400_000,
        "Tool Name" + " " * 400_000 + "x",
        "<answer>" * 50_000,
        "```json\n{" * 50_000,
        "Command: " + "`" * 200_000 + " " * 200_000 + "x",
    ],
    ids=["whitespace-line", "tabs", "hash-spaces", "name-spaces", "answer-tags", "json-fences", "backticks"],
)
def test_pathological_actions_parse_fast(action):
    """Each took from minutes to hours with the reference regexes; linear scans take milliseconds."""
    start = time.perf_counter()
    parse_action(action)
    assert time.perf_counter() - start < 5.0


def test_deeply_nested_json_never_raises():
    deep = '{"command": ' + "[" * 900 + "]" * 900 + ', "tool_name": "T"}'
    p = parse_action(deep)
    assert isinstance(p.problems, list)
    json.dumps(p.to_dict())


def test_long_keys_stay_out_of_the_key_cache():
    """The key cache would keep every long key alive; only short keys go through it."""
    parsing._cached_key_to_field.cache_clear()
    for i in range(50):
        assert parse_action(json.dumps({"k" * 10_000 + str(i): 1, "command": "x"})).command == "x"
    assert parsing._cached_key_to_field.cache_info().currsize == 1  # "command" only


@pytest.mark.skipif(sys.version_info < (3, 11), reason="possessive quantifiers need Python 3.11")
def test_native_and_emulated_header_patterns_find_the_same_headers():
    import random

    flags = re.IGNORECASE | re.MULTILINE
    native = re.compile(parsing._NATIVE_HEADER_PATTERN, flags)
    emulated = re.compile(parsing._EMULATED_HEADER_PATTERN, flags)
    rng = random.Random(0)
    pieces = [
        *" \t\n#>-*+1.):_`",
        "12.",
        "tool",
        "Tool Name",
        "command",
        "final answer",
        "sub-goal",
        "x",
        "\u017fub goal",
    ]
    for _ in range(5000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 30)))
        spans = [[(m.span(), m.group("name")) for m in p.finditer(text)] for p in (native, emulated)]
        assert spans[0] == spans[1], text


def test_the_emulated_pattern_path_parses_as_the_native_one(monkeypatch):
    actions = [
        "Justification: j\nContext: c\nSub-Goal: s\nTool Name: T\nCommand: x = 1\nquery: y",
        "**Tool Name:** `Calc`\n1. Command: ```python\nprint(1)\n```\nFinal Answer: no\nanswer: 42",
        "\u017fub goal: folded\nTool: A\n> command:   b  ",
        "nothing here",
    ]
    native = [parse_action(a) for a in actions]
    emulated = re.compile(parsing._EMULATED_HEADER_PATTERN, re.IGNORECASE | re.MULTILINE)
    monkeypatch.setattr(parsing, "_HEADER_RE", emulated)
    monkeypatch.setattr(parsing, "_NAME_GROUP", emulated.groupindex["name"])
    assert [parse_action(a) for a in actions] == native
