"""Pydantic v2: ids as decimal strings in JSON, ints in Python; a decoded id as an object."""

from __future__ import annotations

from clockflake import Generator, decode
from clockflake.pydantic import Id, JsonParts
from pydantic import BaseModel


class Order(BaseModel):
    id: Id
    customer_id: Id
    parent_id: Id | None = None


class IdInfo(BaseModel):
    id: Id
    parts: JsonParts


def example() -> tuple[str, str]:
    gen = Generator(worker_id=7)
    order = Order(id=gen.next_id(), customer_id=gen.next_id())
    body = order.model_dump_json()  # {"id":"3839...","customer_id":"3839...","parent_id":null}
    assert Order.model_validate_json(body) == order  # strings (or numbers) are read back
    info = IdInfo(id=order.id, parts=decode(order.id)).model_dump_json()
    return body, info


if __name__ == "__main__":
    print(*example(), sep="\n")
