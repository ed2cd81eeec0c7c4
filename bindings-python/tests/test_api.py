"""The binding's own behaviour: API and exception shape, bad input, threads, fork, clocks."""

from __future__ import annotations

import copy
import json
import os
import pickle
import re
from collections.abc import Callable
from datetime import datetime, timezone
from itertools import pairwise
from pathlib import Path
from typing import Any

import clockflake
import pytest
from clockflake import (
    ClockflakeError,
    ClockMovedBackwardsError,
    ClockNotAdvancingError,
    ClockSeqOutOfRangeError,
    ClockSequenceExhaustedError,
    EpochInFutureError,
    Generator,
    InvalidIdError,
    InvalidLayoutError,
    InvalidRangeError,
    InvalidStateError,
    Parts,
    SequenceExhaustedError,
    SequenceOutOfRangeError,
    TimestampExhaustedError,
    TimestampOutOfRangeError,
    UnknownLayoutError,
    UnknownPolicyError,
    WorkerIdOutOfRangeError,
    _clockflake,
    _errors,
    decode,
    describe_layout,
    encode,
    id_range,
    layouts,
)
from helpers import REFUSED_IN_CHILD, in_threads, refusals, refused

T = 1_795_000_000_000  # 2026-11-18T11:06:40Z

# --- API shape -------------------------------------------------------------------------------


def test_all_names_exist() -> None:
    for name in clockflake.__all__:
        assert hasattr(clockflake, name), name
    for name in (
        "Generator",
        "decode",
        "encode",
        "id_range",
        "layouts",
        "describe_layout",
        "Parts",
    ):
        assert name in clockflake.__all__


def test_next_id_is_a_positive_63_bit_int_that_decodes_to_now() -> None:
    gen = Generator(worker_id=7)
    before = datetime.now(timezone.utc)
    id = gen.next_id()
    assert type(id) is int and 0 < id < 2**63
    parts = decode(id)
    assert parts.worker_id == 7 and parts.clock_seq == 0
    assert parts.datetime.tzinfo is timezone.utc
    assert abs((parts.datetime - before).total_seconds()) < 5
    assert parts.datetime == datetime.fromtimestamp(parts.timestamp_ms / 1000, timezone.utc)


def test_parts_shape() -> None:
    p = Parts(timestamp_ms=T + 123, clock_seq=1, worker_id=2, sequence=3)
    assert (p.timestamp_ms, p.clock_seq, p.worker_id, p.sequence) == (T + 123, 1, 2, 3)
    assert tuple(p) == (T + 123, 1, 2, 3)
    _ts, _cs, _w, _s = p
    assert p == Parts(T + 123, 1, 2, 3) and hash(p) == hash(Parts(T + 123, 1, 2, 3))
    assert p != Parts(T + 123, 1, 2, 4)
    assert p.as_dict() == {"timestamp_ms": T + 123, "clock_seq": 1, "worker_id": 2, "sequence": 3}
    assert repr(p) == f"Parts(timestamp_ms={T + 123}, clock_seq=1, worker_id=2, sequence=3)"
    assert pickle.loads(pickle.dumps(p)) == p
    assert p.datetime == datetime(2026, 11, 18, 11, 6, 40, 123000, tzinfo=timezone.utc)
    with pytest.raises(AttributeError):
        p.worker_id = 5  # type: ignore[misc]


def test_decode_takes_int_or_decimal_str_and_encode_inverts_it() -> None:
    gen = Generator(worker_id=9)
    id = gen.next_id()
    assert decode(str(id)) == decode(id)
    assert encode(decode(id)) == id
    assert encode(decode(id).as_dict()) == id  # type: ignore[arg-type]


def test_id_range_brackets_ids_of_the_window() -> None:
    gen = Generator(worker_id=3)
    id = gen.next_id_at(T + 500)
    lo, hi = id_range(T, T + 999)
    assert lo <= id <= hi
    assert decode(lo).timestamp_ms == T and decode(hi).timestamp_ms == T + 999


