"""Snowflake-style 64-bit ids that never repeat, even when the wall clock steps back.

>>> from clockflake import Generator, decode
>>> gen = Generator(worker_id=7)
>>> parts = decode(gen.next_id())
>>> parts.worker_id
7
"""

from __future__ import annotations

try:
    import clockflake._clockflake as _clockflake
except ImportError as _missing:  # say what to install
    import sys
    import sysconfig

    raise ImportError(
        f"clockflake's native module (clockflake._clockflake, compiled from Rust) did not load: "
        f"{_missing}. This is {sys.implementation.name} {sys.version.split()[0]} on "
        f"{sysconfig.get_platform()}. The module is compiled per platform: install the wheel built "
        "for this one (one abi3 wheel serves CPython 3.10 and later: Linux x86_64 and aarch64, "
        "glibc 2.17+ or musl; macOS x86_64 and arm64; Windows x64, x86 and arm64), or build it "
        "from source, which needs a Rust toolchain 1.85 or newer (`pip install ./bindings-python` "
        "in a clone of the repository; `make build-python` to work on it there)"
    ) from _missing
from clockflake import _aio
from clockflake._clockflake import (
    Generator,
    Parts,
    PublicIds,
    decode,
    describe_layout,
    encode,
    guess_layout,
    id_range,
    is_plausible,
    restored,
    suggest_layout,
)

# Every exception class, one per stable code (`_errors.__all__`).
from clockflake._errors import *

# Generator.open_async, close_async and `async with` (asyncio imported on first use only).
_aio.install(Generator)

# The typed dict shapes (clockflake._types) are for type checkers: importing them at run time
# means importing `typing` (several ms, more than the rest of the package). Type checkers take
# them from here (a variable named TYPE_CHECKING is true for them); at run time
# `clockflake.LayoutSpec` and friends load on first use (__getattr__ below).
TYPE_CHECKING = False
if TYPE_CHECKING:
    from clockflake._types import (
        GeneratorState,
        GeneratorStats,
        LayoutArg,
        LayoutField,
        LayoutInfo,
        LayoutSpec,
    )

_TYPES = frozenset(
    ["GeneratorState", "GeneratorStats", "LayoutArg", "LayoutField", "LayoutInfo", "LayoutSpec"]
)


if not TYPE_CHECKING:  # hidden from type checkers: a module __getattr__ would let any name pass

    def __getattr__(name: str) -> object:
        if name in _TYPES:
            from clockflake import _types

            value = getattr(_types, name)
            globals()[name] = value
            return value
        raise AttributeError(f"module 'clockflake' has no attribute {name!r}")

    def __dir__() -> list[str]:
        return sorted({*globals(), *_TYPES})


__version__: str = _clockflake.__version__
"""The package's version: the Cargo workspace's version, compiled into the native module (so it
is stated in one place, Cargo.toml, and reading it costs no import of importlib.metadata)."""

__all__ = [
    "Generator",
    "Parts",
    "PublicIds",
    "decode",
    "encode",
    "id_range",
    "describe_layout",
    "layouts",
    "restored",
    "suggest_layout",
    "is_plausible",
    "guess_layout",
    "GeneratorState",
    "GeneratorStats",
    "LayoutArg",
    "LayoutField",
    "LayoutInfo",
    "LayoutSpec",
    # The exception classes: mypy reads only a literal list (the tests check it against them).
    "ClockflakeError",
    "ClockMovedBackwardsError",
    "ClockNotAdvancingError",
    "ClockSkewError",
    "ClockSeqOutOfRangeError",
    "ClockSequenceExhaustedError",
    "CoordinatorUnavailableError",
    "EpochInFutureError",
    "GeneratorClosedError",
    "InvalidArgTypeError",
    "InvalidArgValueError",
    "InvalidIdError",
    "InvalidKeyVersionError",
    "InvalidLayoutError",
    "InvalidPublicIdError",
    "InvalidRangeError",
    "InvalidStateError",
    "InvalidUriError",
    "LeaseLostError",
    "SequenceExhaustedError",
    "SequenceOutOfRangeError",
    "TimestampExhaustedError",
    "TimestampOutOfRangeError",
    "UnknownKeyVersionError",
    "UnknownLayoutError",
    "UnknownPolicyError",
    "WorkerIdInvalidatedError",
    "WorkerIdOutOfRangeError",
    "WorkerPoolExhaustedError",
    "WorkerRangeConflictError",
]

layouts: dict[str, LayoutInfo] = {name: describe_layout(name) for name in _clockflake.PRESET_NAMES}
"""Every preset layout by name, described as by ``describe_layout`` (the default, clockseq, first)."""

# Forks need no hook here: a forked child must not go on issuing ids under its parent's worker
# id, and os.register_at_fork would miss a fork() called from C (uWSGI, C extensions). The
# native module notices every fork itself (a pthread_atfork child handler): in the child, a
# generator made before the fork with Generator(worker_id=...) raises WorkerIdInvalidatedError,
# and one made with Generator.open(uri) leases a new worker id for the child at its first call.
