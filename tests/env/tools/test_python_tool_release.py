"""A Python tool nobody closed is released by the garbage collector without deadlocking whatever thread the
collector happens to run in, and its workers go."""

from __future__ import annotations

import gc
import sys
import threading
import time

import pytest

from agentflow_env.tools.python.tool import PythonCoderTool

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the Python sandbox needs Linux")


def _workers(zygote) -> int:
    reply, _ = zygote.request({"op": "ping"})
    return int(reply["workers"])


def test_a_collected_tool_is_released_even_when_collected_inside_a_zygote_request():
    keep = PythonCoderTool()  # holds the shared zygote
    keep.reset()
    assert keep.run("6 * 7", 30).text == "42"
    victim = PythonCoderTool()
    victim.reset()
    assert victim.run("6 * 7", 30).text == "42"
    zygote = keep._zygote()
    before = _workers(zygote)
    victim.cycle = victim  # only the cyclic collector frees it, at whatever allocation triggers it
    del victim
    done = threading.Event()

    def collect_mid_request() -> None:
        with zygote.lock:  # what any thread holds while a spawn or kill request is in flight
            gc.collect()  # runs the dead tool's finalizer right here
        done.set()

    threading.Thread(target=collect_mid_request, daemon=True).start()
    try:
        assert done.wait(30), "the finalizer blocked on the zygote's channel lock its own thread holds"
        deadline = time.monotonic() + 60
        while _workers(zygote) >= before and time.monotonic() < deadline:
            time.sleep(0.05)
        assert _workers(zygote) < before, "the collected tool's workers were not killed"
        assert keep.run("6 * 7", 30).text == "42"
    finally:
        if done.is_set():  # else the zygote's lock is held for good: closing would wait on it too
            keep.close()
