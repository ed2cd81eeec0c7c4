"""Keeps docs/architecture.md's list of rooms true (issue 27): the rooms it draws are the
workspace's crates (Cargo.toml `members`, less the test and docs helpers), each once, and the
number it states is the number it draws.

    python docs/tools/rooms.py
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
HELPERS = ("tests/", "docs/")
NUMBERS = [
    "zero",
    "one",
    "two",
    "three",
    "four",
    "five",
    "six",
    "seven",
    "eight",
    "nine",
    "ten",
    "eleven",
    "twelve",
]


def main() -> int:
    members = tomllib.loads((ROOT / "Cargo.toml").read_text())["workspace"]["members"]
    crates = {member for member in members if not member.startswith(HELPERS)}
    page = (ROOT / "docs/architecture.md").read_text()
    stated = re.search(r"^(\w+) rooms, each importing", page, re.MULTILINE)
    drawing = re.search(r"```text\n(.*?)```", page, re.DOTALL)
    if not stated or not drawing:
        print("docs/architecture.md: no 'N rooms, each importing' line or no drawing")
        return 1
    drawn = re.findall(r"^(\S+)/\s", drawing.group(1), re.MULTILINE)
    problems = []
    if sorted(drawn) != sorted(crates):
        problems.append(
            f"the drawing shows {sorted(drawn)}, the workspace has {sorted(crates)}"
        )
    if stated.group(1).lower() != NUMBERS[len(drawn)]:
        problems.append(f"it says {stated.group(1)} rooms and draws {len(drawn)}")
    for problem in problems:
        print(f"docs/architecture.md: {problem}")
    if not problems:
        print(f"docs/architecture.md: {len(drawn)} rooms, the workspace's crates")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
