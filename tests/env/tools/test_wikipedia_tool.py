"""Tests of Wikipedia search over a local dump: DPR tsv, JSONL (plain and KILT-like), parquet and a saved dataset.

Each test writes its own tiny dump and builds through the ``agentflow-env build-index`` command; no network.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agentflow_env.cli import main
from agentflow_env.tools import make_tool
from agentflow_env.tools.bm25 import BM25Index
from agentflow_env.tools.wikipedia import WIKI_ENV_VAR, WikipediaSearchTool, iter_dpr_tsv, split_passages

ARTICLES = [
    ("1", "Eiffel Tower", "The Eiffel Tower is a wrought-iron lattice tower in Paris, 330 metres tall."),
    ("2", "Jaws (film)", 'Jaws is a 1975 thriller directed by Steven Spielberg, about a "great white" shark.'),
    ("3", "Steven Spielberg", "Steven Spielberg was born in Cincinnati, Ohio, in 1946."),
    ("4", "Mount Everest", "Mount Everest is Earth's highest mountain above sea level, in the Himalayas."),
]


def write_dpr(path: Path) -> Path:
    lines = ["id\ttext\ttitle"]
    for pid, title, text in ARTICLES:
        lines.append(f'{pid}\t"{text.replace(chr(34), chr(34) * 2)}"\t{title}')
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def build(capsys, *args: str) -> dict:
    assert main(["build-index", "--no-progress", "--json", *args]) == 0
    return json.loads(capsys.readouterr().out)


def test_dpr_reader_streams_rows_and_unquotes(tmp_path) -> None:
    rows = iter_dpr_tsv(write_dpr(tmp_path / "psgs_w100.tsv"))
    first = next(rows)  # a generator: nothing beyond the first row has been read
    assert first == {"id": "1", "title": "Eiffel Tower", "text": ARTICLES[0][2]}
    assert [r["title"] for r in rows] == ["Jaws (film)", "Steven Spielberg", "Mount Everest"]


def test_build_index_from_dpr_and_search(tmp_path, capsys) -> None:
    out = tmp_path / "wiki"
    summary = build(
        capsys, "--format", "dpr", "--input", str(write_dpr(tmp_path / "psgs.tsv")), "--output-dir", str(out)
    )
    assert summary["passages"] == 4 and WIKI_ENV_VAR in summary["use"]
    tool = WikipediaSearchTool(index_path=out, top_k=2)
    result = tool.run("Where was the director of Jaws born?")
    assert result.ok and result.text.startswith("[1] ")
    assert "[1] Steven Spielberg" in result.text or "[1] Jaws (film)" in result.text
    assert '"great white"' in tool.run("great white shark film").text
    hit = BM25Index.load(out).search("Everest Himalayas", 1)[0]
    assert (hit.title, hit.id) == ("Mount Everest", "4")


def test_build_index_refuses_to_overwrite_without_force(tmp_path, capsys) -> None:
    dump = str(write_dpr(tmp_path / "psgs.tsv"))
    out = tmp_path / "wiki"
    build(capsys, "--format", "dpr", "--input", dump, "--output-dir", str(out))
    assert main(["build-index", "--no-progress", "--format", "dpr", "--input", dump, "--output-dir", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert (
        build(capsys, "--format", "dpr", "--input", dump, "--output-dir", str(out), "--force", "--limit", "2")[
            "passages"
        ]
        == 2
    )


def test_build_index_from_jsonl_kilt_like_with_passage_splitting(tmp_path, capsys) -> None:
    kilt = tmp_path / "kilt.jsonl"
    long_text = {"paragraph": ["Everest\n", "word " * 120 + "summit.", "Climbers use oxygen near the summit."]}
    kilt.write_text(
        json.dumps({"wikipedia_id": "77", "wikipedia_title": "Mount Everest", "text": long_text})
        + "\n"
        + json.dumps({"wikipedia_id": "78", "wikipedia_title": "Cincinnati", "text": ["A city in Ohio."]})
        + "\n",
        encoding="utf-8",
    )
    out = tmp_path / "kilt-index"
    assert (
        build(capsys, "--format", "jsonl", "--input", str(kilt), "--output-dir", str(out), "--passage-words", "50")[
            "passages"
        ]
        == 4
    )  # 127 words -> 3 passages, plus the short article
    index = BM25Index.load(out)
    hit = index.search("oxygen climbers", 1)[0]
    assert (hit.title, hit.id) == ("Mount Everest", "77_2")
    assert index.search("Ohio city", 1)[0].id == "78"


def test_jsonl_with_named_fields_and_bad_input(tmp_path, capsys) -> None:
    dump = tmp_path / "custom.jsonl"
    dump.write_text(json.dumps({"name": "Lima", "body": "Capital of Peru."}) + "\n", encoding="utf-8")
    out = tmp_path / "custom"
    args = ["--format", "jsonl", "--input", str(dump), "--output-dir", str(out)]
    assert main(["build-index", "--no-progress", *args]) == 2
    assert "--text-field" in capsys.readouterr().err
    build(capsys, *args, "--force", "--text-field", "body", "--title-field", "name")
    assert BM25Index.load(out).search("Peru", 1)[0].title == "Lima"


def test_build_index_from_parquet_and_a_saved_dataset(tmp_path, capsys) -> None:
    rows = [{"id": pid, "title": title, "text": text} for pid, title, text in ARTICLES]
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "wiki.parquet")
    build(
        capsys, "--format", "parquet", "--input", str(tmp_path / "wiki.parquet"), "--output-dir", str(tmp_path / "pq")
    )

    datasets = pytest.importorskip("datasets")
    datasets.DatasetDict({"train": datasets.Dataset.from_list(rows)}).save_to_disk(str(tmp_path / "hub"))
    build(capsys, "--format", "hub", "--input", str(tmp_path / "hub"), "--output-dir", str(tmp_path / "hubidx"))
    build(capsys, "--format", "hub", "--input", str(tmp_path / "wiki.parquet"), "--output-dir", str(tmp_path / "hubpq"))
    for folder in ("pq", "hubidx", "hubpq"):
        hit = BM25Index.load(tmp_path / folder).search("wrought iron lattice Paris", 1)[0]
        assert (hit.title, hit.id) == ("Eiffel Tower", "1")


def test_tool_uses_the_environment_variable(tmp_path, capsys, monkeypatch) -> None:
    out = tmp_path / "wiki"
    build(capsys, "--format", "dpr", "--input", str(write_dpr(tmp_path / "psgs.tsv")), "--output-dir", str(out))
    monkeypatch.setenv(WIKI_ENV_VAR, str(out))
    tool = make_tool("wikipedia", top_k=1)
    assert tool.name == "Wikipedia_Search_Tool"
    assert tool.run("tallest mountain Earth sea level").text.startswith("[1] Mount Everest")


def test_tool_without_index_names_the_variable(monkeypatch) -> None:
    monkeypatch.delenv(WIKI_ENV_VAR, raising=False)
    result = make_tool("wikipedia").run("Eiffel Tower")
    assert not result.ok and WIKI_ENV_VAR in result.text and "build-index" in result.text


def test_split_passages_keeps_short_texts_whole() -> None:
    rows = [{"id": "a", "title": "T", "text": "one two three"}, {"title": "U", "text": {"paragraph": ["x y", "z"]}}]
    assert list(split_passages(rows, 2)) == [
        {"title": "T", "text": "one two", "id": "a_0"},
        {"title": "T", "text": "three", "id": "a_1"},
        {"title": "U", "text": "x y"},
        {"title": "U", "text": "z"},
    ]
    assert list(split_passages(rows[:1], 0)) == [{"title": "T", "text": "one two three", "id": "a"}]


def test_hub_ids_are_streamed_through_datasets(tmp_path, capsys, monkeypatch) -> None:
    datasets = pytest.importorskip("datasets")
    rows = [{"docid": pid, "page_title": title, "contents": text} for pid, title, text in ARTICLES]
    calls: list[tuple] = []

    def fake_load_dataset(path, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append((path, kwargs))
        return datasets.Dataset.from_list(rows).to_iterable_dataset()

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    out = tmp_path / "hub"
    build(
        capsys, "--format", "hub", "--input", "someone/wiki-passages", "--split", "validation", "--output-dir", str(out)
    )
    assert calls == [("someone/wiki-passages", {"split": "validation", "streaming": True})]
    hit = BM25Index.load(out).search("Cincinnati Ohio born", 1)[0]
    assert (hit.title, hit.id) == ("Steven Spielberg", "3")
