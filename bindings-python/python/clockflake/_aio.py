"""asyncio forms of a leased generator's open and close: ``Generator.open_async``,
``Generator.close_async``, and ``async with``.

``Generator.open`` and ``close`` release the GIL for their coordinator I/O, so running them on a
worker thread (``asyncio.to_thread``) leaves the event loop free meanwhile: an open against a
coordinator that does not answer waits up to half the TTL per request (and, after a handover,
up to ``max_handover_wait_ms`` for the clock), which an ``async def`` calling ``Generator.open``
directly would spend with every other task of the loop stalled (measured: a 10 ms task stalled
5,007 ms while an open waited on a socket that never answered, ``tests/test_asyncio.py``).

They are installed on ``Generator`` by the package's ``__init__`` (the class is defined in the
native module); asyncio is imported on first use only, not with the package.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any, Literal

    from clockflake._clockflake import Generator


async def open_async(cls: type[Generator], uri: str, **options: Any) -> Generator:
    """``Generator.open(uri, **options)`` on a worker thread (``asyncio.to_thread``): the event
    loop keeps running while the worker id is leased. Same options, same errors, raised here.

    Cancelling the awaiting task does not stop the open already under way: the generator it
    makes is dropped, which releases its worker id.
    """
    import asyncio

    return await asyncio.to_thread(cls.open, uri, **options)


async def close_async(self: Generator) -> None:
    """``close()`` on a worker thread: stops issuing ids, stores the state with the coordinator
    and releases the worker id while the event loop keeps running (up to about 2 s plus half the
    TTL when the coordinator does not answer, then ``CoordinatorUnavailableError``). Idempotent.
    """
    import asyncio

    await asyncio.to_thread(self.close)


async def aenter(self: Generator) -> Generator:
    """``async with await Generator.open_async(uri) as gen:``: the generator itself."""
    return self


async def aexit(
    self: Generator,
    exc_type: type[BaseException] | None,
    exc_value: BaseException | None,
    traceback: TracebackType | None,
    /,
) -> Literal[False]:
    """Leaving ``async with``: ``await close_async()``; exceptions propagate."""
    await close_async(self)
    return False


def install(generator: type[Generator]) -> None:
    """Adds the asyncio forms to the native ``Generator`` class (its type is not frozen)."""
    methods: dict[str, Any] = {
        "open_async": open_async,
        "close_async": close_async,
        "__aenter__": aenter,
        "__aexit__": aexit,
    }
    for name, function in methods.items():
        function.__name__ = name
        function.__qualname__ = f"Generator.{name}"
        setattr(generator, name, classmethod(function) if name == "open_async" else function)
