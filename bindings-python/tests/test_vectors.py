"""Every shared vector in tests/vectors/*.json, run through the Python API.

Mirrors tests/harness/vectors.mjs and core/tests/vectors.rs: globs the folder, fails on an
unknown op, names each test by its case id, and checks that enough cases were loaded.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import clockflake
import pytest
from clockflake import ClockflakeError, Generator, Parts, decode, describe_layout, encode, id_range

VECTORS = Path(__file__).resolve().parents[2] / "tests" / "vectors"


def load_cases() -> list[tuple[str, Any, dict[str, Any]]]:
    cases = []
    for path in sorted(VECTORS.glob("*.json")):
        body = json.loads(path.read_text())
        for case in body["cases"]:
            cases.append((path.name, body["layout"], case))
    return cases


CASES = load_cases()


def test_enough_cases_loaded() -> None:
    assert len(CASES) >= 80, f"loaded only {len(CASES)} vector cases from {VECTORS}"


def to_layout(spec: Any) -> Any:
    """A vector's layout (preset name, or dict with epoch_ms as a decimal str) as the API takes it."""
    if spec is None or isinstance(spec, str):
        return spec
    return {
        "fields": [{"name": f["name"], "bits": f["bits"]} for f in spec["fields"]],
        "unit_ms": spec["unit_ms"],
        "epoch_ms": int(spec["epoch_ms"]),
    }


def outcome(produce: Callable[[], Any]) -> tuple[str, Any]:
    try:
        return ("out", produce())
    except ClockflakeError as error:
        assert isinstance(error.code, str) and error.code
        return ("error", error)


def expect(
    name: str, case: dict[str, Any], got: tuple[str, Any], render: Callable[[Any], Any]
) -> None:
    kind, value = got
    if "error" in case:
        assert kind == "error", f"{name}: expected error {case['error']}, found {value!r}"
        assert value.code == case["error"], (
            f"{name}: expected {case['error']}, found {value.code}: {value}"
        )
        return
    assert kind == "out", f"{name}: expected {case['out']!r}, found {value.code}: {value}"
    assert render(value) == case["out"], (
        f"{name}: expected {case['out']!r}, found {render(value)!r}"
    )


def parts_to_vector(p: Parts) -> dict[str, Any]:
    return {
        "timestamp_ms": str(p.timestamp_ms),
        "clock_seq": p.clock_seq,
        "worker_id": p.worker_id,
        "sequence": p.sequence,
    }


def layout_to_vector(info: dict[str, Any]) -> dict[str, Any]:
    return {
        "fields": info["fields"],
        "unit_ms": info["unit_ms"],
        "epoch_ms": str(info["epoch_ms"]),
        "max_id": str(info["max_id"]),
        "fingerprint": str(info["fingerprint"]),
    }


def run_case(file_layout: Any, case: dict[str, Any]) -> None:
    name = case["id"]
    layout = to_layout(file_layout)
    given = case["in"]
    op = case["op"]
    if op == "layout":
        expect(name, case, outcome(lambda: describe_layout(to_layout(given))), layout_to_vector)
    elif op == "decode":
        expect(name, case, outcome(lambda: decode(given, layout)), parts_to_vector)
        if re.fullmatch(r"-?[0-9]+", given):
            # The same id as an int decodes the same (or is refused with the same code).
            expect(
                f"{name} (int)", case, outcome(lambda: decode(int(given), layout)), parts_to_vector
            )
    elif op == "encode":
        fields = {
            "timestamp_ms": int(given["timestamp_ms"]),
            "clock_seq": given["clock_seq"],
            "worker_id": given["worker_id"],
            "sequence": given["sequence"],
        }
        expect(name, case, outcome(lambda: encode(fields, layout)), str)
        expect(f"{name} (Parts)", case, outcome(lambda: encode(Parts(**fields), layout)), str)
    elif op == "id_range":
        expect(
            name,
            case,
            outcome(lambda: id_range(int(given["from_ms"]), int(given["to_ms"]), layout)),
            lambda pair: [str(pair[0]), str(pair[1])],
        )
    elif op == "generate":
        run_generate(layout, case)
    else:
        raise AssertionError(f"{name}: unknown op {op!r}")


def run_generate(layout: Any, case: dict[str, Any]) -> None:
    name = case["id"]
    given = case["in"]
    options: dict[str, Any] = {}
    if layout is not None:
        options["layout"] = layout
    for key in ("on_rollback", "max_wait_ms", "max_drift_ms"):
        if key in given:
            options[key] = given[key]
    made = outcome(lambda: Generator(worker_id=given["worker_id"], **options))
    if "error" in case:
        expect(name, case, made, lambda _: "a generator")
        return
    assert made[0] == "out", f"{name}: expected a generator, found {made[1]!r}"
    gen = made[1]
    for i, step in enumerate(given["steps"]):
        step_name = f"{name} step {i}"
        if step.get("restart"):
            state = gen.state()
            if "reserve_ms" in step:
                cs = state["clock_seq"]
                reserve = int(step["reserve_ms"])
                mark = state["high_water_ms"][cs]
                state["high_water_ms"][cs] = reserve if mark is None else max(mark, reserve)
            # The state must survive JSON, as it would in a file or a database row.
            gen = Generator.resume(json.loads(json.dumps(state)), **options)
            continue
        now = int(step["now_ms"])
        repeat = step.get("repeat", 1)
        for k in range(repeat):
            got = outcome(functools.partial(gen.next_id_at, now))
            if repeat > 1:
                assert got[0] == "out", f"{step_name} (repeat {k}): {got[1]!r}"
        expect(step_name, step, got, str)
        if got[0] == "error":
            retry = got[1].retry_at_ms
            assert (None if retry is None else str(retry)) == step["retry_at_ms"], (
                f"{step_name}: retry_at_ms expected {step['retry_at_ms']}, found {retry}"
            )


@pytest.mark.parametrize(
    ("file_layout", "case"),
    [(layout, case) for _, layout, case in CASES],
    ids=[case["id"] for _, _, case in CASES],
)
def test_vector(file_layout: Any, case: dict[str, Any]) -> None:
    run_case(file_layout, case)


def test_unknown_op_fails() -> None:
    with pytest.raises(AssertionError, match="unknown op"):
        run_case("clockseq", {"id": "x", "op": "frobnicate", "in": None})


def test_package_is_the_built_one() -> None:
    assert clockflake.__file__ is not None
