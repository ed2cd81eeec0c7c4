"""The ``clockflake`` command: decode ids, list the preset layouts, size a layout.

    clockflake decode ID [ID ...] [--layout NAME] [--json]
    clockflake layouts [--json]
    clockflake suggest WORKERS PEAK_IDS_PER_SEC LIFETIME_YEARS [--json]

``decode`` warns when an id's time is implausible for the layout (after now plus a day) and names
the preset that gives a plausible one. Also ``python -m clockflake``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from datetime import datetime, timezone

from clockflake._clockflake import (
    PRESET_NAMES,
    decode,
    describe_layout,
    guess_layout,
    is_plausible,
    suggest_layout,
)
from clockflake._errors import ClockflakeError
from clockflake._types import LayoutInfo

__all__ = ["main"]


def _utc(ms: int) -> str:
    return datetime.fromtimestamp(ms / 1000, timezone.utc).isoformat(timespec="milliseconds")


def _fields(info: LayoutInfo) -> str:
    return ", ".join(f"{f['name']} {f['bits']}" for f in info["fields"])


def _layout_json(info: LayoutInfo) -> dict[str, object]:
    # max_id and fingerprint may exceed 2**53: strings, as every 64-bit value in clockflake's JSON.
    return {**info, "max_id": str(info["max_id"]), "fingerprint": str(info["fingerprint"])}


def _decode(ids: Sequence[str], layout: str, as_json: bool) -> int:
    status = 0
    for text in ids:
        try:
            parts = decode(text, layout)
        except ClockflakeError as error:
            print(f"{text}: {error.code}: {error}", file=sys.stderr)
            status = 1
            continue
        plausible = is_plausible(text, layout)
        guess = None if plausible else guess_layout(text)
        if as_json:
            record: dict[str, object] = {"id": text, "layout": layout, **parts.as_dict()}
            record["time"] = _utc(parts.timestamp_ms)
            record["plausible"] = plausible
            record["guess"] = guess[0] if guess else None
            print(json.dumps(record))
            continue
        print(
            f"{text}  {_utc(parts.timestamp_ms)}  clock_seq {parts.clock_seq}  "
            f"worker {parts.worker_id}  sequence {parts.sequence}  ({layout})"
        )
        if not plausible:
            hint = (
                f"; under {guess[0]} it reads {_utc(guess[1].timestamp_ms)}"
                if guess
                else "; no preset gives a plausible time"
            )
            print(f"  warning: that time is after now for {layout}{hint}", file=sys.stderr)
    return status


def _layouts(as_json: bool) -> int:
    for name in PRESET_NAMES:
        info = describe_layout(name)
        if as_json:
            print(json.dumps(_layout_json(info)))
        else:
            end = _utc(info["epoch_ms"] + (1 << info["fields"][0]["bits"]) * info["unit_ms"])
            print(
                f"{name:10} {_fields(info)}; tick {info['unit_ms']} ms; "
                f"{info['max_worker_id'] + 1} workers; epoch {_utc(info['epoch_ms'])[:10]}; "
                f"until {end[:10]}"
            )
    return 0


def _suggest(workers: int, rate: int, years: int, as_json: bool) -> int:
    try:
        info = suggest_layout(workers, rate, years)
    except ClockflakeError as error:
        print(f"{error.code}: {error}", file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(_layout_json(info)))
        return 0
    sequence = next(f["bits"] for f in info["fields"] if f["name"] == "sequence")
    print(f"{_fields(info)}; tick {info['unit_ms']} ms; epoch {_utc(info['epoch_ms'])[:10]}")
    print(
        f"{info['max_worker_id'] + 1} workers, {1 << sequence} ids per ms per worker, "
        f"{info['clock_seqs']} clock sequences"
    )
    spec = {"fields": info["fields"], "epoch_ms": info["epoch_ms"], "unit_ms": info["unit_ms"]}
    print(f"layout = {json.dumps(spec)}")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="clockflake", description=__doc__.split("\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    decoding = commands.add_parser("decode", help="what ids say: time, clock sequence, worker")
    decoding.add_argument("ids", nargs="+", metavar="ID")
    decoding.add_argument("--layout", default="clockseq", help="a preset name (default clockseq)")
    decoding.add_argument("--json", action="store_true", help="one JSON object per id")
    listing = commands.add_parser("layouts", help="the preset layouts")
    listing.add_argument("--json", action="store_true")
    sizing = commands.add_parser("suggest", help="a layout for a fleet, a peak rate, a lifetime")
    sizing.add_argument("workers", type=int, help="processes alive at once")
    sizing.add_argument("peak_ids_per_sec", type=int, help="from any one process")
    sizing.add_argument("lifetime_years", type=int, help="from 2024-01-01")
    sizing.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if args.command == "decode":
        return _decode(args.ids, args.layout, args.json)
    if args.command == "layouts":
        return _layouts(args.json)
    return _suggest(args.workers, args.peak_ids_per_sec, args.lifetime_years, args.json)


if __name__ == "__main__":
    sys.exit(main())
