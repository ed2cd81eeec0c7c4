"""Two builds of the package side by side in one run: the per-call cost of a static
generator's next_id(), a leased one's (file://; healing, the default, and with heal=False, which
a build from before healing reads as a plain open) and decode(), for a change's before and after.

    .venv/bin/python bindings-python/bench/compare.py BEFORE_DIR AFTER_DIR

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
import json
import tempfile
import clockflake
from timing import raw_cost

with tempfile.TemporaryDirectory() as pool:
    leased = clockflake.Generator.open(f"file://{pool}?app=bench")
    try:
        once = clockflake.Generator.open(f"file://{pool}?app=bench-once", heal=False)
    except TypeError:  # a build from before healing: every leased generator is one lease
        once = clockflake.Generator.open(f"file://{pool}?app=bench-once")
    static = clockflake.Generator(worker_id=1)
    an_id = static.next_id()
    print(json.dumps({"file": clockflake.__file__,
                      "next_id": raw_cost(static.next_id),
                      "leased next_id": raw_cost(leased.next_id),
                      "leased, heal=False": raw_cost(once.next_id),
                      "decode": raw_cost(lambda: clockflake.decode(an_id)),
                      "empty call": raw_cost(lambda: None)}))
    leased.close()
    once.close()
"""
CALLS = ["next_id", "leased next_id", "leased, heal=False", "decode", "empty call"]
# The child imports `timing` (bench.py's "raw" measurement) from this folder.
HERE = os.path.dirname(os.path.abspath(__file__))


def measure(package_dir: str) -> dict[str, float]:
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([package_dir, HERE]))
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
    print("| build | " + " | ".join(f"{call} ns" for call in CALLS) + " |")
    print("|---|" + "---:|" * len(CALLS))
    for name in ("before", "after"):
        medians = [statistics.median(r[call] for r in runs[name]) for call in CALLS]
        print(f"| {name} | " + " | ".join(f"{m:.1f}" for m in medians) + " |")
    paired = [
        statistics.median(
            a[call] - b[call] for a, b in zip(runs["after"], runs["before"], strict=True)
        )
        for call in CALLS
    ]
    print(
        f"| after - before (median of the {ROUNDS} paired rounds) | "
        + " | ".join(f"{d:+.1f}" for d in paired)
        + " |"
    )
    print(
        f"\n{ROUNDS} rounds, each one child process per build in alternating order; each child the median of "
        "200 bursts of 1000 calls."
    )


if __name__ == "__main__":
    main()
