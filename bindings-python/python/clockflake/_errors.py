"""Exceptions of clockflake, one class per stable error code.

Every class derives from :class:`ClockflakeError` and from the matching builtin:
``ValueError`` for bad input, ``RuntimeError`` for refusals about the clock or the state of the
world, ``ConnectionError`` for a lease coordinator that cannot be reached. The native module raises them by their ``code`` (the same strings in Rust, JS and Python).
"""

from __future__ import annotations

# `typing` costs several ms at import (it brings re, enum, collections): type checkers treat a
# variable named TYPE_CHECKING as true, and at run time this annotation is never evaluated.
TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import ClassVar

__all__ = [
    "ClockflakeError",
    "InvalidIdError",
    "InvalidLayoutError",
    "UnknownLayoutError",
    "UnknownPolicyError",
    "WorkerIdOutOfRangeError",
    "TimestampOutOfRangeError",
    "ClockSeqOutOfRangeError",
    "SequenceOutOfRangeError",
    "InvalidRangeError",
    "EpochInFutureError",
    "TimestampExhaustedError",
    "SequenceExhaustedError",
    "ClockMovedBackwardsError",
    "ClockSequenceExhaustedError",
    "InvalidStateError",
    "ClockNotAdvancingError",
    "WorkerIdInvalidatedError",
    "LeaseLostError",
    "WorkerPoolExhaustedError",
    "InvalidUriError",
    "CoordinatorUnavailableError",
    "GeneratorClosedError",
    "ClockSkewError",
    "WorkerRangeConflictError",
    "InvalidPublicIdError",
    "UnknownKeyVersionError",
    "InvalidKeyVersionError",
    "InvalidArgTypeError",
    "InvalidArgValueError",
]


class ClockflakeError(Exception):
    """Base class of every clockflake exception.

    ``code`` is the stable error code; ``retry_at_ms`` is the Unix-ms time at which the same call
    can succeed (set on sequence and clock refusals that a short wait would cure), else ``None``.
    """

    code: ClassVar[str] = "CLOCKFLAKE_ERROR"
    retry_at_ms: int | None

    def __init__(self, message: str, retry_at_ms: int | None = None) -> None:
        super().__init__(message)
        self.retry_at_ms = retry_at_ms

    def __reduce__(self) -> tuple[type[ClockflakeError], tuple[str, int | None]]:
        return (type(self), (str(self), self.retry_at_ms))


# Bad input: also ValueError.


class InvalidIdError(ClockflakeError, ValueError):
    """A value that is not an id of the layout (wrong type, negative, 2**63 or more, beyond the layout)."""

    code = "INVALID_ID"


class InvalidLayoutError(ClockflakeError, ValueError):
    """A custom layout that breaks a rule."""

    code = "INVALID_LAYOUT"


class UnknownLayoutError(ClockflakeError, ValueError):
    """No preset layout has that name."""

    code = "UNKNOWN_LAYOUT"


class UnknownPolicyError(ClockflakeError, ValueError):
    """No rollback policy has that name."""

    code = "UNKNOWN_POLICY"


class WorkerIdOutOfRangeError(ClockflakeError, ValueError):
    """A worker id that is not an int the layout's worker field holds."""

    code = "WORKER_ID_OUT_OF_RANGE"


class TimestampOutOfRangeError(ClockflakeError, ValueError):
    """A time before the layout's epoch or past its lifetime (or not an int of Unix ms)."""

    code = "TIMESTAMP_OUT_OF_RANGE"


class ClockSeqOutOfRangeError(ClockflakeError, ValueError):
    """A clock sequence the layout does not hold."""

    code = "CLOCK_SEQ_OUT_OF_RANGE"


class SequenceOutOfRangeError(ClockflakeError, ValueError):
    """A sequence number the layout does not hold."""

    code = "SEQUENCE_OUT_OF_RANGE"


class InvalidRangeError(ClockflakeError, ValueError):
    """A time window whose start is after its end."""

    code = "INVALID_RANGE"


class InvalidStateError(ClockflakeError, ValueError):
    """A saved state that cannot be resumed with this layout (or a lease's stored state record
    that is corrupt: refused, never reset)."""

    code = "INVALID_STATE"


class InvalidUriError(ClockflakeError, ValueError):
    """A coordinator URI that ``Generator.open`` cannot use."""

    code = "INVALID_URI"


class InvalidPublicIdError(ClockflakeError, ValueError):
    """A public number or text that is not a public id (a typo, a wrong length, 2**63 or more)."""

    code = "INVALID_PUBLIC_ID"


