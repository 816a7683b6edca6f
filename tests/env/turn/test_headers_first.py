"""How a text action that holds a JSON object reads: ``headers_first`` (the ``-v7`` ids) against the older reading.

Under the older reading (ids up to ``-v6``) the span from the first "{" to the last "}" is tried as the action
even when field headers come before it, so a command that writes a dict literal, or an answer written as an
object, was read as the object. With ``headers_first`` an object after a ``Tool Name:``, ``Command:`` or
``Final Answer:`` header is part of that field's value; an object with no such header before it is still the action.
"""

from __future__ import annotations

import json
import warnings

import gymnasium as gym
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import agentflow_env  # noqa: F401  (registers the ids)
from agentflow_env.error import ConfigError
from agentflow_env.registration import LATEST_VERSION
from agentflow_env.turn.parsing import parse_action, parse_tolerant
from agentflow_env.turn.tool_calls import read_tool_action

pytestmark = pytest.mark.filterwarnings("ignore:.*is out of date:DeprecationWarning")


def _fields(action: str, headers_first: bool) -> tuple:
    p = parse_action(action, headers_first)
    return p.tool_name, p.command, p.final_answer, p.format


@pytest.mark.parametrize(
    ("action", "old", "new"),
    [
        (
            'Tool Name: Python_Coder_Tool\nCommand: print({"answer": 42})',
            ("", "", "42", "json"),
            ("Python_Coder_Tool", 'print({"answer": 42})', None, "text"),
        ),
        (
            'Tool Name: Local_Search_Tool\nCommand: d = {"query": "x"}',
            ("", "x", None, "json"),
            ("Local_Search_Tool", 'd = {"query": "x"}', None, "text"),
        ),
        (
            'Final Answer: {"answer": "Paris", "alternative": "Lyon"}',
            ("", "", "Paris", "json"),
            ("", "", '{"answer": "Paris", "alternative": "Lyon"}', "text"),
        ),
        (
            '**Final Answer:**\n```json\n{"answer": "Paris"}\n```',
            ("", "", "Paris", "json"),
            ("", "", '{"answer": "Paris"}', "text"),
        ),
    ],
)
def test_an_object_after_a_field_header_is_that_fields_value(action, old, new):
    assert _fields(action, False) == old  # the -v6 reading, kept for the ids that measured with it
    assert _fields(action, True) == new
    assert _fields(action, True) == (lambda p: (p.tool_name, p.command, p.final_answer, p.format))(
        parse_tolerant(action, True)
    )


@pytest.mark.parametrize(
    "action",
    [
        '{"tool_name": "Calculator_Tool", "command": "1+1"}',
        'Here is my action:\n{"tool_name": "Calculator_Tool", "command": "1+1"}',
        'Justification: add them\n{"tool_name": "Calculator_Tool", "command": "1+1"}',  # no action header before
        'I will add them.\n```json\n{"tool_name": "Calculator_Tool", "command": "1+1"}\n```',
        '{"final_answer": "x"}\nFinal Answer: y',  # the object comes first: it is the action
        '{\n  "tool_name": "Calculator_Tool",\n  "command": "1+1"\n}',
    ],
)
def test_an_object_with_no_action_header_before_it_is_still_the_action(action):
    assert _fields(action, True) == _fields(action, False)
    assert parse_action(action, True).format == "json"


_HEADERS = st.sampled_from(["Tool Name: ", "Command: ", "Final Answer: ", "Justification: ", "Context: ", ""])
_LINE = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="{}\x00\n"), max_size=30)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_HEADERS, _LINE), min_size=1, max_size=6))
def test_without_a_brace_the_two_readings_agree(lines):
    """Without a brace the readings differ only in an action that gives two answers or more."""
    action = "\n".join(h + v for h, v in lines)
    new, old = parse_action(action, True), parse_action(action, False)
    if new.final_answer != old.final_answer:  # every answer after the first header, where the older one kept the last
        assert action.count("Final Answer: ") >= 2 and new.final_answer.endswith(old.final_answer)
        new.final_answer = old.final_answer
    assert new == old


