"""Dense retrieval: a local Hugging Face encoder and a FAISS index (flat, HNSW or IVF-PQ) over a passage corpus.

``agentflow-env build-index --retriever dense --encoder PATH`` (or :meth:`DenseIndex.build`) streams the corpus in
batches: passages go to ``passages.jsonl`` (the BM25 folder's layout), embeddings to ``embeddings.npy`` on disk,
then the FAISS index is built from that file batch by batch (IVF-PQ trains on a sample first), so memory holds
one batch, never the corpus. At query time the FAISS index is memory-mapped (``IO_FLAG_MMAP``) where FAISS
supports it for the index type.

The encoder is any local ``AutoModel`` folder. e5's conventions are the default, as its model card says:
``"query: "`` / ``"passage: "`` prefixes, mean pooling over the attention mask, L2-normalised vectors scored by
inner product; ``pooling="cls"`` and other prefixes are options. Needs the ``dense`` extra (``faiss-cpu``, torch,
transformers); GPU FAISS is used for search when the installed FAISS has it and ``gpu=True``.
"""

from __future__ import annotations

import array
import json
import os
import zlib
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from agentflow_env.error import ConfigError, DataError, DependencyNotInstalled
from agentflow_env.tools.bm25.check import META_FILE, OFFSETS_FILE, PASSAGES_FILE, file_checksums
from agentflow_env.tools.bm25.corpus import _as_text, _PassageStore
from agentflow_env.tools.bm25.index import SearchHit

__all__ = ["DENSE_FORMAT", "INDEX_TYPES", "DenseEncoder", "DenseIndex"]

DENSE_FORMAT = "agentflow-dense"
INDEX_TYPES = ("flat", "hnsw", "ivfpq")
EMBEDDINGS_FILE = "embeddings.npy"
FAISS_FILE = "index.faiss"


def _faiss() -> Any:
    try:
        import faiss
    except ImportError:  # pragma: no cover - depends on the install
        raise DependencyNotInstalled("faiss-cpu", "dense") from None
    return faiss


