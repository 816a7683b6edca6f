"""The dense retriever with an encoder built here (a random-init one-layer BERT from a config, a word-level
tokenizer made from the corpus; no hub): build-index --retriever dense, FAISS flat/HNSW/IVF-PQ, recall@k on a
synthetic set, the fingerprint, and serving it in Search-R1's format."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

pytest.importorskip("faiss")
pytest.importorskip("transformers")

from agentflow_env.cli import main
from agentflow_env.tools.retrieval import RemoteRetriever, open_index

WORDS = [f"w{i}" for i in range(500)]


def _passages(n: int = 300) -> list[dict[str, str]]:
    rng = random.Random(0)
    return [{"id": f"d{i}", "title": f"t{i}", "text": " ".join(rng.choice(WORDS) for _ in range(20))} for i in range(n)]


def _tiny_encoder(folder: Path, words: list[str]) -> Path:
    import torch
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers
    from transformers import BertConfig, BertModel, PreTrainedTokenizerFast

    vocab = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4}
    for word in sorted({*words, "query", "passage", ":"}):
        vocab.setdefault(word, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.normalizer = normalizers.Lowercase()
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    special = {"unk_token": "[UNK]", "pad_token": "[PAD]", "cls_token": "[CLS]", "sep_token": "[SEP]"}
    PreTrainedTokenizerFast(tokenizer_object=tok, mask_token="[MASK]", **special).save_pretrained(folder)
    torch.manual_seed(0)
    config = BertConfig(
        vocab_size=len(vocab),
        hidden_size=64,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=128,
        max_position_embeddings=128,
    )
    BertModel(config).save_pretrained(folder)
    return folder


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("dense")
    passages = _passages()
    corpus = root / "corpus.jsonl"
    corpus.write_text("".join(json.dumps(p) + "\n" for p in passages))
    encoder = _tiny_encoder(root / "encoder", WORDS + [p["title"] for p in passages])
    folders = {}
    for kind in ("flat", "hnsw", "ivfpq"):
        folders[kind] = root / kind
        args = ["build-index", "--format", "jsonl", "--input", str(corpus), "--output-dir", str(folders[kind])]
        args += ["--retriever", "dense", "--encoder", str(encoder), "--index-type", kind, "--no-progress"]
        args += ["--max-length", "64", "--passage-words", "0"]
        assert main(args) == 0
    return passages, folders


def _recall(index, passages, k: int = 5) -> float:
    queries = [" ".join(p["text"].split()[:6]) for p in passages]  # 6 of the passage's 20 words
    results = index.search_batch(queries, k)
    return sum(p["id"] in {h.id for h in hits} for p, hits in zip(passages, results, strict=True)) / len(passages)


def test_recall_at_k_of_each_index_type(built) -> None:
    passages, folders = built
    flat, hnsw, ivfpq = (open_index(folders[k]) for k in ("flat", "hnsw", "ivfpq"))
    exact = _recall(flat, passages)
    assert exact >= 0.6  # chance is 5/300
    assert _recall(hnsw, passages) >= exact - 0.05
    assert _recall(ivfpq, passages) >= 0.05  # 2-bit codes at 300 passages: lossy, still far above chance
    assert _recall(flat, passages, k=20) >= exact
    fp = flat.fingerprint()
    assert fp["retriever"] == "dense" and fp["index_type"] == "faiss-flat-ip" and "mean" in fp["model"]
    assert fp["corpus_hash"] == hnsw.fingerprint()["corpus_hash"] and fp["model"] == hnsw.fingerprint()["model"]
    assert "q='query: '" in fp["model"] and ivfpq.fingerprint()["index_type"].startswith("faiss-ivf")
    hit = flat.search(passages[3]["text"], 1)[0]
    assert (hit.id, hit.title) == ("d3", "t3") and hit.score > 0.9


def test_dense_index_served_in_search_r1s_format(built) -> None:
    from agentflow_env.remote.retrieval_server import RetrievalServer

    passages, folders = built
    server = RetrievalServer(open_index(folders["flat"]), port=0).start()
    try:
        client = RemoteRetriever(f"{server.url}/retrieve")
        [hits] = client.search_batch([passages[7]["text"]], 3)
        assert hits[0].id == "d7" and hits[0].title == "t7"
        assert client.fingerprint()["retriever"] == "dense"
    finally:
        server.close()


def test_dense_needs_an_encoder(tmp_path, capsys) -> None:
    corpus = tmp_path / "c.jsonl"
    corpus.write_text('{"title": "a", "text": "b"}\n')
    args = ["build-index", "--format", "jsonl", "--input", str(corpus), "--output-dir", str(tmp_path / "o")]
    assert main([*args, "--retriever", "dense"]) == 2
    assert "--encoder" in capsys.readouterr().err
    assert main([*args, "--retriever", "dense", "--encoder", str(tmp_path)]) == 2
