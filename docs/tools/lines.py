"""Fails on a line over 100 characters in the given Markdown files and folders (issue 24: the
landing page and the site read well in a terminal and in review). Generated pages (docs/api/) and
the design document (docs/DESIGN.md, the lead's, wrapped by paragraph) are left out.

    python docs/tools/lines.py README.md docs
"""

from __future__ import annotations

import sys
from pathlib import Path

LIMIT = 100
LEFT_OUT = ("docs/api/", "docs/DESIGN.md")


def main() -> int:
    files: list[Path] = []
    for arg in sys.argv[1:]:
        path = Path(arg)
        files += sorted(path.rglob("*.md")) if path.is_dir() else [path]
    long = [
        f"{file}:{number}: {len(line)} characters"
        for file in files
        if not any(part in file.as_posix() for part in LEFT_OUT)
        for number, line in enumerate(file.read_text().splitlines(), 1)
        if len(line) > LIMIT
    ]
    print("\n".join(long) or f"no line over {LIMIT} characters in {len(files)} files")
    return 1 if long else 0


if __name__ == "__main__":
    sys.exit(main())
