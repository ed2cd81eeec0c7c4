"""PublicIds: every case of tests/vectors/public/*.json, plus the binding's own input checks."""

from __future__ import annotations

import copy
import json
import pickle
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from clockflake import (
    ClockflakeError,
    InvalidIdError,
    InvalidKeyVersionError,
    InvalidPublicIdError,
    PublicIds,
    UnknownKeyVersionError,
    _errors,
    encode,
)
from clockflake._errors import InvalidArgTypeError, InvalidArgValueError
from helpers import refused

VECTORS = Path(__file__).resolve().parents[2] / "tests" / "vectors" / "public"
KEY = bytes.fromhex("636c6f636b666c616b652d6b65792d31")


def load_cases() -> list[dict[str, Any]]:
    cases = []
    for path in sorted(VECTORS.glob("*.json")):
        cases.extend(json.loads(path.read_text())["cases"])
    return cases


CASES = load_cases()


def test_enough_cases_loaded() -> None:
    assert len(CASES) >= 80, f"loaded only {len(CASES)} public-id cases from {VECTORS}"


def codec_of(keys: list[dict[str, Any]]) -> PublicIds:
    """keys[0] is the current key, the rest old keys for decoding; each ff1 or legacy."""
    legacy = [key["construction"] == "legacy" for key in keys]
    assert all(key["construction"] in ("ff1", "legacy") for key in keys)
    new = PublicIds.legacy if legacy[0] else PublicIds
    codec = new(keys[0]["version"], bytes.fromhex(keys[0]["key_hex"]))
    for key, is_legacy in zip(keys[1:], legacy[1:], strict=True):
        add = codec.with_legacy_key if is_legacy else codec.with_old_key
        codec = add(key["version"], bytes.fromhex(key["key_hex"]))
    return codec


def run(case: dict[str, Any]) -> Callable[[], Any]:
    given = case["in"]
    op = case["op"]

    def call() -> Any:
        codec = codec_of(given["keys"])
        if op == "public_encode":
            id = int(given["id"])
            number, text = codec.encode(id), codec.encode_text(id)
            assert codec.decode(number) == id and codec.decode_text(text) == id
            return {"number": str(number), "text": text}
        if op == "public_decode":
            return str(codec.decode(int(given["number"])))
        if op == "public_decode_text":
            return str(codec.decode_text(given["text"]))
        raise AssertionError(f"unknown op {op!r} in case {case['id']}")

    return call


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_vector(case: dict[str, Any]) -> None:
    call = run(case)
    if "error" in case:
        cls = _errors._BY_CODE[case["error"]]
        with pytest.raises(ClockflakeError) as caught:
            call()
        assert caught.value.code == case["error"] and type(caught.value) is cls
        assert isinstance(caught.value, ValueError)
    else:
        assert call() == case["out"]


# --- the binding's own checks ----------------------------------------------------------------

codec = PublicIds(1, KEY)

