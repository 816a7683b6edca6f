"""Speed of the local BM25 search: queries/s over a deterministic synthetic corpus, on one core, side by side.

Compares agentflow_env's BM25Index (single queries and batches) with stock bm25s (numba backend, same index
files) and rank_bm25 (pure Python/numpy, timed on a small subset of queries because it is slow). Prints JSON.
Usage: python perf/search.py [--passages 200000] [--queries 5000] [--rank-bm25-queries 20]
"""

from __future__ import annotations

import os

# one core for every library: set before numpy/numba are imported
for _var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse  # noqa: E402
import json  # noqa: E402
import platform  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

SYLLABLES = ["ka", "lo", "mi", "ne", "ru", "sa", "ti", "vo", "ze", "pa", "do", "gu", "shi", "ber", "tan", "mor"]


def make_vocab(n_words: int, rng: np.random.Generator) -> list[str]:
    """Distinct pseudo-words of 2-4 syllables."""
    words: list[str] = []
    seen: set[str] = set()
    while len(words) < n_words:
        parts = rng.integers(0, len(SYLLABLES), size=rng.integers(2, 5))
        w = "".join(SYLLABLES[p] for p in parts)
        if w not in seen:
            seen.add(w)
            words.append(w)
    return words


def make_corpus(n_passages: int, seed: int = 0, n_words: int = 60_000, length: int = 60) -> list[dict[str, str]]:
    """Zipf-distributed words, fixed seed so every run indexes the same corpus.

    As in natural text, the most frequent ranks are function words (the tokenizer's stopwords), followed by
    pseudo-words; passages are about as long as DPR's 100-word Wikipedia passages once stopwords are removed.
    """
    from agentflow_env.tools.bm25 import STOPWORDS

    rng = np.random.default_rng(seed)
    vocab = np.array(sorted(STOPWORDS) + make_vocab(n_words - len(STOPWORDS), rng), dtype=object)
    ranks = np.arange(1, n_words + 1)
    probs = 1.0 / ranks**1.05
    probs /= probs.sum()
    lens = rng.integers(length // 2, length * 3 // 2, size=n_passages)
    words = vocab[rng.choice(n_words, size=int(lens.sum()), p=probs)]
    cuts = np.cumsum(lens)[:-1]
    return [
        {"id": f"p{i}", "title": f"{chunk[0].title()} {i}", "text": " ".join(chunk)}
        for i, chunk in enumerate(np.split(words, cuts))
    ]


def make_queries(corpus: list[dict[str, str]], n: int, seed: int = 1) -> list[str]:
    """Queries of 3-6 words drawn from a random passage, as a planner would phrase a keyword search."""
    rng = np.random.default_rng(seed)
    out = []
    for i in rng.integers(0, len(corpus), size=n):
        words = corpus[int(i)]["text"].split()
        take = rng.choice(len(words), size=min(len(words), int(rng.integers(3, 7))), replace=False)
        out.append(" ".join(words[j] for j in sorted(take)))
    return out


def rate(n: int, seconds: float) -> float:
    return round(n / seconds, 1) if seconds > 0 else float("inf")


class Clock:
    """Wall and CPU time of a block: on a shared machine the CPU figure is the fair per-core throughput."""

    def __enter__(self) -> Clock:
        self.wall, self.cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *exc: object) -> None:
        self.wall = time.perf_counter() - self.wall
        self.cpu = time.process_time() - self.cpu

    def qps(self, n: int, prefix: str) -> dict[str, float]:
        return {f"{prefix}_qps": rate(n, self.wall), f"{prefix}_qps_cpu": rate(n, self.cpu)}


