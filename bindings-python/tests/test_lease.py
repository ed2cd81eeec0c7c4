"""Leased generators (`Generator.open`) against a real coordinator: file:// in a temp directory
(and PostgreSQL when CLOCKFLAKE_PG_URL names one). Processes, forks and threads included."""

from __future__ import annotations

import copy
import fcntl
import json
import logging
import multiprocessing
import os
import pickle
import sys
import threading
import time
from array import array
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path
from typing import Any

import clockflake
import pytest
from clockflake import (
    ClockflakeError,
    ClockSkewError,
    CoordinatorUnavailableError,
    Generator,
    GeneratorClosedError,
    InvalidStateError,
    InvalidUriError,
    UnknownLayoutError,
    WorkerPoolExhaustedError,
    _clockflake,
    _errors,
    decode,
)

sys.path.insert(0, str(Path(__file__).parent))
import lease_children
from helpers import in_threads, layout_spec, refused

# A layout with 4 worker ids, to exhaust the pool quickly.
FOUR_WORKERS = layout_spec(1_704_067_200_000, timestamp=41, worker=2, sequence=12)


def uri(directory: Path, app: str = "orders") -> str:
    return f"file://{directory}?app={app}"


def lock_is_held(path: Path) -> bool:
    """Whether another open file description holds an flock on `path` (as the lease does)."""
    with open(path, "rb") as file:
        try:
            fcntl.flock(file, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(file, fcntl.LOCK_UN)
        return False


# --- open, close, reuse ---------------------------------------------------------------------


def test_open_leases_distinct_worker_ids_and_close_releases_them(tmp_path: Path) -> None:
    first = Generator.open(uri(tmp_path))
    second = Generator.open(uri(tmp_path))
    assert (first.worker_id, second.worker_id) == (0, 1)
    a = [first.next_id() for _ in range(10_000)]
    b = second.next_ids(10_000)
    assert {decode(id).worker_id for id in a} == {0} and {decode(id).worker_id for id in b} == {1}
    assert all(x < y for x, y in pairwise(a)) and len(set(a + b)) == 20_000
    assert lock_is_held(tmp_path / "orders" / "worker-0.lock")
    first.close()
    first.close()  # idempotent
    assert not lock_is_held(tmp_path / "orders" / "worker-0.lock")
    # The state record was stored: whoever takes worker id 0 next continues above it.
    stored = (tmp_path / "orders" / "worker-0.state").read_text()
    assert "worker_id 0\n" in stored
    again = Generator.open(uri(tmp_path))
    assert again.worker_id == 0
    c = [again.next_id() for _ in range(10_000)]
    assert not set(c) & set(a)
    assert min(c) > max(a)
    again.close()
    second.close()


def test_context_manager_closes_and_releases(tmp_path: Path) -> None:
    with Generator.open(uri(tmp_path)) as gen:
        assert isinstance(gen, Generator)
        assert gen.worker_id == 0 and gen.next_id() > 0
        assert lock_is_held(tmp_path / "orders" / "worker-0.lock")
    assert not lock_is_held(tmp_path / "orders" / "worker-0.lock")
    with pytest.raises(GeneratorClosedError):
        gen.next_id()
    # An exception in the block is not swallowed, and the lease is released all the same.
    with pytest.raises(KeyError), Generator.open(uri(tmp_path)) as failing:
        assert failing.worker_id == 0
        raise KeyError("boom")
    assert not lock_is_held(tmp_path / "orders" / "worker-0.lock")


def test_every_call_after_close_raises_generator_closed(tmp_path: Path) -> None:
    gen = Generator.open(uri(tmp_path))
    gen.next_id()
    gen.close()
    for call in (gen.next_id, lambda: gen.next_ids(3), lambda: gen.next_id_at(1_795_000_000_000)):
        with pytest.raises(GeneratorClosedError) as caught:
            call()
        error = caught.value
        assert error.code == "GENERATOR_CLOSED"
        assert isinstance(error, ClockflakeError) and isinstance(error, RuntimeError)
        assert not isinstance(error, ValueError)
        assert "close()" in str(error)


def test_a_static_generator_closes_too() -> None:
    with Generator(worker_id=3) as gen:
        gen.next_id()
    with pytest.raises(GeneratorClosedError):
        gen.next_id()
    with pytest.raises(GeneratorClosedError) as caught:
        gen.state()
    assert (
        caught.value.code == "GENERATOR_CLOSED"
        and str(caught.value) == "generator closed: close() was called; make a new generator"
    )
    assert gen.coordinator is None


def test_leased_generator_properties(tmp_path: Path) -> None:
    with Generator.open(
        uri(tmp_path, "billing"), layout="twitter", on_rollback="fail", max_wait_ms=3
    ) as gen:
        assert gen.coordinator == f"file://{tmp_path}?app=billing"
        assert gen.layout["name"] == "twitter"
        assert (gen.on_rollback, gen.max_wait_ms, gen.max_drift_ms) == ("fail", 3, 1000)
        id = gen.next_id()
        assert decode(id, "twitter").worker_id == gen.worker_id == 0
        state = gen.state()
        assert state["worker_id"] == 0 and json.loads(json.dumps(state)) == state
        assert repr(gen) == (
            f'Generator.open("file://{tmp_path}?app=billing", worker_id=0, layout="twitter", on_rollback="fail")'
        )
        with pytest.raises(TypeError):
            copy.copy(gen)
        with pytest.raises(TypeError):
            pickle.dumps(gen)
    assert Generator.open(uri(tmp_path)).on_rollback == "clock-sequence"


def test_apps_are_separate_namespaces(tmp_path: Path) -> None:
    with Generator.open(uri(tmp_path, "a")) as a, Generator.open(uri(tmp_path, "b")) as b:
        assert a.worker_id == b.worker_id == 0


# --- refusals --------------------------------------------------------------------------------


def test_the_pool_runs_out_with_worker_pool_exhausted(tmp_path: Path) -> None:
    held = [Generator.open(uri(tmp_path), layout=FOUR_WORKERS) for _ in range(4)]  # type: ignore[arg-type]
    assert sorted(g.worker_id for g in held) == [0, 1, 2, 3]
    with pytest.raises(WorkerPoolExhaustedError) as caught:
        Generator.open(uri(tmp_path), layout=FOUR_WORKERS)  # type: ignore[arg-type]
    assert caught.value.code == "WORKER_POOL_EXHAUSTED" and isinstance(caught.value, RuntimeError)
    held[2].close()
    with Generator.open(uri(tmp_path), layout=FOUR_WORKERS) as again:  # type: ignore[arg-type]
        assert again.worker_id == 2
    for gen in held:
        gen.close()


def test_a_corrupt_state_record_is_refused_never_reset(tmp_path: Path) -> None:
    with Generator.open(uri(tmp_path)) as gen:
        gen.next_id()
    state_file = tmp_path / "orders" / "worker-0.state"
    state_file.write_text("not a state record")
    with pytest.raises(InvalidStateError) as caught:
        Generator.open(uri(tmp_path))
    assert caught.value.code == "INVALID_STATE" and "worker-0.state" in str(caught.value)
    assert state_file.read_text() == "not a state record"
    assert not lock_is_held(tmp_path / "orders" / "worker-0.lock")


def test_an_unreachable_coordinator_is_a_connection_error(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(CoordinatorUnavailableError) as caught:
        Generator.open(f"file://{blocker}/ids?app=orders")
    error = caught.value
    assert error.code == "COORDINATOR_UNAVAILABLE"
    assert (
        isinstance(error, ConnectionError)
        and isinstance(error, OSError)
        and not isinstance(error, ValueError)
    )
    assert str(error).startswith("coordinator unavailable:")


BAD_OPEN: list[tuple[str, dict[str, Any], type[Exception], str]] = [
    ("no scheme", {"uri": "orders"}, InvalidUriError, "no scheme"),
    ("unknown scheme", {"uri": "ftp://x/y"}, InvalidUriError, "ftp"),
    ("relative path", {"uri": "file://relative/dir"}, InvalidUriError, "absolute"),
    ("bad app", {"uri": "file:///tmp/x?app=../etc"}, InvalidUriError, "app"),
    ("ttl on file", {"uri": "file:///tmp/x?ttl=10s"}, InvalidUriError, "ttl"),
    ("unknown parameter", {"uri": "file:///tmp/x?bogus=1"}, InvalidUriError, "bogus"),
    ("uri not a str", {"uri": 5}, InvalidUriError, "int"),
    ("uri bytes", {"uri": b"file:///tmp/x"}, InvalidUriError, "bytes"),
    ("worker_id", {"uri": "file:///tmp/x", "worker_id": 3}, TypeError, "worker_id"),
    ("clock", {"uri": "file:///tmp/x", "clock": lambda: 0}, TypeError, "clock"),
    (
        "unknown layout",
        {"uri": "file:///tmp/x", "layout": "snowflake"},
        UnknownLayoutError,
        "snowflake",
    ),
    (
        "handover negative",
        {"uri": "file:///tmp/x", "max_handover_wait_ms": -1},
        ValueError,
        "max_handover_wait_ms",
    ),
    (
        "handover float",
        {"uri": "file:///tmp/x", "max_handover_wait_ms": 1.5},
        TypeError,
        "max_handover_wait_ms",
    ),
]


@pytest.mark.parametrize(
    ("kwargs", "error", "text"), [row[1:] for row in BAD_OPEN], ids=[row[0] for row in BAD_OPEN]
)
def test_bad_open_arguments(kwargs: dict[str, Any], error: type[Exception], text: str) -> None:
    kwargs = dict(kwargs)
    raised = refused(lambda: Generator.open(kwargs.pop("uri"), **kwargs), error, text)
    if issubclass(error, ClockflakeError):
        assert isinstance(raised, ValueError)


def test_every_lease_code_has_a_class_with_the_right_builtin() -> None:
    samples = dict(_clockflake._lease_error_codes())
    assert sorted(samples) == sorted(_clockflake.LEASE_ERROR_CODES)
    for code, is_input in samples.items():
        cls = _errors._BY_CODE[code]
        assert cls.code == code and issubclass(cls, ClockflakeError)
        if is_input:
            assert issubclass(cls, ValueError) and not issubclass(cls, RuntimeError), code
        else:
            assert issubclass(cls, (RuntimeError, ConnectionError)) and not issubclass(
                cls, ValueError
            ), code


# --- threads ---------------------------------------------------------------------------------


def test_threads_share_one_leased_generator(tmp_path: Path) -> None:
    with Generator.open(uri(tmp_path)) as gen:

        def work(_: int, out: list[int]) -> None:
            next_id = gen.next_id
            for _ in range(100_000):
                out.append(next_id())
            out.extend(gen.next_ids(5000))

        results = in_threads(4, work)
    every = [id for out in results for id in out]
    assert len(every) == 420_000 and len(set(every)) == len(every)


def gil_free_progress(call: Any) -> int:
    """How far another Python thread gets while `call()` runs. With a switch interval longer
    than the call, it gets nowhere unless the call releases the GIL (a C call that holds it,
    such as sorted() of a big list, scores 0)."""
    old = sys.getswitchinterval()
    sys.setswitchinterval(0.5)
    try:
        done = threading.Event()
        counter = [0]

        def other() -> None:
            while not done.is_set():
                counter[0] += 1

        thread = threading.Thread(target=other)
        thread.start()
        while counter[0] == 0:
            time.sleep(0.001)
        before = counter[0]
        call()
        during = counter[0] - before
        done.set()
        thread.join()
        return during
    finally:
        sys.setswitchinterval(old)


def test_a_leased_batch_waits_for_ticks_without_the_gil(tmp_path: Path) -> None:
    """next_ids(400_000) takes at least 98 ticks (4096 ids per ms), all without the GIL."""
    floats = [float(i % 7) for i in range(300_000)]
    assert gil_free_progress(lambda: sorted(floats)) == 0  # the probe works
    with Generator.open(uri(tmp_path)) as gen:
        ids: list[int] = []
        assert gil_free_progress(lambda: ids.extend(gen.next_ids(400_000))) > 0
        assert len(set(ids)) == 400_000


# --- processes -------------------------------------------------------------------------------


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_eight_processes_share_one_directory_without_duplicates(
    tmp_path: Path, method: str
) -> None:
    """8 children x 100,000 ids on one file:// directory. With 'spawn' each child opens its own
    generator; with 'fork' each uses the generator the parent opened before starting them,
    which leases a new worker id in the child."""
    if method not in multiprocessing.get_all_start_methods():
        pytest.skip(f"no {method} start method here")
    context = multiprocessing.get_context(method)
    coordinator = uri(tmp_path / "ids")
    inherited = Generator.open(coordinator) if method == "fork" else None
    parent_before = inherited.next_ids(1000) if inherited else []
    lease_children.INHERITED = inherited
    barrier = context.Barrier(8)
    children = [
        context.Process(
            target=lease_children.generate,
            args=(coordinator, str(tmp_path / f"out-{i}"), 100_000, barrier),
        )
        for i in range(8)
    ]
    try:
        for child in children:
            child.start()
        for child in children:
            child.join(120)
            assert child.exitcode == 0
    finally:
        lease_children.INHERITED = None
    worker_ids = []
    every = array("q")
    for i in range(8):
        report = json.loads((tmp_path / f"out-{i}.json").read_text())
        assert report["error"] is None, report["error"]
        worker_ids.append(report["worker_id"])
        ids = array("q")
        ids.frombytes((tmp_path / f"out-{i}.ids").read_bytes())
        assert len(ids) == 100_000
        assert {decode(id).worker_id for id in ids[::997]} == {report["worker_id"]}
        every.extend(ids)
    assert len(set(worker_ids)) == 8
    assert len(every) == 800_000 and len(set(every)) == 800_000
    if inherited is not None:
        # The parent kept its own worker id and goes on under it.
        assert inherited.worker_id == 0 and 0 not in worker_ids
        parent_after = inherited.next_ids(1000)
        assert not set(parent_before + parent_after) & set(every)
        assert lock_is_held(tmp_path / "ids" / "orders" / "worker-0.lock")
        inherited.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_os_fork_parent_and_child_both_generate_under_different_worker_ids(tmp_path: Path) -> None:
    gen = Generator.open(uri(tmp_path))
    assert gen.worker_id == 0
    before = gen.next_ids(1000)
    parent_lock = tmp_path / "orders" / "worker-0.lock"
    out = tmp_path / "child.ids"
    ready_r, ready_w = os.pipe()
    go_r, go_w = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into pytest
        status = 1
        try:
            os.close(ready_r)
            os.close(go_w)
            worker = gen.worker_id  # the first call leases the child's own worker id
            os.write(ready_w, json.dumps({"worker_id": worker, "repr": repr(gen)}).encode())
            os.read(go_r, 1)  # generate at the same time as the parent
            ids = array("q", (gen.next_id() for _ in range(50_000)))
            ids.extend(gen.next_ids(50_000))
            out.write_bytes(ids.tobytes())
            gen.close()  # releases the child's worker id only
            status = 0
        finally:
            os._exit(status)
    os.close(ready_w)
    os.close(go_r)
    child = json.loads(os.read(ready_r, 4096))
    os.close(ready_r)
    assert child["worker_id"] != 0
    assert f"worker_id={child['worker_id']}" in child["repr"]
    child_lock = tmp_path / "orders" / f"worker-{child['worker_id']}.lock"
    assert lock_is_held(child_lock)
    os.write(go_w, b"x")
    os.close(go_w)
    parent_ids = [gen.next_id() for _ in range(100_000)]
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    child_ids = array("q")
    child_ids.frombytes(out.read_bytes())
    assert len(child_ids) == 100_000
    assert {decode(id).worker_id for id in child_ids[::101]} == {child["worker_id"]}
    every = before + parent_ids + list(child_ids)
    assert len(set(every)) == len(every)
    # The parent's lease outlived the child: still locked, still issuing, not handed out.
    assert lock_is_held(parent_lock) and not lock_is_held(child_lock)
    assert gen.worker_id == 0 and gen.next_id() > parent_ids[-1]
    with Generator.open(uri(tmp_path)) as other:
        assert other.worker_id != 0
    gen.close()
    assert not lock_is_held(parent_lock)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_threads_of_a_forked_child_share_the_childs_one_new_lease(tmp_path: Path) -> None:
    gen = Generator.open(uri(tmp_path))
    parent_ids = gen.next_ids(1000)
    out = tmp_path / "child.json"
    pid = os.fork()
    if pid == 0:
        status = 1
        try:

            def work(_: int, mine: list[int]) -> None:
                mine.extend(gen.next_id() for _ in range(20_000))

            # together: all four race for the child's first call
            results = in_threads(4, work, together=True)
            every = [id for mine in results for id in mine]
            out.write_text(
                json.dumps(
                    {
                        "workers": sorted({decode(id).worker_id for id in every}),
                        "count": len(every),
                        "unique": len(set(every)),
                        "overlap": len(set(every) & set(parent_ids)),
                        "locked": sorted(
                            p.name for p in (tmp_path / "orders").glob("*.lock") if lock_is_held(p)
                        ),
                        "files": sorted(p.name for p in (tmp_path / "orders").glob("*.lock")),
                    }
                )
            )
            status = 0
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    report = json.loads(out.read_text())
    # One new worker id for the whole child (not one per thread), never the parent's.
    assert report["workers"] == [1]
    assert report["count"] == report["unique"] == 80_000 and report["overlap"] == 0
    # Seen from the child: the parent's lock and the child's own; no thread leased a third.
    assert report["locked"] == report["files"] == ["worker-0.lock", "worker-1.lock"]
    gen.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_child_closing_an_inherited_generator_leaves_the_parents_lease_alone(
    tmp_path: Path,
) -> None:
    gen = Generator.open(uri(tmp_path))
    first = gen.next_id()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            gen.close()  # the lease is the parent's: only marks this copy closed
            try:
                gen.next_id()
            except GeneratorClosedError:
                status = 0
            del gen  # dropping it in the child must not unlock the parent's file either
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert lock_is_held(tmp_path / "orders" / "worker-0.lock")
    assert gen.next_id() > first
    gen.close()


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_generator_closed_before_the_fork_stays_closed_in_the_child(tmp_path: Path) -> None:
    gen = Generator.open(uri(tmp_path))
    gen.close()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            try:
                gen.next_id()
            except GeneratorClosedError:
                # ... and leased nothing on the way.
                status = 2 if lock_is_held(tmp_path / "orders" / "worker-0.lock") else 0
        finally:
            os._exit(status)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0


# --- PostgreSQL (when make provides one) -----------------------------------------------------

PG_URL = os.environ.get("CLOCKFLAKE_PG_URL")


@pytest.mark.skipif(
    not PG_URL, reason="CLOCKFLAKE_PG_URL not set (make test-python-pg starts a server)"
)
def test_postgres_leases(tmp_path: Path) -> None:
    assert PG_URL
    base = f"{PG_URL}?app=python-{os.getpid()}&ttl=2s"
    with Generator.open(base) as a, Generator.open(base) as b:
        assert a.worker_id != b.worker_id
        assert a.coordinator is not None and "app=python-" in a.coordinator
        ids = a.next_ids(10_000) + [b.next_id() for _ in range(10_000)]
        assert len(set(ids)) == 20_000
        worker = a.worker_id
    with Generator.open(base) as again:
        assert again.worker_id in (worker, b.worker_id)
        assert not set(again.next_ids(10_000)) & set(ids)


@pytest.mark.skipif(
    not PG_URL or not hasattr(os, "fork"), reason="CLOCKFLAKE_PG_URL not set, or no os.fork"
)
def test_postgres_fork_child_leases_over_its_own_connection(tmp_path: Path) -> None:
    """The child inherits the parent's database socket; it must neither use nor close it. Both
    generate for longer than the TTL, so both renew: the parent's lease must survive."""
    base = f"{PG_URL}?app=python-fork-{os.getpid()}&ttl=1s"
    gen = Generator.open(base)
    out = tmp_path / "child.ids"
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            ids = array("q")
            end = time.monotonic() + 2.5
            while time.monotonic() < end:
                ids.extend(gen.next_ids(100))
                time.sleep(0.001)
            out.write_bytes(ids.tobytes())
            (tmp_path / "child.worker").write_text(str(gen.worker_id))
            gen.close()
            status = 0
        finally:
            os._exit(status)
    parent: list[int] = []
    end = time.monotonic() + 2.5
    while time.monotonic() < end:
        parent.extend(gen.next_ids(100))
        time.sleep(0.001)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    child = array("q")
    child.frombytes(out.read_bytes())
    assert int((tmp_path / "child.worker").read_text()) != gen.worker_id
    every = parent + list(child)
    assert len(child) > 1000 and len(set(every)) == len(every)
    time.sleep(1.2)  # past a TTL after the child's exit: the parent's renewals still work
    assert gen.next_id() > parent[-1]
    gen.close()


@pytest.mark.skipif(not PG_URL, reason="CLOCKFLAKE_PG_URL not set")
def test_postgres_a_lease_taken_away_raises_lease_lost() -> None:
    """Another owner takes the row (as a rival would after an expiry): the next renewal matches
    no row, and from then on every call raises LeaseLostError; with heal=False the generator
    stays dead (tests/test_heal_postgres.py: with the default, it leases again)."""
    import subprocess

    from clockflake import LeaseLostError

    app = f"python-lost-{os.getpid()}"
    gen = Generator.open(f"{PG_URL}?app={app}&ttl=1s", heal=False)
    gen.next_id()
    psql = "/usr/lib/postgresql/15/bin/psql"
    subprocess.run(
        [
            psql,
            "-q",
            "-v",
            "ON_ERROR_STOP=1",
            PG_URL or "",
            "-c",
            f"UPDATE clockflake_leases SET owner = 'thief', epoch = epoch + 1 WHERE app = '{app}' AND worker_id = {gen.worker_id}",
        ],
        check=True,
    )
    deadline = time.monotonic() + 3
    with pytest.raises(LeaseLostError) as caught:
        while time.monotonic() < deadline:  # renewals run every ttl/4
            gen.next_id()
            time.sleep(0.01)
    error = caught.value
    assert (
        error.code == "LEASE_LOST"
        and isinstance(error, RuntimeError)
        and not isinstance(error, ValueError)
    )
    assert str(error).startswith("lease lost:")
    with pytest.raises(LeaseLostError):
        gen.next_id()
    gen.close()


# --- ZooKeeper (when make provides one) ------------------------------------------------------

ZK_URL = os.environ.get("CLOCKFLAKE_ZK_URL")


@pytest.mark.skipif(
    not ZK_URL, reason="CLOCKFLAKE_ZK_URL not set (make test-python-zk starts a server)"
)
def test_zookeeper_leases() -> None:
    base = f"{ZK_URL}/clockflake/python-{os.getpid()}?ttl=2s"
    with Generator.open(base) as a, Generator.open(base) as b:
        assert a.worker_id != b.worker_id
        ids = a.next_ids(10_000) + [b.next_id() for _ in range(10_000)]
        assert len(set(ids)) == 20_000
    with Generator.open(base) as again:
        assert not set(again.next_ids(10_000)) & set(ids)


@pytest.mark.skipif(
    not ZK_URL or not hasattr(os, "fork"), reason="CLOCKFLAKE_ZK_URL not set, or no os.fork"
)
def test_zookeeper_forked_child(tmp_path: Path) -> None:
    """zookeeper:// in a forked child: the ZooKeeper client's I/O reactor (async-io) is global
    to the process and does not survive fork(), so the lease crate refuses at once with
    COORDINATOR_UNAVAILABLE naming the fork (never the parent's worker id, never a hang until
    the connect timeout), and the parent is unaffected."""
    base = f"{ZK_URL}/clockflake/python-fork-{os.getpid()}?ttl=2s"
    gen = Generator.open(base)
    gen_worker_before_fork = gen.worker_id
    out = tmp_path / "child.json"
    forked_at = time.monotonic()
    pid = os.fork()
    if pid == 0:
        status = 1
        try:
            report: dict[str, Any] = {}
            try:
                report["ids"] = gen.next_ids(20_000)
                report["worker_id"] = gen.worker_id
                gen.close()
            except ClockflakeError as error:
                report["error"] = error.code
                report["message"] = str(error)
            report["seconds"] = time.monotonic() - forked_at
            out.write_text(json.dumps(report))
            status = 0
        finally:
            os._exit(status)
    parent = gen.next_ids(20_000)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    report = json.loads(out.read_text())
    assert gen.next_id() > parent[-1]  # the parent goes on, whatever happened in the child
    worker = gen.worker_id
    gen.close()
    assert report.get("error") == "COORDINATOR_UNAVAILABLE", report
    assert "fork" in report["message"], report["message"]
    # The connect limit is the 2 s session timeout + 2 s: a refusal well before it was not a timeout.
    assert report["seconds"] < 3.0, "refused at once, not after a connect timeout"
    assert worker == gen_worker_before_fork


def patiently(call: Callable[[], int]) -> int:
    """Runs an id call that needs a new reservation persisted first (a step back to another
    clock sequence): it waits at most 50 ms for the renewal thread, and on a loaded machine the
    write can take longer, so it raises the retryable CoordinatorUnavailableError. A caller
    retries; so does the test, for up to 10 s."""
    until = time.monotonic() + 10
    while True:
        try:
            return call()
        except CoordinatorUnavailableError:
            if time.monotonic() > until:
                raise
            time.sleep(0.01)


def test_stats_of_a_leased_and_a_fixed_generator(tmp_path: Path) -> None:
    with Generator.open(f"file://{tmp_path}?app=stats") as gen:
        now = int(time.time() * 1000)
        gen.next_id_at(now)
        # Back 5 s: a new clock sequence, persisted first.
        patiently(lambda: gen.next_id_at(now - 5000))
        stats = gen.stats()
        assert stats["leased"] is True and stats["state"] == "active"
        assert stats["worker_id"] == gen.worker_id
        assert stats["renewals"] >= 2 and stats["clock_seq_switches"] == 1
        assert stats["deadline_in_ms"] is None  # file:// leases do not expire
        assert stats["reserved_until_ms"] > now
        assert stats["heal"] is True and stats["losses"] == stats["heals"] == 0
        assert gen.is_active
    assert gen.stats()["state"] == "closed" and not gen.is_active
    assert not Generator.open(f"file://{tmp_path}?app=stats", heal=False).stats()["heal"]
    fixed = Generator(worker_id=3)
    assert fixed.stats() == {
        "worker_id": 3,
        "state": "active",
        "leased": False,
        "renewals": 0,
        "renewal_failures": 0,
        "clock_steps_back": 0,
        "clock_seq_switches": 0,
        "waits": 0,
        "wait_us": 0,
        "deadline_in_ms": None,
        "reserved_until_ms": 0,
        "measured_skew_ms": None,
        "heal": False,
        "losses": 0,
        "heals": 0,
        "heal_failures": 0,
        "last_loss": None,
        "last_heal_error": None,
    }


def test_heal_is_on_by_default_and_takes_a_bool(tmp_path: Path) -> None:
    with (
        Generator.open(uri(tmp_path)) as healing,
        Generator.open(uri(tmp_path), heal=False) as not_,
    ):
        assert healing.stats()["heal"] is True and not_.stats()["heal"] is False
        assert repr(not_).endswith(", heal=False)") and "heal=" not in repr(healing)
        assert healing.is_active and not_.is_active
        assert healing.next_id() > 0 and not_.next_id() > 0
        assert healing.state()["worker_id"] == healing.worker_id
    assert not healing.is_active and not not_.is_active
    assert healing.worker_id != not_.worker_id  # the worker ids released, still readable
    with pytest.raises(GeneratorClosedError):
        healing.next_ids(3)
    with pytest.raises(TypeError, match="heal: expected a bool"):
        Generator.open(uri(tmp_path), heal="yes")
    with pytest.raises(TypeError, match="unexpected keyword argument 'heal'"):
        Generator(worker_id=1, heal=True)  # type: ignore[call-arg]


@pytest.mark.parametrize("heal", [True, False])
def test_a_lease_lost_to_a_removed_lock_file_heals_unless_heal_is_false(
    tmp_path: Path, heal: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The lock file removed while held (a newcomer then takes its worker id): the lease is lost
    at its next renewal. With heal=True the generator refuses with the retryable
    CoordinatorUnavailableError meanwhile and leases another worker id by itself; with
    heal=False it raises LeaseLostError from then on. No id repeats either way. The healing
    generator says so on the clockflake logger."""
    caplog.set_level(logging.INFO, logger="clockflake")
    gen = Generator.open(uri(tmp_path), heal=heal)
    ids = gen.next_ids(1000)
    (tmp_path / "orders" / "worker-0.lock").unlink()
    newcomer = Generator.open(uri(tmp_path), heal=False)
    assert newcomer.worker_id == 0
    refusals: list[clockflake.ClockflakeError] = []
    deadline = time.monotonic() + 5
    # Until healed (heal=True: the window between the loss and the new lease may be shorter
    # than a call here, so the loss is read from stats()), or refused 50 times (heal=False).
    while time.monotonic() < deadline and not (
        (heal and gen.stats()["heals"] >= 1 and gen.is_active) or (not heal and len(refusals) >= 50)
    ):
        try:
            ids.append(gen.next_id())
        except clockflake.ClockflakeError as error:
            refusals.append(error)
        time.sleep(0.002)
    if heal:
        assert gen.is_active and gen.worker_id == 1
        for error in refusals:
            assert isinstance(error, clockflake.CoordinatorUnavailableError), repr(error)
            assert error.retry_at_ms is not None
        stats = gen.stats()
        assert stats["state"] == "active" and (stats["losses"], stats["heals"]) == (1, 1)
        ids += gen.next_ids(1000)
        # The healing thread logs just after it installs the new lease: give it a moment.
        until = time.monotonic() + 2
        while len(caplog.records) < 2 and time.monotonic() < until:
            time.sleep(0.005)
        events = [(r.levelname, r.clockflake_event, r.worker_id) for r in caplog.records]
        assert events == [("WARNING", "lost", 0), ("INFO", "healed", 1)], caplog.text
        assert "was removed or replaced" in caplog.records[0].getMessage()
    else:
        assert refusals and not gen.is_active and gen.stats()["state"] == "lost"
        assert all(isinstance(error, clockflake.LeaseLostError) for error in refusals)
        assert not caplog.records
    ids += newcomer.next_ids(1000)
    assert len(set(ids)) == len(ids)
    newcomer.close()
    gen.close()


def test_is_active_of_a_fixed_generator() -> None:
    gen = Generator(worker_id=1)
    assert gen.is_active
    gen.close()
    assert not gen.is_active


# --- the start-up clock check (max_skew) -----------------------------------------------------


def test_clock_skew_error_is_a_runtime_error_with_its_code() -> None:
    assert issubclass(ClockSkewError, ClockflakeError) and issubclass(ClockSkewError, RuntimeError)
    assert not issubclass(ClockSkewError, ValueError)
    assert ClockSkewError.code == "CLOCK_SKEW" and "CLOCK_SKEW" in _clockflake.LEASE_ERROR_CODES
    assert _errors._RAISE_BY_CODE["CLOCK_SKEW"] is ClockSkewError
    assert "ClockSkewError" in clockflake.__all__ and clockflake.ClockSkewError is ClockSkewError


def test_file_leases_measure_no_clock_skew_and_refuse_max_skew(tmp_path: Path) -> None:
    with Generator.open(uri(tmp_path)) as gen:
        assert gen.stats()["measured_skew_ms"] is None
    assert Generator(worker_id=1).stats()["measured_skew_ms"] is None
    with pytest.raises(InvalidUriError, match="file:// has no clock"):
        Generator.open(uri(tmp_path) + "&max_skew=5s")


@pytest.mark.skipif(
    not PG_URL, reason="CLOCKFLAKE_PG_URL not set (make test-python-pg starts a server)"
)
def test_postgres_stats_report_the_measured_clock_skew() -> None:
    base = f"{PG_URL}?app=python-skew-{os.getpid()}&ttl=2s"
    with Generator.open(base) as gen:
        skew = gen.stats()["measured_skew_ms"]
        # The server runs on this machine, on the same clock.
        assert isinstance(skew, int) and abs(skew) <= 300, skew
    with Generator.open(base + "&max_skew=off") as gen:
        assert gen.stats()["measured_skew_ms"] is None


@pytest.mark.skipif(
    not ZK_URL, reason="CLOCKFLAKE_ZK_URL not set (make test-python-zk starts a server)"
)
def test_zookeeper_stats_report_the_measured_clock_skew() -> None:
    with Generator.open(f"{ZK_URL}/clockflake/python-skew-{os.getpid()}?ttl=2s") as gen:
        skew = gen.stats()["measured_skew_ms"]
        assert isinstance(skew, int) and abs(skew) <= 300, skew
