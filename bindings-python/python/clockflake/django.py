"""Django: a primary-key default that ``makemigrations`` can write down, on a lazily opened lease.

>>> from clockflake.django import next_id
>>> next_id.__module__, next_id.__qualname__   # what a migration file records
('clockflake.django', 'next_id')

In ``models.py``::

    from clockflake.django import next_id

    class Order(models.Model):
        id = models.BigIntegerField(primary_key=True, default=next_id, editable=False)

``default=gen.next_id`` fails in ``makemigrations`` ("Cannot serialize function <built-in method
next_id ...>"): a migration can only name a module-level function. ``next_id`` is one. The
generator behind it is opened on the first call, not at import, so ``makemigrations``,
``manage.py check`` and a pre-forking server's master never lease a worker id; a leased generator
re-leases in each forked worker by itself.

Where the lease comes from, first found wins: :func:`configure` called from your code before the
first id (a test's fixture, say), else ``settings.CLOCKFLAKE_URI`` (with optional
``settings.CLOCKFLAKE_LAYOUT``), else the environment variables ``CLOCKFLAKE_URI`` and
``CLOCKFLAKE_LAYOUT``.
Django itself is imported only to read its settings, and only if it is installed.
"""

from __future__ import annotations

import os
import threading
import time

from clockflake._clockflake import Generator
from clockflake._errors import CoordinatorUnavailableError, InvalidUriError
from clockflake._types import LayoutArg

__all__ = ["RETRY_FOR_S", "configure", "generator", "next_id", "reset"]

# How long next_id waits out a lease's transient refusal (a reservation its renewal thread has not
# persisted yet: a slow disk, a busy machine, a coordinator's hiccup) before raising it.
RETRY_FOR_S = 2.0

_lock = threading.Lock()
_generator: Generator | None = None
_configured: tuple[str, LayoutArg] | None = None


def configure(uri: str, layout: LayoutArg = None) -> None:
    """Sets the URI (and layout) the generator is opened with, before its first call."""
    global _configured
    with _lock:
        _configured = (uri, layout)


def _settings() -> tuple[str, LayoutArg] | None:
    try:
        # Only when Django is there (and untyped for mypy, which has no stubs for it).
        from django.conf import settings  # type: ignore[import-untyped,import-not-found,unused-ignore]
        from django.core.exceptions import (  # type: ignore[import-untyped,import-not-found,unused-ignore]
            ImproperlyConfigured,
        )
    except ImportError:
        return None
    try:
        uri = getattr(settings, "CLOCKFLAKE_URI", None)
        layout = getattr(settings, "CLOCKFLAKE_LAYOUT", None)
    except ImproperlyConfigured:  # settings not configured: not a Django process
        return None
    return (uri, layout) if uri else None


def _where() -> tuple[str, LayoutArg]:
    if _configured is not None:
        return _configured
    found = _settings()
    if found is not None:
        return found
    uri = os.environ.get("CLOCKFLAKE_URI")
    if uri:
        return uri, os.environ.get("CLOCKFLAKE_LAYOUT") or None
    raise InvalidUriError(
        "clockflake.django: no coordinator URI: set CLOCKFLAKE_URI in Django's settings or in the "
        "environment (e.g. file:///var/lib/myapp/ids?app=orders), or call "
        "clockflake.django.configure(uri)"
    )


def generator() -> Generator:
    """The shared generator, opened on first use (thread-safe)."""
    global _generator
    gen = _generator
    if gen is None:
        with _lock:
            if _generator is None:
                uri, layout = _where()
                _generator = Generator.open(uri, layout=layout)
            gen = _generator
    return gen


def next_id() -> int:
    """A new id from the shared generator: use it as a model field's ``default``.

    A transient ``CoordinatorUnavailableError`` (one with ``retry_at_ms``) is retried at that time
    for up to ``RETRY_FOR_S`` seconds, so that a save does not fail on a renewal that is merely
    late; past that, or for any other refusal, the error propagates.
    """
    gen = generator()
    give_up = time.monotonic() + RETRY_FOR_S
    while True:
        try:
            return gen.next_id()
        except CoordinatorUnavailableError as error:
            if error.retry_at_ms is None or time.monotonic() >= give_up:
                raise
            time.sleep(min(max(error.retry_at_ms / 1000 - time.time(), 0.001), 0.1))


def reset() -> None:
    """Closes the shared generator (releasing its worker id); the next call opens a new one."""
    global _generator
    with _lock:
        gen, _generator = _generator, None
    if gen is not None:
        gen.close()
