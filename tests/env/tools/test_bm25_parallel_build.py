"""A BM25 build in worker processes writes the same index folder, byte for byte, as one in this process.

Corpora are a few hundred passages made in the test, with the words the tokenizer treats specially (several
tokens in one raw word, none, a capital sigma); each parallel build starts two worker processes.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from agentflow_env.error import ConfigError, DataError
from agentflow_env.tools.bm25 import BM25Index

SPECIAL = [
    {"id": "s1", "title": "ΟΔΥΣΣΕΥΣ", "text": "ΟΔΥΣΣΕΥΣ sailed home; Σίσυφος pushed rocks."},
    {"id": "s2", "title": "Contractions", "text": "don't e-mail Paris, or the well-known co-op's boxes"},
    {"title": "", "text": "the of and"},
    {"id": "s4", "title": "Zürich", "text": "Zürich 2024 ÉCOLE cities churches w3 w3 w3"},
]


def corpus(n: int, seed: int) -> list[dict[str, str]]:
    """Zipfian passages over 400 words, with the special passages spread through them."""
    rng = np.random.default_rng(seed)
    words = [f"w{i}" for i in range(400)]
    probs = 1.0 / np.arange(1, 401)
    probs /= probs.sum()
    out = [
        {
            "id": f"d{i}",
            "title": f"T{i % 50}",
            "text": " ".join(rng.choice(words, size=int(rng.integers(3, 40)), p=probs)),
        }
        for i in range(n)
    ]
    for k, passage in enumerate(SPECIAL):
        out.insert(37 * k + 5, passage)
    return out


def files(folder) -> dict[str, bytes]:  # type: ignore[no-untyped-def]
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_parallel_build_writes_the_same_folder_as_a_sequential_one(tmp_path) -> None:
    passages = corpus(400, seed=4)
    one = BM25Index.build(iter(passages), out_dir=tmp_path / "one", chunk_size=37)
    two = BM25Index.build(iter(passages), out_dir=tmp_path / "two", chunk_size=37, workers=2)
    assert files(tmp_path / "one") == files(tmp_path / "two")
    assert not [p for p in (tmp_path / "two").iterdir() if p.name.startswith("bm25spool")]
    assert len(two) == len(passages) and two.vocab == one.vocab
    for query in ("w0 w7", "w3 Zürich", "ΟΔΥΣΣΕΥΣ", "don't e-mail", "w399 T7", "city church"):
        assert two.search(query, 10) == one.search(query, 10)
    assert two.search("ΟΔΥΣΣΕΥΣ", 1)[0].id == "s1"
    # and the same matrix as an in-memory build (its own numbering of terms aside, the same scores)
    memory = BM25Index.build(passages, chunk_size=37)
    assert memory.vocab == two.vocab
    np.testing.assert_array_equal(np.asarray(two.data), memory.data)


def test_parallel_jsonl_build_parses_in_workers_and_reports_bad_rows(tmp_path) -> None:
    jsonl = tmp_path / "c.jsonl"
    jsonl.write_text("".join(json.dumps(p) + "\n" for p in corpus(120, seed=5)) + "\n")
    BM25Index.from_jsonl(jsonl, out_dir=tmp_path / "one", chunk_size=16)
    BM25Index.from_jsonl(jsonl, out_dir=tmp_path / "two", chunk_size=16, workers=2)
    assert files(tmp_path / "one") == files(tmp_path / "two")

    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"text": "ok"}\n{"text": "fine"}\n{not json\n')
    with pytest.raises(DataError, match=r"bad\.jsonl:3"):
        BM25Index.from_jsonl(bad, out_dir=tmp_path / "bad", chunk_size=2, workers=2)
    assert not [p for p in (tmp_path / "bad").iterdir() if p.name.startswith("bm25spool")]
    with pytest.raises(DataError, match="passage 3 must be a dict"):
        BM25Index.build([*SPECIAL[:3], "not a dict"], out_dir=tmp_path / "broken", chunk_size=2, workers=2)
    with pytest.raises(ConfigError, match="workers"):
        BM25Index.build(SPECIAL, out_dir=tmp_path / "none", workers=0)


def test_build_index_cli_workers(tmp_path, capsys) -> None:
    from agentflow_env.cli import main

    dump = tmp_path / "dump.jsonl"
    dump.write_text("".join(json.dumps(p) + "\n" for p in corpus(60, seed=6)))
    common = ["build-index", "--no-progress", "--json", "--format", "jsonl", "--input", str(dump), "--chunk-size", "8"]
    assert main([*common, "--output-dir", str(tmp_path / "one"), "--workers", "1"]) == 0
    capsys.readouterr()
    assert main([*common, "--output-dir", str(tmp_path / "two"), "--workers", "2"]) == 0
    assert json.loads(capsys.readouterr().out)["passages"] == 64
    assert files(tmp_path / "one") == files(tmp_path / "two")
    assert main([*common, "--output-dir", str(tmp_path / "none"), "--workers", "0"]) == 2
    assert "--workers must be at least 1" in capsys.readouterr().err


def test_the_raw_word_memo_and_batch_size_do_not_change_the_folder(tmp_path, monkeypatch) -> None:
    """Words the memo holds (one token, none, several) and words it no longer takes give the same terms."""
    from agentflow_env.tools.bm25 import build

    passages = corpus(300, seed=6) + SPECIAL  # the special words again, now remembered
    BM25Index.build(iter(passages), out_dir=tmp_path / "default", chunk_size=41)
    monkeypatch.setattr(build, "_RAW_WORDS_KEPT", 5)
    monkeypatch.setattr(build, "_TOKENIZE_BATCH", 3)
    BM25Index.build(iter(passages), out_dir=tmp_path / "small", chunk_size=41)
    assert files(tmp_path / "default") == files(tmp_path / "small")


def test_a_jsonl_file_read_in_spans_writes_the_folder_its_passages_write(tmp_path, monkeypatch) -> None:
    """Spans Arrow parses (escapes, non-ASCII kept or escaped, int, null and missing ids, null and missing
    titles, extra fields, a sigma) and spans read line by line (blank lines, CRLF, a lone CR, duplicate keys,
    surrogate escapes) give the folder a build from the parsed passages gives, byte for byte."""
    from agentflow_env.tools.bm25 import build, spans
    from agentflow_env.tools.bm25.corpus import iter_jsonl

    parsed: list[object] = []
    monkeypatch.setattr(build, "parse_span", lambda *a: parsed.append(spans.parse_span(*a)) or parsed[-1])
    rows = corpus(150, seed=7)
    for i, row in enumerate(rows):
        if i % 5 == 0:
            row["text"] += ' a "quoted" back\\slash tab\tnew\nline \x1c \u00a0 nbsp \u2028 Σίσυφος'
        if i % 10 == 5:
            row["title"] = "emoji 😀"  # kept as UTF-8 (odd rows): escaped, a surrogate pair sends the span to json
        if 32 <= i < 48:  # the third span's ids are numbers (a span of both is read line by line)
            row["id"] = i
        if i % 7 == 2:
            row["id"] = None
        if i % 7 == 3:
            row.pop("id", None)
        if i % 11 == 4:
            row["title"] = None
        if i % 11 == 5:
            row.pop("title", None)
        if i % 13 == 6:
            row["extra"] = {"nested": [1, {"x": None}]}
    plain = [json.dumps(r, ensure_ascii=i % 2 == 0) for i, r in enumerate(rows)]
    odd = list(plain)
    odd[20] = odd[20] + "\r"  # CRLF
    odd[40] = "   \n" + odd[40]  # a blank line
    odd[60] = odd[60].replace('{"', '{"text": "dup", "', 1)  # a duplicate key: the last wins
    odd[80] = odd[80][:-1] + ', "x": "\\ud83d\\ude00"}'  # a surrogate pair, escaped
    odd[100] = odd[100] + "\r" + plain[0]  # a lone CR ends a line too
    for name, lines in (("plain", plain), ("odd", odd)):
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(("\n".join(lines)).encode())  # and no line end after the last line
        passages = list(iter_jsonl(path))
        BM25Index.build(iter(passages), out_dir=tmp_path / f"{name}-rows", chunk_size=16)
        for workers in (1, 2):
            BM25Index.from_jsonl(path, out_dir=tmp_path / f"{name}-{workers}", chunk_size=16, workers=workers)
            assert files(tmp_path / f"{name}-{workers}") == files(tmp_path / f"{name}-rows")
        if name == "plain":  # Arrow read most spans (in this process, with workers=1)
            assert sum(p is not None for p in parsed) > len(parsed) // 2
        parsed.clear()


@pytest.mark.parametrize("read", [5, 16, 1 << 24])  # bytes read at a time: lines longer than that, \r\n split
def test_spans_count_passages_and_lines_as_text_mode_reads_them(tmp_path, monkeypatch, read) -> None:
    from agentflow_env.tools.bm25 import spans as module
    from agentflow_env.tools.bm25.corpus import jsonl_lines
    from agentflow_env.tools.bm25.spans import jsonl_spans, span_lines

    monkeypatch.setattr(module, "_READ", read)
    path = tmp_path / "c.jsonl"
    path.write_bytes(b'{"text": "a"}\r\n\n  \t\n{"text": "b"}\r{"text": "c"}\n \xc2\xa0\n{"text": "d"}\n{"text": "e"}')
    for size in (1, 2, 3, 10):
        spans = list(jsonl_spans(path, size))
        assert [s.n for s in spans] == [min(size, 5 - i) for i in range(0, 5, size)]
        assert [item for s in spans for item in span_lines(s)] == list(jsonl_lines(path))
        assert spans[-1].end == path.stat().st_size
