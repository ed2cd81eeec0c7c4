"""What several of the binding's test modules share (imported from this folder, as pytest puts
it on sys.path)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from clockflake import ClockflakeError, LayoutSpec, WorkerIdInvalidatedError

# What `refusals` reports for each call a static generator refuses in a forked child, and the
# worker id of a generator made in the child (2), which belongs to the child.
INVALIDATED = ["WORKER_ID_INVALIDATED", True]
REFUSED_IN_CHILD = {
    "next_id": INVALIDATED,
    "next_ids": INVALIDATED,
    "next_id_at": INVALIDATED,
    "state": INVALIDATED,
    "fresh": 2,
}


def refusals(calls: dict[str, Callable[[], object]]) -> dict[str, Any]:
    """Each call's refusal as `[code, is a RuntimeError]` ("no error" if it returned); any
    exception other than `WorkerIdInvalidatedError` propagates."""
    report: dict[str, Any] = {}
    for name, call in calls.items():
        try:
            call()
            report[name] = "no error"
        except WorkerIdInvalidatedError as error:
            report[name] = [error.code, isinstance(error, RuntimeError)]
    return report


def in_threads(
    count: int, work: Callable[[int, list[int]], None], *, together: bool = False
) -> list[list[int]]:
    """Runs `work(i, out)` on `count` threads, each with its own list `out`, and returns the
    lists once all have finished. `together`: every thread waits at a barrier first, so that
    they all start at once."""
    results: list[list[int]] = [[] for _ in range(count)]
    barrier = threading.Barrier(count)

    def run(i: int) -> None:
        if together:
            barrier.wait()
        work(i, results[i])

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def layout_spec(epoch_ms: int, unit_ms: int | None = None, **bits: int) -> LayoutSpec:
    """A custom layout: the fields named in `bits`, most significant first."""
    spec: LayoutSpec = {
        "fields": [{"name": name, "bits": width} for name, width in bits.items()],
        "epoch_ms": epoch_ms,
    }
    if unit_ms is not None:
        spec["unit_ms"] = unit_ms
    return spec


def refused(call: Callable[[], Any], error: type[Exception], text: str | None) -> BaseException:
    """The exception `call()` raises: an `error` (never a stray `OverflowError`) with `text` in
    its message (unless None) and, for a clockflake class, that class's code."""
    with pytest.raises(error) as caught:
        call()
    raised = caught.value
    assert not isinstance(raised, OverflowError)
    if issubclass(error, ClockflakeError):
        assert isinstance(raised, ClockflakeError) and raised.code == error.code
    if text is not None:
        assert text in str(raised)
    return raised
