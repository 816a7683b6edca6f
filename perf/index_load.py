"""Time to open a BM25 index folder (validation and checksums included), on perf/search.py's synthetic corpus.

Prints JSON: the index's size on disk, and the median wall and CPU time of ``BM25Index.load`` (the first opening in a
process, which verifies the checksums; a later one; one with ``verify=False``) and the wall time of load plus a first
query, over a few repeats (the files stay in the page cache between repeats, as on a warm machine).
Usage: python perf/index_load.py [--passages 200000] [--folder DIR (kept and reused)] [--repeats 5]
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from search import make_corpus

from agentflow_env.tools.bm25 import BM25Index


def _forget_verified() -> None:
    try:
        from agentflow_env.tools.bm25 import check as index_check
    except ImportError:  # a version without checksums
        return
    index_check._verified.clear()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--passages", type=int, default=200_000)
    parser.add_argument("--folder", default=None, help="index folder to build once and reuse")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="perf-index-load-") as tmp:
        folder = Path(args.folder) if args.folder else Path(tmp) / "index"
        built_s = None
        if not (folder / "agentflow_index.json").is_file():
            start = time.perf_counter()
            BM25Index.build(make_corpus(args.passages), out_dir=folder).close()
            built_s = round(time.perf_counter() - start, 2)
        kinds: dict[str, dict[str, bool]] = {"load": {}}
        if "verify" in inspect.signature(BM25Index.load).parameters:
            kinds["load_again_in_this_process"] = {}  # the checksums were verified here already
            kinds["load_without_checksums"] = {"verify": False}
        BM25Index.load(folder).search("kalo mine", 5)  # compile / load the numba kernel outside the timing
        out: dict[str, object] = {
            "benchmark": "bm25_index_load",
            "passages": len(BM25Index.load(folder)),
            "index_mb": round(sum(p.stat().st_size for p in folder.iterdir()) / 1e6, 1),
            "build_s": built_s,
            "python": platform.python_version(),
            "load_average_1m": round(os.getloadavg()[0], 2),
        }
        for name, kwargs in kinds.items():
            loads, firsts, cpus = [], [], []
            for _ in range(args.repeats):
                if name == "load":  # the first opening in a process reads every file for its checksum
                    _forget_verified()
                start, cpu = time.perf_counter(), time.process_time()
                index = BM25Index.load(folder, **kwargs)
                loads.append(time.perf_counter() - start)
                cpus.append(time.process_time() - cpu)
                index.search("kalo mine", 5)
                firsts.append(time.perf_counter() - start)
                index.close()
            out[f"{name}_ms"] = round(statistics.median(loads) * 1000, 1)
            out[f"{name}_cpu_ms"] = round(statistics.median(cpus) * 1000, 1)  # steadier on a shared machine
            out[f"{name}_and_first_query_ms"] = round(statistics.median(firsts) * 1000, 1)
    sys.stdout.write(json.dumps(out, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
