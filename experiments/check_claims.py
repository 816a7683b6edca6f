"""Check every registered figure the documentation states against the committed output that produced it.

    python experiments/check_claims.py            # one line per claim; exit 0 when all hold, 1 otherwise
    python experiments/check_claims.py --json     # the same as JSON (claim, status, texts found, expected)
    python experiments/check_claims.py --list     # the registry: what each claim reads, and from where

The registry, ``experiments/claims.toml``, lists claims. Each has an ``id``, a regular expression ``pattern``
whose named groups capture the figures in the text (a space in it matches any run of whitespace, line breaks
included, so reflowed text still matches), the committed ``output`` (a JSON file) and, per group, the
path to its value there (``values``), and the rounding rule (``scale`` then a format ``spec``, per claim or
per group; half up on the value the JSON shows, and at an exact tie there either way, since that value was
rounded once already). The pattern is searched in README.md and every ``docs/**/*.md``, so a claim survives its
paragraph moving from one file to another. A claim fails when its text is found nowhere, or when any place that
states it disagrees with the output's value formatted by its rule (a minus sign "−" reads as "-", and an
expected value without thousands separators ignores the text's). A claim registered with ``expect_fail``
(a reason) documents a known disagreement: it passes while the text still disagrees and fails once it agrees,
so the entry is cleaned up. Claims measured too slowly for CI to rerun (``rerun = "no"``) may name the commit
they were measured on (``measured_on``; ``"recorded"``: the first 7 characters of the commit the output
records in ``code_version``): that commit must then appear in the same file as the figure, so the reader is told.
``rerun`` is one of ``ci`` (a test reruns the measurement), ``recompute`` (a test recomputes the statistics),
``smoke`` (a test reruns the perf script's ``--smoke`` mode and checks the value paths still give numbers) or ``no``.

A value path is dotted keys and list indices (``seeds.0.end.success``); ``[field=value,...]`` keeps the list
items whose fields read so (more than one is an expansion); ``*`` expands over a list or a dict's values, and
``train*`` over the values of the dict keys it matches; a prefix ``min:``, ``max:``, ``mean:``, ``median:``,
``len:``, ``tlo:`` or ``thi:`` (the t-95% interval of the mean) reduces the expansion to one number. Every
output's code version is reported (``--list``): the ``code_version`` it recorded when it has one, else the
commit that last changed the file (``git log``).
"""

from __future__ import annotations

import argparse
import fnmatch
import json
import math
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from decimal import ROUND_HALF_DOWN, ROUND_HALF_UP, Decimal
from pathlib import Path
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib  # type: ignore[no-redef]

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))
REGISTRY = ROOT / "experiments" / "claims.toml"


def _t_bound(side: str) -> Any:
    def bound(values: list[float]) -> float:
        from experiments.stats_util import t_interval

        bound_value = t_interval(values)[side]
        if bound_value is None:
            raise ValueError("a t interval needs at least two values")
        return bound_value

    return bound


REDUCERS = {
    "min": min,
    "max": max,
    "mean": statistics.fmean,
    "median": statistics.median,
    "len": len,
    "tlo": _t_bound("lo"),  # the 95% Student-t interval of the mean over the expansion (seeds, runs)
    "thi": _t_bound("hi"),
}


RERUN = ("ci", "recompute", "smoke", "no")  # how CI reruns a claim's measurement (see the module's doc)


class RegistryError(ValueError):
    """The registry itself is malformed (a missing field, a pattern without groups, a group without a value)."""


@dataclass(frozen=True)
class Claim:
    id: str
    pattern: re.Pattern[str]
    output: str
    values: dict[str, str]
    specs: dict[str, str]
    scales: dict[str, float]
    rerun: str = "no"
    measured_on: str | None = None
    expect_fail: str = ""


@dataclass
class Result:
    claim: str
    ok: bool
    status: str
    found: list[dict[str, Any]] = field(default_factory=list)
    expected: dict[str, str] = field(default_factory=dict)


