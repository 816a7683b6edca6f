"""BM25 search over a local corpus, in the order a corpus goes through it.

- :mod:`~agentflow_env.tools.bm25.tokenize`: the tokenizer;
- :mod:`~agentflow_env.tools.bm25.corpus`: corpus readers and the passage store;
- :mod:`~agentflow_env.tools.bm25.build`: the streaming index builder;
- :mod:`~agentflow_env.tools.bm25.index`: the mmap-able index and its numba retrieval kernel;
- :mod:`~agentflow_env.tools.bm25.check`: the folder's layout, checksums and structural checks.

Scores are precomputed into a term-major sparse matrix in bm25s's on-disk layout; queries run on bm25s's numba
backend. The search tool itself is :class:`agentflow_env.tools.search.BM25SearchTool`.
"""

from agentflow_env.tools.bm25.corpus import (
    iter_dataset,
    iter_dataset_rows,
    iter_jsonl,
    iter_parquet,
    jsonl_rows,
    parquet_rows,
)
from agentflow_env.tools.bm25.index import BM25Index, SearchHit
from agentflow_env.tools.bm25.tokenize import STOPWORDS, tokenize

__all__ = [
    "STOPWORDS",
    "BM25Index",
    "SearchHit",
    "iter_dataset",
    "iter_dataset_rows",
    "iter_jsonl",
    "iter_parquet",
    "jsonl_rows",
    "parquet_rows",
    "tokenize",
]
