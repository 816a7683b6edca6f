"""BM25 index build: time and peak memory of agentflow_env's streaming builder, tantivy and bm25s, side by side.

Writes a synthetic corpus (perf/search.py's Zipfian words; passage lengths like wiki-18's 100-word passages)
to a JSON-lines file once, then builds an index from that file with each library in its own child process,
one after the other, and reports each child's wall time, CPU time (user + system of all its threads and of its
worker processes) and peak memory: ``ru_maxrss`` of the child itself, and the peak of the summed resident and
proportional set sizes (RSS, PSS) of the child and all its worker processes, sampled every 0.2 s. Ours (with
``--workers`` processes) and tantivy (its indexing threads) stream the file and store the passages; bm25s needs
the whole corpus and its tokens in memory (its API). Prints JSON.

``--stream`` measures ours alone on a corpus generated on the fly (never written, never held: a 21M-passage
build fits the disk and memory), logging progress every million passages to stderr.
Usage: python perf/bm25_build.py [--passages 1000000] [--only ours,tantivy,bm25s] [--workers N] [--workdir DIR]
       python perf/bm25_build.py --stream --passages 21000000 --workdir DIR
"""

from __future__ import annotations

import argparse
import dataclasses
import glob
import json
import os
import platform
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))


def synthetic_items(n_passages: int, seed: int = 0, n_words: int = 60_000, block: int = 50_000):
    """``(decode, items)``: ``n_passages`` Zipfian passages (80-120 words, like wiki-18's 100-word passages) as
    compact items, ``(row, word ids as uint16 bytes)``, generated block by block from ``seed`` (memory holds one
    block, whatever ``n_passages``), and the :class:`SyntheticRow` that turns an item into its passage."""
    from search import SYLLABLES, make_vocab

    from agentflow_env.tools.bm25 import STOPWORDS

    rng = np.random.default_rng(seed)
    vocab = sorted(STOPWORDS) + make_vocab(n_words - len(STOPWORDS), rng)
    assert SYLLABLES and n_words <= 1 << 16
    probs = 1.0 / np.arange(1, n_words + 1) ** 1.05
    probs /= probs.sum()
    cdf = np.cumsum(probs)

    def items():
        for start in range(0, n_passages, block):
            n = min(block, n_passages - start)
            lens = rng.integers(80, 121, size=n)  # wiki-18 passages: 100 words, a few shorter or longer
            ids = np.minimum(np.searchsorted(cdf, rng.random(int(lens.sum()))), n_words - 1).astype(np.uint16)
            raw = ids.tobytes()
            ends = (2 * np.cumsum(lens)).tolist()
            begin = 0
            for i, end in enumerate(ends):
                yield start + i, raw[begin:end]
                begin = end

    return SyntheticRow(tuple(vocab)), items()


@dataclasses.dataclass(frozen=True)
class SyntheticRow:
    """Turns a :func:`synthetic_items` item into its passage ``{id, title, text}`` (picklable: a build's
    worker processes can generate the passages)."""

    vocab: tuple[str, ...]

    def __call__(self, item: tuple[int, bytes]) -> dict[str, str]:
        row, ids = item
        words = [self.vocab[i] for i in np.frombuffer(ids, dtype=np.uint16).tolist()]
        return {"id": f"p{row}", "title": f"{words[0].title()} {row}", "text": " ".join(words)}


def synthetic_passages(n_passages: int, seed: int = 0):
    """The passages of :func:`synthetic_items`, generated here."""
    decode, items = synthetic_items(n_passages, seed)
    return map(decode, items)


def write_corpus(path: Path, n_passages: int, seed: int = 0) -> None:
    """:func:`synthetic_passages` as a JSON-lines file."""
    with open(path, "w", encoding="utf-8") as fh:
        lines = []
        for passage in synthetic_passages(n_passages, seed):
            lines.append(json.dumps(passage))
            if len(lines) >= 50_000:
                fh.write("\n".join(lines) + "\n")
                lines = []
        if lines:
            fh.write("\n".join(lines) + "\n")