@pytest.mark.parametrize(
    ("action", "labels"),
    [
        ("Final Answer: **Final Answer:** 35\n\n**Final Answer:** 33", ["35", "33"]),
        ("Final Answer: 35\nWait, that was wrong.\nFinal Answer: 33", ["35", "33"]),
        ("Final Answer: 35\nFinal Answer: 33\nJustification: checked twice", ["35", "33"]),
        ("Final Answer:\nFinal Answer: 33", ["33"]),  # an empty header gives no answer
        ("Final Answer: 33", ["33"]),
    ],
)
def test_every_answer_an_action_gives_reaches_the_grammar(action, labels):
    answer = parse_action(action, True).final_answer  # as {"final_answer": <the text after the first header>}
    assert answer.startswith(labels[0]) or answer.lstrip("*").startswith(f"Final Answer:** {labels[0]}")
    assert all(value in answer for value in labels) and answer.endswith("33")
    assert not answer.startswith("Final Answer: ")  # the format's own header is not part of the answer
    assert parse_action(action, False).final_answer == "33"  # the -v6 reading: the last header wins


def test_two_final_answers_in_the_text_format_read_as_in_the_json_format_through_env_step():
    env = gym.make(f"agentflow/Gen-Math-v{LATEST_VERSION}")
    env.reset(options={"index": 0})
    gold = str(env.unwrapped.task.answer)
    rival = gold + "1"
    cases = {
        f"**Final Answer:** {rival}\n\n**Final Answer:** {gold}": 0.0,  # two labelled answers, neither retracted
        f"**Final Answer:** {gold}\n\n**Final Answer:** {rival}": 0.0,
        f"{rival}\nWait, that was wrong.\nFinal Answer: {gold}": 1.0,  # a revision: the last commits
    }
    for body, want in cases.items():
        for action in (f"Final Answer: {body}", json.dumps({"final_answer": body})):
            env.reset(options={"index": 0})
            assert env.step(action)[1] == want, action
    env.close()


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(["tool_name", "command", "final_answer", "note"]), _LINE, min_size=1),
    st.lists(st.tuples(_HEADERS, _LINE), max_size=4),
)
def test_an_object_before_every_header_reads_alike(obj, after):
    """An object that opens the action (it names a field) is read the same way by both readings, whatever text
    follows it."""
    assume(set(obj) != {"note"})  # an object with no field key is not the action
    action = json.dumps(obj) + "".join("\n" + h + v for h, v in after)
    assert parse_action(action, True) == parse_action(action, False)  # JSON wins: the text headers are not read


def test_a_message_content_reads_headers_first_too():
    content = 'Tool Name: Python_Coder_Tool\nCommand: print({"answer": 42})'
    _call, parsed = read_tool_action(content, 2, True, lambda _: None, True)
    assert (parsed.tool_name, parsed.final_answer) == ("Python_Coder_Tool", None)
    _call, parsed = read_tool_action(content, 2, True, lambda _: None)  # the older reading
    assert (parsed.tool_name, parsed.final_answer) == ("", "42")


def test_headers_first_is_a_checked_option():
    from benchmarks.specs import make_env

    assert make_env("Gen-Math").headers_first is False  # no version given: grammar 2, the older reading
    assert make_env("Gen-Math", grammar=7).headers_first is True
    assert make_env("Gen-Math", grammar=7, headers_first=False).headers_first is False
    with pytest.raises(ConfigError, match="headers_first"):
        make_env("Gen-Math", headers_first="yes")


def _play(env_id: str, action: str) -> tuple[float, bool, str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make(env_id)
    env.reset(seed=0, options={"index": 0})
    _obs, reward, terminated, _truncated, info = env.step(action)
    memory = env.unwrapped.render()
    env.close()
    return reward, terminated, memory or ""


def test_through_env_step_a_command_with_a_dict_runs_on_v7_and_ended_the_episode_on_v6():
    action = 'Tool Name: Python_Coder_Tool\nCommand: print({"answer": 42})'
    reward, terminated, memory = _play(f"agentflow/Gen-Math-v{LATEST_VERSION}", action)
    assert (reward, terminated) == (0.0, False) and "{'answer': 42}" in memory  # the tool ran the command
    reward, terminated, _ = _play("agentflow/Gen-Math-v6", action)
    assert terminated  # the older reading: a final answer of 42


def test_through_env_step_an_answer_object_with_an_alternative_is_a_hedge_on_v7():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        env = gym.make("agentflow/Gen-Math-v6")
    env.reset(seed=0, options={"index": 0})
    gold = str(env.unwrapped.task.answer)
    env.close()
    hedge = f'Final Answer: {{"answer": "{gold}", "alternative": "{int(gold) + 1}"}}'
    committed = f'Final Answer: {{"answer": "{gold}"}}'
    assert _play("agentflow/Gen-Math-v6", hedge)[:2] == (1.0, True)  # what the -v6 ids paid
    assert _play(f"agentflow/Gen-Math-v{LATEST_VERSION}", hedge)[:2] == (0.0, True)
    assert _play(f"agentflow/Gen-Math-v{LATEST_VERSION}", committed)[:2] == (1.0, True)
