"""The clock in ways a mocked clock cannot show.

* An excursion: the wall clock jumps an hour ahead for 1.5 s and comes back (libfaketime, Debian's
  ``faketime`` package) while a child process issues ids; within 2 s of the return its ids carry
  the real time again, and no id repeats over the whole run.
* Long ticks: a layout with a 1-day unit and no sequence bits has room for one id a day, and
  ``next_id()`` refuses the second at once (``SequenceExhaustedError`` with ``retry_at_ms``)
  rather than sleeping until tomorrow.
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from clockflake import ClockflakeError, Generator, LayoutSpec, SequenceExhaustedError, decode
from helpers import layout_spec

LIBFAKETIME = "/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1"
HOUR_MS = 3_600_000
DAY_MS = 86_400_000

# The child: ids in batches of 64, a sample on stdout every 5 ms, every id into ids.bin at the
# end; stops when the parent creates `stop`. `time.sleep` fails under libfaketime with
# FAKETIME_DONT_FAKE_MONOTONIC (EINVAL from clock_nanosleep), so it waits with select().
CHILD = r"""
import array, select, sys, time
from pathlib import Path
from clockflake import Generator
directory = Path(sys.argv[1])
gen = Generator(worker_id=5) if sys.argv[2] == "static" else Generator.open(sys.argv[2])
ids = array.array("Q")
started = last_sample = time.monotonic()
while time.monotonic() - started < 10 and not (directory / "stop").exists():
    for _ in range(64):
        ids.append(gen.next_id())
    if time.monotonic() - last_sample >= 0.005:
        last_sample = time.monotonic()
        print("id", ids[-1], time.time_ns() // 1_000_000, flush=True)
    select.select([], [], [], 0.0002)
(directory / "ids.bin").write_bytes(ids.tobytes())
gen.close()
print("done", len(ids), flush=True)
"""


def set_offset(path: Path, offset: str) -> None:
    """Written whole, then renamed: the child never reads half a file."""
    part = path.with_suffix(".part")
    part.write_text(offset + "\n")
    part.replace(path)


def now_ms() -> int:
    return time.time_ns() // 1_000_000


@pytest.mark.parametrize("kind", ["static", "leased"])
def test_ids_follow_the_wall_clock_back_after_an_excursion_to_the_future(
    kind: str, tmp_path: Path
) -> None:
    assert Path(LIBFAKETIME).exists(), (
        f"{LIBFAKETIME} is missing: apt-get install -y faketime (make test-python does)"
    )
    offset = tmp_path / "faketime.rc"
    set_offset(offset, "+0s")
    leases = tmp_path / "leases"
    leases.mkdir()
    which = "static" if kind == "static" else f"file://{leases}?app=x"
    env = {
        **os.environ,
        "LD_PRELOAD": LIBFAKETIME,
        "FAKETIME_TIMESTAMP_FILE": str(offset),
        "FAKETIME_NO_CACHE": "1",
        "FAKETIME_DONT_FAKE_MONOTONIC": "1",
    }
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path), which],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    stdout = child.stdout
    # Every line, stamped with the real time it arrived at (this process is not faked).
    lines: list[tuple[int, str]] = []
    first = threading.Event()

    def read() -> None:
        for line in stdout:
            lines.append((now_ms(), line.strip()))
            first.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        assert first.wait(20), "the child printed nothing"
        time.sleep(0.3)
        set_offset(offset, "+3600s")
        away = now_ms()
        time.sleep(1.5)
        set_offset(offset, "+0s")
        back = now_ms()
        time.sleep(3.5)
        (tmp_path / "stop").touch()
        assert child.wait(20) == 0, "the child failed"
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    reader.join(5)

    # (received at, the id's parts, the child's wall clock when it printed the id)
    samples = [
        (at, decode(int(line.split()[1])), int(line.split()[2]))
        for at, line in lines
        if line.startswith("id ")
    ]
    ahead = [
        1
        for at, parts, _ in samples
        if away < at < back and parts.timestamp_ms > at + HOUR_MS - 5000
    ]
    assert ahead, "no id carried the excursion's time: did libfaketime load?"
    # Samples the child printed 2 s or more after the return, by its own clock (real again by
    # then; about an hour ahead during the excursion, and for a moment after it, as libfaketime
    # rereads its file): compared with that clock, so that a child or a
    # pipe slowed down by a loaded machine cannot make a correct id look late.
    late = [
        (printed, parts)
        for _, parts, printed in samples
        if back + 2000 <= printed < back + HOUR_MS - 60_000
    ]
    assert len(late) >= 20, f"only {len(late)} samples after the return"
    for printed, parts in late:
        assert abs(parts.timestamp_ms - printed) < 1000, (
            f"{printed - back} ms after the return an id carries {parts.timestamp_ms} Unix ms, "
            f"{parts.timestamp_ms - printed} ms from the child's clock"
        )
    data = (tmp_path / "ids.bin").read_bytes()
    ids = [int.from_bytes(data[i : i + 8], "little") for i in range(0, len(data), 8)]
    assert len(ids) > 10_000, f"only {len(ids)} ids"
    assert len(set(ids)) == len(ids), f"{len(ids) - len(set(ids))} ids repeated among {len(ids)}"


# --- long ticks ------------------------------------------------------------------------------


def daily_layout() -> tuple[LayoutSpec, int]:
    """One id a day per worker, the epoch 12 h ago: the current day has 12 h left, always."""
    epoch = now_ms() - DAY_MS // 2
    layout = layout_spec(epoch, unit_ms=DAY_MS, timestamp=20, worker=4, sequence=0)
    return layout, epoch + DAY_MS


def refused_at_once(call: Callable[[], object], retry_at_ms: int) -> None:
    """`call` raises SequenceExhaustedError naming `retry_at_ms` within 100 ms. It runs on a
    thread so that a call that sleeps until tomorrow fails the test instead of hanging it."""
    outcome: list[object] = []

    def run() -> None:
        started = time.monotonic()
        try:
            outcome.append(call())
        except ClockflakeError as error:
            outcome.append(error)
        outcome.append(time.monotonic() - started)

    worker = threading.Thread(target=run, daemon=True)
    worker.start()
    worker.join(2)
    assert not worker.is_alive(), "the call was still waiting after 2 s"
    error, took = outcome
    assert isinstance(error, SequenceExhaustedError), error
    assert error.code == "SEQUENCE_EXHAUSTED" and error.retry_at_ms == retry_at_ms
    assert str(retry_at_ms) in str(error)
    assert isinstance(took, float) and took < 0.1, f"took {took:.3f} s"


def test_next_id_refuses_at_once_when_the_next_tick_is_a_day_away() -> None:
    layout, next_day = daily_layout()
    gen = Generator(worker_id=3, layout=layout)
    gen.next_id()
    refused_at_once(gen.next_id, next_day)
    refused_at_once(lambda: gen.next_ids(1), next_day)
    fresh = Generator(worker_id=4, layout=layout)
    refused_at_once(lambda: fresh.next_ids(2), next_day)


def test_the_same_on_a_python_clock() -> None:
    layout, next_day = daily_layout()
    clock = lambda: next_day - 3 * HOUR_MS  # noqa: E731
    gen = Generator(worker_id=3, layout=layout, clock=clock)
    gen.next_id()
    refused_at_once(gen.next_id, next_day)
    refused_at_once(lambda: gen.next_ids(1), next_day)


def test_a_tick_that_ends_within_a_second_is_still_waited_for() -> None:
    layout = layout_spec(1704067200000, unit_ms=1000, timestamp=33, worker=4, sequence=0)
    gen = Generator(worker_id=3, layout=layout)
    a, b = gen.next_id(), gen.next_id()
    assert decode(b, layout).timestamp_ms == decode(a, layout).timestamp_ms + 1000  # type: ignore[arg-type]
