"""A JSON-lines corpus as byte spans of a fixed number of passages, each read and parsed where it is tokenized.

The building process only finds where each span of ``size`` passages ends (it scans the file's bytes for line
ends, never decodes or sends the lines); a worker reads its span and parses it with Arrow's JSON reader into
columns, or, when the span holds anything that reader could read differently from :func:`json.loads` (control
bytes, a byte-order mark, surrogate escapes, blank or indented lines, numbers or lists where text is expected),
line by line exactly as :class:`~agentflow_env.tools.bm25.corpus.JsonlRow` does. Lines are the text-mode
lines of :func:`jsonl_lines` (``\\n``, ``\\r\\n`` or ``\\r`` ends them; blank
ones are skipped).
"""

from __future__ import annotations

import io
import json
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from agentflow_env.error import DataError

__all__ = ["JsonlFile", "ParsedSpan", "Span", "arrow_bytes", "jsonl_lines", "jsonl_spans", "parse_span", "span_lines"]

_READ = 1 << 24  # bytes read at a time when finding the spans
_LF, _CR, _OPEN, _CLOSE, _BACKSLASH = 10, 13, ord("{"), ord("}"), ord("\\")


# a str as a JSON string, non-ASCII kept (json.dumps(..., ensure_ascii=False) of a str), in C
_json_str: Any = json.encoder.encode_basestring  # type: ignore[attr-defined]


def jsonl_lines(path: str | os.PathLike[str]) -> Iterator[tuple[int, str]]:
    """``(line number, line)`` of each non-blank line of a JSON-lines file, not parsed
    (:class:`~agentflow_env.tools.bm25.corpus.JsonlRow` parses one)."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"corpus file not found: {path}")
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.isspace():
                yield lineno, line


@dataclass(frozen=True)
class JsonlFile:
    """A JSON-lines corpus file: iterates ``(line number, line)`` like :func:`jsonl_lines`; an index build
    reads it in spans instead (:func:`jsonl_spans`)."""

    path: str

    def __iter__(self) -> Iterator[tuple[int, str]]:
        return jsonl_lines(self.path)


@dataclass(frozen=True)
class Span:
    """``n`` passages of ``path``: bytes ``offset`` to ``end``, the first on line ``lineno`` (1-based)."""

    path: str
    offset: int
    end: int
    lineno: int
    n: int

    def __len__(self) -> int:
        return self.n

    def read(self) -> bytes:
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            return fh.read(self.end - self.offset)


def _line_ends(arr: np.ndarray, lone_cr: bool, eof: bool) -> np.ndarray:
    """Where each complete line of ``arr`` ends (one past its last byte), as text mode splits lines."""
    ends = np.flatnonzero(arr == _LF) + 1
    if lone_cr:  # a lone \r ends a line too (one not yet known to be lone, at the end, waits for more)
        cr = np.flatnonzero(arr == _CR)
        nxt = np.append(arr, np.uint8(0 if eof else _LF))[cr + 1]
        ends = np.union1d(ends, cr[nxt != _LF] + 1)
    if eof and len(arr) and (not len(ends) or ends[-1] < len(arr)):
        ends = np.append(ends, len(arr))
    return ends


def _blank(line: bytes) -> bool:
    return line.decode("utf-8").isspace()


def jsonl_spans(path: str | os.PathLike[str], size: int) -> Iterator[Span]:
    """The spans of ``size`` non-blank lines (the last one shorter) that cover the file ``path``."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"corpus file not found: {path}")
    name = str(path)
    base = lineno = 0  # file offset of ``buf``, lines before it
    start, start_line, count = 0, 1, 0  # the current span: its offset, its first line, its passages so far
    buf, kept = bytearray(_READ), 0  # read into, after the ``kept`` bytes of a line not yet ended
    with open(path, "rb") as fh:
        eof = False
        while not eof:
            if kept == len(buf):  # a line longer than the buffer
                buf.extend(bytes(len(buf)))
            got = fh.readinto(memoryview(buf)[kept:])
            eof, filled = not got, kept + got
            arr = np.frombuffer(buf, dtype=np.uint8, count=filled)
            ends = _line_ends(arr, buf.find(b"\r", 0, filled) >= 0, eof)
            if not len(ends):
                del arr
                kept = filled
                continue
            starts = np.concatenate([[0], ends[:-1]])
            passage = arr[starts] == _OPEN  # the usual line; any other is checked the way text mode reads it
            if passage.all():
                at = None  # the block's passages are its lines
            else:
                for i in np.flatnonzero(~passage).tolist():
                    passage[i] = not _blank(bytes(buf[starts[i] : ends[i]]))
                at = np.flatnonzero(passage)  # the block's passages, by line
            found = len(ends) if at is None else len(at)
            used = 0
            while found - used >= size - count:  # a span ends within this block
                k = used + size - count - 1
                last = k if at is None else int(at[k])  # the line that makes it ``size`` passages
                stop = base + int(ends[last])
                yield Span(name, start, stop, start_line, size)
                used += size - count
                start, start_line, count = stop, lineno + last + 2, 0
            count += found - used
            lineno += len(ends)
            done = int(ends[-1])
            base += done
            del arr
            buf[: filled - done] = buf[done:filled]  # the line not yet ended, to the front
            kept = filled - done
    if count:
        yield Span(name, start, base, start_line, count)


