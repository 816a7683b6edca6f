"""``judge="agentflow:PATH"``: AgentFlow's own grading (``test/calculate_score_unified.py``), read at run time
from the user's checkout; nothing of its text ships with this project.

What is read from the file (with :mod:`ast`, nothing of it is executed):

- the single-stage prompt (the f-string ``ResultScorer.answer_verification`` builds) and the two prompt
  constants ``answer_verification_twostage`` formats (extraction, then verification);
- the answer-tag pattern both stages cut the response with (the last match wins);
- the task names that get the two-stage path (``score_results``: GPQA and MedQA);
- the field names of the structured replies (the pydantic classes given as ``response_format``).

The control flow around them (the last ``<answer>`` rule, the question field falling back to ``query``,
the option matching after extraction, and the fallbacks when a stage's call fails) is this module's; a
fingerprint of the checkout's code with its strings blanked pins it to the AgentFlow version it follows,
so a checkout whose scoring logic changed is an :class:`AgentFlowSourceError`, not a silent difference.
A test runs AgentFlow's own functions beside this scorer on the same replies.
"""

from __future__ import annotations

import ast
import hashlib
import json
import logging
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agentflow_env.engines.base import SamplingParams
from agentflow_env.engines.ledger import generate_as
from agentflow_env.error import ConfigError, EngineError
from agentflow_env.paper_flow.agentflow_source import AgentFlowSourceError, _parse, find_package_dir
from agentflow_env.paper_flow.checkout_cache import cached_build
from agentflow_env.types import Task

__all__ = ["AgentFlowJudge", "AgentFlowScoring", "judge_record", "most_similar_option"]

logger = logging.getLogger(__name__)

SCORE_FILE = Path("test") / "calculate_score_unified.py"
# sha256 of the scoring functions' code, strings blanked (AgentFlow b940064); see _logic_fingerprint
KNOWN_LOGIC = "d19001b8804eca77"
_LOGIC_FUNCTIONS = ("find_most_similar_candidate", "answer_verification_twostage", "answer_verification")
_NUMBER = re.compile(r"\d+\.?\d*")


def most_similar_option(extracted: str, options: Any) -> Any:
    """The option an extracted answer names, as AgentFlow's ``find_most_similar_candidate`` picks it: the
    first option containing it (case-insensitive), else the first containing its first number, else the
    first option (or the text itself when there are no options)."""
    wanted = extracted.lower().strip()
    for option in options:
        if wanted in option.lower():
            return option
    number = _NUMBER.search(wanted)
    if number:
        for option in options:
            if number.group() in option:
                return option
    return options[0] if options else extracted


def judge_record(task: Task) -> dict[str, Any]:
    """The AgentFlow record a task was built from (``question``/``query``, ``answer``, ``choices``, ``task``).

    Paper-mode loaders attach it as ``metadata['agentflow_record']``; a task without one (another source)
    gets an equivalent built from the task: its question, gold answer and lettered options.
    """
    record = task.metadata.get("agentflow_record")
    if isinstance(record, dict):
        if task.metadata.get("option_seed") is not None:
            raise ConfigError(
                f"task {task.id}: its options were re-lettered for this trial (shuffle_options), but AgentFlow's "
                "judge grades the record as the file has it; run with shuffle_options = false"
            )
        return record
    options = task.metadata.get("options")
    built: dict[str, Any] = {"question": task.question, "answer": task.answer, "task": ""}
    if options:
        built["choices"] = [f"{chr(65 + i)}. {text}" for i, text in enumerate(options)]
    return built


# ------------------------------------------------------------------ reading the checkout
def _functions(tree: ast.Module) -> dict[str, ast.FunctionDef]:
    out: dict[str, ast.FunctionDef] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            out.setdefault(node.name, node)
    return out


class _Blank(ast.NodeTransformer):
    def visit_Constant(self, node: ast.Constant) -> ast.AST:
        return ast.Constant("") if isinstance(node.value, str) else node

    def visit_JoinedStr(self, node: ast.JoinedStr) -> ast.AST:
        return ast.Constant("")

    def visit_Expr(self, node: ast.Expr) -> ast.AST | None:  # docstrings and print(...) calls
        if isinstance(node.value, ast.Constant) or (
            isinstance(node.value, ast.Call) and ast.unparse(node.value.func) == "print"
        ):
            return ast.Pass()
        return self.generic_visit(node)


