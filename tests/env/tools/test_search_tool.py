"""Tests of the local BM25 index and Local_Search_Tool: scoring against bm25s, streaming builds, persistence.

Corpora are a few dozen passages made in the test; the numba kernel is cached on disk after its first compile.
"""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from agentflow_env.error import DataError
from agentflow_env.tools import make_tool
from agentflow_env.tools.bm25 import BM25Index, SearchHit, tokenize
from agentflow_env.tools.search import BM25SearchTool, format_hits

CITIES = [
    {"id": "fr", "title": "Paris", "text": "Paris is the capital and largest city of France, on the Seine."},
    {"id": "de", "title": "Berlin", "text": "Berlin is the capital of Germany and its most populous city."},
    {"id": "au", "title": "Canberra", "text": "Canberra is the capital city of Australia, not Sydney."},
    {"id": "jp", "title": "Tokyo", "text": "Tokyo is the capital of Japan; the Tokyo metropolis has many cities."},
    {"id": "eg", "title": "Cairo", "text": "Cairo, on the Nile, is the capital of Egypt."},
    {"id": "pe", "title": "Lima", "text": "Lima is the capital of Peru, on the Pacific coast."},
]


def synthetic(n: int, seed: int = 0) -> list[dict[str, str]]:
    """Random passages over a 300-word vocabulary: some words are in most passages, some in a few."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(300)]
    probs = 1.0 / np.arange(1, 301)
    probs /= probs.sum()
    out = []
    for i in range(n):
        toks = rng.choice(words, size=int(rng.integers(5, 30)), p=probs)
        out.append({"id": f"d{i}", "title": f"T{i}", "text": " ".join(toks)})
    return out


@pytest.fixture(scope="module")
def cities() -> BM25Index:
    return BM25Index.build(CITIES)


def test_tokenize_drops_stopwords_and_folds_plurals() -> None:
    assert tokenize("The Cities of the WORLD's boxes, and churches!") == ["city", "world", "s", "box", "church"]
    assert tokenize("Zürich 2024 ÉCOLE") == ["zürich", "2024", "école"]
    assert tokenize("class bus analysis") == ["class", "bus", "analysis"]
    assert tokenize("the of and") == []


def test_search_ranks_the_relevant_passage_first(cities: BM25Index) -> None:
    hits = cities.search("capital of Germany", k=3)
    assert isinstance(hits[0], SearchHit)
    assert (hits[0].rank, hits[0].title, hits[0].id) == (1, "Berlin", "de")
    assert [h.rank for h in hits] == list(range(1, len(hits) + 1))
    assert all(a.score >= b.score for a, b in itertools.pairwise(hits))
    assert cities.search("Nile river")[0].title == "Cairo"
    assert cities.search("Australia cities", k=1)[0].id == "au"


def test_k_larger_than_corpus_and_no_match(cities: BM25Index) -> None:
    assert len(cities.search("capital", k=50)) == len(CITIES)
    assert cities.search("zebra xylophone", k=5) == []
    assert cities.search("", k=5) == []
    assert cities.search_batch([], k=3) == []


def test_search_batch_equals_single_searches(cities: BM25Index) -> None:
    queries = ["capital Japan", "Pacific coast", "largest city France", "nothing here"]
    assert cities.search_batch(queries, k=2) == [cities.search(q, k=2) for q in queries]


def brute_force(index: BM25Index, query: str) -> np.ndarray:
    scores = np.zeros(len(index), dtype=np.float64)
    for tok in index.tokenize(query):
        term = index.vocab.get(tok)
        if term is None:
            continue
        lo, hi = int(index.indptr[term]), int(index.indptr[term + 1])
        np.add.at(scores, np.asarray(index.indices[lo:hi]), np.asarray(index.data[lo:hi], dtype=np.float64))
    return scores


@pytest.mark.parametrize("query", ["w0 w1", "w250 w260 w299", "w3 w150", "w0"])
def test_kernel_matches_brute_force_on_dense_and_sparse_queries(query: str) -> None:
    # common words touch most passages (dense top-k path); rare ones touch few (sparse path)
    index = BM25Index.build(synthetic(400))
    expect = brute_force(index, query)
    hits = index.search(query, k=10)
    assert len(hits) == min(10, int((expect > 0).sum()))
    got = np.array([h.score for h in hits])
    np.testing.assert_allclose(got, np.sort(expect)[::-1][: len(hits)], rtol=1e-5)
    for h in hits:
        assert expect[int(h.id[1:])] == pytest.approx(h.score, rel=1e-5)


def test_scores_match_bm25s_lucene() -> None:
    bm25s = pytest.importorskip("bm25s")
    corpus = synthetic(120, seed=3)
    index = BM25Index.build(corpus)
    ref = bm25s.BM25(method="lucene", k1=1.5, b=0.75)
    ref.index([tokenize(f"{p['title']} {p['text']}") for p in corpus], show_progress=False)
    for query in ("w5 w7 w40", "w100", "w1 w2 w3 w4"):
        expect = ref.get_scores(tokenize(query))
        np.testing.assert_allclose(brute_force(index, query), expect, rtol=1e-4, atol=1e-6)


def test_streaming_build_to_disk_equals_in_memory(tmp_path) -> None:
    corpus = synthetic(250, seed=1)
    in_memory = BM25Index.build(corpus)
    on_disk = BM25Index.build(iter(corpus), out_dir=tmp_path / "idx", chunk_size=17)
    assert isinstance(on_disk.data, np.memmap)
    assert len(on_disk) == 250 and on_disk.vocab == in_memory.vocab
    np.testing.assert_allclose(np.asarray(on_disk.data), in_memory.data, rtol=1e-6)
    np.testing.assert_array_equal(np.asarray(on_disk.indices), in_memory.indices)
    for q in ("w0 w9", "w77 T5", "w299"):
        assert on_disk.search(q, 5) == in_memory.search(q, 5)
    assert not [p for p in (tmp_path / "idx").iterdir() if p.name.startswith("bm25spool")]


def test_build_streams_in_chunks(monkeypatch) -> None:
    from agentflow_env.tools.bm25 import build

    seen: list[int] = []
    original = build._IndexWriter.add_chunk

    def spy(self, chunk):  # type: ignore[no-untyped-def]
        seen.append(len(chunk))
        return original(self, chunk)

    monkeypatch.setattr(build._IndexWriter, "add_chunk", spy)
    BM25Index.build((p for p in synthetic(50)), chunk_size=8)
    assert seen == [8] * 6 + [2]


def test_save_load_roundtrip_with_mmap(tmp_path, cities: BM25Index) -> None:
    folder = cities.save(tmp_path / "cities")
    loaded = BM25Index.load(folder, mmap=True)
    assert isinstance(loaded.data, np.memmap)
    assert len(loaded) == len(CITIES)
    for q in ("capital Egypt", "Seine", "Tokyo metropolis"):
        assert loaded.search(q, 3) == cities.search(q, 3)
    assert json.loads((folder / "agentflow_index.json").read_text())["format"] == "agentflow-bm25"
    in_ram = BM25Index.load(folder, mmap=False)
    assert not isinstance(in_ram.data, np.memmap)
    assert in_ram.search("Peru", 1)[0].title == "Lima"
    loaded.close()


def test_saved_folder_is_readable_by_bm25s(tmp_path, cities: BM25Index) -> None:
    bm25s = pytest.importorskip("bm25s")
    folder = cities.save(tmp_path / "cities")
    # the numpy backend: bm25s's numba retrieval takes ~10 s to JIT, and its layout is what is under test
    retriever = bm25s.BM25.load(folder, mmap=True, backend="numpy")
    docs, scores = retriever.retrieve(
        [tokenize("capital of Egypt")], k=1, show_progress=False, backend_selection="numpy"
    )
    assert CITIES[int(docs[0, 0])]["title"] == "Cairo"
    assert scores[0, 0] == pytest.approx(cities.search("capital of Egypt", 1)[0].score, rel=1e-5)


def test_load_rejects_a_folder_that_is_not_an_index(tmp_path) -> None:
    with pytest.raises(DataError, match="not a BM25 index folder"):
        BM25Index.load(tmp_path)


def test_from_jsonl_parquet_and_dataset(tmp_path) -> None:
    rows = [{"name": p["title"], "body": p["text"], "key": p["id"]} for p in CITIES]
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n")
    fields = {"text_field": "body", "title_field": "name", "id_field": "key"}
    a = BM25Index.from_jsonl(jsonl, **fields)

    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "c.parquet")
    b = BM25Index.from_parquet(tmp_path / "c.parquet", **fields)

    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_list(rows)
    c = BM25Index.from_dataset(ds, **fields)
    ds.save_to_disk(str(tmp_path / "saved"))
    d = BM25Index.from_dataset(tmp_path / "saved", **fields)
    for index in (a, b, c, d):
        hit = index.search("capital of Peru", 1)[0]
        assert (hit.title, hit.id) == ("Lima", "pe")


def test_bad_corpus_input_raises_data_error(tmp_path) -> None:
    with pytest.raises(DataError, match="empty"):
        BM25Index.build([])
    with pytest.raises(DataError, match="'text'"):
        BM25Index.build([{"title": "x"}])
    with pytest.raises(DataError, match="passage 3 must be a dict"):
        BM25Index.build([*CITIES[:3], "not a dict"], out_dir=tmp_path / "broken", chunk_size=2)
    assert not [p for p in (tmp_path / "broken").iterdir() if p.name.startswith("bm25spool")]
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{not json\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:2"):
        BM25Index.from_jsonl(bad)
    with pytest.raises(DataError, match="body"):
        BM25Index.from_jsonl(bad, text_field="body")


def test_format_hits_numbers_titles_and_cut_notice() -> None:
    hits = [SearchHit(1, 2.0, "Alpha", "a" * 300, "1"), SearchHit(2, 1.0, "Beta", "b" * 300, "2")]
    full = format_hits(hits, max_chars=10_000)
    assert full.startswith("[1] Alpha\n") and "\n\n[2] Beta\n" in full
    cut = format_hits(hits, max_chars=200)
    assert len(cut) <= 200 and "[cut: results trimmed to 200 of" in cut
    assert "No passage matched" in format_hits([])


def test_tool_without_corpus_answers_with_an_error(monkeypatch) -> None:
    monkeypatch.delenv("AGENTFLOW_SEARCH_INDEX", raising=False)
    tool = make_tool("search")
    assert tool.name == "Local_Search_Tool"
    result = tool.run("anything")
    assert not result.ok and "AGENTFLOW_SEARCH_INDEX" in result.text and "passages=" in result.text


def test_tool_with_a_bad_index_path_answers_with_an_error(tmp_path) -> None:
    result = BM25SearchTool(index_path=tmp_path / "missing").run("capital")
    assert not result.ok and "could not open its index" in result.text


def test_tool_searches_passages_and_trims(tmp_path, monkeypatch, cities: BM25Index) -> None:
    tool = make_tool("search", passages=CITIES, top_k=2, max_chars=120)
    result = tool.run("capital of Japan")
    assert result.ok and result.text.startswith("[1] Tokyo\n")
    assert "[cut: results trimmed to 120" in result.text and len(result.text) <= 120
    assert not tool.run("   ").ok
    assert "no searchable words" in tool.run("the of and").text
    assert "No passage matched" in tool.run("zebra").text

    folder = cities.save(tmp_path / "idx")
    monkeypatch.setenv("AGENTFLOW_SEARCH_INDEX", str(folder))
    from_env = BM25SearchTool(name="Corpus_Search", top_k=1)
    assert from_env.name == "Corpus_Search"
    assert from_env.run("Egypt").text.startswith("[1] Cairo")
    from_env.close()
    assert BM25SearchTool(cities).run("Seine").text.startswith("[1] Paris")


def test_tool_close_leaves_a_shared_index_usable(tmp_path, cities: BM25Index) -> None:
    shared = BM25Index.load(cities.save(tmp_path / "shared"))
    BM25SearchTool(shared).close()  # handed in: not the tool's to close
    assert shared.search("Peru", 1)[0].title == "Lima"
    own = BM25SearchTool(index_path=tmp_path / "shared")
    assert own.run("Peru").ok
    own.close()
    assert own.run("Egypt").text.startswith("[1] Cairo")  # the passages file is mapped again on demand