def test_layouts_and_describe_layout() -> None:
    assert list(layouts) == ["clockseq", "twitter", "discord", "sonyflake", "baidu", "js53"]
    info = layouts["clockseq"]
    assert info == describe_layout("clockseq")
    assert set(info) == {
        "name",
        "fields",
        "unit_ms",
        "epoch_ms",
        "clock_seqs",
        "max_worker_id",
        "max_id",
        "fingerprint",
    }
    assert info["clock_seqs"] == 8 and info["max_worker_id"] == 127 and info["max_id"] == 2**63 - 1
    assert isinstance(info["fingerprint"], str)
    # A described layout can be passed back in; a custom one has no name.
    assert describe_layout(info) == info  # type: ignore[arg-type]
    custom = {
        "fields": [{"name": "timestamp", "bits": 40}, {"name": "sequence", "bits": 10}],
        "epoch_ms": 0,
    }
    described = describe_layout(custom)  # type: ignore[arg-type]
    assert described["name"] is None and described["unit_ms"] == 1 and described["clock_seqs"] == 1
    assert json.loads(json.dumps(layouts)) == layouts


def test_generator_properties() -> None:
    gen = Generator(worker_id=5, layout="twitter")
    assert gen.worker_id == 5
    assert gen.layout == layouts["twitter"]
    assert gen.on_rollback == "wait"  # the default without clock-sequence bits
    assert Generator(worker_id=1).on_rollback == "clock-sequence"
    assert (gen.max_wait_ms, gen.max_drift_ms) == (5, 1000)
    assert repr(gen) == 'Generator(worker_id=5, layout="twitter", on_rollback="wait")'


def test_generator_is_not_copyable_or_picklable() -> None:
    # A copy would issue the same ids: only state()/resume() hand a worker id on.
    gen = Generator(worker_id=1)
    with pytest.raises(TypeError):
        copy.copy(gen)
    with pytest.raises(TypeError):
        pickle.dumps(gen)


def test_state_is_json_safe_and_one_mark_per_clock_sequence() -> None:
    gen = Generator(worker_id=4)
    gen.next_id_at(T)
    gen.next_id_at(T - 1000)  # steps back: switches to clock sequence 1
    state = gen.state()
    assert json.loads(json.dumps(state)) == state
    assert state == {
        "layout_fingerprint": layouts["clockseq"]["fingerprint"],
        "worker_id": 4,
        "clock_seq": 1,
        "high_water_ms": [T, T - 1000, None, None, None, None, None, None],
    }
    assert len(Generator(worker_id=1, layout="twitter").state()["high_water_ms"]) == 1


def test_resume_continues_above_every_issued_id() -> None:
    gen = Generator(worker_id=4)
    issued = [gen.next_id_at(T) for _ in range(10)]
    resumed = Generator.resume(json.loads(json.dumps(gen.state())))
    again = resumed.next_id_at(T - 1)  # the clock behind after a restart: another clock sequence
    assert again not in issued
    assert decode(again).clock_seq == 1
    assert resumed.worker_id == 4


def test_resume_refuses_another_layout_and_malformed_state() -> None:
    state = Generator(worker_id=1).state()
    with pytest.raises(InvalidStateError) as caught:
        Generator.resume(state, layout="twitter")
    assert caught.value.code == "INVALID_STATE"
    for broken in (
        None,
        {},
        {**state, "layout_fingerprint": "abc"},
        {**state, "clock_seq": 8},
        {**state, "clock_seq": -1},
        {**state, "high_water_ms": "x"},
        {**state, "high_water_ms": [1.5]},
        {**state, "high_water_ms": [None] * 17},
        {**state, "high_water_ms": [0] + [None] * 7},  # before the epoch
        # A mark left out would let a used clock sequence pass for a fresh one.
        {**state, "high_water_ms": state["high_water_ms"][:1]},
        {**state, "high_water_ms": []},
    ):
        with pytest.raises(InvalidStateError):
            Generator.resume(broken)  # type: ignore[arg-type]
    with pytest.raises(WorkerIdOutOfRangeError):
        Generator.resume({**state, "worker_id": 128})