def _logic_fingerprint(funcs: dict[str, ast.FunctionDef], path: Path) -> str:
    parts = []
    for name in _LOGIC_FUNCTIONS:
        if name not in funcs:
            raise AgentFlowSourceError(f"{path}: function {name} not found")
        blank = _Blank().visit(ast.parse(ast.unparse(funcs[name])))
        parts.append(ast.unparse(blank))
    return hashlib.sha256("\n".join(parts).encode("utf-8")).hexdigest()[:16]


def _module_strings(tree: ast.Module) -> dict[str, str]:
    return {
        t.id: s.value.value
        for s in tree.body
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str)
        for t in s.targets
        if isinstance(t, ast.Name)
    }


def _fields(tree: ast.Module, name: str, path: Path) -> dict[str, str]:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return {
                s.target.id: ast.unparse(s.annotation)
                for s in node.body
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
            }
    raise AgentFlowSourceError(f"{path}: class {name} (a response_format) not found")


def _calls(func: ast.FunctionDef, attr: str) -> list[ast.Call]:
    return [
        n
        for n in ast.walk(func)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == attr
    ]


def _response_formats(func: ast.FunctionDef) -> list[str]:
    return [
        kw.value.id
        for n in ast.walk(func)
        if isinstance(n, ast.Call)
        for kw in n.keywords
        if kw.arg == "response_format" and isinstance(kw.value, ast.Name)
    ]


@dataclass(frozen=True)
class _FString:
    """An f-string over plain names (no conversions or format specs), rendered as Python renders it."""

    parts: tuple[str | tuple[str], ...]

    @classmethod
    def read(cls, node: ast.JoinedStr, allowed: set[str], where: str) -> _FString:
        parts: list[str | tuple[str]] = []
        for value in node.values:
            if isinstance(value, ast.Constant) and isinstance(value.value, str):
                parts.append(value.value)
            elif (
                isinstance(value, ast.FormattedValue)
                and isinstance(value.value, ast.Name)
                and value.value.id in allowed
                and value.conversion == -1
                and value.format_spec is None
            ):
                parts.append((value.value.id,))
            else:
                raise AgentFlowSourceError(
                    f"{where}:{node.lineno}: the prompt has a field the reader cannot evaluate "
                    f"({ast.unparse(value)[:80]!r}); it reads fields over {', '.join(sorted(allowed))}"
                )
        return cls(tuple(parts))

    def render(self, values: dict[str, Any]) -> str:
        return "".join(p if isinstance(p, str) else format(values[p[0]]) for p in self.parts)


