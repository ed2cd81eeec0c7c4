"""PostgreSQL and Redis fail over to a replica that fell behind (issue 22), across two
languages: Python holders issue ids on the primary, the replica stops receiving its writes for
longer than the TTL, the primary is killed, the replica promoted, and Rust holders (the lease
crate's probe) start on it while the Python ones still run. No id may repeat; no Python id call
may take 100 ms.

Needs `scripts/postgres-ha.sh` and `scripts/redis-ha.sh` with a directory each in
CLOCKFLAKE_PG_HA_DIR and CLOCKFLAKE_REDIS_HA_DIR (make test-python-failover); skipped otherwise."""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
import time
from array import array
from pathlib import Path

import pytest
from clockflake import ClockflakeError, Generator

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "target" / "debug" / "clockflake-lease-probe"

# Per coordinator: its pair's script, the directory variable, how the pair starts, and the URI
# parameters of the old holders and of the newcomers (the promoted replica has no replica to
# wait for). 4 s leases for both: with 2 s, a newcomer lost its Redis lease to one renewal
# that went unanswered for its second (1 run in 2 of make test with its checks beside it).
PAIRS = {
    "postgres": (
        "postgres-ha.sh",
        "CLOCKFLAKE_PG_HA_DIR",
        ["start", "async"],
        "ttl=4s&max_skew=1s",
    ),
    "redis": ("redis-ha.sh", "CLOCKFLAKE_REDIS_HA_DIR", ["start"], "ttl=4s&max_skew=1s"),
}
GUARD = {"postgres": "", "redis": "&min_replicas=1"}


class PythonHolder(threading.Thread):
    """Issues ids until stopped, every call timed; stops issuing at its first refusal that is
    not retryable (LEASE_LOST once the primary is gone)."""

    def __init__(self, uri: str) -> None:
        super().__init__(daemon=True)
        # heal=False: this test is about the lease itself (what a newcomer on the promoted
        # replica may reissue), not about leasing again once the primary is gone.
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
        # The primary it leased from is gone: close() stops the generator and says it could not
        # release the worker id.
        with contextlib.suppress(ClockflakeError):
            self.gen.close()


@pytest.mark.parametrize("coordinator", sorted(PAIRS))
def test_rust_newcomers_on_a_promoted_lagging_replica_repeat_no_python_id(coordinator: str) -> None:
    script, directory, start, params = PAIRS[coordinator]
    if directory not in os.environ:
        pytest.skip(f"{directory} is not set")
    assert PROBE.exists(), f"{PROBE}: build it with cargo build -p clockflake-lease --bins"

    def ha(*args: str) -> str:
        return subprocess.run(
            [str(ROOT / "scripts" / script), *args], check=True, capture_output=True, text=True
        ).stdout.strip()

    ha(*start)
    try:
        app = f"py-failover-{os.getpid()}"
        params = f"?app={app}&{params}"
        old = [PythonHolder(ha("primary-url") + params + GUARD[coordinator]) for _ in range(3)]
        for holder in old:
            holder.start()
        time.sleep(1.0)
        ha("cut")
        time.sleep(5.0)  # longer than the TTL: the replica shows every lease as expired
        ha("kill-primary")
        ha("promote")
        newcomers = [
            subprocess.Popen(
                [
                    str(PROBE),
                    "--uri",
                    ha("replica-url") + params,
                    "--binary",
                    "--every-ms",
                    "1",
                    "--for-ms",
                    "9000",
                ],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
            for _ in range(3)
        ]
        outputs = [probe.communicate(timeout=60) for probe in newcomers]
        for holder in old:
            holder.stop()
    finally:
        ha("stop")
    rust_ids = array("q")
    for (stdout, stderr), probe in zip(outputs, newcomers, strict=True):
        assert probe.returncode == 0, stderr.decode()
        rust_ids.frombytes(stdout[: len(stdout) // 8 * 8])
    python_ids = [id for holder in old for id in holder.ids]
    assert all(len(holder.ids) > 0 for holder in old)
    assert len(rust_ids) > 0, "the newcomers issued nothing"
    assert max(holder.longest_call for holder in old) < 0.1
    every = python_ids + list(rust_ids)
    duplicates = len(every) - len(set(every))
    assert duplicates == 0, f"{duplicates} duplicates in {len(every)} ids"