# --- exceptions ------------------------------------------------------------------------------


def test_the_exception_classes_are_listed_once() -> None:
    """The classes of `_errors.py` are the list: `_errors.__all__` (what the package imports)
    and the exception names in the package's `__all__` name every one and nothing else; the
    tables by code are derived from the classes."""
    classes = [_errors.ClockflakeError, *_errors.ClockflakeError.__subclasses__()]
    names = sorted(cls.__name__ for cls in classes)
    assert sorted(_errors.__all__) == names
    assert sorted(name for name in clockflake.__all__ if name.endswith("Error")) == names
    assert all(getattr(clockflake, cls.__name__) is cls for cls in classes)
    assert sorted(_errors._RAISE_BY_CODE) == sorted(
        [*_errors._BY_CODE, "INVALID_ARG_TYPE", "INVALID_ARG_VALUE"]
    )


def test_the_codes_the_rust_half_writes_out_are_all_known() -> None:
    """A code the Rust half spells as a literal (`Refusal::input("INVALID_ID", ...)`, for a
    message that names a Python value) must be one with a class, and so one of core's or the
    lease crate's (checked above) or the binding's two argument codes: never a retyped variant."""
    source = "\n".join(
        path.read_text() for path in (Path(__file__).parents[1] / "src").glob("*.rs")
    )
    # Not the names of environment variables read at build time (`env!("CARGO_PKG_VERSION")`).
    written = set(re.findall(r'(?<!env!\()"([A-Z][A-Z_]+[A-Z])"', source)) - set(dir(_clockflake))
    assert "INVALID_ID" in written  # the pattern still finds them
    assert written <= set(_errors._RAISE_BY_CODE), written - set(_errors._RAISE_BY_CODE)


def test_every_core_code_has_a_class_with_the_right_builtin() -> None:
    samples = {code: is_input for code, is_input, _message in _clockflake._error_codes()}
    assert sorted(samples) == sorted(_clockflake.ERROR_CODES)
    assert sorted(_errors._BY_CODE) == sorted(
        _clockflake.ERROR_CODES + _clockflake.LEASE_ERROR_CODES
    )
    for code, is_input in samples.items():
        cls = _errors._BY_CODE[code]
        assert cls.code == code
        assert issubclass(cls, ClockflakeError)
        assert cls.__name__ in clockflake.__all__ and getattr(clockflake, cls.__name__) is cls
        if is_input:
            assert issubclass(cls, ValueError) and not issubclass(cls, RuntimeError), code
        else:
            assert issubclass(cls, RuntimeError) and not issubclass(cls, ValueError), code


def test_every_core_error_reaches_python_with_its_code_class_and_message() -> None:
    """Core's table (`Error::EXAMPLES`), raised through the binding's mapping: nothing retyped."""
    table = _clockflake._error_codes()
    assert len(table) == len(_clockflake.ERROR_CODES)
    for code, _is_input, message in table:
        with pytest.raises(ClockflakeError) as caught:
            _clockflake._raise_error_example(code)
        assert type(caught.value) is _errors._BY_CODE[code], code
        assert caught.value.code == code
        assert str(caught.value) == message


def test_exception_shape() -> None:
    gen = Generator(worker_id=1, max_wait_ms=0)
    for _ in range(4096):
        gen.next_id_at(T)
    with pytest.raises(SequenceExhaustedError) as caught:
        gen.next_id_at(T)
    error = caught.value
    assert isinstance(error, ClockflakeError) and isinstance(error, RuntimeError)
    assert error.code == "SEQUENCE_EXHAUSTED"
    assert error.retry_at_ms == T + 1
    assert str(error).startswith("sequence exhausted:")
    again = pickle.loads(pickle.dumps(error))
    assert (
        type(again) is SequenceExhaustedError
        and again.retry_at_ms == T + 1
        and str(again) == str(error)
    )
    with pytest.raises(InvalidIdError) as bad:
        decode(-1)
    assert bad.value.retry_at_ms is None and isinstance(bad.value, ValueError)


