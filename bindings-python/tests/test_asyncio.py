"""asyncio: ``await Generator.open_async(uri)`` and ``await gen.close_async()`` leave the event
loop running while the coordinator does not answer (issue 38). A task ticking every 10 ms keeps
ticking; ``Generator.open`` called straight from a coroutine stalled it for the whole wait
(measured: 5,007 ms against a socket that never answers, ttl=10s).

A coordinator that does not answer: a TCP socket on loopback that listens and never replies (the
kernel completes the handshake, as for a frozen PostgreSQL), so the client waits out its patience
(half the TTL). For close, a generator leased through a proxy to CLOCKFLAKE_PG_URL (when set),
which then stops forwarding.
"""

from __future__ import annotations

import asyncio
import os
import socket
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import pytest
from clockflake import (
    CoordinatorUnavailableError,
    Generator,
    GeneratorClosedError,
    InvalidUriError,
)

# Longest gap between two ticks of a 10 ms task that still counts as a running event loop.
MAX_GAP_S = 0.2


def while_ticking(work: Callable[[], Awaitable[Any]]) -> tuple[object, float, float]:
    """Runs ``work()`` on a fresh event loop beside a task that ticks every 10 ms; returns its
    result (or the exception it raised), how long it took and the longest gap between ticks."""

    async def main() -> tuple[object, float, float]:
        started = time.perf_counter()
        last = started
        longest = 0.0
        done = False

        async def tick() -> None:
            nonlocal last, longest
            while not done:
                await asyncio.sleep(0.01)
                now = time.perf_counter()
                longest = max(longest, now - last)
                last = now

        ticker = asyncio.create_task(tick())
        await asyncio.sleep(0)
        outcome: object
        try:
            outcome = await work()
        except Exception as error:
            outcome = error
        done = True
        await ticker
        ended = time.perf_counter()
        return outcome, ended - started, max(longest, ended - last)

    return asyncio.run(main())


@pytest.fixture
def silent_port() -> Iterator[int]:
    """A listening socket that accepts (in the kernel's backlog) and never says a word."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(16)
    yield server.getsockname()[1]
    server.close()


def test_open_async_keeps_the_event_loop_running_while_the_coordinator_is_silent(
    silent_port: int,
) -> None:
    uri = f"postgres://clockflake@127.0.0.1:{silent_port}/ids?app=loop&ttl=10s&sslmode=disable"
    outcome, took, gap = while_ticking(lambda: Generator.open_async(uri))
    assert isinstance(outcome, CoordinatorUnavailableError), outcome
    assert took >= 4.0, f"open gave up after {took:.3f} s, not at the patience (5 s)"
    assert gap < MAX_GAP_S, f"the event loop stalled {gap * 1000:.0f} ms while open waited"


def test_open_async_and_close_async_against_a_coordinator_that_answers(tmp_path: Path) -> None:
    uri = tmp_path.as_uri() + "?app=loop"

    async def lifecycle() -> tuple[int, int, int, int]:
        gen = await Generator.open_async(uri, layout="clockseq")
        first = gen.next_id()
        await gen.close_async()
        with pytest.raises(GeneratorClosedError):
            gen.next_id()
        await gen.close_async()  # idempotent
        # Released: `async with` takes the same worker id again, above the first ids.
        async with await Generator.open_async(uri) as again:
            after = again.next_id()
        with pytest.raises(GeneratorClosedError):
            again.next_id()
        return gen.worker_id, again.worker_id, first, after

    outcome, _, _ = while_ticking(lifecycle)
    assert isinstance(outcome, tuple), outcome
    worker, again_worker, first, after = outcome
    assert again_worker == worker
    assert after > first


def test_open_async_raises_what_open_raises() -> None:
    outcome, _, _ = while_ticking(lambda: Generator.open_async("bogus://x"))
    assert isinstance(outcome, InvalidUriError)
    outcome, _, _ = while_ticking(
        lambda: Generator.open_async("postgres://someone:secret@127.0.0.1:1/ids?app=a&ttl=10s")
    )
    assert isinstance(outcome, CoordinatorUnavailableError)
    assert "secret" not in str(outcome)


class FreezableProxy:
    """A TCP proxy to ``host:port`` on threads; once frozen it forwards nothing, either way."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.frozen = threading.Event()
        self.server = socket.socket()
        self.server.bind(("127.0.0.1", 0))
        self.server.listen(16)
        self.port = self.server.getsockname()[1]
        self.sockets: list[socket.socket] = [self.server]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.sockets.append(client)
            if self.frozen.is_set():
                continue
            upstream = socket.create_connection(self.target)
            self.sockets.append(upstream)
            for source, sink in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(source, sink), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket) -> None:
        try:
            while data := source.recv(65536):
                if self.frozen.is_set():
                    return
                sink.sendall(data)
        except OSError:
            return

    def close(self) -> None:
        for sock in self.sockets:
            sock.close()


PG_URL = os.environ.get("CLOCKFLAKE_PG_URL")


@pytest.mark.skipif(not PG_URL, reason="CLOCKFLAKE_PG_URL not set (a PostgreSQL to proxy)")
def test_close_async_keeps_the_event_loop_running_while_the_coordinator_is_silent() -> None:
    assert PG_URL is not None
    parts = urlsplit(PG_URL)
    proxy = FreezableProxy(parts.hostname or "127.0.0.1", parts.port or 5432)
    try:
        netloc = f"{parts.username}@127.0.0.1:{proxy.port}"
        through = urlunsplit((parts.scheme, netloc, parts.path, "", ""))
        uri = f"{through}?app=loop{os.getpid()}&ttl=10s&sslmode=disable"
        gen = Generator.open(uri)
        gen.next_id()
        proxy.frozen.set()
        outcome, took, gap = while_ticking(gen.close_async)
        assert isinstance(outcome, CoordinatorUnavailableError), outcome
        assert took >= 1.5, f"close gave up after {took:.3f} s"
        assert gap < MAX_GAP_S, f"the event loop stalled {gap * 1000:.0f} ms while close waited"
        with pytest.raises(GeneratorClosedError):
            gen.next_id()
    finally:
        proxy.close()