def load_registry(path: Path = REGISTRY) -> list[Claim]:
    """The claims of ``path``; a malformed entry is a RegistryError naming it."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    claims, seen = [], set()
    for i, entry in enumerate(data.get("claim", [])):
        name = entry.get("id") or f"claim #{i + 1}"
        missing = [k for k in ("id", "pattern", "output", "values") if k not in entry]
        if missing:
            raise RegistryError(f"{path.name}: {name} lacks {', '.join(missing)}")
        if name in seen:
            raise RegistryError(f"{path.name}: {name} is registered twice")
        seen.add(name)
        try:
            # a space matches any run of whitespace, line breaks included: reflowed text still matches
            pattern = re.compile(entry["pattern"].replace(" ", r"\s+"), re.M)
        except re.error as exc:
            raise RegistryError(f"{path.name}: {name}: bad pattern ({exc})") from exc
        values = dict(entry["values"])
        if set(pattern.groupindex) != set(values):
            raise RegistryError(
                f"{path.name}: {name}: the pattern's groups {sorted(pattern.groupindex)} "
                f"must be the values' names {sorted(values)}"
            )
        spec, scale = entry.get("spec", ".1f"), float(entry.get("scale", 1.0))
        claims.append(
            Claim(
                id=name,
                pattern=pattern,
                output=entry["output"],
                values=values,
                specs={g: entry.get("specs", {}).get(g, spec) for g in values},
                scales={g: float(entry.get("scales", {}).get(g, scale)) for g in values},
                rerun=_rerun(path, name, entry.get("rerun", "no")),
                measured_on=entry.get("measured_on"),
                expect_fail=entry.get("expect_fail", ""),
            )
        )
    return claims


def _rerun(path: Path, name: str, rerun: str) -> str:
    if rerun not in RERUN:
        raise RegistryError(f"{path.name}: {name}: rerun = {rerun!r} is not one of {', '.join(RERUN)}")
    return rerun


def documents(root: Path = ROOT) -> dict[str, str]:
    """README.md and every Markdown page under docs/, by path relative to ``root``."""
    paths = [root / "README.md", *sorted((root / "docs").rglob("*.md"))]
    return {str(p.relative_to(root)): p.read_text(encoding="utf-8") for p in paths if p.is_file()}


def resolve(data: Any, path: str) -> Any:
    """The value at ``path`` (dotted keys, list indices, ``*``; an optional ``reducer:`` prefix)."""
    reducer = None
    if ":" in path:
        name, path = path.split(":", 1)
        if name not in REDUCERS:
            raise KeyError(f"unknown reducer {name!r} (one of {', '.join(REDUCERS)})")
        reducer = REDUCERS[name]
    nodes, expanded = [data], False
    for key in re.findall(r"\[[^\]]*\]|[^.]+", path):
        nxt: list[Any] = []
        for node in nodes:
            if key == "*":
                nxt.extend(node.values() if isinstance(node, dict) else node)
                expanded = True
            elif "*" in key:  # a glob over a dict's keys: train* is every run named train...
                nxt.extend(v for k, v in node.items() if fnmatch.fnmatchcase(k, key))
                expanded = True
            elif key.startswith("["):  # [field=value,...]: the list's items whose fields read so
                wanted = dict(part.split("=", 1) for part in key[1:-1].split(","))
                kept = [item for item in node if all(_same(item.get(k), v) for k, v in wanted.items())]
                if not kept:
                    raise KeyError(f"{key} selects nothing")
                expanded = expanded or len(kept) > 1
                nxt.extend(kept)
            elif isinstance(node, list):
                nxt.append(node[int(key)])
            else:
                nxt.append(node[key])
        nodes = nxt
    if reducer is not None:
        return reducer(nodes)
    if expanded:
        raise KeyError(f"{path}: '*' needs a reducer (min:, max:, mean:, median:, len:, tlo:, thi:)")
    return nodes[0]


def _same(value: Any, text: str) -> bool:
    """A selector's ``field=text`` against a JSON value (numbers compare as numbers)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return math.isclose(value, float(text))
        except ValueError:
            return False
    return str(value) == text


SPEC = re.compile(r"^(?P<sign>\+)?(?P<comma>,)?(?:\.(?P<places>\d+))?(?P<kind>[fd])$")


