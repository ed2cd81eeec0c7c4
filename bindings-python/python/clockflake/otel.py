"""OpenTelemetry metrics of a generator: observable instruments read from ``Generator.stats()``.

>>> from clockflake.otel import instrument  # imports no OpenTelemetry until it is called

``instrument(gen)`` registers the generator with the OpenTelemetry meter provider (the global one
unless ``meter_provider=`` is given): the SDK reads ``gen.stats()`` when it collects, in its own
reader's thread, so the id path costs nothing and this module starts no thread. Only
``opentelemetry-api`` is imported (``pip install clockflake[otel]``); the application brings the
SDK and an exporter, as with any instrumented library.

The names follow the id service's Prometheus metrics, so one dashboard serves both (a Prometheus
exporter writes ``clockflake.lease.renewals`` as ``clockflake_lease_renewals_total``)::

    clockflake.lease.active          gauge, 1        1 while ids are issued (gen.is_active)
    clockflake.lease.state           gauge, 1        1 for the current state (attribute state:
                                                     active, healing, lost, forked), 0 for others
    clockflake.lease.worker_id       gauge           the leased worker id, -1 for none
    clockflake.lease.deadline        gauge, s        time to the lease deadline (-1 never
                                                     expires, 0 passed or none held)
    clockflake.lease.renewals        counter         renewals of the lease
    clockflake.lease.renewal_failures counter        renewals that failed
    clockflake.lease.losses          counter         leases lost
    clockflake.lease.heals           counter         leases taken again after a loss
    clockflake.lease.heal_failures   counter         failed attempts to lease again
    clockflake.clock.steps_back      counter         the clock seen going back
    clockflake.clock.seq_switches    counter         clock-sequence switches that caused
    clockflake.generator.waits       counter         waits inside the generator
    clockflake.generator.wait        counter, us     their total time

The ``clockflake.lease.*`` instruments are observed for a leased generator only (one made with
``Generator.open``). Every point carries ``clockflake.coordinator`` (``gen.coordinator``: the URI
without any password) when leased, and the ``attributes`` given. The worker id is a gauge's value,
not an attribute: it changes when a lost lease heals, and an attribute would split each counter
into one series per worker id.

A generator is observed until it is closed: the first collection after ``close()`` observes
nothing more for it and drops the reference (its counters restart at 0 once closed, which a
cumulative counter must not show). ``handle.close()`` (or leaving ``with instrument(gen):``) stops
observing at once. OpenTelemetry has no way to remove an instrument: the instruments are made
once per meter provider and observe every generator registered with it, so several generators can
be instrumented side by side: each needs its own attributes (two on one coordinator, or two
static generators, are told apart with ``attributes=``; the same set twice is refused). After
``os.fork()`` the child observes its own generator (which leases its own worker id there).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable, Iterable, Iterator, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, ClassVar, Literal

from clockflake._clockflake import Generator, __version__
from clockflake._errors import InvalidArgTypeError, InvalidArgValueError
from clockflake._types import GeneratorStats

if TYPE_CHECKING:
    from opentelemetry.metrics import CallbackOptions, Meter, MeterProvider, Observation
    from opentelemetry.util.types import AttributeValue

__all__ = ["GeneratorMetrics", "MissingDependencyError", "instrument"]

_STATES = ("active", "healing", "lost", "forked")


class MissingDependencyError(ModuleNotFoundError):
    """``instrument`` called without ``opentelemetry-api`` installed (``pip install clockflake[otel]``).

    A ``ModuleNotFoundError`` (so ``except ImportError`` catches it) with ``name`` set to the
    missing module and a stable ``code``. Not a ``ClockflakeError``: those are the library's own
    refusals, one per code of the Rust core and lease crate.
    """

    code: ClassVar[str] = "MISSING_DEPENDENCY"


class GeneratorMetrics:
    """What ``instrument`` returns: ``close()`` stops observing the generator (idempotent)."""

    def __init__(
        self, registry: _Registry, generator: Generator, attributes: dict[str, AttributeValue]
    ) -> None:
        self._registry = registry
        self._generator: Generator | None = generator
        self._attributes = attributes

    @property
    def closed(self) -> bool:
        """Whether the generator is no longer observed (this handle or the generator closed)."""
        return self._generator is None

    def close(self) -> None:
        """Stops observing the generator and drops the reference to it."""
        self._registry.remove(self)

    def __enter__(self) -> GeneratorMetrics:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> Literal[False]:
        self.close()
        return False


_Point = tuple[float, Mapping[str, "AttributeValue"]]
_Read = Callable[[GeneratorStats, dict[str, "AttributeValue"]], Iterable[_Point]]


def _stat(
    field: Literal[
        "renewals",
        "renewal_failures",
        "losses",
        "heals",
        "heal_failures",
        "clock_steps_back",
        "clock_seq_switches",
        "waits",
        "wait_us",
    ],
) -> _Read:
    return lambda stats, attributes: [(stats[field], attributes)]


def _active(stats: GeneratorStats, attributes: dict[str, AttributeValue]) -> Iterable[_Point]:
    return [(1 if stats["state"] == "active" else 0, attributes)]


def _state(stats: GeneratorStats, attributes: dict[str, AttributeValue]) -> Iterable[_Point]:
    return [
        (1 if stats["state"] == state else 0, {**attributes, "state": state}) for state in _STATES
    ]


def _worker_id(stats: GeneratorStats, attributes: dict[str, AttributeValue]) -> Iterable[_Point]:
    held = stats["state"] == "active" and stats["worker_id"] is not None
    return [(stats["worker_id"] if held and stats["worker_id"] is not None else -1, attributes)]


def _deadline(stats: GeneratorStats, attributes: dict[str, AttributeValue]) -> Iterable[_Point]:
    if stats["state"] != "active":
        return [(0, attributes)]
    left_ms = stats["deadline_in_ms"]
    return [(-1 if left_ms is None else max(left_ms, 0) / 1000, attributes)]


# (name, kind, unit, description, read, leased generators only)
# fmt: off
_INSTRUMENTS: tuple[tuple[str, str, str, str, _Read, bool], ...] = (
    ("clockflake.lease.active", "gauge", "1", "1 while the generator issues ids", _active, True),
    ("clockflake.lease.state", "gauge", "1", "1 for the lease's current state", _state, True),
    ("clockflake.lease.worker_id", "gauge", "", "The leased worker id, -1 for none", _worker_id, True),
    ("clockflake.lease.deadline", "gauge", "s", "Time to the lease deadline (-1 never expires)", _deadline, True),
    ("clockflake.lease.renewals", "counter", "{renewal}", "Renewals of the lease", _stat("renewals"), True),
    ("clockflake.lease.renewal_failures", "counter", "{failure}", "Renewals that failed", _stat("renewal_failures"), True),
    ("clockflake.lease.losses", "counter", "{loss}", "Leases lost", _stat("losses"), True),
    ("clockflake.lease.heals", "counter", "{heal}", "Leases taken again after a loss", _stat("heals"), True),
    ("clockflake.lease.heal_failures", "counter", "{failure}", "Failed attempts to lease again", _stat("heal_failures"), True),
    ("clockflake.clock.steps_back", "counter", "{step}", "The clock seen going back", _stat("clock_steps_back"), False),
    ("clockflake.clock.seq_switches", "counter", "{switch}", "Clock-sequence switches", _stat("clock_seq_switches"), False),
    ("clockflake.generator.waits", "counter", "{wait}", "Waits inside the generator", _stat("waits"), False),
    ("clockflake.generator.wait", "counter", "us", "Total time of the waits", _stat("wait_us"), False),
)
# fmt: on


class _Registry:
    """The instruments of one meter provider and the generators they observe."""

    def __init__(self, meter: Meter) -> None:
        self._lock = threading.Lock()
        self._handles: list[GeneratorMetrics] = []
        for name, kind, unit, description, read, leased_only in _INSTRUMENTS:
            create = (
                meter.create_observable_gauge
                if kind == "gauge"
                else meter.create_observable_counter
            )
            create(
                name,
                callbacks=[self._callback(read, leased_only)],
                unit=unit,
                description=description,
            )

    def add(self, generator: Generator, attributes: dict[str, AttributeValue]) -> GeneratorMetrics:
        with self._lock:
            for handle in list(self._handles):  # closed generators no longer count
                if handle._generator is None or handle._generator.stats()["state"] == "closed":
                    self._handles.remove(handle)
                    handle._generator = None
            if any(handle._generator is generator for handle in self._handles):
                raise InvalidArgValueError(
                    "clockflake.otel.instrument: this generator is already instrumented on this "
                    "meter provider (close the first handle, or keep using it)"
                )
            if any(handle._attributes == attributes for handle in self._handles):
                raise InvalidArgValueError(
                    f"clockflake.otel.instrument: another generator is instrumented on this meter "
                    f"provider with the same attributes {attributes!r}: their points would "
                    f"collide; tell them apart with attributes={{...}}"
                )
            handle = GeneratorMetrics(self, generator, attributes)
            self._handles.append(handle)
            return handle

    def remove(self, handle: GeneratorMetrics) -> None:
        with self._lock:
            if handle in self._handles:
                self._handles.remove(handle)
            handle._generator = None

    def _live(self) -> Iterator[tuple[GeneratorStats, dict[str, AttributeValue]]]:
        with self._lock:
            handles = list(self._handles)
        for handle in handles:
            generator = handle._generator
            if generator is None:
                continue
            stats = generator.stats()  # a few atomic reads: never blocks on the coordinator
            if stats["state"] == "closed":
                self.remove(handle)
                continue
            yield stats, handle._attributes

    def _callback(
        self, read: _Read, leased_only: bool
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        from opentelemetry.metrics import Observation

        def callback(_options: CallbackOptions) -> Iterable[Observation]:
            return [
                Observation(value, attributes)
                for stats, base in self._live()
                if stats["leased"] or not leased_only
                for value, attributes in read(stats, base)
            ]

        return callback


class _GlobalProvider:
    """The key of the global meter provider's instruments."""