BAD: list[tuple[str, Callable[[], Any], type[Exception], str | None]] = [
    ("encode bool", lambda: codec.encode(True), InvalidIdError, "bool"),
    ("encode float", lambda: codec.encode(1.0), InvalidIdError, "float"),  # type: ignore[arg-type]
    ("encode negative", lambda: codec.encode(-1), InvalidIdError, "-1"),
    ("encode 2^63", lambda: codec.encode(2**63), InvalidIdError, None),
    ("encode 2^64", lambda: codec.encode(2**64), InvalidIdError, "18446744073709551616"),
    ("encode str", lambda: codec.encode("5"), InvalidIdError, "str"),  # type: ignore[arg-type]
    ("encode_text negative", lambda: codec.encode_text(-5), InvalidIdError, "-5"),
    ("decode bool", lambda: codec.decode(False), InvalidPublicIdError, "bool"),
    ("decode float", lambda: codec.decode(2.0), InvalidPublicIdError, "float"),  # type: ignore[arg-type]
    ("decode negative", lambda: codec.decode(-1), InvalidPublicIdError, "-1"),
    ("decode 2^63", lambda: codec.decode(2**63), InvalidPublicIdError, None),
    ("decode 2^100", lambda: codec.decode(2**100), InvalidPublicIdError, None),
    ("decode_text int", lambda: codec.decode_text(5), InvalidPublicIdError, "int"),  # type: ignore[arg-type]
    (
        "decode_text bytes",
        lambda: codec.decode_text(b"10WKC4N8M565DPQJ"),
        InvalidPublicIdError,
        "bytes",
    ),  # type: ignore[arg-type]
    (
        "decode_text non-ascii",
        lambda: codec.decode_text("10WKC4N8M565DPQé"),
        InvalidPublicIdError,
        None,
    ),
    ("decode_text typo", lambda: codec.decode_text("10WKC4N8M565DPQK"), InvalidPublicIdError, None),
    (
        "decode_text unknown version",
        lambda: codec.decode_text(PublicIds(2, KEY).encode_text(7)),
        UnknownKeyVersionError,
        None,
    ),
    ("version 32", lambda: PublicIds(32, KEY), InvalidKeyVersionError, "32"),
    ("version negative", lambda: PublicIds(-1, KEY), InvalidKeyVersionError, "-1"),
    ("version bool", lambda: PublicIds(True, KEY), InvalidKeyVersionError, "bool"),
    ("version float", lambda: PublicIds(1.0, KEY), InvalidKeyVersionError, "float"),  # type: ignore[arg-type]
    ("version 2^64", lambda: PublicIds(2**64, KEY), InvalidKeyVersionError, None),
    ("old key same version", lambda: codec.with_old_key(1, KEY), InvalidKeyVersionError, None),
    ("old key version 40", lambda: codec.with_old_key(40, KEY), InvalidKeyVersionError, None),
    ("legacy version 32", lambda: PublicIds.legacy(32, KEY), InvalidKeyVersionError, "32"),
    (
        "legacy key same version",
        lambda: codec.with_legacy_key(1, KEY),
        InvalidKeyVersionError,
        None,
    ),
]