class DenseEncoder:
    """A local Hugging Face encoder: texts -> L2-normalised float32 vectors (mean or CLS pooling, prefixes)."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        pooling: str = "mean",
        query_prefix: str = "query: ",
        passage_prefix: str = "passage: ",
        max_length: int = 256,
        batch_size: int = 64,
        device: str | None = None,
    ):
        if pooling not in ("mean", "cls"):
            raise ConfigError(f"pooling={pooling!r}; use 'mean' (e5) or 'cls'")
        self.path = Path(path)
        if not (self.path / "config.json").is_file():
            raise ConfigError(f"--encoder {self.path}: not a local Hugging Face model folder (no config.json)")
        try:
            import torch
            from transformers import AutoModel, AutoTokenizer
        except ImportError:  # pragma: no cover - depends on the install
            raise DependencyNotInstalled("transformers", "dense") from None
        self._torch = torch
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path), local_files_only=True)
        self.model = AutoModel.from_pretrained(str(self.path), local_files_only=True).eval()
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        self.model.to(self.device)
        self.pooling, self.query_prefix, self.passage_prefix = pooling, query_prefix, passage_prefix
        self.max_length, self.batch_size = int(max_length), max(1, int(batch_size))
        self.dim = int(self.model.config.hidden_size)

    def settings(self) -> dict[str, Any]:
        """What decides the vectors: the model (folder name and a hash of its config and weight sizes) and options."""
        digest = zlib.crc32((self.path / "config.json").read_bytes())
        for weights in sorted(self.path.glob("*.safetensors")) + sorted(self.path.glob("*.bin")):
            digest = zlib.crc32(f"{weights.name}:{weights.stat().st_size}".encode(), digest)
        return {
            "encoder": self.path.name,
            "encoder_hash": f"{digest:08x}",
            "pooling": self.pooling,
            "query_prefix": self.query_prefix,
            "passage_prefix": self.passage_prefix,
            "max_length": self.max_length,
            "dim": self.dim,
        }

    def encode(self, texts: Sequence[str], kind: str = "passage") -> np.ndarray:
        """Vectors of ``texts`` (``kind`` is ``"query"`` or ``"passage"``, which picks the prefix)."""
        prefix = self.query_prefix if kind == "query" else self.passage_prefix
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        torch = self._torch
        for start in range(0, len(texts), self.batch_size):
            batch = [prefix + t for t in texts[start : start + self.batch_size]]
            enc = self.tokenizer(batch, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
            enc = {
                k: v.to(self.device) for k, v in enc.items() if k in ("input_ids", "attention_mask", "token_type_ids")
            }
            with torch.inference_mode():
                hidden = self.model(**enc).last_hidden_state
                if self.pooling == "cls":
                    vec = hidden[:, 0]
                else:
                    mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                    vec = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
                vec = torch.nn.functional.normalize(vec.float(), dim=-1)
            out[start : start + len(batch)] = vec.cpu().numpy()
        return out


def _index_factory(
    index_type: str, dim: int, n: int, hnsw_m: int, nlist: int | None, pq_m: int | None
) -> tuple[str, Any]:
    faiss = _faiss()
    if index_type == "flat":
        return "faiss-flat-ip", faiss.IndexFlatIP(dim)
    if index_type == "hnsw":
        index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        return f"faiss-hnsw{hnsw_m}-flat-ip", index
    if index_type == "ivfpq":
        lists = nlist or max(1, min(int(4 * np.sqrt(n)), n // 39 or 1))
        m = pq_m or next(x for x in (64, 48, 32, 24, 16, 12, 8, 4, 2, 1) if dim % x == 0 and 4 * x <= max(dim, 4))
        nbits = int(min(8, max(1, np.floor(np.log2(max(n / 39, 2))))))  # a code book FAISS can train from n vectors
        quantizer = faiss.IndexFlatIP(dim)
        index = faiss.IndexIVFPQ(quantizer, dim, lists, m, nbits, faiss.METRIC_INNER_PRODUCT)
        index.nprobe = min(lists, 32)
        return f"faiss-ivf{lists}-pq{m}x{nbits}-ip", index
    raise ConfigError(f"index type {index_type!r}; use one of: {', '.join(INDEX_TYPES)}")


class DenseIndex:
    """Passages, their vectors' FAISS index and the encoder that made them; ``search_batch`` like BM25's."""

    def __init__(
        self,
        folder: Path,
        meta: dict[str, Any],
        index: Any,
        encoder: DenseEncoder | None = None,
        encoder_path: str | None = None,
    ):
        self.path = folder
        self._encoder_path = encoder_path
        self.meta = meta
        self.faiss_index = index
        self.store = _PassageStore(path=folder)
        self._encoder = encoder

    # ---- building
    @classmethod
    def build(
        cls,
        passages: Iterable[dict[str, Any]],
        encoder: DenseEncoder,
        out_dir: str | os.PathLike[str],
        *,
        index_type: str = "flat",
        chunk_size: int = 4096,
        show_progress: bool = False,
        total: int | None = None,
        hnsw_m: int = 32,
        nlist: int | None = None,
        pq_m: int | None = None,
        train_size: int = 100_000,
    ) -> DenseIndex:
        """Encode ``passages`` (dicts with ``title``, ``text``, optional ``id``) into a folder at ``out_dir``."""
        from tqdm.auto import tqdm

        from agentflow_env.tools.bm25.build import _chunks

        if index_type not in INDEX_TYPES:
            raise ConfigError(f"index type {index_type!r}; use one of: {', '.join(INDEX_TYPES)}")
        out = Path(out_dir)
        out.mkdir(parents=True, exist_ok=True)
        offsets = array.array("q", [0])
        raw = out / (EMBEDDINGS_FILE + ".part")
        n = 0
        with open(out / PASSAGES_FILE, "wb") as fh, open(raw, "wb") as vec_fh:
            bar = tqdm(total=total, disable=not show_progress, unit="passage", desc="dense index")
            for chunk in _chunks(passages, chunk_size):
                texts = []
                for p in chunk:
                    if not isinstance(p, dict) or "text" not in p:
                        raise DataError(f"passage {n} must be a dict with 'text' (and 'title')")
                    rec = {"id": str(p.get("id", n)), "title": _as_text(p.get("title")), "text": _as_text(p["text"])}
                    fh.write(json.dumps(rec, ensure_ascii=False).encode("utf-8") + b"\n")
                    offsets.append(fh.tell())
                    texts.append(f"{rec['title']} {rec['text']}".strip())
                    n += 1
                vec_fh.write(encoder.encode(texts, "passage").tobytes())
                bar.update(len(chunk))
            bar.close()
        if n == 0:
            raise DataError("the corpus is empty: give at least one passage with 'title' and 'text'")
        np.save(out / OFFSETS_FILE, np.frombuffer(offsets, dtype=np.int64))
        vectors = np.memmap(raw, dtype=np.float32, mode="r", shape=(n, encoder.dim))
        kind, index = _index_factory(index_type, encoder.dim, n, hnsw_m, nlist, pq_m)
        if not index.is_trained:  # IVF-PQ: train on an even sample of the vectors
            step = max(1, n // max(1, min(train_size, n)))
            index.train(np.ascontiguousarray(vectors[::step]))
        for start in range(0, n, chunk_size):
            index.add(np.ascontiguousarray(vectors[start : start + chunk_size]))
        faiss = _faiss()
        faiss.write_index(index, str(out / FAISS_FILE))
        # the embeddings stay beside the index as a .npy (rebuild another index type without encoding again)
        header = np.lib.format.open_memmap(out / EMBEDDINGS_FILE, mode="w+", dtype=np.float32, shape=(n, encoder.dim))
        for start in range(0, n, chunk_size):
            header[start : start + chunk_size] = vectors[start : start + chunk_size]
        header.flush()
        del header, vectors
        raw.unlink()
        meta = {
            "format": DENSE_FORMAT,
            "version": 1,
            "n_docs": n,
            "index_type": kind,
            **encoder.settings(),
            "encoder_path": str(encoder.path.resolve()),
            "checksums": {"files": file_checksums(out, [PASSAGES_FILE])},
        }
        (out / META_FILE).write_text(json.dumps(meta, indent=2))
        return cls.load(out, encoder=encoder)

    # ---- loading
    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str],
        *,
        encoder: DenseEncoder | None = None,
        encoder_path: str | None = None,
        gpu: bool = False,
    ) -> DenseIndex:
        """Open a folder written by :meth:`build`; the FAISS index is memory-mapped where FAISS can."""
        folder = Path(path)
        try:
            meta = json.loads((folder / META_FILE).read_bytes())
        except (OSError, ValueError) as exc:
            raise DataError(f"{folder} is not a dense index folder ({type(exc).__name__}: {exc})") from None
        if meta.get("format") != DENSE_FORMAT:
            raise DataError(f"{folder} holds a {meta.get('format')!r} index, not {DENSE_FORMAT!r}")
        faiss = _faiss()
        try:
            index = faiss.read_index(str(folder / FAISS_FILE), faiss.IO_FLAG_MMAP | faiss.IO_FLAG_READ_ONLY)
        except RuntimeError:  # an index type FAISS cannot map: read it
            index = faiss.read_index(str(folder / FAISS_FILE))
        if "ivf" in str(meta.get("index_type")):
            faiss.extract_index_ivf(index).nprobe = int(meta.get("nprobe", 32))
        if gpu and hasattr(faiss, "StandardGpuResources") and faiss.get_num_gpus() > 0:  # pragma: no cover
            index = faiss.index_cpu_to_gpu(faiss.StandardGpuResources(), 0, index)
        return cls(folder, meta, index, encoder, encoder_path)

    @property
    def encoder(self) -> DenseEncoder:
        """The encoder named in the folder's metadata (loaded on first query), unless one was given."""
        if self._encoder is None:
            path = self._encoder_path or os.environ.get("AGENTFLOW_DENSE_ENCODER") or self.meta.get("encoder_path")
            if not path or not Path(path).is_dir():
                raise ConfigError(
                    f"the dense index {self.path} needs its encoder {self.meta.get('encoder')!r}: give its local "
                    "folder (retrieval-server --encoder PATH, or $AGENTFLOW_DENSE_ENCODER)"
                )
            self._encoder = DenseEncoder(
                path,
                pooling=self.meta["pooling"],
                query_prefix=self.meta["query_prefix"],
                passage_prefix=self.meta["passage_prefix"],
                max_length=self.meta["max_length"],
            )
        return self._encoder

    # ---- querying
    def __len__(self) -> int:
        return int(self.meta["n_docs"])

    def search(self, query: str, k: int = 5) -> list[SearchHit]:
        return self.search_batch([query], k)[0]

    def search_batch(self, queries: Sequence[str], k: int = 5) -> list[list[SearchHit]]:
        """Top-``k`` passages of each query by inner product of the normalised vectors."""
        if not queries:
            return []
        k = max(1, min(int(k), len(self)))
        scores, ids = self.faiss_index.search(self.encoder.encode(list(queries), "query"), k)
        out = []
        for row_ids, row_scores in zip(ids.tolist(), scores.tolist(), strict=True):
            hits: list[SearchHit] = []
            for doc, score in zip(row_ids, row_scores, strict=True):
                if doc < 0:
                    continue
                rec = self.store[doc]
                hits.append(SearchHit(len(hits) + 1, float(score), rec["title"], rec["text"], rec["id"]))
            out.append(hits)
        return out

    def fingerprint(self) -> dict[str, Any]:
        m = self.meta
        passages = m["checksums"]["files"][PASSAGES_FILE]
        model = f"{m['encoder']}@{m['encoder_hash']} {m['pooling']} q={m['query_prefix']!r} p={m['passage_prefix']!r}"
        return {
            "retriever": "dense",
            "model": model,
            "index_type": m["index_type"],
            "corpus_hash": f"crc32:{passages['crc32']}:{passages['bytes']}",
            "passages": len(self),
        }

    def close(self) -> None:
        self.store.close()

    def __repr__(self) -> str:
        return f"DenseIndex(passages={len(self)}, {self.meta['index_type']}, path={str(self.path)!r})"
