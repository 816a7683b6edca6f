"""The paper's ten benchmarks: where each one's data lives, how its fields map to a task, its tools and
its budgets (AgentFlow's --max_steps and --max_time)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from benchmarks.loaders import (
    HubSource,
)

__all__ = ["BENCHMARKS", "MATH_TOOLS", "PAPER_MAX_TURNS", "PAPER_TIME_BUDGET_S", "SEARCH_TOOLS", "PaperBenchmark"]

SEARCH_TOOLS = ("generator", "python", "wikipedia", "web_search")
MATH_TOOLS = ("generator", "python", "calculator")
PAPER_MAX_TURNS = 10  # AgentFlow's evaluation runs with --max_steps 10 ...
PAPER_TIME_BUDGET_S = 300.0  # ... and --max_time 300

_KINDS = ("qa", "gaia", "math", "game24", "choice")

_INSTRUCTIONS = {
    "qa": "Give the final answer as a short phrase (a name, date, number or yes/no), not a sentence.",
    "gaia": "Give the final answer as briefly as possible: a number, a few words, or a comma-separated list.",
    "math": "Give the final answer as a number or a simplified expression, with no units or explanation.",
    "game24": "Give the final answer as one arithmetic expression that uses each given number exactly once "
    "with + - * / and parentheses, and equals 24.",
    "choice": "Give the final answer as the letter of the correct option (for example: B).",
}


@dataclass(frozen=True)
class PaperBenchmark:
    """One of the paper's benchmarks: where its data lives and how its fields map to a task."""

    name: str
    file: str  # base name in AgentFlow's test folder
    family: str
    kind: str
    local_columns: Mapping[str, str | Sequence[str]]
    hub: HubSource
    known_size: int  # records in AgentFlow's test file
    paper_size: int  # how many of them the paper's script evaluates (the first N)
    about: str = ""
    aliases: tuple[str, ...] = field(default_factory=tuple)

    @property
    def tools(self) -> tuple[str, ...]:
        return MATH_TOOLS if self.family == "math" else SEARCH_TOOLS


def _flashrag(config: str, split: str) -> HubSource:
    return HubSource(
        "RUC-NLPIR/FlashRAG_datasets",
        split,
        {"question": "question", "answer": "golden_answers", "id": "id"},
        config=config,
    )


def _no_attachment(row: dict[str, Any]) -> bool:
    return not str(row.get("file_name") or "").strip()


def _solvable(row: dict[str, Any]) -> bool:
    return bool(row.get("solvable", True))


# "query": the text AgentFlow's solver sends (``verbatim_query=True``, the paper mode); absent columns are skipped
_QA_LOCAL = {"question": "question", "answer": "answer", "id": "pid", "query": "query"}
_QUERY_LOCAL = {"question": "query", "answer": "answer", "id": "pid", "query": "query"}

BENCHMARKS: dict[str, PaperBenchmark] = {
    b.name: b
    for b in (
        PaperBenchmark(
            "Bamboogle",
            "bamboogle",
            "search",
            "qa",
            _QA_LOCAL,
            _flashrag("bamboogle", "test"),
            125,
            125,
            "2-hop questions written so that search engines answer them wrongly",
        ),
        PaperBenchmark(
            "TwoWiki",
            "2wiki",
            "search",
            "qa",
            _QUERY_LOCAL,
            _flashrag("2wikimultihopqa", "dev"),
            200,
            100,
            "2WikiMultihopQA: multi-hop questions over Wikipedia and Wikidata",
            ("2wikimultihopqa",),
        ),
        PaperBenchmark(
            "HotpotQA",
            "hotpotqa",
            "search",
            "qa",
            _QA_LOCAL,
            _flashrag("hotpotqa", "dev"),
            100,
            100,
            "HotpotQA: 2-hop bridge and comparison questions over Wikipedia",
        ),
        PaperBenchmark(
            "Musique",
            "musique",
            "search",
            "qa",
            _QUERY_LOCAL,
            _flashrag("musique", "dev"),
            200,
            100,
            "MuSiQue: 2-4 hop composed questions",
        ),
        PaperBenchmark(
            "GAIA",
            "gaia",
            "agentic",
            "gaia",
            {
                "question": "question",
                "answer": "answer",
                "id": "task_id",
                "level": "Level",
                "file_name": "file_name",
                "query": "query",
            },
            HubSource(
                "gaia-benchmark/GAIA",
                "validation",
                {
                    "question": "Question",
                    "answer": "Final answer",
                    "id": "task_id",
                    "level": "Level",
                    "file_name": "file_name",
                },
                config="2023_all",
                keep=_no_attachment,
                note="text-only: questions with an attached file are dropped",
            ),
            127,
            127,
            "GAIA validation, text-only questions (no attached files)",
        ),
        PaperBenchmark(
            "AIME24",
            "aime24",
            "math",
            "math",
            _QA_LOCAL,
            HubSource("HuggingFaceH4/aime_2024", "train", {"question": "problem", "answer": "answer", "id": "id"}),
            30,
            30,
            "AIME 2024: 30 competition problems with integer answers 0-999",
        ),
        PaperBenchmark(
            "AMC23",
            "amc23",
            "math",
            "math",
            _QA_LOCAL,
            HubSource("math-ai/amc23", "test", {"question": "question", "answer": "answer", "id": "id"}),
            40,
            40,
            "AMC 2023: 40 competition problems with numeric answers",
        ),
        PaperBenchmark(
            "GameOf24",
            "gameof24",
            "math",
            "game24",
            {"numbers": "question", "answer": "answer", "question": "query", "id": "pid", "query": "query"},
            HubSource("nlile/24-game", "train", {"numbers": "numbers", "answer": "solutions"}, keep=_solvable),
            300,
            100,
            "Game of 24: combine four numbers with + - * / to make 24 (exact checker)",
        ),
        PaperBenchmark(
            "GPQA",
            "gpqa",
            "science",
            "choice",
            {"question": "question", "choices": "choices", "answer_index": "answer_idx", "id": "pid", "query": "query"},
            HubSource(
                "Idavidrein/gpqa",
                "train",
                {
                    "question": "Question",
                    "correct": "Correct Answer",
                    "incorrect": ["Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3"],
                    "id": "Record ID",
                },
                config="gpqa_diamond",
            ),
            300,
            100,
            "GPQA: graduate-level science multiple choice; options shuffled per seed",
        ),
        PaperBenchmark(
            "MedQA",
            "medqa",
            "science",
            "choice",
            {"question": "question", "choices": "options", "answer": "answer", "id": "pid", "query": "query"},
            HubSource(
                "GBaker/MedQA-USMLE-4-options",
                "test",
                {"question": "question", "choices": "options", "answer_letter": "answer_idx", "answer": "answer"},
            ),
            300,
            100,
            "MedQA (USMLE, 4 options): medical multiple choice",
        ),
    )
}

_REQUIRED = {
    "qa": ("question", "answer"),
    "gaia": ("question", "answer"),
    "math": ("question", "answer"),
    "game24": ("numbers",),
    "choice": ("question",),
}
_OPTIONAL = ("id", "level", "file_name", "answer", "question", "query")
