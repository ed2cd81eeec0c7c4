#!/usr/bin/env python3
"""Independent reference for the shared test vectors.

Written from docs/DESIGN.md with plain integers and no code from core: the vectors are
what this script says, and every language's runner checks its binding against them.

    python3 tests/vectors/reference.py          # rewrite tests/vectors/*.json
    python3 tests/vectors/reference.py --check  # fail if the committed files differ
"""

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
FIELD_INDEX = {"timestamp": 0, "clock_seq": 1, "worker": 2, "sequence": 3}
MAX_TIME_MS = 2**53 - 1
NOV_2026 = 1_795_000_000_000  # 2026-11-18T10:13:20Z


class Refusal(Exception):
    def __init__(self, code, retry_at_ms=None):
        super().__init__(code)
        self.code = code
        self.retry_at_ms = retry_at_ms


# ---------------------------------------------------------------- layouts

PRESETS = {
    "clockseq": (
        [("timestamp", 41), ("clock_seq", 3), ("worker", 7), ("sequence", 12)],
        1,
        1704067200000,
    ),
    "twitter": ([("timestamp", 41), ("worker", 10), ("sequence", 12)], 1, 1288834974657),
    "discord": ([("timestamp", 41), ("worker", 10), ("sequence", 12)], 1, 1420070400000),
    "sonyflake": ([("timestamp", 39), ("sequence", 8), ("worker", 16)], 10, 1409529600000),
    "baidu": ([("timestamp", 28), ("worker", 22), ("sequence", 13)], 1000, 1463673600000),
    "js53": ([("timestamp", 33), ("worker", 4), ("sequence", 15)], 1000, 1704067200000),
}


class Layout:
    def __init__(self, fields, unit_ms, epoch_ms):
        names = [name for name, _ in fields]
        max_bits = {"timestamp": 63, "clock_seq": 4, "worker": 32, "sequence": 32}
        for name, bits in fields:
            if name not in FIELD_INDEX or bits > max_bits[name] or bits < 0:
                raise Refusal("INVALID_LAYOUT")
        if len(set(names)) != len(names) or not names or names[0] != "timestamp":
            raise Refusal("INVALID_LAYOUT")
        if "sequence" not in names or dict(fields)["timestamp"] < 1:
            raise Refusal("INVALID_LAYOUT")
        total = sum(bits for _, bits in fields)
        if total > 63 or unit_ms < 1:
            raise Refusal("INVALID_LAYOUT")
        self.bits = dict.fromkeys(FIELD_INDEX, 0)
        self.shift = dict.fromkeys(FIELD_INDEX, 0)
        below = total
        for name, bits in fields:
            below -= bits
            self.bits[name], self.shift[name] = bits, below
        self.fields = [(n, b) for n, b in fields if b > 0]
        self.total, self.unit, self.epoch = total, unit_ms, epoch_ms
        if epoch_ms + 2 ** self.bits["timestamp"] * unit_ms - 1 > MAX_TIME_MS:
            raise Refusal("INVALID_LAYOUT")

    def max(self, name):
        return 2 ** self.bits[name] - 1

    @property
    def max_id(self):
        return 2**self.total - 1

    @property
    def end_ms(self):  # first Unix ms the layout cannot hold
        return self.epoch + (self.max("timestamp") + 1) * self.unit

    def fingerprint(self):  # FNV-1a 64 over (field index, bits)..., unit, epoch (little endian)
        h = 0xCBF29CE484222325
        data = [b for name, bits in self.fields for b in (FIELD_INDEX[name], bits)]
        data += list(self.unit.to_bytes(8, "little")) + list(self.epoch.to_bytes(8, "little"))
        for byte in data:
            h = ((h ^ byte) * 0x100000001B3) % 2**64
        return h

    def compose(self, tick, cs, worker, seq):
        return (
            (tick << self.shift["timestamp"])
            | (cs << self.shift["clock_seq"])
            | (worker << self.shift["worker"])
            | (seq << self.shift["sequence"])
        )

    def field(self, value, name):
        return (value >> self.shift[name]) & self.max(name)

    def parse(self, text):
        if text == "" or text.startswith("-"):
            raise Refusal("INVALID_ID")
        if not all("0" <= c <= "9" for c in text):
            raise Refusal("INVALID_ID")
        value = int(text)
        if value >= 2**63 or value > self.max_id:
            raise Refusal("INVALID_ID")
        return value

    def decode(self, text):
        value = self.parse(text)
        return {
            "timestamp_ms": str(self.epoch + self.field(value, "timestamp") * self.unit),
            "clock_seq": self.field(value, "clock_seq"),
            "worker_id": self.field(value, "worker"),
            "sequence": self.field(value, "sequence"),
        }

    def tick_in_range(self, ms, code):
        if ms < self.epoch or ms >= self.end_ms:
            raise Refusal(code)
        return (ms - self.epoch) // self.unit

    def encode(self, parts):
        tick = self.tick_in_range(int(parts["timestamp_ms"]), "TIMESTAMP_OUT_OF_RANGE")
        for key, name, code in [
            ("clock_seq", "clock_seq", "CLOCK_SEQ_OUT_OF_RANGE"),
            ("worker_id", "worker", "WORKER_ID_OUT_OF_RANGE"),
            ("sequence", "sequence", "SEQUENCE_OUT_OF_RANGE"),
        ]:
            if parts[key] > self.max(name):
                raise Refusal(code)
        return str(self.compose(tick, parts["clock_seq"], parts["worker_id"], parts["sequence"]))

    def id_range(self, args):
        lo_ms, hi_ms = int(args["from_ms"]), int(args["to_ms"])
        if lo_ms > hi_ms:
            raise Refusal("INVALID_RANGE")
        lo = self.tick_in_range(lo_ms, "TIMESTAMP_OUT_OF_RANGE")
        hi = self.tick_in_range(hi_ms, "TIMESTAMP_OUT_OF_RANGE")
        below = 2 ** self.shift["timestamp"] - 1
        return [str(lo << self.shift["timestamp"]), str((hi << self.shift["timestamp"]) | below)]


