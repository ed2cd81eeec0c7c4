"""A static generator's next_id() in two builds of the package, side by side in one run: what
the fork check costs per call (issue 12: fork generation read from the lease crate's
pthread_atfork counter instead of the Python hook's).

    .venv/bin/python bindings-python/bench/fork_check.py BEFORE_DIR AFTER_DIR

Each directory holds an importable `clockflake` package (an unpacked wheel). The two are
measured in alternating child processes, ROUNDS each; every child reports the median of 200
bursts of 1000 calls started just after a millisecond tick (the cost of a call, not the wait
for the next tick), as `bench.py` measures "raw". Printed: the median over the rounds, and the
median of the per-round differences (each round runs both builds back to back, which cancels
most of the drift of a shared machine).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

ROUNDS = 15

CHILD = r"""
import json, statistics, time
import clockflake
perf_ns = time.perf_counter_ns

def wait_for_tick():
    start = time.time_ns() // 1_000_000
    while time.time_ns() // 1_000_000 == start:
        pass

def raw_cost(f, bursts=200, size=1000):
    samples = []
    r = range(size)
    for _ in range(bursts):
        wait_for_tick()
        t0 = perf_ns()
        for _ in r:
            f()
        samples.append((perf_ns() - t0) / size)
    return statistics.median(samples)

print(json.dumps({"file": clockflake.__file__,
                  "next_id": raw_cost(clockflake.Generator(worker_id=1).next_id),
                  "empty": raw_cost(lambda: None)}))
"""


def measure(package_dir: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=package_dir)
    out = subprocess.run(
        [sys.executable, "-c", CHILD], env=env, check=True, capture_output=True, text=True
    ).stdout
    result: dict[str, float] = json.loads(out)
    if not str(result["file"]).startswith(os.path.abspath(package_dir)):
        raise SystemExit(f"{package_dir}: imported clockflake from {result['file']} instead")
    return result


def main() -> None:
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    before_dir, after_dir = sys.argv[1:]
    runs: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    for round in range(ROUNDS):
        order = [("before", before_dir), ("after", after_dir)]
        for name, directory in order if round % 2 == 0 else order[::-1]:
            runs[name].append(measure(directory))
    print("| build | next_id() ns/call | empty Python call ns |")
    print("|---|---:|---:|")
    for name in ("before", "after"):
        next_id = statistics.median(r["next_id"] for r in runs[name])
        empty = statistics.median(r["empty"] for r in runs[name])
        print(f"| {name} | {next_id:.1f} | {empty:.1f} |")
    differences = [
        a["next_id"] - b["next_id"] for a, b in zip(runs["after"], runs["before"], strict=True)
    ]
    print(
        f"| after - before (median of the {ROUNDS} paired rounds) | {statistics.median(differences):+.1f} | |"
    )
    print(
        f"\n{ROUNDS} rounds, each one child process per build in alternating order; each child the median of "
        "200 bursts of 1000 calls."
    )


if __name__ == "__main__":
    main()
