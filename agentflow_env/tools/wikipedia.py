"""Wikipedia search over a local dump: streaming readers for DPR/KILT/hub dumps, the index builder CLI, the tool.

``agentflow-env build-index --format dpr|jsonl|parquet|hub --input ... --output-dir DIR`` writes a BM25 index folder.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from agentflow_env.error import DataError
from agentflow_env.tools.bm25 import BM25Index, iter_dataset_rows, jsonl_rows, parquet_rows
from agentflow_env.tools.bm25.build import available_cpus
from agentflow_env.tools.dense_cli import add_dense_arguments, run_dense_build
from agentflow_env.tools.search import BM25SearchTool

__all__ = [
    "WIKI_ENV_VAR",
    "WikipediaSearchTool",
    "build_wiki_index",
    "configure",
    "iter_dpr_tsv",
    "iter_wiki_jsonl",
    "split_passages",
]

WIKI_ENV_VAR = "AGENTFLOW_WIKI_INDEX"
FORMATS = ("dpr", "jsonl", "parquet", "hub")

# field names seen in common dumps, tried in order when the user names none
_TITLE_KEYS = ("title", "wikipedia_title", "page_title")
_TEXT_KEYS = ("text", "contents", "passage", "paragraph")
_ID_KEYS = ("id", "_id", "wikipedia_id", "docid")


def iter_dpr_tsv(path: str | os.PathLike[str]) -> Iterator[dict[str, str]]:
    """Stream DPR's ``psgs_w100.tsv``: a header ``id  text  title`` then one 100-word passage per line."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"DPR dump not found: {path}")
    csv.field_size_limit(min(sys.maxsize, 2**31 - 1))
    with open(path, encoding="utf-8", newline="") as fh:
        reader = csv.reader(fh, delimiter="\t", quotechar='"')
        header = next(reader, None)
        if header is None:
            return
        cols = [h.strip().lower() for h in header]
        if {"id", "text", "title"} <= set(cols):
            i_id, i_text, i_title = cols.index("id"), cols.index("text"), cols.index("title")
        else:  # no header: DPR's column order
            i_id, i_text, i_title = 0, 1, 2
            yield from _dpr_row(header, i_id, i_text, i_title, path, 1)
        for lineno, row in enumerate(reader, 2):
            yield from _dpr_row(row, i_id, i_text, i_title, path, lineno)


def _dpr_row(row: list[str], i_id: int, i_text: int, i_title: int, path: Path, lineno: int) -> Iterator[dict[str, str]]:
    if not row:
        return
    if len(row) <= max(i_id, i_text, i_title):
        raise DataError(f"{path}:{lineno}: expected 3 tab-separated columns (id, text, title), got {len(row)}")
    yield {"id": row[i_id], "title": row[i_title], "text": row[i_text]}


def _pick(row: dict[str, Any], wanted: str | None, candidates: tuple[str, ...]) -> str | None:
    if wanted:
        return wanted
    return next((k for k in candidates if k in row), None)


def _normalize_row(
    row: dict[str, Any], text_field: str | None, title_field: str | None, id_field: str | None
) -> dict[str, Any]:
    text_key = _pick(row, text_field, _TEXT_KEYS)
    if text_key is None or text_key not in row:
        raise DataError(f"record has no text field (fields: {', '.join(map(str, row))}); pass --text-field")
    out: dict[str, Any] = {"text": row[text_key]}
    title_key = _pick(row, title_field, _TITLE_KEYS)
    out["title"] = row.get(title_key, "") if title_key else ""
    id_key = _pick(row, id_field, _ID_KEYS)
    if id_key and row.get(id_key) is not None:
        out["id"] = str(row[id_key])
    return out


def iter_wiki_jsonl(
    path: str | os.PathLike[str],
    *,
    text_field: str | None = None,
    title_field: str | None = None,
    id_field: str | None = None,
) -> Iterator[dict[str, Any]]:
    """Stream a JSON-lines dump (``{title, text}``, KILT's ``{wikipedia_title, text: {paragraph: [...]}}``...)."""
    for row in jsonl_rows(path):
        yield _normalize_row(row, text_field, title_field, id_field)


def _paragraphs(text: Any) -> list[str]:
    if isinstance(text, dict):
        for key in ("paragraph", "paragraphs", "text"):
            if key in text:
                return _paragraphs(text[key])
        return [str(v) for v in text.values()]
    if isinstance(text, (list, tuple)):
        return [p for item in text for p in _paragraphs(item)]
    return [] if text is None else [str(text)]