# --- bad input -------------------------------------------------------------------------------

gen1 = Generator(worker_id=1)
BAD_INPUT: list[
    tuple[str, Callable[[], Any], type[ClockflakeError] | type[Exception], str | None]
] = [
    ("decode bool", lambda: decode(True), InvalidIdError, "found True (bool)"),
    ("decode float", lambda: decode(1.0), InvalidIdError, "found 1.0 (float)"),
    ("decode negative", lambda: decode(-1), InvalidIdError, "found -1"),
    ("decode 2^63", lambda: decode(2**63), InvalidIdError, "below 2^63"),
    ("decode 2^64", lambda: decode(2**64), InvalidIdError, "found 18446744073709551616"),
    ("decode 2^100", lambda: decode(2**100), InvalidIdError, None),
    ("decode None", lambda: decode(None), InvalidIdError, "NoneType"),  # type: ignore[arg-type]
    ("decode bytes", lambda: decode(b"12"), InvalidIdError, "bytes"),  # type: ignore[arg-type]
    ("decode text", lambda: decode("12a"), InvalidIdError, "'a'"),
    ("decode spaces", lambda: decode(" 12"), InvalidIdError, None),
    ("decode past js53", lambda: decode(2**52, "js53"), InvalidIdError, "at most"),
    ("worker bool", lambda: Generator(worker_id=True), WorkerIdOutOfRangeError, "bool"),
    ("worker float", lambda: Generator(worker_id=1.0), WorkerIdOutOfRangeError, "float"),  # type: ignore[arg-type]
    ("worker negative", lambda: Generator(worker_id=-1), WorkerIdOutOfRangeError, "found -1"),
    ("worker too big", lambda: Generator(worker_id=128), WorkerIdOutOfRangeError, "0..=127"),
    ("worker huge", lambda: Generator(worker_id=2**64), WorkerIdOutOfRangeError, "0..=127"),
    ("worker str", lambda: Generator(worker_id="1"), WorkerIdOutOfRangeError, "str"),  # type: ignore[arg-type]
    (
        "layout unknown",
        lambda: Generator(worker_id=1, layout="snowflake"),
        UnknownLayoutError,
        "'snowflake'",
    ),
    ("layout type", lambda: decode(1, 5), InvalidLayoutError, "int"),  # type: ignore[arg-type]
    (
        "layout key",
        lambda: decode(1, {"fields": [], "epoch_ms": 0, "unit": 1}),
        InvalidLayoutError,
        "unit",
    ),  # type: ignore[arg-type]
    (
        "layout no epoch",
        lambda: decode(1, {"fields": [{"name": "timestamp", "bits": 41}]}),
        InvalidLayoutError,
        "epoch_ms",
    ),  # type: ignore[arg-type]
    (
        "layout field",
        lambda: decode(1, {"fields": [{"name": "shard", "bits": 1}], "epoch_ms": 0}),
        InvalidLayoutError,
        "shard",
    ),
    (
        "layout bits bool",
        lambda: decode(1, {"fields": [{"name": "timestamp", "bits": True}], "epoch_ms": 0}),
        InvalidLayoutError,
        None,
    ),
    (
        "layout too wide",
        lambda: decode(
            1,
            {
                "fields": [{"name": "timestamp", "bits": 2**40}, {"name": "sequence", "bits": 1}],
                "epoch_ms": 0,
            },
        ),
        InvalidLayoutError,
        None,
    ),
    (
        "policy unknown",
        lambda: Generator(worker_id=1, on_rollback="retry"),
        UnknownPolicyError,
        "'retry'",
    ),
    ("policy type", lambda: Generator(worker_id=1, on_rollback=1), UnknownPolicyError, "int"),  # type: ignore[arg-type]
    (
        "max_wait_ms negative",
        lambda: Generator(worker_id=1, max_wait_ms=-1),
        ValueError,
        "max_wait_ms",
    ),
    (
        "max_wait_ms float",
        lambda: Generator(worker_id=1, max_wait_ms=1.5),
        TypeError,
        "max_wait_ms",
    ),  # type: ignore[arg-type]
    ("clock not callable", lambda: Generator(worker_id=1, clock=5), TypeError, "callable"),  # type: ignore[arg-type]
    ("unknown option", lambda: Generator(worker_id=1, max_wait=5), TypeError, "'max_wait'"),  # type: ignore[call-arg]
    (
        "resume takes no worker_id",
        lambda: Generator.resume(gen1.state(), worker_id=2),  # type: ignore[call-arg]
        TypeError,
        "Generator.resume() got an unexpected keyword argument 'worker_id'",
    ),
    (
        "open: unknown option before the URI is read",
        lambda: Generator.open("file:///tmp/x?app=a", ttl=5),  # type: ignore[call-arg]
        TypeError,
        "'ttl'",
    ),
    ("next_id_at negative", lambda: gen1.next_id_at(-1), TimestampOutOfRangeError, "found -1"),
    ("next_id_at float", lambda: gen1.next_id_at(1.5e12), TimestampOutOfRangeError, "float"),  # type: ignore[arg-type]
    ("next_id_at before epoch", lambda: gen1.next_id_at(0), EpochInFutureError, None),
    ("next_id_at past lifetime", lambda: gen1.next_id_at(2**53), TimestampExhaustedError, None),
    ("next_ids negative", lambda: gen1.next_ids(-1), ValueError, "n:"),
    ("next_ids bool", lambda: gen1.next_ids(True), TypeError, "n:"),
    ("next_ids 2^64", lambda: gen1.next_ids(2**64), ValueError, "n:"),
    ("next_ids unholdable", lambda: gen1.next_ids(2**62), MemoryError, "next_ids"),
    (
        "encode negative worker",
        lambda: encode({"timestamp_ms": T, "clock_seq": 0, "worker_id": -1, "sequence": 0}),
        WorkerIdOutOfRangeError,
        None,
    ),
    ("encode big clock_seq", lambda: encode(Parts(T, 8, 0, 0)), ClockSeqOutOfRangeError, None),
    ("encode big sequence", lambda: encode(Parts(T, 0, 0, 4096)), SequenceOutOfRangeError, None),
    ("encode bool sequence", lambda: Parts(T, 0, 0, True), SequenceOutOfRangeError, "bool"),
    ("encode before epoch", lambda: encode(Parts(0, 0, 0, 0)), TimestampOutOfRangeError, None),
    ("encode missing key", lambda: encode({"timestamp_ms": T}), TypeError, "clock_seq"),  # type: ignore[arg-type]
    ("encode wrong type", lambda: encode((T, 0, 0, 0)), TypeError, "Parts"),  # type: ignore[arg-type]
    ("id_range reversed", lambda: id_range(T + 1, T), InvalidRangeError, None),
    ("id_range negative", lambda: id_range(-5, T), TimestampOutOfRangeError, "from_ms"),
    ("id_range huge", lambda: id_range(T, 2**64), TimestampOutOfRangeError, "to_ms"),
]


