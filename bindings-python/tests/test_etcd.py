"""etcd:// across two languages: Python holders and a Rust holder (the lease crate's probe)
issue ids on a three-member etcd cluster while its leader is killed and restarted and the new
leader is frozen for 3 s. A majority serves throughout, so no lease may be lost: no id repeats,
no LEASE_LOST, no Python id call takes 100 ms.

Needs `scripts/etcd-cluster.sh` started with its directory in CLOCKFLAKE_ETCD_DIR and its URL in
CLOCKFLAKE_ETCD_URL (make test-python-etcd); skipped otherwise."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from array import array
from pathlib import Path

import pytest
from clockflake import ClockflakeError, Generator

ROOT = Path(__file__).resolve().parents[2]
PROBE = (
    Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug" / "clockflake-lease-probe"
)
URL = os.environ.get("CLOCKFLAKE_ETCD_URL")

pytestmark = pytest.mark.skipif(
    URL is None or "CLOCKFLAKE_ETCD_DIR" not in os.environ,
    reason="CLOCKFLAKE_ETCD_URL is not set (make test-python-etcd starts a cluster)",
)


def cluster(*args: str) -> str:
    done = subprocess.run(
        [str(ROOT / "scripts" / "etcd-cluster.sh"), *args],
        check=True,
        capture_output=True,
        text=True,
    )
    return done.stdout.strip()


class PythonHolder(threading.Thread):
    """Issues ids until stopped, every call timed, every refusal counted by code."""

    def __init__(self, uri: str) -> None:
        super().__init__(daemon=True)
        # heal=False: a lost lease must show as LEASE_LOST, not be leased again quietly.
        self.gen = Generator.open(uri, heal=False)
        self.ids = array("q")
        self.longest_call = 0.0
        self.refusals: dict[str, int] = {}
        self.running = True

    def run(self) -> None:
        while self.running:
            started = time.perf_counter()
            try:
                self.ids.append(self.gen.next_id())
            except ClockflakeError as error:
                self.refusals[error.code] = self.refusals.get(error.code, 0) + 1
            self.longest_call = max(self.longest_call, time.perf_counter() - started)
            time.sleep(0.0002)

    def stop(self) -> None:
        self.running = False
        self.join()
        self.gen.close()


def test_the_leader_killed_and_frozen_loses_no_lease_in_python_or_rust() -> None:
    assert PROBE.exists(), f"{PROBE}: build it with cargo build -p clockflake-lease --bins"
    uri = f"{URL}/?app=python-{os.getpid()}-{time.time_ns()}&ttl=6s"
    holders = [PythonHolder(uri) for _ in range(2)]
    for holder in holders:
        holder.start()
    rust = subprocess.Popen(
        [str(PROBE), "--uri", uri, "--every-ms", "1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        time.sleep(1.5)
        leader = cluster("leader")
        cluster("kill", leader)
        time.sleep(3)
        cluster("restart", leader)
        time.sleep(1)
        frozen = cluster("leader")
        cluster("freeze", frozen)
        time.sleep(3)
        cluster("thaw", frozen)
        time.sleep(1.5)
    finally:
        rust.terminate()
        rust_out, _ = rust.communicate(timeout=30)
        for holder in holders:
            holder.stop()
    rust_ids = [int(line[3:]) for line in rust_out.splitlines() if line.startswith("id ")]
    assert "error " not in rust_out, rust_out[-2000:]
    assert rust_ids, "the Rust holder issued nothing"
    every = list(rust_ids)
    for holder in holders:
        assert len(holder.ids) > 0, "a Python holder issued nothing"
        assert "LEASE_LOST" not in holder.refusals, holder.refusals
        assert holder.longest_call < 0.1, f"an id call took {holder.longest_call:.3f} s"
        every.extend(holder.ids)
    assert len(set(every)) == len(every), "an id repeated"