_GLOBAL = _GlobalProvider()
_registries: weakref.WeakKeyDictionary[object, _Registry] = weakref.WeakKeyDictionary()
_registries_lock = threading.Lock()


def instrument(
    generator: Generator,
    meter_provider: MeterProvider | None = None,
    *,
    attributes: Mapping[str, AttributeValue] | None = None,
) -> GeneratorMetrics:
    """Observes ``generator``'s ``stats()`` as OpenTelemetry metrics (see the module's docs).

    ``meter_provider``: the global one if None (set before or after this call, as
    ``opentelemetry.metrics.set_meter_provider`` allows). ``attributes``: added to every point
    (say, ``{"app": "orders"}``, to tell apart two generators on one coordinator: two with the
    same attributes on one provider are refused). Returns a handle whose ``close()`` stops
    observing.
    Raises ``MissingDependencyError`` (code ``MISSING_DEPENDENCY``, an ``ImportError``) without
    ``opentelemetry-api``, ``InvalidArgTypeError`` for something other than a ``Generator`` and
    ``InvalidArgValueError`` for a generator already instrumented on that meter provider, or
    another one with the same attributes.
    """
    try:
        from opentelemetry import metrics
    except ImportError as missing:
        raise MissingDependencyError(
            "clockflake.otel needs the OpenTelemetry API: pip install 'clockflake[otel]' "
            f"(or opentelemetry-api) ({missing})",
            name="opentelemetry",
        ) from missing
    if not isinstance(generator, Generator):
        raise InvalidArgTypeError(
            f"clockflake.otel.instrument: expected a clockflake.Generator, found "
            f"{type(generator).__name__}"
        )
    base: dict[str, AttributeValue] = {}
    if generator.coordinator is not None:
        base["clockflake.coordinator"] = generator.coordinator  # never shows a password
    base.update(attributes or {})
    # The global provider is one key whichever provider it is now: before the application sets
    # the SDK's, the API's proxy meter forwards these instruments to it once set, and making them
    # again on the SDK's meter would keep the first callbacks only.
    key = meter_provider if meter_provider is not None else _GLOBAL
    with _registries_lock:
        registry = _registries.get(key)
        if registry is None:
            meter = (
                metrics.get_meter("clockflake", __version__)
                if meter_provider is None
                else meter_provider.get_meter("clockflake", __version__)
            )
            registry = _registries[key] = _Registry(meter)
    return registry.add(generator, base)
