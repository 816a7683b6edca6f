"""Gen-HopChain: answers reachable only through the registry's replies, lengths that vary, disjoint splits."""

from __future__ import annotations

import collections

import gymnasium as gym
import pytest

import agentflow_env  # noqa: F401  (registers the env ids)
from agentflow_env.error import ConfigError
from agents.policies.baselines import final_answer, tool_call
from agents.policies.hopchain import ScriptedHopChainEarlyPlanner, ScriptedHopChainPlanner
from benchmarks.synthetic.hopchain import (
    TOOL_NAME,
    HopChainScorer,
    RegistryTool,
    build_registry,
    load_tasks,
    parse_question,
    parse_reply,
)

ENV_ID = "agentflow/Gen-HopChain-v2"


def _play(planner, split: str = "train", n: int = 60, **kwargs):
    env = gym.make(ENV_ID, split=split, disable_env_checker=True, **kwargs)
    out = []
    try:
        for i in range(n):
            obs, _ = env.reset(seed=0, options={"index": i})
            calls = turn = 0
            terminated = truncated = False
            while not (terminated or truncated) and turn < 20:
                turn += 1
                action = planner.act([obs])[0]
                calls += "Tool Name:" in action
                obs, reward, terminated, truncated, _ = env.step(action)
            out.append((reward, turn, calls, parse_question(env.unwrapped.task.question).hops))
    finally:
        env.close()
    return out


def test_splits_have_their_own_links_and_disjoint_questions():
    worlds = {s: build_registry(0, s) for s in ("train", "validation", "test")}
    assert all(sorted(w) == [str(n) for n in range(100, 400)] for w in worlds.values())  # the same 300 people
    facts = {s: {(p, link, q) for p, links in w.items() for link, q in links.items()} for s, w in worlds.items()}
    for a, b in (("train", "validation"), ("train", "test"), ("validation", "test")):
        # links agree only by chance (1 in 299): what train teaches about where a chain leads is useless on test
        assert len(facts[a] & facts[b]) / len(facts[a]) < 0.02
    questions = {s: [t.question for t in load_tasks(s, num_tasks=200)] for s in worlds}
    assert all(len(set(q)) == 200 for q in questions.values())
    assert not set(questions["train"]) & set(questions["validation"])
    assert not set(questions["train"]) & set(questions["test"])
    assert not set(questions["validation"]) & set(questions["test"])
    for task in load_tasks("test", num_tasks=100):  # the gold follows the test world's links
        q = parse_question(task.question)
        person = q.start
        for link in q.links:
            person = worlds["test"][person][link]
        assert person == task.answer == task.metadata["path"][-1]


def test_answer_never_in_question_and_every_link_is_random():
    tasks = list(load_tasks("train", num_tasks=300))
    assert all(task.answer not in task.question for task in tasks)
    assert all(len(set(task.metadata["path"])) == len(task.metadata["path"]) for task in tasks)
    # answers spread over the world: nothing to guess without the replies
    answers = collections.Counter(task.answer for task in tasks)
    assert answers.most_common(1)[0][1] <= 12  # in-degree varies; no answer is common
    # other seeds link the same people differently
    assert build_registry(0, "train") != build_registry(1, "train")


def test_scripted_planner_solves_all_and_lengths_vary():
    played = _play(ScriptedHopChainPlanner(), n=90)
    assert all(reward == 1.0 for reward, *_ in played)
    assert all(turns == hops + 1 and calls == hops for _, turns, calls, hops in played)
    assert {hops for *_, hops in played} == {1, 2, 3}
    assert {turns for _, turns, _, _ in played} == {2, 3, 4}


def test_answers_need_the_replies():
    """Answering the start person, or stopping one link early, fails; a single lookup solves only 1-link tasks."""
    env = gym.make(ENV_ID, split="validation", disable_env_checker=True)
    try:
        for i in range(40):
            obs, _ = env.reset(seed=0, options={"index": i})
            q = parse_question(obs["question"])
            _, reward, *_ = env.step(final_answer(q.start))
            assert reward == 0.0
            obs, _ = env.reset(seed=0, options={"index": i})
            obs, *_ = env.step(tool_call(TOOL_NAME, f"{q.links[0]} of {q.start}"))
            reply = parse_reply(obs["memory"].split("Result: ")[-1].strip())
            assert reply is not None and reply[:2] == (q.links[0], q.start)
            _, reward, *_ = env.step(final_answer(reply[2]))
            assert reward == float(q.hops == 1)
    finally:
        env.close()


def test_early_planner_stops_short_on_most_three_link_questions():
    played = _play(ScriptedHopChainEarlyPlanner(), n=150)
    three = [p for p in played if p[3] == 3]
    early = [p for p in three if p[2] == 2]
    assert 0.45 < len(early) / len(three) < 0.75  # the most common action after two lookups: answer
    assert all(reward == 0.0 for reward, *_ in early)
    assert all(p[0] == 1.0 and p[2] == p[3] for p in played if p[3] < 3)  # 1 and 2 links: always complete


def test_tool_and_scorer_read_strictly():
    tool = RegistryTool(0, "test")
    person = next(iter(tool.registry))
    reply = tool.run(f"rival of {person}").text
    assert parse_reply(reply) == ("rival", person, tool.registry[person]["rival"])
    assert tool.run("rival of 5").ok is False
    assert tool.run("rival of 400").ok is False
    assert tool.run("cousin of 100").ok is False
    assert tool.run("who knows").ok is False
    task = load_tasks("test", num_tasks=1)[0]
    scorer = HopChainScorer()
    assert scorer(task.answer, task) == 1.0
    assert scorer(f"The answer is {task.answer}.", task) == 1.0
    assert scorer(f"{task.answer} or 123", task) == 0.0
    assert scorer("123" if task.answer != "123" else "124", task) == 0.0
    with pytest.raises(ConfigError):
        load_tasks("test", hops=(0, 2))
    with pytest.raises(ConfigError):
        build_registry(0, "test", 1000)
