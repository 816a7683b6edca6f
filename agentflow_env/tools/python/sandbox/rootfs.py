"""Bubblewrap's job without bubblewrap: new namespaces and a read-only minimal root, then exec a command in it.

Run as ``python -I -S rootfs.py MOUNTPOINT VIEW_JSON -- COMMAND...``. It unshares mount, pid, network, IPC and
UTS namespaces (plus a user namespace when not root), becomes pid 1 of the new pid namespace, builds the view
(``view.build_view``) on a tmpfs at MOUNTPOINT (an empty directory; nothing is mounted on the host), pivots into
it, makes the root read-only and execs COMMAND. Standard library only: it runs before the view exists.
"""

from __future__ import annotations

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import nslib

_DEV_NODES = ("null", "zero", "full", "random", "urandom", "tty")
_KEEP_FLAGS = nslib.MS_NOSUID | nslib.MS_NODEV | nslib.MS_NOEXEC


def _bind_ro(src: str, dst: str) -> None:
    if os.path.isdir(src):
        os.makedirs(dst, exist_ok=True)
    else:
        os.makedirs(os.path.dirname(dst), exist_ok=True)
        if not os.path.exists(dst):
            open(dst, "w").close()
    nslib.mount(src, dst, None, nslib.MS_BIND | nslib.MS_REC)
    locked = os.statvfs(src).f_flag & _KEEP_FLAGS  # flags a user namespace may not clear
    nslib.mount(None, dst, None, nslib.MS_REMOUNT | nslib.MS_BIND | nslib.MS_RDONLY | nslib.MS_NOSUID | locked)


def _dev(dst: str) -> None:
    nslib.mount("tmpfs", dst, "tmpfs", nslib.MS_NOSUID | nslib.MS_NOEXEC, "mode=0755,size=65536")
    for name in _DEV_NODES:
        host = f"/dev/{name}"
        if os.path.exists(host):
            open(f"{dst}/{name}", "w").close()
            nslib.mount(host, f"{dst}/{name}", None, nslib.MS_BIND)
    for name, target in (("fd", "/proc/self/fd"), ("stdin", "/proc/self/fd/0"), ("stdout", "/proc/self/fd/1")):
        os.symlink(target, f"{dst}/{name}")
    os.symlink("/proc/self/fd/2", f"{dst}/stderr")
    os.mkdir(f"{dst}/shm", 0o755)


def _proc(dst: str) -> None:
    os.makedirs(dst, exist_ok=True)
    try:
        nslib.mount("proc", dst, "proc", nslib.MS_NOSUID | nslib.MS_NODEV | nslib.MS_NOEXEC)
    except OSError:  # a partly hidden host /proc (containers) forbids a fresh one in a user namespace
        nslib.mount("tmpfs", dst, "tmpfs", nslib.MS_NOSUID | nslib.MS_NODEV, "mode=0555,size=4096")


def build(root: str, steps: list[dict]) -> None:
    nslib.mount("tmpfs", root, "tmpfs", nslib.MS_NOSUID | nslib.MS_NODEV, "mode=0755,size=1048576")
    for s in steps:
        op, dst = s["op"], root + s["dst"]
        if op == "ro":
            _bind_ro(s["src"], dst)
        elif op == "symlink":
            os.symlink(s["target"], dst)
        elif op == "dir":
            os.makedirs(dst, mode=0o755, exist_ok=True)
            os.chmod(dst, 0o755)
        elif op == "tmpfs":
            os.makedirs(dst, exist_ok=True)
            nslib.mount("tmpfs", dst, "tmpfs", nslib.MS_NOSUID | nslib.MS_NODEV, f"mode=0755,size={int(s['size'])}")
        elif op == "dev":
            os.makedirs(dst, exist_ok=True)
            _dev(dst)
        elif op == "proc":
            _proc(dst)
        elif op != "remount_ro":
            raise ValueError(f"unknown view step {op!r}")
    os.chdir(root)
    os.mkdir(".old-root")
    nslib.pivot_root(".", ".old-root")
    os.chdir("/")
    nslib.umount("/.old-root")
    os.rmdir("/.old-root")
    if any(s["op"] == "remount_ro" and s["dst"] == "/" for s in steps):
        flags = nslib.MS_REMOUNT | nslib.MS_BIND | nslib.MS_RDONLY | nslib.MS_NOSUID | nslib.MS_NODEV
        nslib.mount(None, "/", None, flags)


def main(argv: list[str]) -> int:
    root, steps = argv[1], json.loads(argv[2])
    command = argv[argv.index("--") + 1 :]
    uid, gid = os.getuid(), os.getgid()
    flags = nslib.CLONE_NEWNS | nslib.CLONE_NEWPID | nslib.CLONE_NEWNET | nslib.CLONE_NEWIPC | nslib.CLONE_NEWUTS
    if uid != 0:
        flags |= nslib.CLONE_NEWUSER
    nslib.unshare(flags)
    if uid != 0:
        nslib.write_id_maps("self", uid, uid, gid)
    pid = os.fork()
    if pid:  # outside the new pid namespace: wait for its pid 1 and pass its status on
        _, status = os.waitpid(pid, 0)
        return os.waitstatus_to_exitcode(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
    try:
        nslib.prctl(nslib.PR_SET_PDEATHSIG, 9)
        nslib.mount(None, "/", None, nslib.MS_REC | nslib.MS_PRIVATE)
        build(root, steps)
        os.execv(command[0], command)
    except BaseException as exc:
        sys.stderr.write(f"rootfs: {type(exc).__name__}: {exc}\n")
        os._exit(71)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
