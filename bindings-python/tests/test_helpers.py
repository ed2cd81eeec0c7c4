"""Layout advice (suggest_layout, is_plausible, guess_layout), the JSON helpers (Parts as a dict,
the Pydantic types) and the Django default function. Pydantic and Django are optional: their
tests are skipped where they are not installed (make test-recipes installs both)."""

from __future__ import annotations

import importlib.metadata
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import clockflake
import pytest
from clockflake import (
    Generator,
    InvalidIdError,
    InvalidLayoutError,
    InvalidUriError,
    Parts,
    decode,
    describe_layout,
    encode,
    guess_layout,
    is_plausible,
    suggest_layout,
)

TWITTER_ID = 2125537250721665024  # made 2026-11-25T10:29:05.801Z under Twitter's layout
A_DAY_LATER = 1_795_700_000_000


def test_version_is_the_distributions_and_costs_no_metadata_import() -> None:
    assert clockflake.__version__ == importlib.metadata.version("clockflake")
    code = "import sys, clockflake; print('importlib.metadata' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_import_and_a_first_id_load_no_typing_and_the_types_load_on_use() -> None:
    """`typing` (with re, enum, collections) costs more than the rest of the import: the typed
    dict shapes load on first use, and are the same classes as clockflake._types' then."""
    code = (
        "import sys, clockflake; clockflake.Generator(worker_id=1).next_id(); "
        "print(sorted(m for m in ('typing', 're', 'enum', 'clockflake._types') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    from clockflake import _types

    for name in ["GeneratorState", "GeneratorStats", "LayoutArg", "LayoutField", "LayoutInfo"]:
        assert getattr(clockflake, name) is getattr(_types, name), name
        assert name in dir(clockflake), name
    with pytest.raises(AttributeError, match="no attribute 'LayoutSpecs'"):
        clockflake.LayoutSpecs  # type: ignore[attr-defined]  # noqa: B018


def test_a_missing_native_module_says_what_to_install(tmp_path: Path) -> None:
    package = Path(clockflake.__file__).parent
    copy = tmp_path / "clockflake"
    copy.mkdir()
    for source in package.glob("*.py"):
        (copy / source.name).write_bytes(source.read_bytes())
    out = subprocess.run(
        [sys.executable, "-c", "import clockflake"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
        cwd=tmp_path,
    )
    assert out.returncode == 1
    last = out.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: clockflake's native module (clockflake._clockflake"), last
    assert "install the wheel built for this one" in last and "Rust toolchain" in last, last
    assert "circular import" not in last, last


def fields(info: clockflake.LayoutInfo) -> list[tuple[str, int]]:
    return [(f["name"], f["bits"]) for f in info["fields"]]


def test_suggest_layout_for_300_processes() -> None:
    info = suggest_layout(300, 10_000, 30)
    assert fields(info) == [("timestamp", 41), ("clock_seq", 3), ("worker", 9), ("sequence", 10)]
    assert info["max_worker_id"] == 511 and info["name"] is None
    # The suggestion is a layout every call takes.
    gen = Generator(worker_id=299, layout=info)
    assert decode(gen.next_id(), info).worker_id == 299


def test_suggest_layout_gives_the_default_for_its_own_numbers() -> None:
    assert suggest_layout(128, 4_096_000, 60)["name"] == "clockseq"


def test_suggest_layout_refuses_what_cannot_fit() -> None:
    with pytest.raises(InvalidLayoutError) as caught:
        suggest_layout(1 << 30, 1 << 40, 1000)
    assert caught.value.code == "INVALID_LAYOUT"
    with pytest.raises(TypeError):
        suggest_layout(1.5, 1, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        suggest_layout(-1, 1, 1)


def test_is_plausible_tells_a_twitter_id_from_a_default_one() -> None:
    assert is_plausible(TWITTER_ID, "twitter", now_ms=A_DAY_LATER)
    assert not is_plausible(TWITTER_ID, now_ms=A_DAY_LATER)  # the default reads 2040
    assert not is_plausible(TWITTER_ID, "js53", now_ms=A_DAY_LATER)  # too wide for js53
    # The margin: an id 10 s ahead of now is plausible by default, not with a 1 s margin.
    ahead = encode(Parts(A_DAY_LATER + 10_000, 0, 1, 0))
    assert is_plausible(ahead, now_ms=A_DAY_LATER)
    assert not is_plausible(ahead, now_ms=A_DAY_LATER, margin_ms=1_000)
    assert is_plausible(str(ahead), now_ms=A_DAY_LATER)
    # Now, by default: an id made now is plausible.
    assert is_plausible(Generator(worker_id=1).next_id())


def test_is_plausible_refuses_what_is_no_id() -> None:
    for bad in (-1, True, 1.0, "12x"):
        with pytest.raises(InvalidIdError):
            is_plausible(bad)  # type: ignore[arg-type]


def test_guess_layout_names_the_preset() -> None:
    guess = guess_layout(TWITTER_ID, now_ms=A_DAY_LATER)
    assert guess is not None
    name, parts = guess
    assert name == "twitter" and parts == decode(TWITTER_ID, "twitter")
    assert parts.timestamp_ms == 1_795_602_545_801
    mine = Generator(worker_id=3).next_id()
    assert guess_layout(mine) == ("clockseq", decode(mine))
    # Before any preset's epoch nothing is plausible. (Any id below 2**63 reads a time before
    # 2024-11-20 under baidu, whose timestamp ran out then: the latest plausible time wins.)
    assert guess_layout(TWITTER_ID, now_ms=0, margin_ms=0) is None
    assert guess_layout((1 << 63) - 1, now_ms=A_DAY_LATER) == (
        "baidu",
        decode((1 << 63) - 1, "baidu"),
    )


def test_parts_serialise() -> None:
    parts = decode(383926669326418305)
    assert parts._asdict() == parts.as_dict()
    assert json.loads(json.dumps(parts._asdict())) == {
        "timestamp_ms": parts.timestamp_ms,
        "clock_seq": parts.clock_seq,
        "worker_id": parts.worker_id,
        "sequence": parts.sequence,
    }


def test_pydantic_id_is_a_string_in_json() -> None:
    pydantic = pytest.importorskip("pydantic")
    from clockflake.pydantic import Id, JsonParts

    class Order(pydantic.BaseModel):
        id: Id
        parts: JsonParts | None = None

    big = 383926669326418305
    order = Order(id=big, parts=decode(big))
    assert json.loads(order.model_dump_json())["id"] == str(big)
    assert order.model_dump()["id"] == big  # Python mode keeps the int
    assert json.loads(order.model_dump_json())["parts"] == decode(big).as_dict()
    assert Order.model_validate_json(order.model_dump_json()) == order
    assert Order(id=str(big)).id == big  # type: ignore[arg-type]
    for bad in ("-1", " 1", "1_0", str(1 << 63), True, 1.5, None):
        with pytest.raises(pydantic.ValidationError):
            Order(id=bad)  # type: ignore[arg-type]
    schema = Order.model_json_schema(mode="serialization")
    assert schema["properties"]["id"]["type"] == "string"


def test_django_default_is_a_module_function_opened_lazily(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from clockflake import django as cf_django

    cf_django.reset()
    monkeypatch.setattr(cf_django, "_configured", None)
    monkeypatch.delenv("CLOCKFLAKE_URI", raising=False)
    with pytest.raises(InvalidUriError):
        cf_django.next_id()
    monkeypatch.setenv("CLOCKFLAKE_URI", f"file://{tmp_path}?app=orders")
    ids: list[int] = []
    threads = [
        threading.Thread(target=lambda: ids.extend(cf_django.next_id() for _ in range(1000)))
        for _ in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(set(ids)) == 4000
    assert cf_django.generator().worker_id == 0  # one generator for every thread
    cf_django.reset()
    cf_django.configure(f"file://{tmp_path}?app=orders", layout="clockseq")
    assert decode(cf_django.next_id()).worker_id == 0
    cf_django.reset()
    monkeypatch.setattr(cf_django, "_configured", None)


def test_describe_layout_round_trips_a_suggestion() -> None:
    info = suggest_layout(1000, 1_000_000, 20)
    assert describe_layout(info) == info


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "clockflake", *args], capture_output=True, text=True, check=False
    )


def test_cli_decode_warns_and_guesses() -> None:
    out = cli("decode", str(TWITTER_ID))
    assert out.returncode == 0
    assert "2040-01-22" in out.stdout
    assert "warning" in out.stderr and "under twitter it reads 2026-11-25" in out.stderr
    as_json = json.loads(cli("decode", "--json", "--layout", "twitter", str(TWITTER_ID)).stdout)
    assert as_json["worker_id"] == 513 and as_json["plausible"] is True
    assert as_json["id"] == str(TWITTER_ID)
    bad = cli("decode", "12x")
    assert bad.returncode == 1 and "INVALID_ID" in bad.stderr


def test_cli_layouts_and_suggest() -> None:
    names = [json.loads(line)["name"] for line in cli("layouts", "--json").stdout.splitlines()]
    assert names == list(clockflake.layouts)
    suggested = json.loads(cli("suggest", "300", "10000", "30", "--json").stdout)
    assert suggested["max_worker_id"] == 511
    assert "512 workers, 1024 ids per ms" in cli("suggest", "300", "10000", "30").stdout
    too_much = cli("suggest", str(1 << 30), str(1 << 40), "1000")
    assert too_much.returncode == 1 and "INVALID_LAYOUT" in too_much.stderr


class _LateRenewal:
    """A generator whose lease reservation is late `late` times, then issues ids."""

    def __init__(self, late: int, retry_at: bool = True) -> None:
        self.late = late
        self.retry_at = retry_at
        self.calls = 0

    def next_id(self) -> int:
        self.calls += 1
        if self.calls <= self.late:
            at = int(time.time() * 1000) + 5 if self.retry_at else None
            raise clockflake.CoordinatorUnavailableError("renewal late", at)
        return 42


def test_django_next_id_waits_out_a_late_renewal(monkeypatch: pytest.MonkeyPatch) -> None:
    from clockflake import django as cf_django

    late = _LateRenewal(3)
    monkeypatch.setattr(cf_django, "_generator", late)
    assert cf_django.next_id() == 42 and late.calls == 4
    # No retry time: the refusal is final, raised at once.
    final = _LateRenewal(1, retry_at=False)
    monkeypatch.setattr(cf_django, "_generator", final)
    with pytest.raises(clockflake.CoordinatorUnavailableError):
        cf_django.next_id()
    assert final.calls == 1
    # Late for longer than RETRY_FOR_S: raised.
    monkeypatch.setattr(cf_django, "RETRY_FOR_S", 0.05)
    monkeypatch.setattr(cf_django, "_generator", _LateRenewal(10_000))
    with pytest.raises(clockflake.CoordinatorUnavailableError):
        cf_django.next_id()
    monkeypatch.setattr(cf_django, "_generator", None)