class AgentFlowScoring:
    """The prompts, answer pattern, two-stage task list and reply fields of a checkout's scoring script."""

    @classmethod
    def cached(cls, path: str | Path) -> AgentFlowScoring:
        """The scoring script of the checkout at ``path``, read once per process while it is unchanged."""
        return cached_build(("scoring", str(Path(path).expanduser())), lambda: cls(path))

    def __init__(self, path: str | Path):
        root = Path(path).expanduser()
        package = find_package_dir(root)
        candidates = [root / SCORE_FILE, package.parent.parent / SCORE_FILE, package.parent / SCORE_FILE]
        file = next((c for c in candidates if c.is_file()), candidates[0])
        self.path = file
        tree = _parse(file)
        funcs = _functions(tree)
        self.logic = _logic_fingerprint(funcs, file)
        if self.logic != KNOWN_LOGIC:
            raise AgentFlowSourceError(
                f"{file}: its scoring logic differs from the AgentFlow version this judge follows (b940064; code "
                f"fingerprint {self.logic}, expected {KNOWN_LOGIC}); the prompts alone are read from the file, the "
                "control flow is this project's, so a changed flow cannot be followed"
            )
        single, two = funcs["answer_verification"], funcs["answer_verification_twostage"]
        where = str(file)
        prompt = [s for s in ast.walk(single) if isinstance(s, ast.Assign) and isinstance(s.value, ast.JoinedStr)]
        if len(prompt) != 1:
            raise AgentFlowSourceError(f"{where}: answer_verification builds {len(prompt)} f-string prompts, not 1")
        self.single = _FString.read(prompt[0].value, {"question", "response", "correct_answer"}, where)  # type: ignore[arg-type]
        strings = _module_strings(tree)
        formatted = [c.func.value.id for c in _calls(two, "format") if isinstance(c.func.value, ast.Name)]  # type: ignore[attr-defined]
        if len(formatted) != 2 or any(name not in strings for name in formatted):
            raise AgentFlowSourceError(
                f"{where}: answer_verification_twostage formats {formatted}, not two string constants"
            )
        self.extraction, self.verification = strings[formatted[0]], strings[formatted[1]]
        self.answer_pattern = self._pattern(single, where)
        if self._pattern(two, where).pattern != self.answer_pattern.pattern:
            raise AgentFlowSourceError(f"{where}: the two scoring paths cut answers with different patterns")
        self.two_stage_tasks = self._two_stage_tasks(funcs["score_results"], where)
        extract_format, verify_format = _response_formats(two)
        (single_format,) = _response_formats(single)
        self.extraction_fields = _fields(tree, extract_format, file)
        self.verification_fields = _fields(tree, verify_format, file)
        self.single_fields = _fields(tree, single_format, file)
        blob = json.dumps(
            [
                self.logic,
                self.single.parts,
                self.extraction,
                self.verification,
                self.answer_pattern.pattern,
                self.two_stage_tasks,
                self.extraction_fields,
                self.verification_fields,
                self.single_fields,
            ],
            ensure_ascii=False,
        )
        self.fingerprint = hashlib.sha256(blob.encode("utf-8")).hexdigest()[:16]

    @staticmethod
    def _pattern(func: ast.FunctionDef, where: str) -> re.Pattern[str]:
        for call in _calls(func, "findall"):
            args = call.args
            if (
                len(args) == 3
                and isinstance(args[0], ast.Constant)
                and isinstance(args[0].value, str)
                and ast.unparse(args[2]) == "re.DOTALL"
            ):
                return re.compile(args[0].value, re.DOTALL)
        raise AgentFlowSourceError(f"{where}: {func.name} has no re.findall(PATTERN, ..., re.DOTALL) answer cut")

    @staticmethod
    def _two_stage_tasks(func: ast.FunctionDef, where: str) -> tuple[str, ...]:
        for node in ast.walk(func):
            if (
                isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == "use_twostage" for t in node.targets)
                and isinstance(node.value, ast.Compare)
            ):
                return tuple(ast.literal_eval(node.value.comparators[0]))
        raise AgentFlowSourceError(f"{where}: score_results sets no use_twostage = task_name in [...]")


# ------------------------------------------------------------------ the scorer
class _ReplyError(ValueError):
    pass


_TRUE = {"true", "t", "yes", "y", "on", "1"}
_FALSE = {"false", "f", "no", "n", "off", "0"}


