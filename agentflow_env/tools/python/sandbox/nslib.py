"""Linux primitives for the sandbox (namespaces, mounts, capabilities, seccomp), through ctypes on libc.

Standalone: imports only the standard library, because it also runs inside the sandbox (next to ``zygote.py``)
and in ``rootfs.py`` before the interpreter's view of the filesystem is cut down.
"""

from __future__ import annotations

import ctypes
import errno
import os
import platform
import struct
from typing import Any

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACE_FLAGS = (
    CLONE_NEWNS | CLONE_NEWCGROUP | CLONE_NEWUTS | CLONE_NEWIPC | CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNET
)

MS_RDONLY = 1
MS_NOSUID = 2
MS_NODEV = 4
MS_NOEXEC = 8
MS_REMOUNT = 32
MS_BIND = 4096
MS_REC = 16384
MS_PRIVATE = 1 << 18
MNT_DETACH = 2

PR_SET_PDEATHSIG = 1
PR_SET_DUMPABLE = 4
PR_SET_SECCOMP = 22
PR_CAPBSET_DROP = 24
PR_SET_CHILD_SUBREAPER = 36
PR_SET_NO_NEW_PRIVS = 38
SECCOMP_MODE_FILTER = 2

_LIBC: Any = None


def libc() -> Any:
    global _LIBC
    if _LIBC is None:
        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


def prctl(option: int, arg: int = 0) -> None:
    _check(libc().prctl(option, ctypes.c_ulong(arg), 0, 0, 0), f"prctl({option})")


def unshare(flags: int) -> None:
    _check(libc().unshare(flags), "unshare")


def mount(source: str | None, target: str, fstype: str | None, flags: int, data: str | None = None) -> None:
    enc = [None if v is None else v.encode() for v in (source, target, fstype, data)]
    _check(libc().mount(enc[0], enc[1], enc[2], ctypes.c_ulong(flags), enc[3]), f"mount {target}")


def umount(target: str, flags: int = MNT_DETACH) -> None:
    _check(libc().umount2(target.encode(), flags), f"umount {target}")


_SYSCALLS = {
    # name: (x86_64, aarch64); the generic numbers of aarch64 are shared by most newer architectures
    "pivot_root": (155, 41),
    "capset": (126, 91),
    "clone": (56, 220),
    "unshare": (272, 97),
    "clone3": (435, 435),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "pidfd_getfd": (438, 438),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "setns": (308, 268),
    "mount": (165, 40),
    "umount2": (166, 39),
    "chroot": (161, 51),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "kexec_load": (246, 104),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "name_to_handle_at": (303, 264),
    "open_by_handle_at": (304, 265),
    "memfd_create": (319, 279),  # its pages belong to no process when unmapped: outside the tree's memory cap
    "memfd_secret": (447, 447),  # the same, and its pages are not even counted as the process's own
    "socket": (41, 198),
    "socketpair": (53, 199),
}
# socket()/socketpair() families user code may open; vsock, netlink, packet, bluetooth, ... reach past the
# network namespace (vsock: the VM's host) or the kernel's attack surface
AF_UNIX, AF_INET, AF_INET6 = 1, 2, 10
ALLOWED_SOCKET_FAMILIES = (AF_UNIX, AF_INET, AF_INET6)
_ARCH = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7)}


def _syscall_number(name: str) -> int | None:
    arch = _ARCH.get(platform.machine())
    return None if arch is None else _SYSCALLS[name][arch[0]]


def pivot_root(new_root: str, put_old: str) -> None:
    nr = _syscall_number("pivot_root")
    if nr is None:
        raise OSError(errno.ENOSYS, "pivot_root: unknown architecture")
    _check(libc().syscall(nr, new_root.encode(), put_old.encode()), "pivot_root")


