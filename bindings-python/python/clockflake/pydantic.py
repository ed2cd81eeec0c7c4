"""Pydantic v2 types: ids are ``int`` in Python and decimal strings in JSON.

A JavaScript client's ``JSON.parse`` rounds integers above 2**53 (``383926669326418300``), so
an id sent as a JSON number arrives wrong. With these types a model sends ids as strings and
takes them back as strings or ints:

>>> from pydantic import BaseModel
>>> from clockflake.pydantic import Id
>>> class Order(BaseModel):
...     id: Id
>>> Order(id=383926669326418305).model_dump_json()
'{"id":"383926669326418305"}'
>>> Order.model_validate_json('{"id":"383926669326418305"}').id
383926669326418305

``JsonParts`` is a decoded id (``clockflake.Parts``) as an object of its four fields. Pydantic
is imported only when this module is, so clockflake does not depend on it.
"""

from __future__ import annotations

from typing import Annotated, Any, TypeAlias

from pydantic import PlainSerializer, PlainValidator, WithJsonSchema

from clockflake._clockflake import Parts, decode
from clockflake._errors import InvalidIdError

__all__ = ["Id", "JsonParts"]

_MAX_ID = (1 << 63) - 1
_ID_PATTERN = "^[0-9]{1,19}$"


def _id(value: object) -> int:
    """An id from an int or a decimal string (core's rules: 0..2**63, digits only)."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ValueError(f"an id is an int or a decimal string, not {type(value).__name__}")
    try:
        # decode checks the text and the range the way every clockflake binding does; the
        # widest layout takes every id below 2**63.
        number = int(value) if isinstance(value, int) else int(value, 10)
        if isinstance(value, str):
            decode(value)  # raises InvalidIdError for a sign, spaces, underscores, ...
        if not 0 <= number <= _MAX_ID:
            raise InvalidIdError(f"invalid id: expected 0..2^63, found {number}")
    except (InvalidIdError, ValueError) as error:
        raise ValueError(str(error)) from None
    return number


def _parts(value: object) -> Parts:
    if isinstance(value, Parts):
        return value
    if isinstance(value, dict):
        keys = ("timestamp_ms", "clock_seq", "worker_id", "sequence")
        return Parts(*(int(value[key]) for key in keys))
    raise ValueError(
        f"expected clockflake.Parts or a dict of its fields, not {type(value).__name__}"
    )


def _parts_dict(parts: Parts) -> dict[str, int]:
    return parts.as_dict()


_ID_SCHEMA: dict[str, Any] = {
    "type": "string",
    "pattern": _ID_PATTERN,
    "examples": ["383926669326418305"],
}

Id: TypeAlias = Annotated[
    int,
    PlainValidator(_id, json_schema_input_type=int | str),
    PlainSerializer(str, return_type=str, when_used="json"),
    WithJsonSchema(_ID_SCHEMA, mode="serialization"),
]
"""An id: ``int`` in Python, a decimal string in JSON (an int or a decimal string accepted)."""

JsonParts: TypeAlias = Annotated[
    Parts,
    PlainValidator(_parts),
    PlainSerializer(_parts_dict),
    WithJsonSchema(
        {
            "type": "object",
            "properties": {
                key: {"type": "integer", "minimum": 0}
                for key in ("timestamp_ms", "clock_seq", "worker_id", "sequence")
            },
            "required": ["timestamp_ms", "clock_seq", "worker_id", "sequence"],
        }
    ),
]
"""A decoded id (``clockflake.Parts``), as ``{timestamp_ms, clock_seq, worker_id, sequence}``."""