def layout_from_json(spec):
    if isinstance(spec, str):
        if spec not in PRESETS:
            raise Refusal("UNKNOWN_LAYOUT")
        return Layout(*PRESETS[spec])
    return Layout(
        [(f["name"], f["bits"]) for f in spec["fields"]], spec["unit_ms"], int(spec["epoch_ms"])
    )


# ---------------------------------------------------------------- generator, literally as DESIGN.md states it


class Generator:
    def __init__(self, layout, worker_id, on_rollback=None, max_wait_ms=5, max_drift_ms=1000):
        if worker_id > layout.max("worker"):
            raise Refusal("WORKER_ID_OUT_OF_RANGE")
        self.l, self.worker = layout, worker_id
        self.policy = on_rollback or ("clock-sequence" if layout.bits["clock_seq"] else "wait")
        self.max_wait, self.max_drift = max_wait_ms, max_drift_ms
        self.cs, self.last, self.seq = 0, None, None
        self.hwm = [None] * 2 ** layout.bits["clock_seq"]

    def ms(self, tick):
        return self.l.epoch + tick * self.l.unit

    def within_wait(self, retry_ms, now_ms):
        return retry_ms if retry_ms - now_ms <= self.max_wait else None

    def issue(self, tick, seq):
        self.last, self.seq = tick, seq
        self.hwm[self.cs] = tick
        return str(self.l.compose(tick, self.cs, self.worker, seq))

    def next(self, now_ms):
        if now_ms < self.l.epoch:
            raise Refusal("EPOCH_IN_FUTURE")
        if now_ms >= self.l.end_ms:
            raise Refusal("TIMESTAMP_EXHAUSTED")
        now = (now_ms - self.l.epoch) // self.l.unit
        last, seq_max = self.last, self.l.max("sequence")
        if last is None or now > last:
            return self.issue(now, 0)
        if now == last and self.seq < seq_max:
            return self.issue(last, self.seq + 1)
        if self.policy == "logical":  # never go back: stay at last, then run ahead within max_drift
            if self.seq < seq_max:
                return self.issue(last, self.seq + 1)
            if last + 1 > self.l.max("timestamp"):
                raise Refusal("TIMESTAMP_EXHAUSTED")
            drift = self.max_drift // self.l.unit
            if last + 1 <= now + drift:
                return self.issue(last + 1, 0)
            retry = self.ms(last + 1 - drift)
            if now < last:
                raise Refusal("CLOCK_MOVED_BACKWARDS", self.within_wait(retry, now_ms))
            raise Refusal("SEQUENCE_EXHAUSTED", retry)
        if now == last:
            raise Refusal("SEQUENCE_EXHAUSTED", self.ms(last + 1))
        if self.policy == "fail":
            raise Refusal("CLOCK_MOVED_BACKWARDS", None)
        if self.policy == "wait":
            raise Refusal("CLOCK_MOVED_BACKWARDS", self.within_wait(self.ms(last + 1), now_ms))
        n = len(self.hwm)
        for step in range(1, n):
            k = (self.cs + step) % n
            if self.hwm[k] is None or self.hwm[k] < now:
                self.cs = k
                return self.issue(now, 0)
        free_at = min(self.hwm) + 1
        raise Refusal("CLOCK_SEQUENCE_EXHAUSTED", self.within_wait(self.ms(free_at), now_ms))

    def restart(self, reserve_ms=None):
        """state() then resume(state): only cs and the marks (in ms, rounded down to ticks) survive."""
        marks = [None if t is None else self.ms(t) for t in self.hwm]
        if reserve_ms is not None:
            marks[self.cs] = (
                reserve_ms if marks[self.cs] is None else max(marks[self.cs], reserve_ms)
            )
        self.hwm = [None if m is None else (m - self.l.epoch) // self.l.unit for m in marks]
        self.last = self.hwm[self.cs]
        self.seq = self.l.max("sequence")  # unknown how many were used: treat the tick as full


class TextbookGenerator(Generator):
    """The textbook variant: on every rollback cs = (cs + 1) & 7, no marks. Used only to show
    that the 'nine rollbacks' vector would make it repeat an id."""

    def next(self, now_ms):
        now = (now_ms - self.l.epoch) // self.l.unit
        if self.last is not None and now < self.last:
            self.cs = (self.cs + 1) % len(self.hwm)
            return self.issue(now, 0)
        return super().next(now_ms)


# ---------------------------------------------------------------- case building


def run(fn, *args):
    try:
        return {"out": fn(*args)}
    except Refusal as refusal:
        return {"error": refusal.code}


def generate_case(layout, case_id, steps, worker_id=1, **options):
    args = {"worker_id": worker_id, **options}
    try:
        gen = Generator(layout, **args)
    except Refusal as refusal:
        return {"id": case_id, "op": "generate", "in": {**args, "steps": []}, "error": refusal.code}
    out_steps = []
    for step in steps:
        if "restart" in step:
            reserve = step.get("reserve_ms")
            gen.restart(reserve)
            out_steps.append({"restart": True, **({"reserve_ms": str(reserve)} if reserve else {})})
            continue
        now_ms, repeat = step["now_ms"], step.get("repeat", 1)
        result = {"now_ms": str(now_ms)}
        if repeat > 1:
            result["repeat"] = repeat
        try:
            for _ in range(repeat):
                result["out"] = gen.next(now_ms)
        except Refusal as refusal:
            assert repeat == 1, f"{case_id}: a repeated step must not refuse"
            result.pop("out", None)
            result["error"] = refusal.code
            result["retry_at_ms"] = (
                None if refusal.retry_at_ms is None else str(refusal.retry_at_ms)
            )
        out_steps.append(result)
    return {"id": case_id, "op": "generate", "in": {**args, "steps": out_steps}}


def preset_cases(name):
    layout = Layout(*PRESETS[name])
    cases = []
    T = layout.epoch + 1000 * 86_400_000 // layout.unit * layout.unit  # 1000 days after the epoch
    if layout.end_ms <= T:
        T = layout.epoch + 86_400_000
    parts_list = [
        {"timestamp_ms": str(layout.epoch), "clock_seq": 0, "worker_id": 0, "sequence": 0},
        {
            "timestamp_ms": str(T),
            "clock_seq": min(5, layout.max("clock_seq")),
            "worker_id": min(9, layout.max("worker")),
            "sequence": 3,
        },
        {
            "timestamp_ms": str(layout.end_ms - layout.unit),
            "clock_seq": layout.max("clock_seq"),
            "worker_id": layout.max("worker"),
            "sequence": layout.max("sequence"),
        },
    ]
    for i, parts in enumerate(parts_list):
        cases.append(
            {"id": f"{name}-encode-{i}", "op": "encode", "in": parts, **run(layout.encode, parts)}
        )
        encoded = layout.encode(parts)
        cases.append(
            {
                "id": f"{name}-decode-{i}",
                "op": "decode",
                "in": encoded,
                **run(layout.decode, encoded),
            }
        )
    # A time inside a tick rounds down to the tick's start.
    mid = {"timestamp_ms": str(T + layout.unit - 1), "clock_seq": 0, "worker_id": 1, "sequence": 1}
    cases.append(
        {"id": f"{name}-encode-rounds-down", "op": "encode", "in": mid, **run(layout.encode, mid)}
    )
    bad_parts = [
        ("before-epoch", {"timestamp_ms": str(layout.epoch - 1)}),
        ("past-lifetime", {"timestamp_ms": str(layout.end_ms)}),
        ("clock-seq", {"clock_seq": layout.max("clock_seq") + 1}),
        ("worker", {"worker_id": layout.max("worker") + 1}),
        ("sequence", {"sequence": layout.max("sequence") + 1}),
    ]
    for label, change in bad_parts:
        parts = {**parts_list[1], **change}
        cases.append(
            {
                "id": f"{name}-encode-bad-{label}",
                "op": "encode",
                "in": parts,
                **run(layout.encode, parts),
            }
        )
    bad_ids = [
        "",
        "-1",
        "abc",
        "12a",
        " 1",
        "+1",
        "1.5",
        "9223372036854775808",
        "18446744073709551615",
        "99999999999999999999999",
    ]
    if layout.total < 63:
        bad_ids.append(str(layout.max_id + 1))  # timestamp beyond the layout's lifetime
    for i, text in enumerate(bad_ids):
        cases.append(
            {"id": f"{name}-decode-bad-{i}", "op": "decode", "in": text, **run(layout.decode, text)}
        )
    cases.append(
        {
            "id": f"{name}-decode-leading-zeros",
            "op": "decode",
            "in": "0007",
            **run(layout.decode, "0007"),
        }
    )
    cases.append(
        {
            "id": f"{name}-decode-max",
            "op": "decode",
            "in": str(layout.max_id),
            **run(layout.decode, str(layout.max_id)),
        }
    )
    for label, args in [
        ("one-tick", {"from_ms": str(T), "to_ms": str(T)}),
        ("one-day", {"from_ms": str(T), "to_ms": str(T + 86_400_000)}),
        ("reversed", {"from_ms": str(T + 1), "to_ms": str(T)}),
        ("before-epoch", {"from_ms": str(layout.epoch - 1), "to_ms": str(T)}),
        ("past-lifetime", {"from_ms": str(T), "to_ms": str(layout.end_ms)}),
    ]:
        cases.append(
            {
                "id": f"{name}-id-range-{label}",
                "op": "id_range",
                "in": args,
                **run(layout.id_range, args),
            }
        )
    return cases


def preset_generator_cases(name):
    layout = Layout(*PRESETS[name])
    u = layout.unit
    T = min(NOV_2026, layout.end_ms - 100 * u) // u * u
    cases = [
        generate_case(
            layout,
            f"{name}-generate-advancing",
            [
                {"now_ms": T},
                {"now_ms": T},
                {"now_ms": T + u},
                {"now_ms": T + 5 * u},
                {"now_ms": T + 5 * u},
            ],
        ),
        generate_case(
            layout, f"{name}-generate-worker-out-of-range", [], worker_id=layout.max("worker") + 1
        ),
        generate_case(layout, f"{name}-generate-before-epoch", [{"now_ms": layout.epoch - 1}]),
        generate_case(layout, f"{name}-generate-past-lifetime", [{"now_ms": layout.end_ms}]),
    ]
    if name == "baidu":  # ran out on 2024-11-20: decodes, refuses to generate now
        cases.append(
            generate_case(layout, "baidu-generate-refuses-in-2026", [{"now_ms": NOV_2026}])
        )
        cases.append(
            generate_case(layout, "baidu-generate-in-2020", [{"now_ms": 1_600_000_000_000}])
        )
    seq_count = layout.max("sequence") + 1
    if seq_count <= 2**15:
        cases.append(
            generate_case(
                layout,
                f"{name}-generate-sequence-exhausted",
                [{"now_ms": T, "repeat": seq_count}, {"now_ms": T}, {"now_ms": T + u}],
            )
        )
    cases.append(
        generate_case(
            layout,
            f"{name}-generate-rollback-default-policy",
            [
                {"now_ms": T + 10 * u},
                {"now_ms": T + 10 * u - 3},
                {"now_ms": T},
                {"now_ms": T + 11 * u},
            ],
        )
    )
    return cases


def clockseq_generator_cases():
    layout = Layout(*PRESETS["clockseq"])
    T = 1_735_689_600_000  # 2025-01-01T00:00:00Z
    cases = []
    for label, back in [("1ms", 1), ("1s", 1000), ("1h", 3_600_000)]:
        cases.append(
            generate_case(
                layout,
                f"clockseq-rollback-{label}",
                [
                    {"now_ms": T},
                    {"now_ms": T},
                    {"now_ms": T - back},
                    {"now_ms": T - back},
                    {"now_ms": T + 1},
                ],
            )
        )
    # Nine rollbacks inside one second: the textbook (cs + 1) & 7 variant repeats an id at the
    # eighth; here every clock sequence is used at that time, so it refuses instead.
    nine = []
    for _ in range(9):
        nine += [{"now_ms": T + 100}, {"now_ms": T + 500}]
    nine += [{"now_ms": T + 498}, {"now_ms": T + 501}, {"now_ms": T + 502}]
    textbook, issued, repeated = TextbookGenerator(layout, 1), set(), False
    for step in nine:
        value = textbook.next(step["now_ms"])
        repeated |= value in issued
        issued.add(value)
    assert repeated, "the nine-rollback schedule must defeat the textbook variant"
    cases.append(generate_case(layout, "clockseq-nine-rollbacks-in-one-second", nine))
    # Rotation skips clock sequences still in use at this time and returns to freed ones.
    cases.append(
        generate_case(
            layout,
            "clockseq-rotation-skips-busy-sequences",
            [
                {"now_ms": T + 1000},
                {"now_ms": T},
                {"now_ms": T + 2000},
                {"now_ms": T + 1500},
                {"now_ms": T + 2500},
                {"now_ms": T + 1001},
                {"now_ms": T + 3000},
                {"now_ms": T + 2600},
            ],
        )
    )
    cases.append(
        generate_case(
            layout,
            "clockseq-sequence-exhausted-after-switch",
            [{"now_ms": T + 10}, {"now_ms": T, "repeat": 4096}, {"now_ms": T}, {"now_ms": T + 1}],
        )
    )
    for policy in ["clock-sequence", "wait", "logical", "fail"]:
        for wait in [0, 5]:
            cases.append(
                generate_case(
                    layout,
                    f"clockseq-policy-{policy}-max-wait-{wait}",
                    [
                        {"now_ms": T + 10},
                        {"now_ms": T + 7},
                        {"now_ms": T + 7},
                        {"now_ms": T + 11},
                        {"now_ms": T - 1000},
                        {"now_ms": T + 12},
                    ],
                    on_rollback=policy,
                    max_wait_ms=wait,
                )
            )
    cases.append(
        generate_case(
            layout,
            "clockseq-logical-runs-ahead-within-drift",
            [
                {"now_ms": T, "repeat": 4096},
                {"now_ms": T},
                {"now_ms": T, "repeat": 4095},
                {"now_ms": T},
                {"now_ms": T},
            ],
            on_rollback="logical",
            max_drift_ms=1,
        )
    )
    cases.append(
        generate_case(
            layout,
            "clockseq-logical-no-drift-waits",
            [{"now_ms": T, "repeat": 4096}, {"now_ms": T}, {"now_ms": T + 1}],
            on_rollback="logical",
            max_drift_ms=0,
        )
    )
    cases.append(
        generate_case(
            layout,
            "clockseq-restart-with-clock-1h-back",
            [
                {"now_ms": T},
                {"now_ms": T},
                {"restart": True},
                {"now_ms": T - 3_600_000},
                {"restart": True},
                {"now_ms": T},
                {"now_ms": T + 1},
            ],
        )
    )
    cases.append(
        generate_case(
            layout,
            "clockseq-restart-same-tick-is-full",
            [{"now_ms": T}, {"restart": True}, {"now_ms": T}, {"now_ms": T + 1}],
            on_rollback="wait",
        )
    )
    cases.append(
        generate_case(
            layout,
            "clockseq-restart-after-reservation",
            [
                {"now_ms": T},
                {"restart": True, "reserve_ms": T + 1000},
                {"now_ms": T + 500},
                {"now_ms": T + 1001},
            ],
        )
    )
    cases.append(generate_case(layout, "clockseq-worker-127", [{"now_ms": T}], worker_id=127))
    return cases


def layout_cases():
    cases = []
    for name in PRESETS:
        layout = Layout(*PRESETS[name])
        cases.append(
            {
                "id": f"layout-preset-{name}",
                "op": "layout",
                "in": name,
                "out": {
                    "fields": [{"name": n, "bits": b} for n, b in layout.fields],
                    "unit_ms": layout.unit,
                    "epoch_ms": str(layout.epoch),
                    "max_id": str(layout.max_id),
                    "fingerprint": str(layout.fingerprint()),
                },
            }
        )
    cases.append(
        {
            "id": "layout-unknown-preset",
            "op": "layout",
            "in": "snowflake",
            "error": "UNKNOWN_LAYOUT",
        }
    )

    def spec(fields, unit=1, epoch=1704067200000):
        return {
            "fields": [{"name": n, "bits": b} for n, b in fields],
            "unit_ms": unit,
            "epoch_ms": str(epoch),
        }

    for label, custom in [
        ("custom-ok", spec([("timestamp", 40), ("worker", 8), ("sequence", 10)], 2)),
        (
            "custom-omitted-fields-equal-preset",
            spec([("timestamp", 41), ("worker", 10), ("sequence", 12)], 1, 1288834974657),
        ),
        ("over-63-bits", spec([("timestamp", 42), ("worker", 10), ("sequence", 12)])),
        ("timestamp-not-first", spec([("worker", 10), ("timestamp", 41), ("sequence", 12)])),
        ("no-sequence", spec([("timestamp", 41), ("worker", 10)])),
        ("duplicate-field", spec([("timestamp", 41), ("sequence", 6), ("sequence", 6)])),
        ("clock-seq-too-wide", spec([("timestamp", 41), ("clock_seq", 5), ("sequence", 12)])),
        ("zero-unit", spec([("timestamp", 41), ("sequence", 12)], 0)),
        ("lifetime-past-2^53", spec([("timestamp", 54), ("sequence", 9)])),
        ("unknown-field", spec([("timestamp", 41), ("shard", 4), ("sequence", 12)])),
        ("zero-timestamp", spec([("timestamp", 0), ("sequence", 12)])),
    ]:

        def describe(s=custom):
            layout = layout_from_json(s)
            return {
                "fields": [{"name": n, "bits": b} for n, b in layout.fields],
                "unit_ms": layout.unit,
                "epoch_ms": str(layout.epoch),
                "max_id": str(layout.max_id),
                "fingerprint": str(layout.fingerprint()),
            }

        cases.append({"id": f"layout-{label}", "op": "layout", "in": custom, **run(describe)})
    return cases


def custom_layout_file():
    """A custom layout with 2 sequence bits and 2 clock-sequence bits: exhaustion in few steps."""
    spec = {
        "fields": [
            {"name": "timestamp", "bits": 30},
            {"name": "clock_seq", "bits": 2},
            {"name": "sequence", "bits": 2},
            {"name": "worker", "bits": 3},
        ],
        "unit_ms": 1000,
        "epoch_ms": "1704067200000",
    }
    layout = layout_from_json(spec)
    T = NOV_2026 // 1000 * 1000
    steps = (
        [{"now_ms": T + 5000}]
        + [{"now_ms": T + 1000}] * 5
        + [
            {"now_ms": T + 500},
            {"now_ms": T + 2000},
            {"now_ms": T + 1999},
            {"now_ms": T + 3000},
            {"now_ms": T + 2000},
            {"now_ms": T + 6000},
        ]
    )
    cases = [
        generate_case(layout, "tiny-exhaustion-and-switches", steps, worker_id=5, max_wait_ms=0),
        generate_case(
            layout,
            "tiny-wait-within-bound",
            [
                {"now_ms": T + 2000},
                {"now_ms": T + 1000},
                {"now_ms": T + 1000},
                {"now_ms": T + 1000},
                {"now_ms": T + 1000},
                {"now_ms": T + 1000},
                {"now_ms": T + 1000},
            ],
            worker_id=5,
            max_wait_ms=1000,
        ),
        generate_case(
            layout,
            "tiny-logical",
            [{"now_ms": T}] * 6 + [{"now_ms": T - 2000}] * 3,
            worker_id=5,
            on_rollback="logical",
            max_drift_ms=1000,
        ),
    ]
    for i, parts in enumerate(
        [{"timestamp_ms": str(T), "clock_seq": 3, "worker_id": 7, "sequence": 2}]
    ):
        cases.append(
            {"id": f"tiny-encode-{i}", "op": "encode", "in": parts, **run(layout.encode, parts)}
        )
    return {
        "description": "a custom layout: sequence before worker, tiny fields",
        "layout": spec,
        "cases": cases,
    }


def build():
    files = {}
    for name in PRESETS:
        cases = preset_cases(name) + preset_generator_cases(name)
        if name == "clockseq":
            cases += clockseq_generator_cases()
        files[f"{name}.json"] = {
            "description": f"the {name} preset",
            "layout": name,
            "cases": cases,
        }
    files["layouts.json"] = {
        "description": "layout presets and validation",
        "layout": None,
        "cases": layout_cases(),
    }
    files["custom.json"] = custom_layout_file()
    return {name: json.dumps(body, indent=1) + "\n" for name, body in files.items()}


def main():
    files = build()
    total = sum(len(json.loads(text)["cases"]) for text in files.values())
    if "--check" in sys.argv:
        stale = [
            n
            for n, text in files.items()
            if not (HERE / n).exists() or (HERE / n).read_text() != text
        ]
        if stale:
            sys.exit(f"vectors out of date, run tests/vectors/reference.py: {', '.join(stale)}")
        print(f"vectors up to date: {len(files)} files, {total} cases")
        return
    for name, text in files.items():
        (HERE / name).write_text(text)
    print(f"wrote {len(files)} files, {total} cases")


if __name__ == "__main__":
    main()