def drop_capabilities() -> None:
    """Empty the effective, permitted and inheritable sets (the bounding set goes first while we may)."""
    for cap in range(64):
        if libc().prctl(PR_CAPBSET_DROP, ctypes.c_ulong(cap), 0, 0, 0) != 0:
            break  # past the last capability (EINVAL), or no CAP_SETPCAP: the empty sets below still hold
    header = struct.pack("=Ii", 0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this thread
    data = ctypes.create_string_buffer(bytes(24))
    _check(libc().capset(ctypes.c_char_p(header), data), "capset")


def write_id_maps(pid: int | str, inside: int, uid: int, gid: int) -> None:
    """Map ``inside`` in a new user namespace to ``uid``/``gid`` outside (one id each, setgroups denied)."""
    base = f"/proc/{pid}"
    try:
        with open(f"{base}/setgroups", "w") as fh:
            fh.write("deny")
    except FileNotFoundError:
        pass
    with open(f"{base}/uid_map", "w") as fh:
        fh.write(f"{inside} {uid} 1")
    with open(f"{base}/gid_map", "w") as fh:
        fh.write(f"{inside} {gid} 1")


# ------------------------------------------------------------------------------------------------- seccomp
_LD_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
_JEQ = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
_JGE = 0x35  # BPF_JMP | BPF_JGE | BPF_K
_JSET = 0x45  # BPF_JMP | BPF_JSET | BPF_K
_RET = 0x06  # BPF_RET | BPF_K
_ALLOW = 0x7FFF0000
_ERRNO = 0x00050000

# Syscalls user code never needs and that reach other processes, the kernel's attack surface or other namespaces.
_FILTERED = ("pivot_root", "capset", "clone", "unshare", "clone3", "socket", "socketpair")
DENIED_SYSCALLS = tuple(n for n in _SYSCALLS if n not in _FILTERED)


def seccomp_program(arch: str | None = None) -> list[tuple[int, int, int, int]] | None:
    """The filter as (code, jt, jf, k) rows; ``None`` on an architecture without a syscall table here.

    Denied with EPERM: ``DENIED_SYSCALLS``, ``clone``/``unshare`` with any namespace flag (no nested user
    namespaces: a tmpfs mounted there would escape the memory cap), and any other ABI (x32, i386).
    ``clone3`` gets ENOSYS so that libc falls back to ``clone``, whose flags can be checked.
    ``socket``/``socketpair`` of a family outside ``ALLOWED_SOCKET_FAMILIES`` get EAFNOSUPPORT.
    """
    spec = _ARCH.get(arch or platform.machine())
    if spec is None:
        return None
    col, audit = spec
    rows: list[tuple[Any, ...]] = [
        (_LD_ABS, 0, 0, 4),
        (_JEQ, "next", "deny", audit),
        (_LD_ABS, 0, 0, 0),
        (_JGE, "deny", "next", 0x40000000),  # x32 syscalls on x86_64
        (_JEQ, "flags", "next", _SYSCALLS["clone"][col]),
        (_JEQ, "flags", "next", _SYSCALLS["unshare"][col]),
        (_JEQ, "enosys", "next", _SYSCALLS["clone3"][col]),
        (_JEQ, "family", "next", _SYSCALLS["socket"][col]),
        (_JEQ, "family", "next", _SYSCALLS["socketpair"][col]),
    ]
    rows += [(_JEQ, "deny", "next", _SYSCALLS[name][col]) for name in DENIED_SYSCALLS]
    rows += [
        (_RET, 0, 0, _ALLOW),
        ("flags", _LD_ABS, 0, 0, 16),  # args[0], low 32 bits (little-endian)
        (_JSET, "deny", "next", NAMESPACE_FLAGS),
        (_RET, 0, 0, _ALLOW),
        ("family", _LD_ABS, 0, 0, 16),  # args[0]: the address family (an int: the high half is ignored)
        *[(_JEQ, "allow", "next", family) for family in ALLOWED_SOCKET_FAMILIES],
        (_RET, 0, 0, _ERRNO | errno.EAFNOSUPPORT),
        ("allow", _RET, 0, 0, _ALLOW),
        ("deny", _RET, 0, 0, _ERRNO | errno.EPERM),
        ("enosys", _RET, 0, 0, _ERRNO | errno.ENOSYS),
    ]
    labels: dict[str, int] = {}
    plain: list[tuple[Any, ...]] = []
    for row in rows:
        if isinstance(row[0], str):
            labels[row[0]] = len(plain)
            row = row[1:]
        plain.append(row)
    program = []
    for pc, (code, jt, jf, k) in enumerate(plain):

        def rel(target: Any, pc: int = pc) -> int:
            if target in (0, "next"):
                return 0
            offset = labels[target] - pc - 1
            assert 0 <= offset < 256
            return offset

        program.append((code, rel(jt), rel(jf), k))
    return program


def install_seccomp() -> bool:
    """Install the filter on this thread and its future children (needs no_new_privs first); False if unsupported."""
    program = seccomp_program()
    if program is None:
        return False
    raw = b"".join(struct.pack("=HBBI", *row) for row in program)
    buf = ctypes.create_string_buffer(raw, len(raw))

    class SockFprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]

    prog = SockFprog(len(program), ctypes.addressof(buf))
    _check(
        libc().prctl(PR_SET_SECCOMP, ctypes.c_ulong(SECCOMP_MODE_FILTER), ctypes.byref(prog), 0, 0),
        "seccomp",
    )
    return True