@pytest.mark.parametrize(
    ("call", "error", "text"), [row[1:] for row in BAD_INPUT], ids=[row[0] for row in BAD_INPUT]
)
def test_bad_input(call: Callable[[], Any], error: type[Exception], text: str | None) -> None:
    raised = refused(call, error, text)
    if issubclass(error, ClockflakeError):
        assert isinstance(raised, (ValueError, RuntimeError))


# --- uniqueness and threads ------------------------------------------------------------------


def test_a_million_ids_unique_and_increasing() -> None:
    gen = Generator(worker_id=11)
    next_id = gen.next_id
    ids = [next_id() for _ in range(1_000_000)]
    assert all(a < b for a, b in pairwise(ids))
    assert len(set(ids)) == len(ids)


def test_next_ids_unique_increasing_and_continuing() -> None:
    gen = Generator(worker_id=11)
    ids = gen.next_ids(10_000) + gen.next_ids(5000) + [gen.next_id()]
    assert all(a < b for a, b in pairwise(ids))
    assert gen.next_ids(0) == []
    # More than one tick's worth waits for the next tick: at most 4096 per ms.
    per_ms: dict[int, int] = {}
    for id in ids:
        per_ms[decode(id).timestamp_ms] = per_ms.get(decode(id).timestamp_ms, 0) + 1
    assert max(per_ms.values()) <= 4096