class UnknownKeyVersionError(ClockflakeError, ValueError):
    """A public id made with a key version the codec does not hold."""

    code = "UNKNOWN_KEY_VERSION"


class InvalidKeyVersionError(ClockflakeError, ValueError):
    """A key version outside 0..=31, or one already in the codec."""

    code = "INVALID_KEY_VERSION"


# The binding's own checks of an argument's shape, with the codes Node uses for them (core has
# no such codes: these never leave a binding).


class InvalidArgTypeError(ClockflakeError, TypeError):
    """An argument of the wrong type (a ``PublicIds`` key that is not ``bytes``, ``encode(None)``)."""

    code = "INVALID_ARG_TYPE"


class InvalidArgValueError(ClockflakeError, ValueError):
    """An argument of the right type but the wrong shape (a ``PublicIds`` key not 16 bytes long)."""

    code = "INVALID_ARG_VALUE"


# Refusals about the clock or the state of the world: also RuntimeError.


class EpochInFutureError(ClockflakeError, RuntimeError):
    """The clock reads a time before the layout's epoch."""

    code = "EPOCH_IN_FUTURE"


class TimestampExhaustedError(ClockflakeError, RuntimeError):
    """The layout's timestamp field has run out; it can no longer generate."""

    code = "TIMESTAMP_EXHAUSTED"


class SequenceExhaustedError(ClockflakeError, RuntimeError):
    """Every sequence number of this tick is used; retry at ``retry_at_ms``."""

    code = "SEQUENCE_EXHAUSTED"


class ClockMovedBackwardsError(ClockflakeError, RuntimeError):
    """The clock reads before the last id issued, and the policy refuses."""

    code = "CLOCK_MOVED_BACKWARDS"


class ClockSequenceExhaustedError(ClockflakeError, RuntimeError):
    """The clock went back and every clock sequence was already used at that time."""

    code = "CLOCK_SEQUENCE_EXHAUSTED"


class ClockNotAdvancingError(ClockflakeError, RuntimeError):
    """A waiting call waited for a time its clock never reached."""

    code = "CLOCK_NOT_ADVANCING"


class WorkerIdInvalidatedError(ClockflakeError, RuntimeError):
    """The generator's worker id belongs to another process (after ``os.fork()``, any other copy
    of the process, or ``restored()``): make a new one."""

    code = "WORKER_ID_INVALIDATED"


class LeaseLostError(ClockflakeError, RuntimeError):
    """The worker-id lease expired without renewal: the generator issues no more ids; open a new one."""

    code = "LEASE_LOST"


class WorkerPoolExhaustedError(ClockflakeError, RuntimeError):
    """Every worker id of the layout (or of the lease URI's ``workers=`` range) is leased."""

    code = "WORKER_POOL_EXHAUSTED"


class GeneratorClosedError(ClockflakeError, RuntimeError):
    """``close()`` was called (the end of a ``with`` block): a leased worker id has been released."""

    code = "GENERATOR_CLOSED"


class ClockSkewError(ClockflakeError, RuntimeError):
    """At start-up the local clock and the lease coordinator's differed by more than the URI's
    ``max_skew`` (default 5 s): the message states both clocks (Unix ms) and the difference. The
    worker id was given back untouched and no id was issued."""

    code = "CLOCK_SKEW"


class WorkerRangeConflictError(ClockflakeError, RuntimeError):
    """A live holder of the same app on this coordinator declared a ``workers`` range that
    overlaps this pool's and differs from it: two pools' ranges overlap, so the plan of ranges
    (one per region) is inconsistent. Nothing was taken."""

    code = "WORKER_RANGE_CONFLICT"


# The coordinator cannot be reached or failed (I/O error, database down): also ConnectionError,
# an OSError, so that code retrying on connection problems catches it.


class CoordinatorUnavailableError(ClockflakeError, ConnectionError):
    """The lease coordinator could not be reached or failed (opening fails; a running generator
    goes on until its lease deadline)."""

    code = "COORDINATOR_UNAVAILABLE"


# Derived from the classes above (the one list of them): one per stable code. The tests check
# `_BY_CODE` against core's and the lease crate's tables (`Error::CODES`, `LeaseError::CODES`);
# the native module raises by `_RAISE_BY_CODE`, which adds the binding's own argument checks.
_RAISE_BY_CODE: dict[str, type[ClockflakeError]] = {
    cls.code: cls for cls in ClockflakeError.__subclasses__()
}
_BY_CODE: dict[str, type[ClockflakeError]] = {
    code: cls
    for code, cls in _RAISE_BY_CODE.items()
    if cls not in (InvalidArgTypeError, InvalidArgValueError)
}