def _structured(reply: str, fields: dict[str, str]) -> dict[str, Any]:
    """A JSON reply validated as the pydantic class of those ``fields`` would validate it (lax mode)."""
    text = reply.strip()
    fenced = re.fullmatch(r"```(?:json)?\s*(.*?)\s*```", text, re.DOTALL)
    try:
        data = json.loads(fenced.group(1) if fenced else text)
    except ValueError as exc:
        raise _ReplyError(f"reply is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise _ReplyError("reply is not a JSON object")
    out: dict[str, Any] = {}
    for name, kind in fields.items():
        if name not in data:
            raise _ReplyError(f"reply has no field {name}")
        value = data[name]
        if kind == "bool":
            if isinstance(value, bool):
                out[name] = value
            elif isinstance(value, int) and value in (0, 1):
                out[name] = bool(value)
            elif isinstance(value, str) and value.strip().lower() in _TRUE | _FALSE:
                out[name] = value.strip().lower() in _TRUE
            else:
                raise _ReplyError(f"field {name} is not a boolean: {value!r:.40}")
        elif kind == "str":
            if not isinstance(value, str):
                raise _ReplyError(f"field {name} is not a string: {value!r:.40}")
            out[name] = value
        else:
            out[name] = value
    return out


def _json_schema(name: str, fields: dict[str, str]) -> dict[str, Any]:
    types = {"str": "string", "bool": "boolean"}
    return {
        "type": "json_schema",
        "json_schema": {
            "name": name,
            "strict": True,
            "schema": {
                "type": "object",
                "properties": {k: {"type": types.get(v, "string")} for k, v in fields.items()},
                "required": list(fields),
                "additionalProperties": False,
            },
        },
    }


class AgentFlowJudge:
    """AgentFlow's grading of one final output: single-stage for most benchmarks, extract-then-verify for
    the two-stage tasks (GPQA, MedQA), on the record AgentFlow's script reads (see :func:`judge_record`).

    As in AgentFlow: a failed extraction call falls back to the response's first 50 characters, a failed
    verification call to comparing the matched option with the answer as text (both counted in
    ``fallbacks``); a failed single-stage call is retried ``retries`` times, then raises (AgentFlow's
    script stops there). There is no hedge rule: the judge's prompt is all there is.
    """

    kind = "judge"
    reads_raw_answer = (
        True  # the answer grammar (scoring/grammar.py) leaves it alone: AgentFlow's judge reads the raw output
    )

    def __init__(self, engine: Any, source: str | Path | AgentFlowScoring, retries: int = 1, max_tokens: int = 4000):
        if engine is None:
            raise ConfigError("judge='agentflow:PATH' needs an engine: pass judge_engine=<Engine or engine spec>")
        self.spec = engine if isinstance(engine, str) else None
        if isinstance(engine, str):
            from agentflow_env.engines import make_engine

            engine = make_engine(engine)
        self.engine = engine
        self.scoring = source if isinstance(source, AgentFlowScoring) else AgentFlowScoring.cached(source)
        self.retries = int(retries)
        self.max_tokens = int(max_tokens)
        self.fallbacks = 0
        self.unparsed = 0

    @property
    def fingerprint(self) -> str:
        return self.scoring.fingerprint

    def _ask(self, prompt: str, name: str, fields: dict[str, str]) -> dict[str, Any]:
        sampling = SamplingParams(
            temperature=0.0, max_tokens=self.max_tokens, response_format=_json_schema(name, fields)
        )
        replies = generate_as(self.engine, [prompt], sampling, role="judge")
        if not replies:
            raise EngineError("the judge engine returned no completion")
        return _structured(replies[0], fields)

    def verdict(self, response: str, record: dict[str, Any]) -> bool:
        """AgentFlow's ``true_false`` for one response to one record."""
        s = self.scoring
        question = record["question"] if "question" in record else record.get("query", "")
        correct = record["answer"]
        matches = s.answer_pattern.findall(str(response))
        if matches:
            response = matches[-1].strip()
        choices = record.get("choices", record.get("options"))
        if record.get("task") in s.two_stage_tasks and choices is not None:
            return self._two_stage(question, response, correct, choices)
        prompt = s.single.render({"question": question, "response": response, "correct_answer": correct})
        for attempt in range(self.retries + 1):
            try:
                return bool(self._ask(prompt, "AnswerVerification", s.single_fields)["true_false"])
            except _ReplyError as exc:
                if attempt == self.retries:
                    self.unparsed += 1
                    raise EngineError(f"the judge's reply has no verdict after {attempt + 1} tries ({exc})") from None
        raise AssertionError("unreachable")

    def _two_stage(self, question: Any, response: str, correct: Any, choices: Any) -> bool:
        s = self.scoring
        prompt = s.extraction.format(question=question, response=response, choices_str="\n".join(choices))
        try:
            extracted = self._ask(prompt, "AnswerExtraction", s.extraction_fields)["extracted_option"].strip()
        except Exception as exc:  # AgentFlow falls back on any failure of this call
            logger.warning("AgentFlow judge: extraction failed (%s); using the response's start", exc)
            self.fallbacks += 1
            extracted = response[:50]
        option = most_similar_option(extracted, choices)
        prompt = s.verification.format(correct_answer=correct, extracted_option=option)
        try:
            return bool(self._ask(prompt, "AnswerVerification", s.verification_fields)["true_false"])
        except Exception as exc:
            logger.warning("AgentFlow judge: verification failed (%s); comparing texts", exc)
            self.fallbacks += 1
            return option == correct

    def __call__(self, prediction: str, task: Task) -> float:
        return 1.0 if self.verdict(str(prediction), judge_record(task)) else 0.0

    def describe(self) -> str:
        engine = self.spec or type(self.engine).__name__
        return f"judge:{engine} agentflow[{self.fingerprint}]"

    def __repr__(self) -> str:
        return f"AgentFlowJudge(engine={self.spec or type(self.engine).__name__}, scoring={self.scoring.path})"