def span_lines(span: Span, raw: bytes | None = None) -> list[tuple[int, str]]:
    """The span's ``(line number, line)`` pairs, blank lines skipped: :func:`jsonl_lines`'s items."""
    raw = span.read() if raw is None else raw
    text = io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8")
    return [(span.lineno + i, line) for i, line in enumerate(text) if not line.isspace()]


class _Scan(NamedTuple):
    """What a plain span's bytes show: an escape (``\\``), a capital sigma, an escaped ``\\x1c``-``\\x1f``."""

    escapes: bool
    sigma: bool
    separators: bool


def _plain(raw: bytes, n: int) -> _Scan | None:
    """Whether the span is ``n`` lines, each one ``{...}``, with nothing Arrow's reader and :func:`json.loads`
    could read differently: no control byte but the line ends, no lone ``\\r``, no byte-order mark, no
    surrogate escape (``\\ud800``-``\\udfff``), and valid UTF-8. Single bytes are found with ``bytes.find``
    (memchr) before any longer pattern is looked for."""
    arr = np.frombuffer(raw, dtype=np.uint8)
    if not len(arr) or arr[0] != _OPEN or (b"\xef" in raw and b"\xef\xbb\xbf" in raw):
        return None
    low = np.flatnonzero(arr < 0x20)
    lf = low[arr[low] == _LF]
    cr = low[arr[low] == _CR]
    if len(lf) + len(cr) != len(low) or (len(cr) and not np.all(arr[np.minimum(cr + 1, len(arr) - 1)] == _LF)):
        return None
    if len(cr) and (cr[-1] == len(arr) - 1):
        return None
    lines = len(lf) + (arr[-1] != _LF)
    if lines != n:  # a blank line, or a line end where text mode sees one and this count does not
        return None
    last = np.where(arr[lf - 1] == _CR, lf - 2, lf - 1) if len(lf) else lf
    if len(lf) and (np.any(last < 0) or not np.all(arr[last] == _CLOSE)):
        return None
    if arr[-1] != _LF and arr[-1] != _CLOSE:
        return None
    if len(lf) and not np.all(arr[lf[lf + 1 < len(arr)] + 1] == _OPEN):
        return None
    sigma = b"\xce" in raw and b"\xce\xa3" in raw
    escapes = separators = False
    if b"\\" in raw:
        escapes = True
        slash = np.flatnonzero(arr[:-5] == _BACKSLASH)
        u = slash[arr[slash + 1] == ord("u")]  # \\uXXXX (or an escaped backslash and a u: only more checks)
        if len(u):
            hexes = [arr[u + k] | 0x20 for k in range(2, 6)]  # lower case
            if np.any((hexes[0] == ord("d")) & np.isin(hexes[1], np.frombuffer(b"89abcdef", np.uint8))):
                return None
            zero_zero = (hexes[0] == ord("0")) & (hexes[1] == ord("0"))
            separators = bool(np.any(zero_zero & (hexes[2] == ord("1"))))
            sigma = sigma or bool(
                np.any(
                    (hexes[0] == ord("0")) & (hexes[1] == ord("3")) & (hexes[2] == ord("a")) & (hexes[3] == ord("3"))
                )
            )
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return None
    return _Scan(escapes, sigma, separators)


