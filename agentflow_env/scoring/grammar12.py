"""Answer grammar 12 (the ``-v12`` ids): grammar 11 (:mod:`agentflow_env.scoring.grammar11`) with grammar 9's
surname-first rule kept to names.

Grammar 9 reads "Madison, James" as the gold "James Madison" (:func:`agentflow_env.scoring.grammar9.localize`). It
took any gold of two to four words as a name, so a gold that is itself a comma-joined list or place ("Oranienburg,
Germany", "Indonesia, Myanmar", "located in Olathe, Kansas") matched its own items written in the other order:
"Germany, Oranienburg" scored 1 under grammars 9, 10 and 11, and 0 under grammars 3 to 8. The adversarial-answer test
(``tests/hostile/test_adversarial_answers.py``) reads a list gold as exactly its items in its order, and it failed on
the Bamboogle, HotpotQA and GAIA ids of those grammars; it skipped wherever the AgentFlow test sets were not beside
the checkout, which is how it went unseen.

Grammar 12 reorders a surname-first name only when the gold holds no comma.

It also reads a chain of predicate clauses in linear time. Grammar 4's rival step joins a clause that is only a
predicate ('"X!" is also possible') to the clause before it; grammars 4 to 11 carried the joined clause on, so in
"(was 5) (was 5) .." every link joined the whole chain before it and the chain was read again at each link: a
16,000-character answer took 11 s to score (a policy that loops on one phrase writes such answers). From grammar 12 a
predicate joins only the clause right before it (:func:`agentflow_env.scoring.grammar.rival_clause`). The rival
step's other per-clause reads (the tokens before a clause, a cue's neighbouring words) now come from one pass over the
answer for every grammar, with the same results (:mod:`agentflow_env.scoring.words`).

Two more readings, found when the project's own styles (``tests/env/scoring/test_reward_quality.py``) ran on the tasks
the ``-v12`` ids sample, each wrong in grammars 9 to 11 as well:

- **A minus sign after a contrast**: "Not -40 but -41." answered 41. Grammar 7 read the hyphen of " -41" as a dash
  after "not 40 but", and grammar 9 took a hyphen left at the start after dropping "not -40 but" for a gap; from
  grammar 12 a hyphen before a digit is the number's sign ("Not 40 -- 41" and "Not 40 - 41" still read a dash).
- **A lone "1."**: grammar 9 takes "1. X" for a one-item list and reads X; for a number or option answer whose item
  names no value of that kind ("1. I verified this with the tools."), the "1" is the answer.

Everything else is grammar 11; the ``-v9`` to ``-v11`` ids keep their verdicts (the adversarial-answer test states
their one exception).
"""

from __future__ import annotations

from collections.abc import Iterable

from agentflow_env.scoring import grammar11
from agentflow_env.scoring.grammar import Reading

__all__ = ["read_answer"]


def read_answer(prediction: object, golds: Iterable[object] = (), kind: str = "text", question: str = "") -> Reading:
    """The final answer ``prediction`` read by grammar 12: grammar 11's reader, with a surname-first name read as a
    gold's name only when that gold holds no comma, and a predicate clause joined only to the clause before it."""
    return grammar11.read_answer(prediction, golds, kind, question, grammar=12)