def bench_ours(corpus: list[dict[str, str]], queries: list[str], k: int, folder: Path) -> dict[str, object]:
    from agentflow_env.tools.bm25 import BM25Index

    with Clock() as build:
        index = BM25Index.build(corpus, out_dir=folder)
    index.search_batch(queries[:10], k)  # compile / load the numba kernel outside the timing
    with Clock() as single:
        for q in queries:
            index.search(q, k)
    with Clock() as batch:
        index.search_batch(queries, k)
    return {
        "build_s": round(build.wall, 2),
        "build_cpu_s": round(build.cpu, 2),
        "terms": len(index.vocab),
        **single.qps(len(queries), "single"),
        **batch.qps(len(queries), "batch"),
        "queries": len(queries),
    }


def bench_bm25s(queries: list[str], k: int, folder: Path) -> dict[str, object]:
    """Stock bm25s retrieve (numba backend, serial) on the very same index files."""
    import bm25s

    from agentflow_env.tools.bm25 import tokenize

    retriever = bm25s.BM25.load(folder, mmap=True)
    tokens = [t for t in (tokenize(q) for q in queries) if t]  # bm25s rejects a query with no known token
    retriever.retrieve(tokens[:10], k=k, show_progress=False, n_threads=1)  # JIT outside the timing
    with Clock() as single:
        for toks in tokens:
            retriever.retrieve([toks], k=k, show_progress=False, n_threads=1)
    with Clock() as batch:
        retriever.retrieve(tokens, k=k, show_progress=False, n_threads=1)
    return {
        **single.qps(len(tokens), "single"),
        **batch.qps(len(tokens), "batch"),
        "queries": len(tokens),
        "note": "query tokenization and passage lookup excluded",
    }


def bench_rank_bm25(corpus: list[dict[str, str]], queries: list[str], k: int) -> dict[str, object]:
    from rank_bm25 import BM25Okapi

    from agentflow_env.tools.bm25 import tokenize

    with Clock() as build:
        model = BM25Okapi([tokenize(f"{p['title']} {p['text']}") for p in corpus])
    with Clock() as single:
        for q in queries:
            scores = model.get_scores(tokenize(q))
            np.argpartition(-scores, k)[:k]
    return {
        "build_s": round(build.wall, 2),
        **single.qps(len(queries), "single"),
        "queries": len(queries),
        "note": f"slow: timed on only {len(queries)} queries",
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=200_000)
    parser.add_argument("--queries", type=int, default=5_000)
    parser.add_argument("--rank-bm25-queries", type=int, default=20, help="0 skips rank_bm25")
    parser.add_argument("--k", type=int, default=5)
    args = parser.parse_args()
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, {sorted(os.sched_getaffinity(0))[0]})

    t0 = time.perf_counter()
    corpus = make_corpus(args.passages)
    queries = make_queries(corpus, args.queries)
    gen_s = time.perf_counter() - t0
    with tempfile.TemporaryDirectory(prefix="perf-search-") as tmp:
        ours = bench_ours(corpus, queries, args.k, Path(tmp) / "index")
        stock = bench_bm25s(queries, args.k, Path(tmp) / "index")
    result: dict[str, object] = {
        "benchmark": "bm25_search",
        "corpus": {"passages": args.passages, "generate_s": round(gen_s, 2), "seed": 0},
        "k": args.k,
        "cores": 1,
        "python": platform.python_version(),
        "load_average_1m": round(os.getloadavg()[0], 2),
        "agentflow_env": ours,
        "bm25s_stock_numba": stock,
    }
    if args.rank_bm25_queries > 0:
        peer = bench_rank_bm25(corpus, queries[: args.rank_bm25_queries], args.k)
        result["rank_bm25"] = peer
        result["speedup_single_cpu_vs_rank_bm25"] = round(ours["single_qps_cpu"] / peer["single_qps_cpu"], 1)  # type: ignore[operator]
    result["speedup_single_cpu_vs_bm25s"] = round(ours["single_qps_cpu"] / stock["single_qps_cpu"], 2)  # type: ignore[operator]
    result["goal_qps"] = 2000
    result["meets_goal_single_cpu"] = float(ours["single_qps_cpu"]) >= 2000  # type: ignore[arg-type]
    sys.stdout.write(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