def _read_columns(raw: bytes, fields: tuple[str, str | None, str | None], id_type: Any) -> Any:
    import pyarrow as pa
    import pyarrow.json as pj

    text_field, title_field, id_field = fields
    schema = [(text_field, pa.large_string())]
    if title_field:
        schema.append((title_field, pa.large_string()))
    if id_field:
        schema.append((id_field, id_type))
    options = pj.ParseOptions(explicit_schema=pa.schema(schema), unexpected_field_behavior="ignore")
    read = pj.ReadOptions(use_threads=False, block_size=max(len(raw) + 1, 1 << 20))
    return pj.read_json(pa.BufferReader(raw), read_options=read, parse_options=options)


class ParsedSpan(NamedTuple):
    """A span Arrow parsed: each passage's ``"title text"`` (to tokenize, an Arrow array), its lines of the
    index's passages file (``json.dumps`` of ``{id, title, text}``, non-ASCII kept) as bytes and where each
    ends in them; whether a text may hold a capital sigma, and whether any may hold one of the separators
    ``\x1c``-``\x1f`` (which Python's ``str.split`` splits at and an ASCII split would not)."""

    texts: Any
    blob: bytes
    ends: np.ndarray
    sigma: bool
    separators: bool


def parse_span(raw: bytes, n: int, start: int, fields: tuple[str, str | None, str | None]) -> ParsedSpan | None:
    """The span's passages as :class:`ParsedSpan`, or ``None`` when the span must be read line by line (see the
    module's docstring). ``start``: the first passage's number (the id of a passage without one)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    scan = _plain(raw, n) if len(set(f for f in fields if f)) == len([f for f in fields if f]) else None
    if scan is None:
        return None
    table = None
    for id_type in (pa.large_string(), pa.int64()):
        try:
            table = _read_columns(raw, fields, id_type)
            break
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            if not fields[2]:
                return None
    if table is None or table.num_rows != n:
        return None
    text_field, title_field, id_field = fields
    text = table.column(text_field).combine_chunks()
    if text.null_count:  # null text: json.loads's path says what is wrong (or reads it as empty)
        return None
    title = (
        table.column(title_field).combine_chunks().fill_null("")
        if title_field
        else pa.array([""] * n, pa.large_string())
    )
    rows = None
    if id_field:
        ids = table.column(id_field).combine_chunks().cast(pa.large_string())
        if ids.null_count:
            rows = pa.array(np.arange(start, start + n).astype(str), pa.large_string())
            ids = pc.if_else(pc.is_null(ids), rows, ids)
    else:
        ids = pa.array(np.arange(start, start + n).astype(str), pa.large_string())
    del table, rows
    piece = lambda s: pa.scalar(s, pa.large_string())  # noqa: E731
    texts = pc.binary_join_element_wise(title, text, piece(" "))
    if len(raw) < 1 << 31:  # the texts are no longer than the span: 32-bit offsets, which Arrow hashes faster
        texts = texts.cast(pa.string())
    # a string to escape again (a quote, a backslash, a control character) was escaped in the span
    quoted = [_quoted(col, scan.escapes) for col in (ids, title, text)]
    lines = pc.binary_join_element_wise(
        piece('{"id": '),
        quoted[0],
        piece(', "title": '),
        quoted[1],
        piece(', "text": '),
        quoted[2],
        piece("}\n"),
        piece(""),
    )
    del quoted, ids, title, text
    return ParsedSpan(texts, *arrow_bytes(lines), scan.sigma, scan.separators)


def _quoted(col: Any, escapes: bool) -> Any:
    """Each string as a JSON string, as ``json.dumps(s, ensure_ascii=False)`` writes it."""
    import pyarrow as pa
    import pyarrow.compute as pc

    piece = pa.scalar('"', pa.large_string())
    quoted = pc.binary_join_element_wise(piece, col, piece, pa.scalar("", pa.large_string()))
    if not escapes:
        return quoted
    escape = pc.match_substring_regex(col, r'["\\\x00-\x1f]')
    if pc.any(escape).as_py():
        values = [_json_str(s) for s in col.filter(escape).to_pylist()]
        quoted = pc.replace_with_mask(quoted, escape, pa.array(values, pa.large_string()))
    return quoted


def arrow_bytes(lines: Any) -> tuple[bytes, np.ndarray]:
    """The concatenated bytes of a large-string array and where each element ends in them."""
    offsets = np.frombuffer(lines.buffers()[1], dtype=np.int64)[lines.offset : lines.offset + len(lines) + 1]
    data = memoryview(lines.buffers()[2])
    first = int(offsets[0])
    return bytes(data[first : int(offsets[-1])]), offsets[1:] - first