# Argument shape, with the codes Node gives (bindings-node/tests/public.test.mjs): a key of the
# wrong type is INVALID_ARG_TYPE (also a TypeError), of the wrong length INVALID_ARG_VALUE (also a
# ValueError); so is a value that is not parts at all given to encode().
BAD_ARGS: list[tuple[str, Callable[[], Any], type[ClockflakeError], type[Exception], str]] = [
    ("key 15 bytes", lambda: PublicIds(1, KEY[:15]), InvalidArgValueError, ValueError, "16 bytes"),
    (
        "key 17 bytes",
        lambda: PublicIds(1, KEY + b"x"),
        InvalidArgValueError,
        ValueError,
        "16 bytes",
    ),
    ("key empty", lambda: PublicIds(1, b""), InvalidArgValueError, ValueError, "found 0"),
    ("key str", lambda: PublicIds(1, KEY.decode()), InvalidArgTypeError, TypeError, "str"),  # type: ignore[arg-type]
    ("key None", lambda: PublicIds(1, None), InvalidArgTypeError, TypeError, "None"),  # type: ignore[arg-type]
    ("key list", lambda: PublicIds(1, list(KEY)), InvalidArgTypeError, TypeError, "list"),  # type: ignore[arg-type]
    (
        "old key bytearray",
        lambda: codec.with_old_key(0, bytearray(KEY)),
        InvalidArgTypeError,
        TypeError,
        "bytearray",
    ),  # type: ignore[arg-type]
    (
        "old key 3 bytes",
        lambda: codec.with_old_key(2, b"abc"),
        InvalidArgValueError,
        ValueError,
        "16 bytes",
    ),
    (
        "legacy key 3 bytes",
        lambda: codec.with_legacy_key(2, b"abc"),
        InvalidArgValueError,
        ValueError,
        "16 bytes",
    ),
    ("legacy key str", lambda: PublicIds.legacy(1, "k"), InvalidArgTypeError, TypeError, "str"),  # type: ignore[arg-type]
    ("encode({})", lambda: encode({}), InvalidArgTypeError, TypeError, "timestamp_ms"),  # type: ignore[typeddict-item]
    ("encode(None)", lambda: encode(None), InvalidArgTypeError, TypeError, "Parts"),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(
    ("call", "error", "builtin", "text"),
    [row[1:] for row in BAD_ARGS],
    ids=[row[0] for row in BAD_ARGS],
)
def test_bad_argument_shape_has_a_code(
    call: Callable[[], Any], error: type[ClockflakeError], builtin: type[Exception], text: str
) -> None:
    with pytest.raises(ClockflakeError) as caught:
        call()
    assert type(caught.value) is error and caught.value.code == error.code
    assert isinstance(caught.value, builtin) and caught.value.retry_at_ms is None
    assert text in str(caught.value)


def test_argument_error_classes() -> None:
    assert InvalidArgTypeError.code == "INVALID_ARG_TYPE" and issubclass(
        InvalidArgTypeError, TypeError
    )
    assert InvalidArgValueError.code == "INVALID_ARG_VALUE" and issubclass(
        InvalidArgValueError, ValueError
    )
    assert not issubclass(InvalidArgTypeError, ValueError) and not issubclass(
        InvalidArgValueError, TypeError
    )
    error = pickle.loads(pickle.dumps(InvalidArgTypeError("key: expected 16 bytes, found str")))
    assert type(error) is InvalidArgTypeError and str(error) == "key: expected 16 bytes, found str"


@pytest.mark.parametrize(
    ("call", "error", "text"), [row[1:] for row in BAD], ids=[row[0] for row in BAD]
)
def test_bad_input(call: Callable[[], Any], error: type[Exception], text: str | None) -> None:
    raised = refused(call, error, text)
    if issubclass(error, ClockflakeError):
        assert isinstance(raised, ValueError)


def test_round_trips_and_shape() -> None:
    rng = random.Random(8)
    rotated = PublicIds(2, bytes(range(16))).with_old_key(1, KEY)
    assert rotated.current_version == 2 and codec.current_version == 1
    for _ in range(5_000):
        id = rng.randrange(2**63)
        public = codec.encode(id)
        assert type(public) is int and 0 <= public < 2**63
        assert codec.decode(public) == id
        text = codec.encode_text(id)
        assert len(text) == 16 and text == text.upper() and text[0] == "1"
        assert codec.decode_text(text.lower()) == id
        assert rotated.decode_text(text) == id  # the old key still decodes
        assert rotated.encode_text(id)[0] == "2"
    assert len({codec.encode(id) for id in range(20_000)}) == 20_000


def test_legacy_keys_keep_their_links() -> None:
    """A text made before FF1 (key version 1, tests/vectors/public/codec.json) still decodes
    under its key registered either way: the text carries its construction."""
    text, id = "17T3G30P67GKXXA6", 383188013854781440
    assert PublicIds.legacy(1, KEY).decode_text(text) == id
    assert PublicIds.legacy(1, KEY).encode_text(id) == text
    moved = PublicIds(2, bytes(range(16))).with_legacy_key(1, KEY)
    assert moved.decode_text(text) == id and moved.encode_text(id)[0] == "2"
    assert PublicIds(1, KEY).decode_text(text) == id
    assert PublicIds.legacy(1, KEY).decode_text(PublicIds(1, KEY).encode_text(id)) == id


def test_keys_never_leak() -> None:
    assert repr(codec) == "PublicIds(current_version=1)"
    assert KEY.hex() not in repr(codec) and "clockflake" not in repr(codec)
    with pytest.raises(TypeError):
        pickle.dumps(codec)
    with pytest.raises(TypeError):
        copy.copy(codec)