def test_four_threads_share_one_generator_without_duplicates() -> None:
    gen = Generator(worker_id=12)

    def work(_: int, out: list[int]) -> None:
        next_id = gen.next_id
        for _ in range(250_000):
            out.append(next_id())

    results = in_threads(4, work, together=True)
    every = [id for out in results for id in out]
    assert len(every) == 1_000_000
    assert len(set(every)) == len(every)
    for out in results:  # each thread sees its own ids increase
        assert all(a < b for a, b in pairwise(out))


def test_threads_mixing_next_id_and_next_ids() -> None:
    gen = Generator(worker_id=13)

    def work(i: int, out: list[int]) -> None:
        for _ in range(50):
            if i % 2:
                out.extend(gen.next_ids(1000))
            else:
                out.extend(gen.next_id() for _ in range(1000))

    results = in_threads(4, work)
    every = [id for out in results for id in out]
    assert len(every) == 200_000 and len(set(every)) == len(every)


# --- clocks and rollbacks --------------------------------------------------------------------


class ManualClock:
    """A clock the test sets; with `step`, it also moves on by that much at every read."""

    def __init__(self, now: int, step: int = 0) -> None:
        self.now = now
        self.step = step

    def __call__(self) -> int:
        now = self.now
        self.now += self.step
        return now


def test_clock_sequence_rollback_through_clock() -> None:
    clock = ManualClock(T)
    gen = Generator(worker_id=1, clock=clock)
    ids = []
    for now in (T, T, T - 1000, T - 1000, T - 2000, T, T + 1):
        clock.now = now
        ids.append(gen.next_id())
    assert len(set(ids)) == len(ids)
    assert [decode(id).clock_seq for id in ids] == [0, 0, 1, 1, 2, 2, 2]
    assert [decode(id).timestamp_ms for id in ids] == [T, T, T - 1000, T - 1000, T - 2000, T, T + 1]


def test_eight_rollbacks_never_reuse_a_clock_sequence() -> None:
    # Steps back to the same ms again and again: 8 clock sequences, then a refusal, never a repeat.
    clock = ManualClock(T)
    gen = Generator(worker_id=1, clock=clock, max_wait_ms=0)
    seen: set[int] = set()
    with pytest.raises(ClockSequenceExhaustedError) as caught:
        for k in range(9):
            for now in (T + 10 + k, T):
                clock.now = now
                id = gen.next_id()
                assert id not in seen
                seen.add(id)
    assert caught.value.code == "CLOCK_SEQUENCE_EXHAUSTED"
    assert {decode(id).clock_seq for id in seen} == set(range(8))


def test_fail_policy_refuses_a_step_back() -> None:
    clock = ManualClock(T)
    gen = Generator(worker_id=1, on_rollback="fail", clock=clock)
    gen.next_id()
    clock.now = T - 1
    with pytest.raises(ClockMovedBackwardsError) as caught:
        gen.next_id()
    assert caught.value.retry_at_ms is None and isinstance(caught.value, RuntimeError)


