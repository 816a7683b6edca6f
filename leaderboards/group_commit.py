"""Group commit for a run's result files: lines are buffered and reach disk together, one fsync per file per batch.

An eval appends a trajectory line, then the outcome line that points at it, per finished episode. Writing and
fsyncing each line costs more than the rest of the bookkeeping; :class:`GroupCommit` buffers the lines of its
appenders and commits them when ``max_records`` are waiting or ``interval_s`` has passed since the first one,
whichever comes first: each file's buffered lines in one write, then one fsync, the files in the order their
appenders were made (trajectories before the outcome lines that point into them, so no outcome is ever on disk
without its trajectory, whatever the crash).

A line is *acknowledged* once a commit holding it has returned (:meth:`GroupCommit.commit`, or the
background committer). A crash (SIGKILL, power loss) loses at most the lines not yet acknowledged: whole
episodes whose outcome line is not on disk, which a resumed run plays again, so every unit is still stored
exactly once. A failed write (disk full) is raised by the next ``append`` or by ``close``.
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from leaderboards.store import JsonlAppender

__all__ = ["GroupAppender", "GroupCommit"]


class GroupAppender(JsonlAppender):
    """A :class:`~leaderboards.store.JsonlAppender` whose lines wait in memory for their group's next commit."""

    def __init__(self, path: Path, group: GroupCommit):
        super().__init__(path)
        self.group = group
        self._end = os.lseek(self._fd, 0, os.SEEK_END)  # the file's size once every buffered line is written
        self._pending: list[bytes] = []

    def append(self, record: dict[str, Any]) -> tuple[int, int]:
        """Buffer one record; returns the ``(byte offset, byte length)`` it will have in the file."""
        line = (json.dumps(record, ensure_ascii=False, sort_keys=True, default=str) + "\n").encode("utf-8")
        return self.group._add(self, line)

    def _write_pending(self, lines: list[bytes]) -> None:
        view = memoryview(b"".join(lines))
        while view:  # a regular file takes it in one write; loop in case a signal splits it
            view = view[os.write(self._fd, view) :]
        os.fsync(self._fd)

    def close(self) -> None:
        self.group.close()
        super().close()


class GroupCommit:
    """Commits its appenders' buffered lines every ``max_records`` lines or ``interval_s`` seconds.

    Use as a context manager; leaving it commits what is left (and raises a failed write)::

        with GroupCommit() as group:
            traj, tasks = group.appender(run_dir / TRAJECTORIES_FILE), group.appender(run_dir / TASKS_FILE)
            ...
    """

    def __init__(self, interval_s: float = 0.1, max_records: int = 64):
        if interval_s <= 0 or max_records < 1:
            raise ValueError("interval_s must be > 0 and max_records >= 1")
        self.interval_s, self.max_records = float(interval_s), int(max_records)
        self.appenders: list[GroupAppender] = []
        self.commits = 0  # batches committed (for tests and perf)
        self._cond = threading.Condition()
        self._commit_lock = threading.Lock()  # one commit at a time, in order
        self._waiting = 0
        self._first = 0.0  # when the oldest waiting line came
        self._error: BaseException | None = None
        self._closed = False
        self._thread = threading.Thread(target=self._committer, name="group-commit", daemon=True)
        self._thread.start()

    def appender(self, path: Path) -> GroupAppender:
        """An appender of this group (commits write the files in the order their appenders were made)."""
        app = GroupAppender(path, self)
        with self._cond:
            self.appenders.append(app)
        return app

    def _add(self, app: GroupAppender, line: bytes) -> tuple[int, int]:
        with self._cond:
            self._raise_failure()
            if self._closed:
                raise RuntimeError(f"{app.path}: the group commit is closed")
            offset = app._end
            app._end += len(line)
            app._pending.append(line)
            if not self._waiting:
                self._first = time.monotonic()
            self._waiting += 1
            if self._waiting >= self.max_records or self._waiting == 1:
                self._cond.notify_all()
        return offset, len(line)

    def _raise_failure(self) -> None:
        if self._error is not None:
            raise OSError(f"writing the run's result files failed: {self._error}") from self._error

    def commit(self) -> None:
        """Write and fsync every line appended so far; when it returns they are acknowledged (durable)."""
        with self._commit_lock:
            with self._cond:
                batches = [(app, app._pending) for app in self.appenders if app._pending]
                for app, _ in batches:
                    app._pending = []
                self._waiting = 0
            try:
                for app, lines in batches:
                    app._write_pending(lines)
            except BaseException as exc:
                with self._cond:
                    self._error = self._error or exc
                raise
            if batches:
                self.commits += 1

    def _committer(self) -> None:
        while True:
            with self._cond:
                while not self._closed:
                    if self._waiting >= self.max_records:
                        break
                    if self._waiting:
                        left = self._first + self.interval_s - time.monotonic()
                        if left <= 0:
                            break
                        self._cond.wait(left)
                    else:
                        self._cond.wait()
                if self._closed:
                    return
            try:
                self.commit()
            except BaseException:  # kept in _error: the next append or close raises it
                return

    def close(self) -> None:
        """Commit what is left and stop the committer (idempotent); raises a failed write."""
        with self._cond:
            if self._closed:
                self._raise_failure()
                return
            self._closed = True
            self._cond.notify_all()
        self._thread.join(timeout=30)
        if self._error is None:
            self.commit()
        self._raise_failure()

    def __enter__(self) -> GroupCommit:
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            self.close()
        finally:
            for app in self.appenders:
                JsonlAppender.close(app)
