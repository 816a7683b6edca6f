"""Multiple-choice records (GPQA, MedQA): options, the correct one, suspect options, per-trial order."""

from __future__ import annotations

import random
import re
from collections.abc import Mapping
from typing import Any

from agentflow_env.error import DataError
from agentflow_env.scoring.choice import option_letters, render_options
from agentflow_env.scoring.qa import normalize_answer
from agentflow_env.types import Task
from benchmarks.paper.catalog import PaperBenchmark
from benchmarks.paper.fields import _meta, _question_text, _text

_OPTION_PREFIX = re.compile(r"^\s*\(?([A-Z])[.):]\s*")
_OPTIONS_BLOCK = re.compile(r"\n\s*A[.)]\s")


def _option_texts(choices: Any, origin: str, row: int) -> list[str]:
    if isinstance(choices, Mapping):  # MedQA on the hub: {"A": text, ...}
        return [_text(choices[k], origin, row, f"option {k}") for k in sorted(choices, key=str)]
    if not isinstance(choices, (list, tuple)) or len(choices) < 2:
        raise DataError(
            f"{origin}: record {row} choices must be a list or mapping of at least 2 options, got {choices!r:.80}"
        )
    texts = [_text(c, origin, row, f"option {i + 1}") for i, c in enumerate(choices)]
    prefixes = [_OPTION_PREFIX.match(t) for t in texts]
    if all(prefixes) and "".join(m.group(1) for m in prefixes if m) == option_letters(len(texts)):
        texts = [t[m.end() :] for t, m in zip(texts, prefixes) if m]
    return [t.strip() for t in texts]


def _correct_index(rec: dict[str, Any], texts: list[str], origin: str) -> int:
    row = rec["_row"]
    if "answer_index" in rec:
        raw = rec["answer_index"]
        if isinstance(raw, str) and raw.strip().lstrip("-").isdigit():
            raw = int(raw.strip())
        if isinstance(raw, float) and raw.is_integer():
            raw = int(raw)
        if isinstance(raw, bool) or not isinstance(raw, int):
            raise DataError(f"{origin}: record {row} answer index {raw!r:.40} is not a whole number; fix answer_idx")
        index = raw
    elif isinstance(rec.get("answer_letter"), str) and rec["answer_letter"].strip():
        index = ord(rec["answer_letter"].strip().upper()[0]) - ord("A")
    elif rec.get("answer") is not None:
        gold = _text(rec["answer"], origin, row, "answer").strip()
        m = _OPTION_PREFIX.match(gold)
        by_text = [i for i, t in enumerate(texts) if normalize_answer(t) == normalize_answer(gold)]
        if not by_text and m:
            by_text = [i for i, t in enumerate(texts) if normalize_answer(t) == normalize_answer(gold[m.end() :])]
        if len(by_text) != 1 and len(gold) == 1 and gold.upper() in option_letters(len(texts)):
            by_text = [ord(gold.upper()) - ord("A")]
        if len(by_text) != 1:
            raise DataError(f"{origin}: record {row} answer {gold[:60]!r} matches {len(by_text)} of the options")
        index = by_text[0]
    else:
        raise DataError(f"{origin}: record {row} has no answer_index, answer_letter, answer or correct field")
    if not 0 <= index < len(texts):
        raise DataError(f"{origin}: record {row} answer index {index} is outside its {len(texts)} options")
    return index


# an option whose text begins with a closing token lost its beginning (GPQA row 135: "\rangle\rightarrow...")
_CUT_START = re.compile(r"\A(?:\\right\b|\\rangle|\\rbrace|\\rvert|\\end\{|[)\]}]|[,;:]\s)")
# an option that is only a statement label ("a", "(b)", "c)"): GPQA row 168 answers by the stem's a)-d)
_BARE_LABEL = re.compile(r"\(?([A-Za-z])\)?\.?")


def _squeezed(text: str) -> str:
    return " ".join(text.split())


def _option_problems(texts: list[str], index: int) -> tuple[list[str], int, list[str], bool]:
    """Options cleaned of data faults: ``(texts, correct index, warnings, keep_order)``.

    Exact duplicates (case-sensitive: GPQA task 239 has options differing only by L vs l) collapse into one,
    so the correct text can never be "wrong" for being the other copy; options that look cut off are
    reported; bare-label options are put in label order and never shuffled, so option letter X always is
    label x (any other order makes "C" and "c" name different options).
    """
    warnings: list[str] = []
    kept: list[str] = []
    where: dict[str, int] = {}
    new_index = index
    for i, t in enumerate(texts):
        key = _squeezed(t)
        if key in where:
            other = option_letters(len(texts))[where[key]]
            warnings.append(f"option {option_letters(len(texts))[i]} repeats option {other} ({t[:40]!r}); merged")
            if i == index:
                new_index = where[key]
            continue
        where[key] = len(kept)
        if i == index:
            new_index = len(kept)
        kept.append(t)
    for letter, t in zip(option_letters(len(kept)), kept):
        if not t.strip():
            warnings.append(f"option {letter} is empty")
        elif _CUT_START.match(t.strip()):
            warnings.append(f"option {letter} looks cut off at its start ({t.strip()[:30]!r})")
    labels = [_BARE_LABEL.fullmatch(t.strip()) for t in kept]
    keep_order = False
    if all(labels):
        names = [m.group(1).upper() for m in labels if m]
        if sorted(names) == list(option_letters(len(kept))):
            order = sorted(range(len(kept)), key=lambda i: names[i])
            correct = kept[new_index]
            kept = [kept[i] for i in order]
            new_index = kept.index(correct)
            keep_order = True
            warnings.append("options are bare statement labels; shown in label order (option X is label x), unshuffled")
    return kept, new_index, warnings, keep_order


