"""clockflake (Python) against its PyPI peers, all measured in the same run.

Run with `make bench-python` (installs the peers into the virtualenv, then runs this script with
`--write BENCHMARKS.md`). Measures, per package:
  sustained  ids per second over 1 s of back-to-back calls (and duplicates among them);
             the Snowflake layouts cap at 4096 ids per ms = 4,096,000 ids/s
  raw        ns per call in bursts of 1000 started just after a millisecond tick
             (below the cap, so it is the cost of a call, not the wait for the next tick)
  decode     ns to turn an id back into its fields
  batch      ns per id for 1000 ids in a list, started just after a tick
             (clockflake: next_ids(1000); peers: a list comprehension of 1000 calls)
Every figure is the median of several repetitions.
"""

from __future__ import annotations

import argparse
import functools
import platform
import re
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import clockflake
import snowflake  # snowflake-id
import snowflake_id_toolkit
import ulid  # python-ulid
import uuid_utils
from timing import perf_ns, raw_cost, wait_for_tick

CAP = 4_096_000


class Subject:
    def __init__(
        self,
        name: str,
        version: str,
        make: Callable[[], Callable[[], Any]],
        decode: Callable[[Any], Any] | None,
        batch: Callable[[Callable[[], Any]], Callable[[], list[Any]]] | None = None,
        capped: bool = True,
    ) -> None:
        self.name, self.version, self.make, self.decode, self.capped = (
            name,
            version,
            make,
            decode,
            capped,
        )
        self.batch = batch or (lambda f: lambda: [f() for _ in range(1000)])


def dist_version(name: str) -> str:
    from importlib.metadata import version

    return version(name)


def subjects() -> list[Subject]:
    def cf_make() -> Callable[[], int]:
        return clockflake.Generator(worker_id=1).next_id

    lease_dir = tempfile.mkdtemp(prefix="clockflake-bench-")

    def cf_leased_make() -> Callable[[], int]:
        # A worker id leased from a file:// directory (released when the generator is dropped).
        return clockflake.Generator.open(f"file://{lease_dir}?app=bench").next_id

    def cf_batch(f: Callable[[], int]) -> Callable[[], list[int]]:
        gen = f.__self__  # type: ignore[attr-defined]
        return lambda: gen.next_ids(1000)

    sf_epoch = 1_288_834_974_657

    def sf_make() -> Callable[[], Any]:
        return snowflake.SnowflakeGenerator(1, epoch=sf_epoch).__next__

    tk = snowflake_id_toolkit.TwitterSnowflakeIDGenerator
    tk_id = snowflake_id_toolkit.TwitterSnowflakeID

    def tk_decode(x: int) -> Any:
        sid = tk_id(x)
        return (sid.timestamp_ms(), sid.node_id(), sid.sequence())

    return [
        Subject("clockflake", dist_version("clockflake"), cf_make, clockflake.decode, cf_batch),
        Subject(
            "clockflake leased (file://)",
            dist_version("clockflake"),
            cf_leased_make,
            None,
            cf_batch,
        ),
        Subject(
            "snowflake-id",
            dist_version("snowflake-id"),
            sf_make,
            lambda x: snowflake.Snowflake.parse(x, sf_epoch),
        ),
        Subject(
            "snowflake-id-toolkit",
            dist_version("snowflake-id-toolkit"),
            lambda: tk(node_id=1).generate_next_id,
            tk_decode,
        ),
        Subject(
            "uuid-utils uuid7",
            dist_version("uuid-utils"),
            lambda: uuid_utils.uuid7,
            lambda x: uuid_utils.UUID(int=x).timestamp,
            capped=False,
        ),
        Subject(
            "python-ulid",
            dist_version("python-ulid"),
            lambda: ulid.ULID,
            lambda x: ulid.ULID.from_int(x).timestamp,
            capped=False,
        ),
    ]


def sustained(make: Callable[[], Callable[[], Any]], seconds: float) -> tuple[float, int, int]:
    """(ids per second, ids, duplicates) over `seconds` of back-to-back calls; None results are not ids."""
    f = make()
    ids: list[Any] = []
    append = ids.append
    start = perf_ns()
    end = start + int(seconds * 1e9)
    while perf_ns() < end:
        for _ in range(1000):
            append(f())
    elapsed = perf_ns() - start
    real = [int(x) for x in ids if x is not None]
    return len(real) / elapsed * 1e9, len(real), len(real) - len(set(real))


