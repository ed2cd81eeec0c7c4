"""Code the multiprocessing children of test_lease.py run (a module, so 'spawn' can import it)."""

from __future__ import annotations

import json
import traceback
from array import array
from typing import Any

from clockflake import Generator

# Set by the parent before starting 'fork' children: the generator they inherit.
INHERITED: Generator | None = None


def generate(coordinator: str, out: str, count: int, barrier: Any) -> None:
    """Takes a lease (opens one, or re-leases the inherited generator), waits until every child
    holds one, writes `count` ids to `out + ".ids"` and a report to `out + ".json"`."""
    report: dict[str, Any] = {"worker_id": None, "error": None}
    try:
        gen = INHERITED if INHERITED is not None else Generator.open(coordinator)
        report["worker_id"] = gen.worker_id  # in a forked child: leases the child's own
        barrier.wait(60)  # all leases held at once: the worker ids must all differ
        next_id = gen.next_id
        ids = array("q", (next_id() for _ in range(count)))
        with open(out + ".ids", "wb") as file:
            file.write(ids.tobytes())
        barrier.wait(60)  # nobody releases a worker id before every child has generated
        gen.close()
    except Exception:
        report["error"] = traceback.format_exc()
        barrier.abort()
    with open(out + ".json", "w") as file:
        json.dump(report, file)