class TreeMemory:
    """Peak summed RSS and PSS (MB) of this process and all its descendants, sampled every ``every`` seconds."""

    def __init__(self, every: float = 0.2):
        self.every = every
        self.peak_rss_mb = self.peak_pss_mb = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _tree(pid: int) -> list[int]:
        out, todo = [], [pid]
        while todo:
            p = todo.pop()
            out.append(p)
            for task in glob.glob(f"/proc/{p}/task/*/children"):
                try:
                    todo.extend(int(c) for c in Path(task).read_text().split())
                except OSError:
                    pass
        return out

    def sample(self) -> tuple[float, float]:
        rss = pss = 0
        for pid in self._tree(os.getpid()):
            try:
                for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                    if line.startswith("Rss:"):
                        rss += int(line.split()[1])
                    elif line.startswith("Pss:"):
                        pss += int(line.split()[1])
            except OSError:
                pass
        rss_mb, pss_mb = rss / 1024, pss / 1024
        self.peak_rss_mb, self.peak_pss_mb = max(self.peak_rss_mb, rss_mb), max(self.peak_pss_mb, pss_mb)
        return rss_mb, pss_mb

    def tree_cpu_s(self) -> float:
        """User + system CPU seconds of the live processes of the tree (from /proc/PID/stat)."""
        ticks = 0
        for pid in self._tree(os.getpid()):
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
                ticks += int(fields[11]) + int(fields[12])
            except (OSError, IndexError, ValueError):
                pass
        return ticks / os.sysconf("SC_CLK_TCK")

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            self.sample()

    def __enter__(self) -> TreeMemory:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def cpu_seconds() -> float:
    """User + system CPU of this process (all threads) and of its waited-for children (the build's workers)."""
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def _rows(path: str):
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            yield json.loads(line)


def child(name: str, corpus: str, out: str, workers: int) -> dict[str, object]:
    """Build one index from ``corpus`` into ``out``; returns what it built."""
    if name == "ours":
        from agentflow_env.tools.bm25 import BM25Index

        index = BM25Index.from_jsonl(corpus, out_dir=out, workers=workers)
        return {"passages": len(index), "terms": len(index.vocab), "workers": workers}
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


def start_child(name: str, corpus: Path, workdir: Path, workers: int) -> tuple[subprocess.Popen, float, Path]:
    out = workdir / f"index-{name}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cmd = [sys.executable, __file__, "--child", name, "--corpus", str(corpus), "--out", str(out)]
    cmd += ["--workers", str(workers)]
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