def decode_cost(decode: Callable[[Any], Any], id: int, n: int = 100_000, reps: int = 7) -> float:
    samples = []
    r = range(n)
    for _ in range(reps):
        t0 = perf_ns()
        for _ in r:
            decode(id)
        samples.append((perf_ns() - t0) / n)
    return statistics.median(samples)


def batch_cost(batch: Callable[[], list[Any]], bursts: int = 200) -> float:
    samples = []
    for _ in range(bursts):
        wait_for_tick()
        t0 = perf_ns()
        batch()
        samples.append((perf_ns() - t0) / 1000)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--write", type=Path, help="replace the python section of this BENCHMARKS.md"
    )
    parser.add_argument("--reps", type=int, default=5, help="repetitions of the 1 s sustained run")
    parser.add_argument("--seconds", type=float, default=1.0)
    args = parser.parse_args()

    rows = []
    empty = raw_cost(lambda: None)
    for s in subjects():
        print(f"measuring {s.name} {s.version} ...", file=sys.stderr, flush=True)
        runs = [sustained(s.make, args.seconds) for _ in range(args.reps)]
        rate = statistics.median(r[0] for r in runs)
        dups = sum(r[2] for r in runs)
        total = sum(r[1] for r in runs)
        f = s.make()
        sample = f()
        while sample is None:
            sample = f()
        raw = raw_cost(f)
        dec = decode_cost(s.decode, int(sample)) if s.decode else None
        batch = batch_cost(s.batch(s.make()))
        rows.append(
            {
                "name": s.name,
                "version": s.version,
                "rate": rate,
                "capped": s.capped,
                "dups": dups,
                "total": total,
                "raw": raw,
                "decode": dec,
                "batch": batch,
            }
        )

    ours = rows[0]
    lines = [
        "## Python",
        "",
        "Command: `make bench-python` (runs `bindings-python/bench/bench.py --write BENCHMARKS.md` in `.venv`, "
        "after installing the peers there). "
        f"Python {platform.python_version()}, {platform.machine()}; clockflake built with `maturin develop --release` (abi3 wheel). "
        f"Medians: sustained over {args.reps} runs of {args.seconds:g} s; raw and batch over 200 bursts started just after a "
        "millisecond tick; decode over 7 runs of 100,000 calls. An empty Python call (`lambda: None`) costs "
        f"{empty:.0f} ns in the same loop. Ratios are the peer's figure over clockflake's (>1: clockflake is faster).",
        "",
        "| package | sustained ids/s | % of 4,096,000 cap | duplicates | raw ns/call | ratio | decode ns | ratio | 1000 ids ns/id | ratio |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]

    def ratio_of(r: dict, key: str) -> str:
        return "1" if r is ours else f"{r[key] / ours[key]:.2f}"

    for r in rows:
        cap = f"{r['rate'] / CAP * 100:.1f}%" if r["capped"] else "no cap"
        ratio = functools.partial(ratio_of, r)
        decode = (
            f"{r['decode']:.0f} | {ratio('decode')}"
            if r["decode"] is not None
            else "(same `decode`) | "
        )
        lines.append(
            f"| {r['name']} {r['version']} | {r['rate']:,.0f} | {cap} | {r['dups']} of {r['total']:,} | {r['raw']:.0f} | {ratio('raw')} "
            f"| {decode} | {r['batch']:.1f} | {ratio('batch')} |"
        )
    lines += [
        "",
        "clockflake leased: the same generator on a worker id leased with `Generator.open('file://DIR?app=bench')` "
        "(issue 6: a leased id costs no more than a static one). Its `next_ids(1000)` takes a tick's worth of ids at a time through the "
        "lease crate's `next_block` (deadline, reservation and clock-sequence checks per block), with the GIL released. "
        "Targets (issue 4): sustained at least 99% of the cap; raw `next_id()` at most 100 ns; `decode()` at most 150 ns; "
        "`next_ids(1000)` at most 25 ns per id. uuid7 and ULID have no per-ms cap (they are 128-bit, random-filled), so their "
        "sustained rate is just their call cost. snowflake-id returns None when a millisecond is used up: those calls are "
        "not counted as ids. Duplicates are counted over every id of every sustained run.",
    ]
    table = "\n".join(lines)
    print(table)
    if args.write:
        text = args.write.read_text()
        new, count = re.subn(
            r"(<!-- section: python -->\n).*?(\n<!-- /section: python -->)",
            lambda m: m.group(1) + table + m.group(2),
            text,
            flags=re.S,
        )
        if count != 1:
            raise SystemExit(f"{args.write}: no python section markers")
        args.write.write_text(new)
        print(f"wrote {args.write}", file=sys.stderr)


if __name__ == "__main__":
    main()
