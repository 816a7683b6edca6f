"""Sphinx configuration of the agentflow-env documentation (MyST Markdown pages, furo, autodoc).

Build it strictly, as CI does (``tests/test_docs.py``): ``sphinx-build -n -W docs OUT``. Nothing here reaches the
network: autodoc imports the packages from this checkout, and the two generated parts (the benchmark table and
the training config reference) come from ``docs/_ext/agentflow_docs.py``.
"""

from __future__ import annotations

import sys
from pathlib import Path

DOCS = Path(__file__).resolve().parent
ROOT = DOCS.parent
sys.path[:0] = [str(ROOT), str(DOCS / "_ext")]

project = "agentflow-env"
author = "agentflow-env developers"
copyright = "agentflow-env developers"
release = version = "0.1.0"

extensions = ["myst_parser", "sphinx.ext.autodoc", "agentflow_docs"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "OUT", "Thumbs.db", ".DS_Store"]
myst_heading_anchors = 3  # [text](page.md#a-heading) links
myst_enable_extensions = ["colon_fence"]

html_theme = "furo"
html_title = "agentflow-env"
html_static_path: list[str] = []

# autodoc: the public surface only (docs/api/*.md name every object); parameters in the signature
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_class_signature = "mixed"
autodoc_default_options = {"undoc-members": False, "show-inheritance": False}
autodoc_preserve_defaults = True

# strict: a stale cross-reference inside the project fails the build. Names from other packages (the standard
# library, typing, numpy, gymnasium, torch, ...) have no inventory offline, so only they are let through.
nitpicky = True
_OURS = r"(agentflow_env|agents|benchmarks|leaderboards)\."
nitpick_ignore_regex = [
    (r"py:(class|obj|data|exc|func|meth|attr|mod)", rf"(?!{_OURS}).*"),
    # private helpers and internal types that public signatures name; the reference documents their users
    (r"py:class", rf"{_OURS}.*\._\w+"),  # a private name (a TypeVar, a base class, a store)
    (r"py:class", r"agentflow_env\.engines\.scripted\.Delayed"),
    (r"py:class", r"agentflow_env\.paper_flow\.(templates\.PromptSource|toolbox\.PaperTool)"),
]
autodoc_inherit_docstrings = False  # gymnasium's own step/reset docstrings are not ours to render
