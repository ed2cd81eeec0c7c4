"""Cold start of `clockflake` beside uuid-utils (its peer: a Rust extension for ids), in paired runs.

    python bindings-python/bench/import_time.py [--pairs N] [--old-dir DIR]

Each round runs, in an order that rotates from round to round, one fresh interpreter per subject:
  - import time: `python -X importtime -c "import M"`, the cumulative time of M (everything it
    imports, the native module included);
  - first id: the wall time of a whole process `python -c "import M; <one id>"`, from spawn to
    exit, and of `python -c "pass"` (the interpreter alone), so the difference is what the
    package costs a command-line tool or a serverless cold start.
It prints the medians and the paired ratios (clockflake / uuid_utils, same round). `--old-dir DIR`
adds another copy of the clockflake package folder (say, an older `__init__.py` beside the same
native module), first on PYTHONPATH, as a third subject. `make bench-python-import` runs it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

FIRST_ID = {
    "clockflake": "import clockflake; clockflake.Generator(worker_id=1).next_id()",
    "uuid_utils": "import uuid_utils; uuid_utils.uuid7()",
    "python": "pass",
}


def environment(python_path: str | None) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    if python_path is not None:
        env["PYTHONPATH"] = python_path
    return env


def import_us(module: str, python_path: str | None) -> int:
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", f"import {module}"],
        env=environment(python_path),
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    line = [row for row in err.splitlines() if row.rstrip().endswith(f"| {module}")][-1]
    return int(line.split("|")[1])


def process_us(code: str, python_path: str | None) -> int:
    env = environment(python_path)
    start = time.perf_counter_ns()
    subprocess.run([sys.executable, "-c", code], env=env, check=True)
    return (time.perf_counter_ns() - start) // 1000


def ms(values: list[int]) -> str:
    return f"{statistics.median(values) / 1000:.1f} ms"


def ratio(ours: list[int], theirs: list[int]) -> str:
    ratios = [a / b for a, b in zip(ours, theirs, strict=True)]
    return f"{statistics.median(ratios):.2f} (min {min(ratios):.2f}, max {max(ratios):.2f})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=30)
    parser.add_argument("--old-dir", help="another copy of the clockflake package, to compare")
    args = parser.parse_args()

    # (label, module, PYTHONPATH)
    subjects = [("clockflake", "clockflake", None), ("uuid_utils", "uuid_utils", None)]
    if args.old_dir:
        subjects.append(("clockflake (old)", "clockflake", args.old_dir))
    runs = [*subjects, ("python", "python", None)]

    def measure(label: str, module: str, path: str | None) -> tuple[int | None, int]:
        imported = None if module == "python" else import_us(module, path)
        return imported, process_us(FIRST_ID[module], path)

    for run in runs * 2:  # warm the .pyc files and the page cache
        measure(*run)
    imports: dict[str, list[int]] = {label: [] for label, _, _ in subjects}
    processes: dict[str, list[int]] = {label: [] for label, _, _ in runs}
    for i in range(args.pairs):
        shift = i % len(runs)
        for label, module, path in runs[shift:] + runs[:shift]:
            imported, process = measure(label, module, path)
            if imported is not None:
                imports[label].append(imported)
            processes[label].append(process)

    print(f"{sys.implementation.name} {sys.version.split()[0]}, {args.pairs} rounds, medians")
    base = processes["python"]
    for label, _, _ in subjects:
        net = [p - b for p, b in zip(processes[label], base, strict=True)]
        print(
            f"{label}: import {ms(imports[label])}; process with a first id {ms(processes[label])}"
            f" ({ms(net)} over `python -c pass`)"
        )
    print(f"python -c pass: {ms(base)}")
    print(
        "clockflake / uuid_utils, paired: import "
        f"{ratio(imports['clockflake'], imports['uuid_utils'])}; process "
        f"{ratio(processes['clockflake'], processes['uuid_utils'])}"
    )
    if args.old_dir:
        print(
            "clockflake (old) / clockflake, paired: import "
            f"{ratio(imports['clockflake (old)'], imports['clockflake'])}"
        )


if __name__ == "__main__":
    main()
