"""A small driver for headless Chromium over the DevTools protocol on a pipe (``--remote-debugging-pipe``).

Tests use it to open pages from ``file://``, click like a user (real mouse events at an element's centre),
read the DOM and take screenshots; no server, no network, no Python dependency beyond the standard library.
Commands go to the browser's fd 3 and replies come from its fd 4, one JSON message per NUL byte.
"""

from __future__ import annotations

import base64
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

__all__ = ["Chromium", "chromium_path"]


def chromium_path() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


class Chromium:
    """One headless browser with one tab. Every wait is bounded by ``timeout`` seconds."""

    def __init__(self, width: int = 1280, height: int = 900, timeout: float = 30.0):
        exe = chromium_path()
        if exe is None:
            raise RuntimeError("chromium is not installed")
        self.timeout = timeout
        self.events: list[dict[str, Any]] = []
        self._next_id = 0
        self._buf = b""
        self._profile = tempfile.mkdtemp(prefix="chromium-profile-")
        to_browser_r, self._to_browser = os.pipe()
        self._from_browser, from_browser_w = os.pipe()

        def wire() -> None:  # in the child: our pipes become its fds 3 (commands) and 4 (replies), nothing else
            a, b = os.dup(to_browser_r), os.dup(from_browser_w)  # copies first: either may sit at 3 or 4
            os.dup2(a, 3)
            os.dup2(b, 4)
            os.closerange(5, 65536)

        self.proc = subprocess.Popen(
            [
                exe,
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-dev-shm-usage",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
                "--no-default-browser-check",
                "--hide-scrollbars",
                f"--user-data-dir={self._profile}",
                f"--window-size={width},{height}",
                "--remote-debugging-pipe",
                "about:blank",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            preexec_fn=wire,  # the tests start no threads before this
            close_fds=False,  # wire() closes the rest
        )
        os.close(to_browser_r)
        os.close(from_browser_w)
        try:
            targets = self.send("Target.getTargets")["targetInfos"]
            page = next(t for t in targets if t["type"] == "page")
            self.session = self.send("Target.attachToTarget", {"targetId": page["targetId"], "flatten": True})[
                "sessionId"
            ]
            self.send("Page.enable", session=True)
            self.send("Runtime.enable", session=True)
            self.send(
                "Emulation.setDeviceMetricsOverride",
                {"width": width, "height": height, "deviceScaleFactor": 1, "mobile": False},
                session=True,
            )
        except BaseException:
            self.close()
            raise

    # ------------------------------------------------------------------ protocol
    def _read_message(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError("chromium did not answer in time")
            ready, _, _ = select.select([self._from_browser], [], [], left)
            if ready:
                chunk = os.read(self._from_browser, 1 << 20)
                if not chunk:
                    raise RuntimeError("chromium closed its pipe (it crashed or exited)")
                self._buf += chunk
        raw, _, self._buf = self._buf.partition(b"\0")
        return json.loads(raw)

    def send(self, method: str, params: dict[str, Any] | None = None, session: bool = False) -> dict[str, Any]:
        self._next_id += 1
        msg: dict[str, Any] = {"id": self._next_id, "method": method, "params": params or {}}
        if session:
            msg["sessionId"] = self.session
        data = json.dumps(msg).encode("utf-8") + b"\0"
        while data:
            data = data[os.write(self._to_browser, data) :]
        deadline = time.monotonic() + self.timeout
        while True:
            reply = self._read_message(deadline)
            if reply.get("id") == self._next_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            if "method" in reply:
                self.events.append(reply)

    def _wait_event(self, method: str, since: int) -> None:
        deadline = time.monotonic() + self.timeout
        while not any(e.get("method") == method for e in self.events[since:]):
            self.events.append(self._read_message(deadline))

    # ------------------------------------------------------------------ page
    def open(self, url: str) -> None:
        mark = len(self.events)
        self.send("Page.navigate", {"url": url}, session=True)
        self._wait_event("Page.loadEventFired", mark)

    def evaluate(self, expression: str) -> Any:
        out = self.send(
            "Runtime.evaluate", {"expression": expression, "returnByValue": True, "awaitPromise": True}, session=True
        )
        if "exceptionDetails" in out:
            raise RuntimeError(f"{expression!r} threw: {out['exceptionDetails']}")
        return out.get("result", {}).get("value")

    def wait_for(self, expression: str) -> Any:
        """Poll ``expression`` until it is truthy (pages that are navigating are retried)."""
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                value = self.evaluate(expression)
            except RuntimeError:  # the context went away mid-navigation
                value = None
            if value or isinstance(value, dict | list):  # JavaScript's truth: any object (an element too) is true
                return value
            if time.monotonic() > deadline:
                raise TimeoutError(f"waited {self.timeout} s for {expression!r}")
            time.sleep(0.05)

    def click(self, selector: str) -> None:
        """A real left click at the centre of the first element matching ``selector`` (scrolled into view)."""
        find = (
            "(function(){var e=document.querySelector(SEL);if(!e)return null;e.scrollIntoView({block:'center'});"
            "var r=e.getBoundingClientRect();return r.width&&r.height?[r.left+r.width/2,r.top+r.height/2]:null})()"
        )
        box = self.wait_for(find.replace("SEL", json.dumps(selector)))
        # a frame drawn after the scroll: a page that has just loaded takes input only once it has painted
        self.evaluate("new Promise(function(r){requestAnimationFrame(function(){requestAnimationFrame(r)})})")
        x, y = box
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            params = {"type": kind, "x": x, "y": y, "button": "left", "clickCount": 1}
            if kind == "mouseMoved":
                params = {"type": kind, "x": x, "y": y}
            self.send("Input.dispatchMouseEvent", params, session=True)

    def screenshot(self, path: Path, full_page: bool = False) -> Path:
        params: dict[str, Any] = {"format": "png"}
        if full_page:
            params["captureBeyondViewport"] = True
        data = self.send("Page.captureScreenshot", params, session=True)["data"]
        Path(path).write_bytes(base64.b64decode(data))
        return Path(path)

    # ------------------------------------------------------------------ lifetime
    def close(self) -> None:
        try:
            if self.proc.poll() is None:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait(timeout=10)
        finally:
            for fd in (self._to_browser, self._from_browser):
                try:
                    os.close(fd)
                except OSError:
                    pass
            shutil.rmtree(self._profile, ignore_errors=True)

    def __enter__(self) -> Chromium:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