def test_wait_policy_waits_for_the_clock_to_catch_up() -> None:
    clock = ManualClock(T + 3)
    gen = Generator(worker_id=1, on_rollback="wait", clock=clock)
    first = gen.next_id()
    clock.now, clock.step = T, 1  # 3 ms back, then moving on
    second = gen.next_id()
    assert second > first and decode(second).timestamp_ms > T + 3


def test_wait_policy_refuses_a_step_back_beyond_max_wait() -> None:
    clock = ManualClock(T)
    gen = Generator(worker_id=1, on_rollback="wait", max_wait_ms=5, clock=clock)
    gen.next_id()
    clock.now = T - 100
    with pytest.raises(ClockMovedBackwardsError) as caught:
        gen.next_id()
    assert caught.value.retry_at_ms is None


def test_logical_policy_keeps_ids_increasing() -> None:
    clock = ManualClock(T)
    gen = Generator(worker_id=1, on_rollback="logical", clock=clock)
    ids = [gen.next_id() for _ in range(100)]
    clock.now = T - 500
    ids += [gen.next_id() for _ in range(10_000)]
    assert all(a < b for a, b in pairwise(ids))


def test_next_id_waits_out_a_full_tick_with_a_python_clock() -> None:
    now = [T]

    def clock() -> int:
        # A slow clock (1 ms per 500 reads), but not so slow that a loaded machine takes
        # longer than the wait's patience (about 1 s of real time) to read it 500 times.
        now[0] += 1 if clock.reads % 500 == 499 else 0  # type: ignore[attr-defined]
        clock.reads += 1  # type: ignore[attr-defined]
        return now[0]

    clock.reads = 0  # type: ignore[attr-defined]
    gen = Generator(worker_id=1, clock=clock)
    ids = gen.next_ids(4097) + [gen.next_id() for _ in range(5000)]
    assert all(a < b for a, b in pairwise(ids))


def test_a_frozen_clock_is_reported_not_waited_on_forever() -> None:
    gen = Generator(worker_id=1, layout="sonyflake", clock=lambda: T)
    gen.next_ids(256)
    with pytest.raises(ClockNotAdvancingError):
        gen.next_id()


def test_clock_errors_propagate_and_leave_the_generator_intact() -> None:
    broken = [False]

    def flaky() -> int:
        if broken[0]:
            raise ZeroDivisionError("clock broke")
        return T

    gen = Generator(worker_id=1, clock=flaky)
    first = gen.next_id()
    broken[0] = True
    with pytest.raises(ZeroDivisionError):
        gen.next_id()
    broken[0] = False
    assert gen.next_id() == first + 1
    with pytest.raises(TypeError, match="float"):
        Generator(worker_id=1, clock=lambda: 1.5e12).next_id()  # type: ignore[arg-type,return-value]
    with pytest.raises(ValueError, match="-1"):
        Generator(worker_id=1, clock=lambda: -1).next_id()


class RaisingClock(ManualClock):
    """A ManualClock that raises `error` once it would read `raise_at_ms` or later (None:
    never), and counts the times it raised."""

    def __init__(self, now: int) -> None:
        super().__init__(now)
        self.error = ZeroDivisionError("clock broke")
        self.raise_at_ms: int | None = None
        self.raised = 0

    def __call__(self) -> int:
        if self.raise_at_ms is not None and self.now >= self.raise_at_ms:
            self.raised += 1
            raise self.error
        return super().__call__()


def test_a_clock_exception_reaches_the_caller_unchanged_and_ends_the_call() -> None:
    clock = RaisingClock(T)
    gen = Generator(worker_id=1, clock=clock)
    first = gen.next_id()
    for call in (gen.next_id, lambda: gen.next_ids(3)):
        clock.raise_at_ms, clock.raised = T, 0
        with pytest.raises(ZeroDivisionError) as caught:
            call()
        # The very exception the clock raised, and the clock not read again after it.
        assert caught.value is clock.error and clock.raised == 1
    clock.raise_at_ms = None
    assert gen.next_id() == first + 1  # nothing was issued meanwhile


