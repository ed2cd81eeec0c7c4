"""Keeps the figures that user pages repeat from BENCHMARKS.md equal to BENCHMARKS.md's.

    python docs/tools/figures.py

FIGURES below is the list of every such figure: where BENCHMARKS.md states it (a pattern whose
group is the figure) and each page that repeats it (a pattern whose group is the figure as the
page writes it). The check fails when BENCHMARKS.md no longer states a figure once, when a page
no longer quotes it, or when a page's figure differs from BENCHMARKS.md's (after converting bytes
to the page's MB with one decimal). A page that repeats a new figure from BENCHMARKS.md adds it
here. A self-test runs first: a page quoting 2.3 kB where BENCHMARKS.md says 2.4 kB must fail.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def same(text: str) -> str:
    return text


def megabytes(text: str) -> str:
    """4,318,032 (bytes) -> 4.3 MB."""
    return f"{int(text.replace(',', '')) / 1e6:.1f} MB"


@dataclass
class Figure:
    name: str
    benchmarks: str  # a pattern in BENCHMARKS.md; its group is the figure
    quotes: list[tuple[str, str]]  # (page, pattern whose group is the figure as quoted)
    convert: Callable[[str], str] = same  # BENCHMARKS.md's figure as pages write it


FIGURES = [
    Figure(
        "the decode-only bundle, gzipped",
        r"^\| `clockflake/decode` \(decode only, plain JS\) \| ([\d.]+ kB) \|",
        [
            ("docs/getting-started/javascript.md", r"plain JavaScript, ([\d.]+ kB) gzipped"),
            ("docs/reference/javascript-in-depth.md", r"plain JavaScript \(([\d.]+ kB) gzipped"),
            ("docs/concepts/choosing.md", r"decode-only entry is\s+([\d.]+ kB)"),
        ],
    ),
    Figure(
        "the full JavaScript bundle, gzipped",
        r"^\| `clockflake` \(generate \+ decode: JS \+ inlined wasm\) \| ([\d.]+ kB) \|",
        [
            ("docs/reference/javascript-in-depth.md", r"the full package is ([\d.]+ kB)"),
            ("docs/concepts/choosing.md", r"clockflake's bundle is\s+([\d.]+ kB)"),
        ],
    ),
    Figure(
        "@sapphire/snowflake's bundle, gzipped",
        r"^\| `@sapphire/snowflake` [\d.]+ \(generate \+ deconstruct\) \| ([\d.]+ kB) \|",
        [("docs/concepts/choosing.md", r"against\s+([\d.]+ kB) for `@sapphire/snowflake`")],
    ),
    Figure(
        "@sapphire/snowflake's share of repeated ids in Node's 1 s loop",
        # the Node.js section's table only (Bun's and Deno's have the same row)
        r"^## Node\.js\n(?s:(?:(?!\n## ).)*?)"
        r"^\| @sapphire/snowflake \| [\d,]+ \| [\d.]+% \| \d+% \| [\d,]+ \(([\d.]+%)\) \|",
        [("docs/concepts/choosing.md", r"it repeated\s+([\d.]+%) of its ids")],
    ),
    Figure(
        "the Linux x64 Node addon",
        r"^\| npm `clockflake-linux-x64-gnu` addon \(`\.node`, glibc 2\.17 symbols\) "
        r"\| ([\d,]+) \|",
        [("docs/concepts/choosing.md", r"a\s+([\d.]+ MB) native addon")],
        megabytes,
    ),
    Figure(
        "the x86_64 wheel",
        r"^\| Python wheel, manylinux2014 x86_64 \(abi3\) \| ([\d,]+) \|",
        [
            ("docs/reference/python-in-depth.md", r"The x86_64 wheel is\s+([\d.]+ MB)"),
            ("docs/concepts/choosing.md", r"([\d.]+ MB) wheel for Python"),
        ],
        megabytes,
    ),
]


def check(benchmarks: str, read: Callable[[str], str | None], figures: list[Figure]) -> list[str]:
    """The problems found; `read(page)` is a page's text, or None if it does not exist."""
    problems = []
    for figure in figures:
        found = re.findall(figure.benchmarks, benchmarks, re.MULTILINE)
        if len(found) != 1:
            problems.append(
                f"BENCHMARKS.md states {figure.name} {len(found)} times, not once: update FIGURES"
            )
            continue
        expected = figure.convert(found[0])
        for page, pattern in figure.quotes:
            text = read(page)
            if text is None:
                problems.append(f"{page}: missing, but listed as quoting {figure.name}")
                continue
            quoted = re.findall(pattern, text)
            if not quoted:
                problems.append(f"{page}: no longer quotes {figure.name} (pattern {pattern!r})")
            for value in quoted:
                if value != expected:
                    problems.append(
                        f"{page}: {figure.name} is {value}, BENCHMARKS.md says {expected}"
                    )
    return problems


def self_test() -> list[str]:
    """The check on a small bad sample must fail, and on the good one pass."""
    figure = Figure(
        "a bundle",
        r"^\| `clockflake/decode` \| ([\d.]+ kB) \|",
        [("page.md", r"plain JavaScript, ([\d.]+ kB) gzipped")],
    )
    bytes_figure = Figure(
        "a wheel", r"^\| wheel \| ([\d,]+) \|", [("page.md", r"a ([\d.]+ MB) wheel")], megabytes
    )
    benchmarks = "| `clockflake/decode` | 2.4 kB |\n| wheel | 2,179,239 |\n"
    good = "plain JavaScript, 2.4 kB gzipped; a 2.2 MB wheel"
    bad = "plain JavaScript, 2.3 kB gzipped; a 2.2 MB wheel"
    bad_bytes = "plain JavaScript, 2.4 kB gzipped; a 2.1 MB wheel"
    figures = [figure, bytes_figure]
    problems = []
    if check(benchmarks, lambda page: good, figures):
        problems.append("self-test: the good sample failed")
    for sample in (bad, bad_bytes, "nothing quoted"):
        if not check(benchmarks, lambda page, sample=sample: sample, figures):
            problems.append(f"self-test: the bad sample {sample!r} passed")
    return problems


def main() -> int:
    problems = self_test()

    def read(page: str) -> str | None:
        path = ROOT / page
        return path.read_text() if path.exists() else None

    problems += check((ROOT / "BENCHMARKS.md").read_text(), read, FIGURES)
    quotes = sum(len(figure.quotes) for figure in FIGURES)
    print("\n".join(problems) or f"{len(FIGURES)} figures, {quotes} quotes: equal to BENCHMARKS.md")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
