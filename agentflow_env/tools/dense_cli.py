"""``agentflow-env build-index --retriever dense --encoder PATH``: the dense options and the build step.

The corpus readers (``--format``, ``--input``, fields, ``--limit``) are ``build-index``'s own
(:mod:`agentflow_env.tools.wikipedia`); this module adds the encoder and FAISS options and runs
:meth:`agentflow_env.tools.dense.DenseIndex.build`. Nothing here imports torch or FAISS until a dense build runs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentflow_env.error import DataError

__all__ = ["add_dense_arguments", "run_dense_build"]


def add_dense_arguments(parser: argparse.ArgumentParser) -> None:
    """``--retriever`` and the dense retriever's options."""
    parser.add_argument(
        "--retriever", choices=("bm25", "dense"), default="bm25", help="bm25 (default) or dense (needs --encoder)"
    )
    parser.add_argument("--encoder", default=None, help="dense: a local Hugging Face encoder folder (e.g. e5-base-v2)")
    parser.add_argument("--index-type", choices=("flat", "hnsw", "ivfpq"), default="flat", help="dense: FAISS index")
    parser.add_argument("--pooling", choices=("mean", "cls"), default="mean", help="dense: pooling (e5: mean)")
    parser.add_argument("--query-prefix", default="query: ", help="dense: prefix of queries (e5: 'query: ')")
    parser.add_argument("--passage-prefix", default="passage: ", help="dense: prefix of passages (e5: 'passage: ')")
    parser.add_argument("--max-length", type=int, default=256, help="dense: tokens per passage")
    parser.add_argument("--batch-size", type=int, default=64, help="dense: passages encoded per forward pass")


def run_dense_build(args: argparse.Namespace, iter_dump: Callable[..., Any], out: Path, start: float) -> int:
    """Build a dense index folder from ``build-index``'s parsed arguments; the exit status."""
    from agentflow_env.tools.dense import DenseEncoder, DenseIndex

    if not args.encoder:
        sys.stderr.write("error: --retriever dense needs --encoder PATH (a local Hugging Face encoder folder)\n")
        return 2
    encoder = DenseEncoder(
        args.encoder,
        pooling=args.pooling,
        query_prefix=args.query_prefix,
        passage_prefix=args.passage_prefix,
        max_length=args.max_length,
        batch_size=args.batch_size,
    )
    passages = iter_dump(
        args.format,
        args.input,
        split=args.split,
        text_field=args.text_field,
        title_field=args.title_field,
        id_field=args.id_field,
        passage_words=args.passage_words,
        limit=args.limit,
    )
    try:
        index = DenseIndex.build(
            passages,
            encoder,
            out,
            index_type=args.index_type,
            chunk_size=min(args.chunk_size, 8192),
            show_progress=not args.no_progress,
        )
    except DataError as exc:
        sys.stderr.write(f"error: {exc}\n")
        return 2
    summary = {
        "index": str(out),
        "passages": len(index),
        "index_type": index.meta["index_type"],
        "seconds": round(time.perf_counter() - start, 2),
        "use": f"agentflow-env retrieval-server --index {out}",
    }
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    else:
        sys.stdout.write(
            f"indexed {summary['passages']} passages ({summary['index_type']}) in {summary['seconds']} s into {out}\n"
            f"serve it: {summary['use']}\n"
        )
    index.close()
    return 0
