"""The documentation site cannot drift from the code: it builds strictly (``sphinx-build -n -W``: a stale
cross-reference, a broken link between pages or a docstring autodoc cannot render fails), and every ```python
block of every page (README.md included) runs, in page order, one namespace per page, in an empty folder, offline.

```bash/```console/```text blocks and ``{code-block} python`` directives are shown, not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
# a fenced block that opens with exactly ```python (MyST's {code-block} directive is not run), at any indent
_FENCE = re.compile(r"^(?P<indent>[ \t]*)```python[ \t]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.M | re.S)


def pages() -> list[Path]:
    """Every page whose examples run: README.md and docs/**/*.md (the built site's folders left out)."""
    found = sorted(p for p in DOCS.rglob("*.md") if not {"_build", "OUT"} & set(p.relative_to(DOCS).parts))
    return [ROOT / "README.md", *found]


def python_blocks(text: str) -> list[tuple[int, str]]:
    """(line number, dedented code) of each ```python block, in page order."""
    return [(text.count("\n", 0, m.start()) + 2, textwrap.dedent(m.group("body"))) for m in _FENCE.finditer(text)]


def test_the_block_reader_finds_fences_at_any_indent_and_skips_other_languages() -> None:
    text = "# T\n\n```python\nx = 1\n```\n\n- item\n\n  ```python\n  y = x + 1\n  ```\n\n```bash\nls\n```\n"
    assert python_blocks(text) == [(4, "x = 1\n"), (10, "y = x + 1\n")]


PAGES = [p for p in pages() if python_blocks(p.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_python_block_of_the_page_runs(page: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # examples write ./runs and friends here, never into the checkout
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(name, "1")
    namespace: dict[str, object] = {"__name__": f"docs_{page.stem.replace('-', '_')}"}
    for line, code in python_blocks(page.read_text(encoding="utf-8")):
        compiled = compile(code, f"{page.relative_to(ROOT)}:{line}", "exec")
        try:
            exec(compiled, namespace)
        except Exception as exc:
            raise AssertionError(f"{page.relative_to(ROOT)}, the block at line {line} failed: {exc!r}") from exc


def test_there_are_examples_to_run() -> None:
    assert len(PAGES) >= 8 and sum(len(python_blocks(p.read_text(encoding="utf-8"))) for p in PAGES) >= 20


def test_the_site_builds_strictly(tmp_path: Path) -> None:
    for module in ("sphinx", "myst_parser", "furo"):
        pytest.importorskip(module, reason="the docs extra is not installed: pip install -e '.[docs]'")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    command = [sys.executable, "-m", "sphinx", "-n", "-W", "--keep-going", "-E", "-q", "-b", "html"]
    proc = subprocess.run(
        [*command, str(DOCS), str(tmp_path / "site")], cwd=tmp_path, env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, f"sphinx-build -n -W failed:\n{proc.stderr[-6000:]}"
    site = tmp_path / "site"
    api = (site / "api" / "envs.html").read_text(encoding="utf-8")
    assert "AgentFlowEnv" in api and "max_action_chars" in api  # classes with their parameters
    training = (site / "training.html").read_text(encoding="utf-8")
    assert "--questions-per-step" in training and "eps_high" in training  # the generated config reference
    from agentflow_env.registration import LATEST_VERSION

    assert f"agentflow/Gen-GameOf24-v{LATEST_VERSION}" in (site / "benchmarks.html").read_text(encoding="utf-8")