@pytest.mark.parametrize("call", [Generator.next_id, lambda gen: gen.next_ids(5)])
def test_a_clock_exception_during_a_wait_ends_the_wait(call: Callable[[Generator], Any]) -> None:
    clock = RaisingClock(T)
    gen = Generator(worker_id=1, layout="sonyflake", clock=clock)
    filled = gen.next_ids(256)  # the 10 ms tick at T is full: the next id waits for T + 10
    clock.step, clock.raise_at_ms = 1, T + 5  # the clock moves on, then raises during the wait
    with pytest.raises(ZeroDivisionError) as caught:
        call(gen)
    assert caught.value is clock.error and clock.raised == 1
    clock.raise_at_ms, clock.now = None, T + 10
    later = gen.next_id()
    assert later > filled[-1] and decode(later, "sonyflake").timestamp_ms == T + 10


# --- fork ------------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_invalidates_generators_in_the_child() -> None:
    gen = Generator(worker_id=1)
    parent_id = gen.next_id()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report, never return into pytest
        try:
            report = refusals(
                {
                    "next_id": gen.next_id,
                    "next_ids": lambda: gen.next_ids(3),
                    "next_id_at": lambda: gen.next_id_at(T),
                    "state": gen.state,
                }
            )
            fresh = Generator(worker_id=2)
            report["fresh"] = decode(fresh.next_id()).worker_id
            os.write(write_end, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        report = json.loads(pipe.read() or "{}")
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert report == REFUSED_IN_CHILD
    assert gen.next_id() > parent_id  # the parent goes on


def refusal_codes(gen: Generator) -> dict[str, Any]:
    """The code each call of `gen` raises ("no error" if it returns), with `stats()["state"]`
    and `is_active`."""
    report: dict[str, Any] = {}
    calls: dict[str, Callable[[], object]] = {
        "next_id": gen.next_id,
        "next_ids": lambda: gen.next_ids(3),
        "next_id_at": lambda: gen.next_id_at(T),
        "state": gen.state,
    }
    for name, call in calls.items():
        try:
            call()
            report[name] = "no error"
        except ClockflakeError as error:
            report[name] = error.code
    report["stats"] = gen.stats()["state"]
    report["is_active"] = gen.is_active
    return report


CALLS = ["next_id", "next_ids", "next_id_at", "state"]
CLOSED_REPORT = dict.fromkeys(CALLS, "GENERATOR_CLOSED") | {"stats": "closed", "is_active": False}
FORKED_REPORT = dict.fromkeys(CALLS, "WORKER_ID_INVALIDATED") | {
    "stats": "forked",
    "is_active": False,
}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_a_closed_generator_is_closed_in_a_forked_child_too() -> None:
    # Closed wins over forked: in the child, the generator the parent closed raises
    # GeneratorClosedError, the one it left open WorkerIdInvalidatedError.
    closed, still_open = Generator(worker_id=1), Generator(worker_id=2)
    closed.next_id()
    closed.close()
    assert refusal_codes(closed) == CLOSED_REPORT
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: report, never return into pytest
        try:
            report = {"closed": refusal_codes(closed), "open": refusal_codes(still_open)}
            still_open.close()  # a close in the child closes the child's copy only
            report["open then closed"] = refusal_codes(still_open)
            os.write(write_end, json.dumps(report).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        report = json.loads(pipe.read() or "{}")
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    assert report == {
        "closed": CLOSED_REPORT,
        "open": FORKED_REPORT,
        "open then closed": CLOSED_REPORT,
    }
    assert refusal_codes(closed) == CLOSED_REPORT
    assert still_open.next_id() > 0 and still_open.is_active
    assert still_open.stats()["state"] == "active"
