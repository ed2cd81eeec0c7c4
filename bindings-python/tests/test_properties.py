"""Hypothesis round trips: decode/encode are inverse, id_range brackets every id of its window,
PublicIds encodes and decodes back under any key, and refuses any one-character typo."""

from __future__ import annotations

import pytest
from clockflake import InvalidPublicIdError, Parts, PublicIds, decode, encode, id_range, layouts
from hypothesis import given, settings
from hypothesis import strategies as st

PRESETS = list(layouts)


def parts_of(name: str) -> st.SearchStrategy[tuple[str, Parts]]:
    info = layouts[name]
    bits = {f["name"]: f["bits"] for f in info["fields"]}
    ticks = 2 ** bits["timestamp"]
    return st.builds(
        lambda tick, offset, cs, w, s: (
            name,
            Parts(info["epoch_ms"] + tick * info["unit_ms"] + offset, cs, w, s),
        ),
        st.integers(0, ticks - 1),
        st.integers(0, info["unit_ms"] - 1),
        st.integers(0, info["clock_seqs"] - 1),
        st.integers(0, info["max_worker_id"]),
        st.integers(0, 2 ** bits["sequence"] - 1),
    )


any_parts = st.sampled_from(PRESETS).flatmap(parts_of)


@settings(max_examples=300)
@given(
    st.sampled_from(PRESETS).flatmap(
        lambda name: st.tuples(st.just(name), st.integers(0, layouts[name]["max_id"]))
    )
)
def test_encode_inverts_decode(case: tuple[str, int]) -> None:
    name, id = case
    parts = decode(id, name)
    assert encode(parts, name) == id
    assert decode(str(id), name) == parts


@settings(max_examples=300)
@given(any_parts)
def test_decode_inverts_encode_up_to_the_tick(case: tuple[str, Parts]) -> None:
    name, parts = case
    unit = layouts[name]["unit_ms"]
    epoch = layouts[name]["epoch_ms"]
    back = decode(encode(parts, name), name)
    tick_start = epoch + (parts.timestamp_ms - epoch) // unit * unit
    assert back == Parts(tick_start, parts.clock_seq, parts.worker_id, parts.sequence)


@settings(max_examples=300)
@given(any_parts, st.integers(0, 10_000), st.integers(0, 10_000))
def test_id_range_brackets_the_window(case: tuple[str, Parts], before: int, after: int) -> None:
    name, parts = case
    epoch = layouts[name]["epoch_ms"]
    end = decode(layouts[name]["max_id"], name).timestamp_ms + layouts[name]["unit_ms"] - 1
    lo, hi = id_range(
        max(epoch, parts.timestamp_ms - before), min(end, parts.timestamp_ms + after), name
    )
    assert lo <= encode(parts, name) <= hi


ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


@settings(max_examples=300)
@given(
    st.integers(0, 31),
    st.binary(min_size=16, max_size=16),
    st.integers(0, 2**63 - 1),
    st.integers(0, 15),
    st.sampled_from(ALPHABET),
)
def test_public_ids_round_trip_and_catch_typos(
    version: int, key: bytes, id: int, at: int, typo: str
) -> None:
    codec = PublicIds(version, key)
    public = codec.encode(id)
    assert 0 <= public < 2**63 and codec.decode(public) == id
    text = codec.encode_text(id)
    assert codec.decode_text(text) == id and codec.decode_text(text.lower()) == id
    if text[at] != typo:
        mistyped = text[:at] + typo + text[at + 1 :]
        with pytest.raises(InvalidPublicIdError):  # the check covers the version character too
            codec.decode_text(mistyped)
