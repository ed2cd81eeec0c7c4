"""Type-checked with `mypy --strict` by make test-python: the stubs describe a usable API."""

from __future__ import annotations

import json
from collections.abc import Callable

import clockflake.django
from clockflake import (
    ClockflakeError,
    Generator,
    GeneratorState,
    LayoutInfo,
    Parts,
    PublicIds,
    decode,
    encode,
    guess_layout,
    id_range,
    is_plausible,
    layouts,
    suggest_layout,
)
from clockflake.pydantic import Id, JsonParts
from pydantic import BaseModel

gen: Generator = Generator(
    worker_id=7,
    layout="twitter",
    on_rollback="wait",
    max_wait_ms=5,
    clock=lambda: 1_795_000_000_000,
)
one: int = gen.next_id()
many: list[int] = gen.next_ids(10)
at: int = gen.next_id_at(1_795_000_000_000)
state: GeneratorState = json.loads(json.dumps(gen.state()))
again: Generator = Generator.resume(state, layout="twitter")
parts: Parts = decode(one, "twitter")
ms: int = parts.timestamp_ms
same: int = encode(parts, "twitter")
window: tuple[int, int] = id_range(
    0,
    1,
    {
        "fields": [{"name": "timestamp", "bits": 41}, {"name": "sequence", "bits": 12}],
        "epoch_ms": 0,
    },
)
info: LayoutInfo = layouts["clockseq"]
try:
    decode(-1)
except ClockflakeError as error:
    code: str = error.code
    retry: int | None = error.retry_at_ms

with Generator.open(
    "file:///tmp/clockflake-typing?app=orders", layout="clockseq", max_handover_wait_ms=100
) as leased:
    worker: int = leased.worker_id
    where: str | None = leased.coordinator
    leased_id: int = leased.next_id()
leased.close()


async def leased_async() -> int:
    gen: Generator = await Generator.open_async("file:///tmp/clockflake-typing?app=orders")
    async with gen:
        first: int = gen.next_id()
    await gen.close_async()
    return first


codec: PublicIds = PublicIds(1, b"0123456789abcdef").with_old_key(0, bytes(16))
public: int = codec.encode(one)
text: str = codec.encode_text(one)
back: int = codec.decode_text(text) + codec.decode(public)
version: int = codec.current_version
moved: PublicIds = PublicIds(2, bytes(16)).with_legacy_key(1, b"0123456789abcdef")
kept: PublicIds = PublicIds.legacy(1, b"0123456789abcdef")

suggested: LayoutInfo = suggest_layout(300, 10_000, 30)
plausible: bool = is_plausible(one, suggested, now_ms=1_795_000_000_000, margin_ms=1000)
guess = guess_layout(one)
if guess is not None:
    guessed_name: str = guess[0]
    guessed_ms: int = guess[1].timestamp_ms
as_dict: dict[str, int] = decode(one)._asdict()


class _Order(BaseModel):
    id: Id
    parts: JsonParts


order_json: str = _Order(id=one, parts=decode(one)).model_dump_json()
default_id: Callable[[], int] = clockflake.django.next_id
