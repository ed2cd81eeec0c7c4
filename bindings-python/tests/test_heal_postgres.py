"""A leased generator whose PostgreSQL is frozen past the TTL, then thawed (issue 38): with
``heal=True`` (the default) it refuses with a retryable ``CoordinatorUnavailableError`` while
the lease is lost, leases again by itself after the thaw, and no id repeats, a newcomer having
taken the old worker id meanwhile. ``make test-python-pg`` provides the server
(``CLOCKFLAKE_PG_URL``) and the script that freezes it (``CLOCKFLAKE_PG_DIR``)."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from clockflake import CoordinatorUnavailableError, Generator, decode

PG_URL = os.environ.get("CLOCKFLAKE_PG_URL")
PG_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "postgres.sh"


def pg_script(action: str) -> None:
    subprocess.run(["bash", str(PG_SCRIPT), action], check=True)


def patiently(open_: Any, seconds: float = 10) -> Generator:
    """The first success of ``open_()`` within ``seconds`` (the server answers again soon
    after the thaw)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            return open_()  # type: ignore[no-any-return]
        except CoordinatorUnavailableError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def frozen_past_the_ttl(heal: bool) -> None:
    """The whole scenario; with ``heal=False`` its assertions fail (the generator stays dead)."""
    uri = f"{PG_URL}?app=python-heal-{os.getpid()}-{heal}&ttl=1s"
    gen = Generator.open(uri, heal=heal)
    first_worker = gen.worker_id
    # (id or None, exception or None, seconds the call took)
    log: list[tuple[int | None, Exception | None, float]] = []
    stop = threading.Event()

    def issue() -> None:
        while not stop.is_set():
            started = time.monotonic()
            try:
                log.append((gen.next_id(), None, time.monotonic() - started))
            except Exception as error:  # every refusal is checked below
                log.append((None, error, time.monotonic() - started))
            time.sleep(0.001)

    issuing = threading.Thread(target=issue)
    issuing.start()
    try:
        time.sleep(0.5)
        pg_script("freeze")
        try:
            time.sleep(2.5)
            while_frozen = gen.stats()
            active_while_frozen = gen.is_active
            # No worker id while it holds no lease: the same retryable refusal as ids.
            with pytest.raises(CoordinatorUnavailableError) as no_worker:
                _ = gen.worker_id
            assert no_worker.value.retry_at_ms is not None
        finally:
            pg_script("thaw")
        # A newcomer at the thaw (it may take the old worker id): its ids count too.
        newcomer = patiently(lambda: Generator.open(uri, heal=False))
        newcomer_ids = newcomer.next_ids(1000)
        healed_by = time.monotonic() + 15
        while not (gen.is_active and gen.stats()["heals"] >= 1):
            assert time.monotonic() < healed_by, f"not healed 15 s after the thaw: {gen.stats()}"
            time.sleep(0.02)
        time.sleep(0.3)
    finally:
        stop.set()
        issuing.join()
    stats = gen.stats()

    assert not active_while_frozen and while_frozen["state"] == "healing", while_frozen
    assert while_frozen["worker_id"] is None and while_frozen["losses"] == 1, while_frozen
    refusals = [error for _, error, _ in log if error is not None]
    assert refusals, "the lease was never lost"
    for error in refusals:
        # The same class and code as any coordinator outage: what the recipes already catch.
        assert isinstance(error, CoordinatorUnavailableError), repr(error)
        assert error.code == "COORDINATOR_UNAVAILABLE" and error.retry_at_ms is not None
    assert any("lease was lost" in str(error) for error in refusals), refusals[-1]
    slowest = max(took for _, _, took in log)
    assert slowest < 0.5, f"an id call took {slowest:.3f} s"
    last_refusal = max(i for i, (_, error, _) in enumerate(log) if error is not None)
    assert sum(1 for id_, _, _ in log[last_refusal:] if id_ is not None) > 10
    assert stats["state"] == "active" and stats["heal"] is True
    assert stats["losses"] >= 1 and stats["heals"] >= 1 and stats["last_loss"], stats
    assert stats["worker_id"] == gen.worker_id != newcomer.worker_id
    print(f"worker {first_worker} -> {gen.worker_id} (newcomer {newcomer.worker_id}); {stats}")

    # Every id of both generators, kept and checked: none repeats.
    ids = [id_ for id_, _, _ in log if id_ is not None] + newcomer_ids
    ids += gen.next_ids(1000)
    assert len(set(ids)) == len(ids), "a duplicate id"
    assert {decode(id_).worker_id for id_ in ids} >= {gen.worker_id, newcomer.worker_id}
    newcomer.close()
    gen.close()


@pytest.mark.skipif(not PG_URL, reason="CLOCKFLAKE_PG_URL not set (make test-python-pg)")
def test_postgres_frozen_past_the_ttl_heals_without_a_restart_and_repeats_no_id() -> None:
    frozen_past_the_ttl(heal=True)
