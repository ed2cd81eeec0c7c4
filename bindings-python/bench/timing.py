"""The "raw" per-call timing of `bench.py`, also run by `compare.py`'s child processes (a
module without the peers' imports, so that a child needs only the clockflake it measures)."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

perf_ns = time.perf_counter_ns


def wait_for_tick() -> None:
    """Spins until the wall clock's millisecond changes."""
    start = time.time_ns() // 1_000_000
    while time.time_ns() // 1_000_000 == start:
        pass


def raw_cost(f: Callable[[], Any], bursts: int = 200, size: int = 1000) -> float:
    """The median ns per call of `bursts` bursts of `size` calls, each started just after a
    millisecond tick (the cost of a call, not the wait for the next tick)."""
    samples = []
    r = range(size)
    for _ in range(bursts):
        wait_for_tick()
        t0 = perf_ns()
        for _ in r:
            f()
        samples.append((perf_ns() - t0) / size)
    return statistics.median(samples)
