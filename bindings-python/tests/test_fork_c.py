"""Forks made from C, which skip `os.register_at_fork` (uWSGI prefork without
py-call-osafterfork, C extensions, ctypes), and copies made by the raw `clone` system call,
which skip `pthread_atfork` too: the native module notices them by itself (a wipe-on-fork page
and a `pthread_atfork` child handler in the lease crate), so a static generator refuses in the
child and a leased one leases the child's own worker id.

The child is made with `ctypes.PyDLL(None).fork()`: libc's `fork()` called directly, so none of
Python's at-fork work runs (no `os.register_at_fork` hooks, no interpreter reinitialisation).
`PyDLL` rather than `CDLL` only keeps the GIL held across the call, so the child, whose one
thread is the forking one, owns it. The child does little (no threads of its own, no pytest),
sends what it saw through a pipe and leaves with `os._exit`.
"""

from __future__ import annotations

import ctypes
import json
import os
import platform
import signal
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from clockflake import Generator, WorkerIdInvalidatedError, decode
from helpers import REFUSED_IN_CHILD, refusals

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")

# Ids each side tries to issue while the other one runs.
CHILD_IDS = 50_000
PARENT_IDS = 100_000


def c_fork() -> int:
    """libc's fork(), bypassing os.fork() and every os.register_at_fork hook."""
    libc = ctypes.PyDLL(None)
    libc.fork.restype = ctypes.c_int
    libc.fork.argtypes = []
    pid: int = libc.fork()
    if pid < 0:
        raise OSError(ctypes.get_errno(), "fork() failed")
    return pid


def raw_clone() -> int:
    """The clone system call with SIGCHLD only: a copy of the process that runs no at-fork
    handler at all, Python's or libc's (only the kernel's wipe-on-fork page tells it)."""
    number = {"x86_64": 56, "aarch64": 220}[platform.machine()]
    libc = ctypes.PyDLL(None)
    libc.syscall.restype = ctypes.c_long
    zero = ctypes.c_long(0)
    pid: int = libc.syscall(
        ctypes.c_long(number), ctypes.c_long(signal.SIGCHLD), zero, zero, zero, zero
    )
    if pid < 0:
        raise OSError(ctypes.get_errno(), "clone() failed")
    return pid


COPIES = pytest.mark.parametrize("copy", [c_fork, raw_clone], ids=["fork-from-c", "raw-clone"])


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def run_child(
    work: Callable[[], tuple[dict[str, Any], array[int]]],
    parent_next: Callable[[], int],
    copy: Callable[[], int],
) -> tuple[dict[str, Any], array[int], list[int]]:
    """Copies the process with `copy`. The child runs `work` (a report and the ids it issued) and sends both
    through a pipe; the parent issues PARENT_IDS ids with `parent_next` meanwhile, then reads.
    Returns (child's report, child's ids, parent's ids)."""
    read_end, write_end = os.pipe()
    pid = copy()
    if pid == 0:  # the child: never return into pytest
        status = 1
        try:
            os.close(read_end)
            try:
                report, ids = work()
            except Exception as error:
                report, ids = {"raised": f"{type(error).__name__}: {error}"}, array("q")
            write_all(write_end, json.dumps(report).encode() + b"\n" + ids.tobytes())
            status = 0
        finally:
            os._exit(status)
    os.close(write_end)
    parent_ids = [parent_next() for _ in range(PARENT_IDS)]
    chunks = []
    with os.fdopen(read_end, "rb") as pipe:
        while chunk := pipe.read(1 << 20):
            chunks.append(chunk)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status:#x}"
    header, _, raw = b"".join(chunks).partition(b"\n")
    child_ids = array("q")
    child_ids.frombytes(raw)
    return json.loads(header), child_ids, parent_ids


def issue(next_id: Callable[[], int], report: dict[str, Any], key: str) -> array[int]:
    """Up to CHILD_IDS ids from `next_id`, stopping at the first refusal (noted in the report)."""
    ids = array("q")
    report[key] = None
    try:
        for _ in range(CHILD_IDS):
            ids.append(next_id())
    except WorkerIdInvalidatedError as error:
        report[key] = [error.code, isinstance(error, RuntimeError)]
    except Exception as error:
        report[key] = [type(error).__name__, str(error)]
    return ids


@COPIES
def test_a_static_generator_refuses_in_a_child_forked_from_c(copy: Callable[[], int]) -> None:
    gen = Generator(worker_id=1)
    before = gen.next_ids(1000)

    def child() -> tuple[dict[str, Any], array[int]]:
        report: dict[str, Any] = {}
        ids = issue(gen.next_id, report, "next_id")
        report |= refusals(
            {
                "next_ids": lambda: gen.next_ids(3),
                "next_id_at": lambda: gen.next_id_at(1_800_000_000_000),
                "state": gen.state,
            }
        )
        # A generator made in the child belongs to the child.
        report["fresh"] = decode(Generator(worker_id=2).next_id()).worker_id
        return report, ids

    report, child_ids, parent_ids = run_child(child, gen.next_id, copy)
    every = before + parent_ids + list(child_ids)
    duplicates = len(every) - len(set(every))
    assert (len(child_ids), duplicates) == (0, 0), (
        f"the child issued {len(child_ids)} ids under the parent's worker id, {duplicates} of them the parent's too"
    )
    assert report == REFUSED_IN_CHILD
    assert gen.next_id() > parent_ids[-1]  # the parent goes on


@COPIES
def test_a_leased_generator_leases_the_childs_own_worker_id_after_a_fork_from_c(
    tmp_path: Path, copy: Callable[[], int]
) -> None:
    gen = Generator.open(f"file://{tmp_path}?app=x")
    assert gen.worker_id == 0
    before = gen.next_ids(1000)

    def child() -> tuple[dict[str, Any], array[int]]:
        report: dict[str, Any] = {}
        ids = issue(gen.next_id, report, "next_id")
        batch = gen.next_ids(1000)  # the block path too
        ids.extend(batch)
        report["worker_id"] = gen.worker_id
        report["workers"] = sorted({decode(id).worker_id for id in ids})
        return report, ids

    report, child_ids, parent_ids = run_child(child, gen.next_id, copy)
    every = before + parent_ids + list(child_ids)
    duplicates = len(every) - len(set(every))
    assert duplicates == 0, f"{duplicates} duplicates; the child's report: {report}"
    assert report.get("next_id", "missing") is None, report
    assert len(child_ids) == CHILD_IDS + 1000
    assert report["worker_id"] != 0 and report["workers"] == [report["worker_id"]], report
    # The parent kept its own worker id and goes on under it.
    assert gen.worker_id == 0 and {decode(id).worker_id for id in parent_ids} == {0}
    assert gen.next_id() > parent_ids[-1]
    gen.close()


def test_restored_invalidates_the_generators_made_before_it(tmp_path: Path) -> None:
    """After a snapshot restore (which no page or handler sees) `clockflake.restored()`: a
    static generator made before refuses, a leased one leases a worker id of its own."""
    import clockflake

    gen = Generator(worker_id=1)
    leased = Generator.open(f"file://{tmp_path}?app=restored")
    gen.next_id()
    before = leased.next_id()
    clockflake.restored()
    with pytest.raises(WorkerIdInvalidatedError):
        gen.next_id()
    after = leased.next_id()
    assert decode(after).worker_id != decode(before).worker_id
    assert Generator(worker_id=1).next_id() > 0  # a generator made after belongs here
    leased.close()
