"""BM25 index build: time and peak memory of agentflow_env's streaming builder, tantivy and bm25s, side by side.

Writes a synthetic corpus (perf/search.py's Zipfian words; passage lengths like wiki-18's 100-word passages)
to a JSON-lines file once, then builds an index from that file with each library in its own child process,
one after the other, and reports each child's wall time, CPU time (user + system, all its threads) and peak
resident memory (``ru_maxrss``). Ours and tantivy stream the file and store the passages; bm25s needs the
whole corpus and its tokens in memory (its API). Prints JSON.
Usage: python perf/bm25_build.py [--passages 1000000] [--only ours,tantivy,bm25s] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def write_corpus(path: Path, n_passages: int, seed: int = 0, n_words: int = 60_000, block: int = 50_000) -> None:
    """``n_passages`` Zipfian passages (54-100 words, wiki-18's 100-word passages less their stopwords' share
    varies) written block by block, so memory holds one block, whatever ``n_passages``."""
    from search import SYLLABLES, make_vocab

    from agentflow_env.tools.bm25 import STOPWORDS

    rng = np.random.default_rng(seed)
    vocab = np.array(sorted(STOPWORDS) + make_vocab(n_words - len(STOPWORDS), rng), dtype=object)
    assert SYLLABLES
    probs = 1.0 / np.arange(1, n_words + 1) ** 1.05
    probs /= probs.sum()
    cdf = np.cumsum(probs)
    with open(path, "w", encoding="utf-8") as fh:
        for start in range(0, n_passages, block):
            n = min(block, n_passages - start)
            lens = rng.integers(80, 121, size=n)  # wiki-18 passages: 100 words, a few shorter or longer
            ids = np.searchsorted(cdf, rng.random(int(lens.sum())))
            words = vocab[np.minimum(ids, n_words - 1)]
            cuts = np.cumsum(lens)[:-1]
            lines = []
            for i, chunk in enumerate(np.split(words, cuts)):
                row = start + i
                lines.append(
                    json.dumps({"id": f"p{row}", "title": f"{chunk[0].title()} {row}", "text": " ".join(chunk)})
                )
            fh.write("\n".join(lines) + "\n")


def _rows(path: str):
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line)


def child(name: str, corpus: str, out: str) -> dict[str, object]:
    """Build one index from ``corpus`` into ``out``; returns what it built."""
    if name == "ours":
        from agentflow_env.tools.bm25 import BM25Index

        index = BM25Index.from_jsonl(corpus, out_dir=out)
        return {"passages": len(index), "terms": len(index.vocab)}
    if name == "tantivy":
        import tantivy

        builder = tantivy.SchemaBuilder()
        builder.add_text_field("id", stored=True, tokenizer_name="raw")
        builder.add_text_field("title", stored=True)
        builder.add_text_field("text", stored=True)
        schema = builder.build()
        index = tantivy.Index(schema, path=out)
        writer = index.writer()  # tantivy's defaults: its heap budget and indexing threads
        n = 0
        for row in _rows(corpus):
            writer.add_document(tantivy.Document(id=row["id"], title=row["title"], text=row["text"]))
            n += 1
        writer.commit()
        writer.wait_merging_threads()
        return {"passages": n}
    if name == "bm25s":
        import bm25s

        texts = [f"{r['title']} {r['text']}" for r in _rows(corpus)]
        tokens = bm25s.tokenize(texts, stopwords="en", show_progress=False)
        retriever = bm25s.BM25(method="lucene")
        retriever.index(tokens, show_progress=False)
        retriever.save(out)
        return {"passages": len(texts), "note": "corpus and tokens in memory (bm25s's API); passages not stored"}
    raise SystemExit(f"unknown library {name}")


def start_child(name: str, corpus: Path, workdir: Path) -> tuple[subprocess.Popen, float, Path]:
    out = workdir / f"index-{name}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cmd = [sys.executable, __file__, "--child", name, "--corpus", str(corpus), "--out", str(out)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, env={**os.environ, "PYTHONPATH": os.getcwd()})
    return proc, time.perf_counter(), out


def finish_child(proc: subprocess.Popen, start: float, out: Path, timeout: float) -> dict[str, object]:
    try:
        stdout, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return {"error": f"over {timeout:g} s"}
    wall = time.perf_counter() - start
    _, status, usage = os.wait4(proc.pid, 0) if proc.returncode is None else (0, 0, None)
    usage = usage or resource.getrusage(resource.RUSAGE_CHILDREN)
    result: dict[str, object] = {"wall_s": round(wall, 1), "returncode": proc.returncode}
    try:
        result.update(json.loads(stdout.strip().splitlines()[-1]))
    except (ValueError, IndexError):
        result["error"] = "no result"
    result["index_mb"] = round(sum(p.stat().st_size for p in out.rglob("*") if p.is_file()) / 1e6, 1)
    shutil.rmtree(out, ignore_errors=True)
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--only", default="ours,tantivy,bm25s")
    parser.add_argument("--workdir", default=None, help="folder for the corpus and indexes (default: a temp dir)")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--parallel", action="store_true", help="run the libraries at once (compare CPU, memory)")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        t0, c0 = time.perf_counter(), time.process_time()
        built = child(args.child, args.corpus, args.out)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        built.update(
            build_s=round(time.perf_counter() - t0, 1),
            cpu_s=round(usage.ru_utime + usage.ru_stime, 1),
            python_cpu_s=round(time.process_time() - c0, 1),
            peak_rss_mb=round(usage.ru_maxrss / 1024, 1),
        )
        sys.stdout.write(json.dumps(built) + "\n")
        return 0
    with tempfile.TemporaryDirectory(prefix="perf-bm25-build-", dir=args.workdir) as tmp:
        work = Path(tmp)
        corpus = work / "corpus.jsonl"
        t0 = time.perf_counter()
        write_corpus(corpus, args.passages)
        out: dict[str, object] = {
            "benchmark": "bm25_build",
            "passages": args.passages,
            "corpus_mb": round(corpus.stat().st_size / 1e6, 1),
            "corpus_write_s": round(time.perf_counter() - t0, 1),
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_average_1m_before": round(os.getloadavg()[0], 2),
        }
        names = args.only.split(",")
        if args.parallel:  # every library at once: CPU time and peak memory stay per process, wall times overlap
            started = {name: start_child(name, corpus, work) for name in names}
            for name in names:
                out[name] = finish_child(*started[name], args.timeout)
        else:
            for name in names:
                out[name] = finish_child(*start_child(name, corpus, work), args.timeout)
                out[name]["load_average_1m_after"] = round(os.getloadavg()[0], 2)  # type: ignore[index]
        out["parallel"] = args.parallel
    sys.stdout.write(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
