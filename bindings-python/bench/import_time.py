"""Import time of `clockflake`, against another copy of the package, in paired runs.

    python bindings-python/bench/import_time.py OLD_DIR

OLD_DIR holds another `clockflake/` package folder (say, this one with an older `__init__.py`
beside the same native module). Each pair runs `python -X importtime -c "import clockflake"`
once with OLD_DIR first on PYTHONPATH and once without (the installed package), alternating
which goes first; it prints the medians of the cumulative import time and of the ratios.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys

CODE = "import clockflake"


def import_us(python_path: str | None) -> int:
    env = dict(os.environ)
    if python_path is not None:
        env["PYTHONPATH"] = python_path
    err = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", CODE],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stderr
    line = [row for row in err.splitlines() if row.rstrip().endswith("| clockflake")][-1]
    return int(line.split("|")[1])


def main() -> None:
    old_dir = sys.argv[1]
    for _ in range(3):  # .pyc files and the page cache
        import_us(old_dir)
        import_us(None)
    old: list[int] = []
    new: list[int] = []
    for i in range(30):
        if i % 2:
            old.append(import_us(old_dir))
            new.append(import_us(None))
        else:
            new.append(import_us(None))
            old.append(import_us(old_dir))
    ratios = [o / n for o, n in zip(old, new, strict=True)]
    print(
        f"other: median {statistics.median(old) / 1000:.1f} ms; this: median "
        f"{statistics.median(new) / 1000:.1f} ms; paired ratio median {statistics.median(ratios):.2f} "
        f"(min {min(ratios):.2f}, max {max(ratios):.2f}), {len(old)} pairs"
    )


if __name__ == "__main__":
    main()