def split_passages(rows: Iterable[dict[str, Any]], words: int = 100) -> Iterator[dict[str, str]]:
    """Cut long articles into passages of at most ``words`` words (as DPR did); ``words <= 0`` keeps them whole."""
    for row in rows:
        title = str(row.get("title") or "")
        base = row.get("id")
        body = " ".join(p.strip() for p in _paragraphs(row.get("text")) if p and p.strip())
        if words <= 0:
            yield {"title": title, "text": body, **({"id": str(base)} if base is not None else {})}
            continue
        tokens = body.split()
        n_parts = max(1, -(-len(tokens) // words))
        for part in range(n_parts):
            chunk = " ".join(tokens[part * words : (part + 1) * words])
            rec = {"title": title, "text": chunk}
            if base is not None:
                rec["id"] = str(base) if n_parts == 1 else f"{base}_{part}"
            yield rec


def iter_dump(
    fmt: str,
    source: str,
    *,
    split: str = "train",
    text_field: str | None = None,
    title_field: str | None = None,
    id_field: str | None = None,
    passage_words: int = 100,
    limit: int | None = None,
) -> Iterator[dict[str, str]]:
    """Passages of a dump in any supported format, streamed (``limit`` stops early, for trials)."""
    if fmt == "dpr":
        rows: Iterable[dict[str, Any]] = iter_dpr_tsv(source)
        passage_words = 0  # DPR is already cut into 100-word passages
    elif fmt == "jsonl":
        rows = iter_wiki_jsonl(source, text_field=text_field, title_field=title_field, id_field=id_field)
    elif fmt == "parquet":
        rows = (_normalize_row(r, text_field, title_field, id_field) for r in parquet_rows(source))
    elif fmt == "hub":
        rows = (_normalize_row(r, text_field, title_field, id_field) for r in iter_dataset_rows(source, split=split))
    else:
        raise DataError(f"unknown dump format {fmt!r}; use one of: {', '.join(FORMATS)}")
    for i, passage in enumerate(split_passages(rows, passage_words)):
        if limit is not None and i >= limit:
            return
        yield passage


def build_wiki_index(
    fmt: str,
    source: str,
    out_dir: str | os.PathLike[str],
    *,
    show_progress: bool = False,
    chunk_size: int = 20_000,
    workers: int = 1,
    **dump_kwargs: Any,
) -> BM25Index:
    """Stream a Wikipedia dump into a BM25 index folder at ``out_dir`` and return the opened index
    (``workers`` processes tokenize the passages; the folder is the same for any number)."""
    passages = iter_dump(fmt, source, **dump_kwargs)
    return BM25Index.build(
        passages, out_dir=out_dir, chunk_size=chunk_size, show_progress=show_progress, workers=workers
    )


class WikipediaSearchTool(BM25SearchTool):
    """BM25 search over a local Wikipedia index (``index_path=`` or ``$AGENTFLOW_WIKI_INDEX``)."""

    name = "Wikipedia_Search_Tool"
    description = (
        "Searches a local copy of Wikipedia and returns the most relevant passages, numbered, with "
        "their article titles. Best for facts about named people, places, works and events."
    )
    input_spec = "a search query (entity names and keywords, or a short question)"
    examples = ("Eiffel Tower height", "birthplace of the director of Jaws")
    env_var = WIKI_ENV_VAR

    def _missing_message(self) -> str:
        return (
            f"Error: {self.name} has no Wikipedia index. Build one with `agentflow-env build-index --format "
            f"dpr --input psgs_w100.tsv --output-dir DIR`, then set ${self.env_var}=DIR (or pass index_path=DIR)."
        )


# ------------------------------------------------------------------------------------------------------ CLI


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``agentflow-env build-index``."""
    parser.description = (
        "Build a BM25 index folder from a Wikipedia dump, streaming it (the dump is never held "
        f"in memory). Point ${WIKI_ENV_VAR} at the folder to use it in Wikipedia_Search_Tool."
    )
    parser.add_argument(
        "--format",
        required=True,
        choices=FORMATS,
        help="dpr: psgs_w100.tsv (id, text, title); jsonl: one {title, text} object per line "
        "(KILT-like); parquet: a Parquet file; hub: a datasets id or save_to_disk folder",
    )
    parser.add_argument("--input", required=True, help="dump file, dataset folder, or hub dataset id")
    parser.add_argument("--output-dir", required=True, help="index folder to write")
    parser.add_argument("--split", default="train", help="dataset split for --format hub (default: train)")
    parser.add_argument("--text-field", default=None, help="name of the passage text field (default: auto)")
    parser.add_argument("--title-field", default=None, help="name of the title field (default: auto)")
    parser.add_argument("--id-field", default=None, help="name of the id field (default: auto)")
    parser.add_argument(
        "--passage-words",
        type=int,
        default=100,
        help="cut longer texts into passages of this many words; 0 keeps them whole (default 100)",
    )
    parser.add_argument("--chunk-size", type=int, default=20_000, help="passages tokenized per chunk")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="processes that tokenize chunks for a BM25 index (default: the CPUs available; the index is the "
        "same for any number)",
    )
    parser.add_argument("--limit", type=int, default=None, help="stop after this many passages (for a trial)")
    parser.add_argument("--force", action="store_true", help="overwrite an existing index folder")
    parser.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_dense_arguments(parser)
    parser.set_defaults(func=_run_build_index)


def _run_build_index(args: argparse.Namespace) -> int:
    out = Path(args.output_dir)
    if args.format != "hub" and not Path(args.input).exists():  # before the progress bar starts
        sys.stderr.write(f"error: {args.format} dump {args.input} not found; pass --input PATH of an existing file\n")
        return 2
    if args.workers is not None and args.workers < 1:
        sys.stderr.write(f"error: --workers must be at least 1, not {args.workers}\n")
        return 2
    if out.exists() and any(out.iterdir()) and not args.force:
        sys.stderr.write(f"error: {out} exists and is not empty; choose another --output-dir or pass --force\n")
        return 2
    start = time.perf_counter()
    if args.retriever == "dense":
        return run_dense_build(args, iter_dump, out, start)
    try:
        index = build_wiki_index(
            args.format,
            args.input,
            out,
            show_progress=not args.no_progress,
            chunk_size=args.chunk_size,
            workers=args.workers or available_cpus(),
            split=args.split,
            text_field=args.text_field,
            title_field=args.title_field,
            id_field=args.id_field,
            passage_words=args.passage_words,
            limit=args.limit,
        )
    except DataError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    summary = {
        "index": str(out),
        "passages": len(index),
        "terms": len(index.vocab),
        "seconds": round(time.perf_counter() - start, 2),
        "use": f"export {WIKI_ENV_VAR}={out.resolve()}",
    }
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        sys.stdout.write(
            f"indexed {summary['passages']} passages ({summary['terms']} terms) in {summary['seconds']} s into "
            f"{out}\nuse it: {summary['use']}\n"
        )
    index.close()
    return 0