def _choice_task(
    bench: PaperBenchmark,
    rec: dict[str, Any],
    origin: str,
    keep_instructions: bool,
    seed: int | None,
    shuffle_options: bool = True,
) -> Task:
    query = rec.pop("_verbatim", None)
    stem = _question_text(bench, rec, origin, keep_instructions)
    row = rec["_row"]
    if "correct" in rec:  # GPQA on the hub: one right answer and a list of wrong ones, in no order
        wrong = rec.get("incorrect") or []
        if not isinstance(wrong, (list, tuple)):
            raise DataError(f"{origin}: record {row} wrong answers must be a list, got {type(wrong).__name__}")
        texts = [_text(rec["correct"], origin, row, "correct answer").strip()]
        texts += [_text(w, origin, row, "wrong answer").strip() for w in wrong]
        index = 0
        seed = 0 if seed is None else seed
    else:
        if "choices" not in rec:
            raise DataError(f"{origin}: record {row} has no choices; map them with columns={{'choices': ...}}")
        texts = _option_texts(rec["choices"], origin, row)
        index = _correct_index(rec, texts, origin)
    # MedQA's question text carries its options (twice in AgentFlow's file): keep the stem only
    cut = _OPTIONS_BLOCK.search(stem)
    if cut and normalize_answer(texts[0])[:40] in normalize_answer(stem[cut.start() :]):
        stem = stem[: cut.start()].rstrip()
    task_id = Task.content_id(bench.name, stem, sorted(texts), texts[index])  # before any clean-up: ids stay put
    if query is not None:
        return _verbatim_choice_task(bench, rec, origin, query, texts, index, task_id, seed, shuffle_options)
    texts, index, warnings, keep_order = _option_problems(texts, index)
    if len(texts) < 2:
        raise DataError(f"{origin}: record {row} has fewer than 2 distinct options; fix its choices")
    correct = texts[index]
    order = list(range(len(texts)))
    if seed is not None and shuffle_options and not keep_order:  # a fresh option order per trial seed
        random.Random(f"{seed}:{task_id}").shuffle(order)
    shown = [texts[i] for i in order]
    letter = option_letters(len(shown))[order.index(index)]
    meta = _meta(rec, origin)
    meta.update(options=shown, answer_text=correct, option_seed=seed if not keep_order else None)
    if warnings:
        meta["data_warnings"] = warnings
    question = f"{stem}\nChoices:\n{render_options(shown)}"
    return Task(id=task_id, question=question, answer=letter, family=bench.family, metadata=meta)


def _verbatim_choice_task(
    bench: PaperBenchmark,
    rec: dict[str, Any],
    origin: str,
    query: str,
    texts: list[str],
    index: int,
    task_id: str,
    seed: int | None,
    shuffle_options: bool,
) -> Task:
    """A choice task whose question is AgentFlow's ``query`` as it is (the paper mode).

    The options keep the file's order and letters, as AgentFlow shows them. With ``shuffle_options`` and a
    ``seed``, the query's option lines are re-lettered in the seed's order (the rest of the text unchanged).
    Faulty options are reported, never merged: the query stays what AgentFlow sends.
    """
    row = rec["_row"]
    _, _, warnings, keep_order = _option_problems(texts, index)
    warnings = [w.replace("; merged", "; kept, as AgentFlow shows it") for w in warnings if "label order" not in w]
    order = list(range(len(texts)))
    question = query
    shuffled = shuffle_options and seed is not None and not keep_order
    if shuffled:
        raw = rec["choices"]
        blocks = ["\n".join(str(c) for c in raw)] if isinstance(raw, (list, tuple)) else []
        blocks.append(render_options(texts))
        block = next((b for b in blocks if query.count(b) == 1), None)
        if block is None:
            raise DataError(
                f"{origin}: record {row}: its query does not list its options once, one per line, so they cannot "
                "be shuffled; keep AgentFlow's order (shuffle_options=False) or fix the record"
            )
        random.Random(f"{seed}:{task_id}").shuffle(order)
        at = query.index(block)
        question = query[:at] + render_options([texts[i] for i in order]) + query[at + len(block) :]
    shown = [texts[i] for i in order]
    meta = _meta(rec, origin)
    meta.update(
        options=shown,
        answer_text=texts[index],
        option_seed=seed if shuffled else None,
        question_text="agentflow query",
    )
    if warnings:
        meta["data_warnings"] = warnings
    letter = option_letters(len(shown))[order.index(index)]
    return Task(id=task_id, question=question, answer=letter, family=bench.family, metadata=meta)