def formatted(value: Any, scale: float, spec: str, rounding: str = ROUND_HALF_UP) -> str:
    """``value`` x ``scale`` rounded half up on its shortest decimal form (0.825 -> "0.83", as a person rounds
    the figure the JSON shows), then written by ``spec``: [+][,][.N](f|d)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"not a number: {value!r}")
    form = SPEC.match(spec)
    if form is None:
        raise ValueError(f"spec {spec!r} is not [+][,][.N](f|d)")
    places = 0 if form["kind"] == "d" else int(form["places"] or 6)
    exact = Decimal(repr(float(value))) * Decimal(repr(float(scale)))
    rounded = exact.quantize(Decimal(1).scaleb(-places), rounding=rounding)
    if rounded == 0:
        rounded = abs(rounded)  # no "-0.0"
    return format(rounded, f"{form['sign'] or ''}{form['comma'] or ''}.{places}f")


def _normal(text: str, keep_commas: bool) -> str:
    text = text.replace("\u2212", "-").replace("\u2009", "").strip()
    return text if keep_commas else text.replace(",", "")


def _agrees(stated: str, group: str, claim: Claim, expected: dict[str, str], ties: dict[str, str]) -> bool:
    commas = "," in claim.specs[group]
    return _normal(stated, commas) in {_normal(expected[group], commas), _normal(ties[group], commas)}


def code_version(output: Path, data: Any, root: Path = ROOT) -> str:
    """The commit an output says produced it, else the one that last changed it (git)."""
    recorded = data.get("code_version") if isinstance(data, dict) else None
    if isinstance(recorded, dict) and recorded.get("commit"):
        dirty = " + uncommitted changes" if recorded.get("code_changed_since_commit") else ""
        return f"{recorded['commit'][:10]}{dirty} (recorded)"
    proc = subprocess.run(
        ["git", "log", "-1", "--format=%h", "--", str(output.relative_to(root))],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
    )
    return f"{proc.stdout.strip()} (last commit of the file)" if proc.stdout.strip() else "unknown (not committed)"


def check(claim: Claim, docs: dict[str, str], root: Path = ROOT) -> Result:
    """One claim against its output: found somewhere, and every place that states it agrees."""
    result = Result(claim=claim.id, ok=False, status="")
    output = root / claim.output
    if not output.is_file():
        result.status = f"output {claim.output} is missing"
        return result
    data = json.loads(output.read_text(encoding="utf-8"))
    try:
        result.expected = {
            g: formatted(resolve(data, path), claim.scales[g], claim.specs[g]) for g, path in claim.values.items()
        }
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        result.status = f"output {claim.output} has no value for it ({exc.__class__.__name__}: {exc})"
        return result
    # a tie in the value the JSON shows (0.2425 of 225/928 = 0.24246) was rounded once already: either way reads
    ties = {
        g: formatted(resolve(data, p), claim.scales[g], claim.specs[g], ROUND_HALF_DOWN)
        for g, p in claim.values.items()
    }
    marker = claim.measured_on
    if marker == "recorded":  # the commit the output says produced it
        marker = str((data.get("code_version") or {}).get("commit") or "")[:7] or "(no recorded commit)"
    wrong = []
    for name, text in docs.items():
        for match in claim.pattern.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            stated = match.groupdict()
            bad = {g: stated[g] for g in claim.values if not _agrees(stated[g], g, claim, result.expected, ties)}
            result.found.append({"file": name, "line": line, "stated": stated})
            if bad:
                wrong.append(f"{name}:{line} states {bad}, the output gives {result.expected}")
            if marker and marker not in text:
                wrong.append(f"{name}:{line} does not say it was measured on commit {marker}")
    if not result.found:
        result.status = "its text is found nowhere (README.md, docs/**/*.md)"
    elif wrong and claim.expect_fail:
        result.ok, result.status = True, f"known disagreement ({claim.expect_fail}): " + "; ".join(wrong)
    elif wrong:
        result.status = "; ".join(wrong)
    elif claim.expect_fail:
        result.status = f"registered as disagreeing ({claim.expect_fail}) but now agrees: drop expect_fail"
    else:
        result.ok, result.status = True, "ok"
    return result


def check_all(root: Path = ROOT, registry: Path | None = None) -> list[Result]:
    docs = documents(root)
    return [check(claim, docs, root) for claim in load_registry(registry or root / REGISTRY.relative_to(ROOT))]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", action="store_true", help="print the results as JSON")
    parser.add_argument("--list", action="store_true", help="print the registry and each output's code version")
    parser.add_argument("--root", type=Path, default=ROOT, help="the checkout whose docs and outputs are read")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    try:
        claims = load_registry(root / REGISTRY.relative_to(ROOT))
    except (RegistryError, OSError, tomllib.TOMLDecodeError) as exc:
        print(f"check_claims: {exc}", file=sys.stderr)
        return 2
    if args.list:
        versions: dict[str, str] = {}
        for claim in claims:
            path = root / claim.output
            if claim.output not in versions:
                data = json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
                versions[claim.output] = code_version(path, data, root) if path.is_file() else "missing"
            print(f"{claim.id}: {claim.output} [{versions[claim.output]}] rerun in CI: {claim.rerun}")
            for group, value_path in claim.values.items():
                print(f"    {group} = {value_path} (x{claim.scales[group]:g}, {claim.specs[group]})")
        return 0
    docs = documents(root)
    results = [check(claim, docs, root) for claim in claims]
    if args.json:
        print(json.dumps([r.__dict__ for r in results], indent=2))
    else:
        for r in results:
            where = ", ".join(sorted({f["file"] for f in r.found})) or "-"
            mark = "FAIL" if not r.ok else "ok  " if r.status == "ok" else "KNOWN"
            print(f"{mark} {r.claim} ({where})" + ("" if r.status == "ok" else f": {r.status}"))
        failed = sum(not r.ok for r in results)
        print(f"{len(results) - failed} of {len(results)} claims hold" + (f"; {failed} fail" if failed else ""))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
