"""Keeps the user pages for users: no issue numbers, seed names, commit hashes, untranslated CJK
text, test timings or notes about the machine the tests ran on.

    python docs/tools/user_pages.py [FILE.md ...]

The user pages are README.md (less its "## Working on clockflake" section) and docs/**/*.md,
less the pages for people working on clockflake (docs/DESIGN.md, docs/development.md,
docs/changelog.md, docs/benchmarks.md) and the generated API pages (docs/api/). Such notes belong in CHANGELOG.md, BENCHMARKS.md, docs/development.md or
docs/DESIGN.md. A self-test runs first: a small bad sample must fail, and a good one pass.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEVELOPER_PAGES = {
    "docs/DESIGN.md",
    "docs/development.md",
    "docs/changelog.md",
    "docs/benchmarks.md",
}
# README.md's section for people working on clockflake: from this heading to the next one.
README_DEVELOPER_SECTION = "## Working on clockflake"
RULES = {
    # "issue 7", "issue #7", "issues 15 and 16", "#26" (not "issues 4096 ids").
    "names an issue": re.compile(
        r"\b[Ii]ssue #?\d+\b|\b[Ii]ssues #?\d+(?=(,| and| or) #?\d)|(?<![\w&])#\d+\b"
    ),
    "names a seed": re.compile(r"\b[Ss]eeds? \d+\b"),
    # What a commit hash looks like: 7 to 12 lowercase hex digits (git's abbreviations) or 40, with
    # at least one letter and one digit, standing alone (not part of a longer word, path, URL or
    # number). Keys and digests (16, 32 or 64 hex digits) are not commits.
    "names a commit": re.compile(
        r"(?<![\w./:#-])(?=[0-9a-f]*[a-f])(?=[0-9a-f]*[0-9])"
        r"(?:[0-9a-f]{40}|[0-9a-f]{7,12})(?![\w-])"
    ),
    "has untranslated CJK text": re.compile(r"[\u3000-\u30ff\u3400-\u9fff\uac00-\ud7af]+"),
    "has a test timing or machine note": re.compile(
        r"\b\d+ min \d+ s\b|\b(this|the test|a fresh) machine\b|\b\d+-core\b"
        r"|\b(ran|run|runs) here\b|\bon this host\b"
    ),
}


def user_pages() -> list[Path]:
    generated = ROOT / "docs" / "api"
    docs = [
        page
        for page in (ROOT / "docs").rglob("*.md")
        if generated not in page.parents
        and page.relative_to(ROOT).as_posix() not in DEVELOPER_PAGES
    ]
    return sorted([ROOT / "README.md", *docs])


def problems_in(name: str, text: str) -> list[str]:
    found = []
    developer_section = False
    for number, line in enumerate(text.splitlines(), 1):
        if name.endswith("README.md") and line.startswith("## "):
            developer_section = line.strip() == README_DEVELOPER_SECTION
        if developer_section:
            continue
        for what, rule in RULES.items():
            for match in rule.finditer(line):
                found.append(f"{name}:{number}: {what}: {match.group(0)!r}")
    return found


SELF_TEST_BAD = {
    "an issue": "Leases from ZooKeeper, the way Leaf does (issue 7).",
    "an issue by hash": "Fixed in #26.",
    "a seed": "The js53 preset is seed 002's reduced Snowflake.",
    "a commit": "Two fresh runs passed (f883a1e, 9539b20).",
    "issues": "As issues 15 and 16 ask.",
    "a long commit": "Built from 9539b20f3c0d5e0a8b3c4d2e1f0a9b8c7d6e5f40.",
    "CJK": 'A clock set back at start-up ("启动时回拨").',
    "a timing": "`make test` took 18 min 54 s.",
    "a machine note": "Not run on this machine.",
}
SELF_TEST_GOOD = (
    "Ids such as 383948137795944448 and 2125537250721665024 decode to a time; a key of\n"
    "0123456789abcdef bytes; `file:///var/lib/myapp/ids`; the generator issues 4096 ids per ms;\n"
    "https://example.com/a1b2c3d4e5f6 and deadbeef-cafe-1234 are not commits; see #redis.\n"
)


def self_test() -> list[str]:
    problems = []
    for what, sample in SELF_TEST_BAD.items():
        if not problems_in("sample", sample):
            problems.append(f"self-test: {what} passed: {sample!r}")
    good = problems_in("sample", SELF_TEST_GOOD)
    if good:
        problems.append("self-test: the good sample failed: " + "; ".join(good))
    return problems


def main() -> int:
    problems = self_test()
    pages = [Path(arg).resolve() for arg in sys.argv[1:]] or user_pages()
    for page in pages:
        name = page.relative_to(ROOT) if page.is_relative_to(ROOT) else page
        problems += problems_in(str(name), page.read_text())
    print("\n".join(problems) or f"{len(pages)} user pages: no issue, seed, commit or lab note")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
