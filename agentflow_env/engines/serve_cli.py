"""``agentflow-env serve ENGINE_SPEC``: an engine behind the OpenAI HTTP API (``server.EngineServer``).

The command sits above the engines' façade (``make_engine``), which names the server only lazily.
"""

from __future__ import annotations

import argparse
import logging
import time
from collections.abc import Sequence

from agentflow_env.engines import make_engine, parse_spec
from agentflow_env.engines.server import EngineServer
from agentflow_env.error import ConfigError

__all__ = ["configure", "main"]


def configure(parser: argparse.ArgumentParser) -> None:
    """Arguments of ``agentflow-env serve`` (and of ``python -m agentflow_env.engines.serve_cli``)."""
    parser.add_argument("engine", help="engine spec, e.g. hf:runs/tiny-lm or scripted:replies.json")
    parser.add_argument("--host", default="127.0.0.1", help="interface to listen on (default: 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8000, help="port (0: any free port; default: 8000)")
    parser.add_argument("--model-name", default=None, help="the model id clients send (default: the spec target)")
    parser.add_argument(
        "--batch-window",
        type=float,
        default=0.005,
        help="seconds to gather concurrent requests into one batch (default: 0.005)",
    )
    parser.add_argument("--max-batch", type=int, default=64, help="most prompts in one engine call (default: 64)")
    parser.add_argument(
        "--max-queue",
        type=int,
        default=256,
        help="most requests waiting or running; more are answered 503 with Retry-After (default: 256)",
    )
    parser.set_defaults(func=_run)


def _run(args: argparse.Namespace) -> int:
    engine = make_engine(args.engine)
    name = args.model_name or parse_spec(args.engine)[1]
    if args.max_batch < 1 or args.max_queue < 1:
        raise ConfigError("--max-batch and --max-queue must be at least 1")
    server = EngineServer(
        engine,
        args.host,
        args.port,
        model_name=name,
        batch_window_s=args.batch_window,
        max_batch=args.max_batch,
        max_queue=args.max_queue,
    )
    server.start()
    from rich.console import Console

    Console(stderr=True).print(f"serving {args.engine} as model {name!r} at {server.url} (Ctrl-C stops)")
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        server.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m agentflow_env.engines.serve_cli ENGINE_SPEC [--host H] [--port P] [--model-name NAME]``."""
    parser = argparse.ArgumentParser(description="Serve an agentflow-env engine over the OpenAI HTTP API.")
    configure(parser)
    logging.basicConfig(level=logging.INFO)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    raise SystemExit(main())
