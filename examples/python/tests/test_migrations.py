"""docs/migrations.md's rule over random times and worker ids: under a layout that keeps the old
scheme's epoch, tick and timestamp position, every new id made in a later tick sorts above every
old id (and the default layout, the wrong choice, does not)."""

from __future__ import annotations

import random

import pytest
from clockflake import Generator, encode

NOW = 1_795_000_000_000


def continuing(bits: tuple[int, int, int, int], epoch_ms: int, unit_ms: int) -> dict[str, object]:
    names = ("timestamp", "clock_seq", "worker", "sequence")
    fields = [{"name": n, "bits": b} for n, b in zip(names, bits, strict=True)]
    return {"fields": fields, "epoch_ms": epoch_ms, "unit_ms": unit_ms}


CASES = {
    "twitter": (continuing((41, 3, 7, 12), 1288834974657, 1), 1023, 4095),
    "discord": (continuing((41, 3, 7, 12), 1420070400000, 1), 1023, 4095),
    "sonyflake": (continuing((39, 3, 9, 12), 1409529600000, 10), 65535, 255),
}


@pytest.mark.parametrize("preset", sorted(CASES))
def test_new_ids_sort_above_every_old_one(preset: str) -> None:
    layout, max_worker, max_sequence = CASES[preset]
    unit = 10 if preset == "sonyflake" else 1
    rng = random.Random(preset)
    for _ in range(200):
        switch = NOW + rng.randrange(0, 10**9)  # the last old tick
        old = [
            encode(
                {
                    "timestamp_ms": switch - rng.randrange(0, 10**6),
                    "clock_seq": 0,
                    "worker_id": rng.randrange(0, max_worker + 1),
                    "sequence": rng.randrange(0, max_sequence + 1),
                },
                preset,
            )
            for _ in range(20)
        ]
        old.append(
            encode(
                {
                    "timestamp_ms": switch,
                    "clock_seq": 0,
                    "worker_id": max_worker,
                    "sequence": max_sequence,
                },
                preset,
            )
        )
        gen = Generator(worker_id=rng.randrange(0, 128), layout=layout)
        first_new = gen.next_id_at(switch + unit)  # the next tick: the smallest new time
        assert first_new > max(old)
        wrong = Generator(worker_id=0).next_id_at(switch + unit)  # the default layout
        assert wrong < max(old)
