"""``agentflow-env tiny-lm [--print-path | --build]``: where the tiny offline LM lives, and building it.

The tiny LM (a byte-level BPE tokenizer and a random ~0.2M-parameter Llama, built in seconds from the
generated families' text) is what ``hf:tiny`` names in policy and engine specs: ``serve hf:tiny``,
``eval --policy hf:tiny``, ``engine:hf:tiny``. It is cached under ``$AGENTFLOW_CACHE`` or
``~/.cache/agentflow_env``, one folder per recipe.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

__all__ = ["configure"]


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "The tiny offline LM that hf:tiny names (serve hf:tiny, eval --policy hf:tiny). Without options: "
        "print its folder and whether it is built."
    )
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--print-path", action="store_true", help="print only the folder (built or not) and exit")
    what.add_argument("--build", action="store_true", help="build it when it is not cached yet, then print the folder")
    parser.add_argument(
        "--cache-dir", default=None, help="cache folder (default: $AGENTFLOW_CACHE or ~/.cache/agentflow_env)"
    )
    parser.add_argument("--vllm", action="store_true", help="the variant whose head shape vLLM accepts (vllm:tiny)")
    parser.add_argument("--json", action="store_true", help="print a JSON summary")
    parser.set_defaults(func=_run)


def _is_built(path: Any) -> bool:
    return bool((path / "config.json").is_file() and (path / "tokenizer.json").is_file())


def _run(args: argparse.Namespace) -> int:
    from agents.tiny_lm import VLLM_MODEL_KWARGS, tiny_lm_cache_path, tiny_lm_path

    kwargs = dict(VLLM_MODEL_KWARGS) if args.vllm else {}
    path = tiny_lm_cache_path(args.cache_dir, **kwargs)
    if args.print_path:
        sys.stdout.write(f"{path}\n")
        return 0
    if args.build and not _is_built(path):
        from rich.console import Console

        with Console(stderr=True).status("building the tiny LM (tokenizer and model, a few seconds)"):
            path = tiny_lm_path(args.cache_dir, **kwargs)
    built = _is_built(path)
    spec = "vllm:tiny" if args.vllm else "hf:tiny"
    summary = {"path": str(path), "built": built, "spec": spec}
    if built:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        summary.update(vocab_size=config.get("vocab_size"), hidden_size=config.get("hidden_size"))
    if args.json:
        sys.stdout.write(json.dumps(summary, indent=2) + "\n")
    elif args.build:
        sys.stdout.write(f"{path}\n")
    else:
        state = "built" if built else "not built yet: agentflow-env tiny-lm --build (or any use of hf:tiny builds it)"
        sys.stdout.write(
            f"{path}\n  {state}\n  use it as {spec}: agentflow-env serve {spec} --port 8000; "
            f"agentflow-env eval --policy {spec}\n"
        )
    return 0