def _stop_on_sigterm(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


def stream_build(n_passages: int, workdir: Path, workers: int, seed: int, every: int) -> dict[str, object]:
    """Build ours from :func:`synthetic_passages` generated on the fly; progress every ``every`` passages to
    stderr. Stopped (SIGTERM or Ctrl-C), it returns the progress reached, marked ``stopped``."""
    from agentflow_env.tools.bm25.build import build_folder

    out_dir = workdir / "index-stream"
    shutil.rmtree(out_dir, ignore_errors=True)
    t0, c0 = time.perf_counter(), cpu_seconds()
    progress: list[dict[str, object]] = []
    signal.signal(signal.SIGTERM, _stop_on_sigterm)
    with TreeMemory() as mem:
        decode, items = synthetic_items(n_passages, seed)

        def passages():
            for i, passage in enumerate(items):
                if i and i % every == 0:
                    rss, pss = mem.sample()
                    line = {"passages": i, "wall_s": round(time.perf_counter() - t0, 1), "rss_mb": round(rss)}
                    line.update(tree_cpu_s=round(mem.tree_cpu_s(), 1), load_1m=round(os.getloadavg()[0], 2))
                    line.update(peak_rss_mb=round(mem.peak_rss_mb), peak_pss_mb=round(mem.peak_pss_mb))
                    progress.append(line)
                    sys.stderr.write(json.dumps(line) + "\n")
                    sys.stderr.flush()
                yield passage

        try:
            build_folder(passages(), out_dir, workers=workers, decode=decode)  # the workers generate the text
        except KeyboardInterrupt:
            shutil.rmtree(out_dir, ignore_errors=True)
            return {
                "stopped": True,
                "workers": workers,
                "wall_s": round(time.perf_counter() - t0, 1),
                "peak_tree_rss_mb": round(mem.peak_rss_mb, 1),
                "peak_tree_pss_mb": round(mem.peak_pss_mb, 1),
                "progress": progress,
            }
    wall = time.perf_counter() - t0
    sizes = {p.name: p.stat().st_size for p in out_dir.iterdir() if p.is_file()}
    meta = json.loads((out_dir / "agentflow_index.json").read_text())
    n_terms = len(np.load(out_dir / "indptr.csc.index.npy", mmap_mode="r")) - 1
    shutil.rmtree(out_dir, ignore_errors=True)
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return {
        "passages": int(meta["n_docs"]),
        "workers": workers,
        "wall_s": round(wall, 1),
        "cpu_s": round(cpu_seconds() - c0, 1),
        "peak_tree_rss_mb": round(mem.peak_rss_mb, 1),
        "peak_tree_pss_mb": round(mem.peak_pss_mb, 1),
        "peak_rss_mb": round(own.ru_maxrss / 1024, 1),
        "peak_worker_rss_mb": round(kids.ru_maxrss / 1024, 1),
        "index_mb": round(sum(sizes.values()) / 1e6, 1),
        "terms": n_terms,
        "progress": progress,
    }


def generation_cost(n_passages: int, seed: int) -> dict[str, float]:
    """Wall and CPU seconds to generate ``n_passages`` synthetic passages alone (part of a --stream build's time)."""
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in synthetic_passages(n_passages, seed):
        pass
    return {
        "passages": n_passages,
        "wall_s": round(time.perf_counter() - t0, 1),
        "cpu_s": round(time.process_time() - c0, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=1_000_000)
    parser.add_argument("--only", default="ours,tantivy,bm25s")
    parser.add_argument("--workers", type=int, default=None, help="our build's processes (default: the CPUs)")
    parser.add_argument("--workdir", default=None, help="folder for the corpus and indexes (default: a temp dir)")
    parser.add_argument("--corpus-file", default=None, help="reuse (or write) the corpus at this path")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--parallel", action="store_true", help="run the libraries at once (compare CPU, memory)")
    parser.add_argument("--stream", action="store_true", help="ours alone, on a corpus generated on the fly")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--progress-every", type=int, default=1_000_000, help="--stream: passages between lines")
    parser.add_argument("--output", default=None, help="also write the JSON to this file")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--corpus", default=None, help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    from agentflow_env.tools.bm25.build import available_cpus

    workers = args.workers or available_cpus()
    if args.child:
        t0 = time.perf_counter()
        with TreeMemory() as mem:
            built = child(args.child, args.corpus, args.out, workers)
        usage = resource.getrusage(resource.RUSAGE_SELF)
        built.update(
            build_s=round(time.perf_counter() - t0, 1),
            cpu_s=round(cpu_seconds(), 1),
            peak_rss_mb=round(usage.ru_maxrss / 1024, 1),
            peak_tree_rss_mb=round(mem.peak_rss_mb, 1),
            peak_tree_pss_mb=round(mem.peak_pss_mb, 1),
        )
        sys.stdout.write(json.dumps(built) + "\n")
        return 0
    out: dict[str, object]
    with tempfile.TemporaryDirectory(prefix="perf-bm25-build-", dir=args.workdir) as tmp:
        work = Path(tmp)
        if args.stream:
            out = {
                "benchmark": "bm25_build_stream",
                "passages": args.passages,
                "seed": args.seed,
                "cpus": os.cpu_count(),
                "python": platform.python_version(),
                "load_average_1m_before": round(os.getloadavg()[0], 2),
                "generation_alone": generation_cost(min(args.passages, 200_000), args.seed),
            }
            out["ours"] = stream_build(args.passages, work, workers, args.seed, args.progress_every)
            out["load_average_1m_after"] = round(os.getloadavg()[0], 2)
        else:
            corpus = Path(args.corpus_file) if args.corpus_file else work / "corpus.jsonl"
            t0 = time.perf_counter()
            if not corpus.is_file():
                write_corpus(corpus, args.passages)
            out = {
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
                started = {name: start_child(name, corpus, work, workers) for name in names}
                for name in names:
                    out[name] = finish_child(*started[name], args.timeout)
            else:
                for name in names:
                    out[name] = finish_child(*start_child(name, corpus, work, workers), args.timeout)
                    out[name]["load_average_1m_after"] = round(os.getloadavg()[0], 2)  # type: ignore[index]
            out["parallel"] = args.parallel
    text = json.dumps(out, indent=2) + "\n"
    if args.output:
        Path(args.output).write_text(text)
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
