"""clockflake.otel: a leased generator's stats() as OpenTelemetry metrics, read by the SDK's
InMemoryMetricReader after open, after ids, after a lost lease that heals, and after close; and
the documented error when OpenTelemetry is not installed."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk.metrics")

from clockflake import Generator, InvalidArgTypeError, InvalidArgValueError
from clockflake.otel import GeneratorMetrics, MissingDependencyError, instrument
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader, NumberDataPoint

Points = dict[tuple[str, frozenset[tuple[str, object]]], float]


def collect(reader: InMemoryMetricReader) -> Points:
    """Every point of the collection, by metric name and attributes."""
    data = reader.get_metrics_data()
    points: Points = {}
    if data is None:
        return points
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            assert scope.scope.name == "clockflake"
            for metric in scope.metrics:
                for point in metric.data.data_points:
                    assert isinstance(point, NumberDataPoint)
                    key = (metric.name, frozenset((point.attributes or {}).items()))
                    points[key] = point.value
    return points


def value(points: Points, name: str, **attributes: object) -> float:
    return points[(name, frozenset(attributes.items()))]


def test_a_leased_generator_after_open_ids_a_healed_loss_and_close(tmp_path: Path) -> None:
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    gen = Generator.open(f"file://{tmp_path}?app=orders")
    coordinator = gen.coordinator
    assert coordinator is not None
    at = {"clockflake.coordinator": coordinator, "service": "orders"}
    handle = instrument(gen, provider, attributes={"service": "orders"})

    # After open: held, active, worker 0, a file:// lease never expires (flock).
    points = collect(reader)
    assert value(points, "clockflake.lease.active", **at) == 1
    assert value(points, "clockflake.lease.worker_id", **at) == 0
    assert value(points, "clockflake.lease.deadline", **at) == -1
    for state in ("active", "healing", "lost", "forked"):
        expected = 1 if state == "active" else 0
        assert value(points, "clockflake.lease.state", **at, state=state) == expected
    for name in ("losses", "heals", "heal_failures", "renewal_failures"):
        assert value(points, f"clockflake.lease.{name}", **at) == 0
    assert value(points, "clockflake.lease.renewals", **at) == gen.stats()["renewals"]

    # After some ids: the counters follow stats() (nothing on the id path itself).
    ids = gen.next_ids(10_000)
    points = collect(reader)
    stats = gen.stats()
    assert value(points, "clockflake.generator.waits", **at) == stats["waits"]
    assert value(points, "clockflake.generator.wait", **at) == stats["wait_us"]
    assert value(points, "clockflake.clock.steps_back", **at) == stats["clock_steps_back"]

    # A lease lost (its lock file removed, a newcomer takes worker 0), then healed as worker 1.
    (tmp_path / "orders" / "worker-0.lock").unlink()
    newcomer = Generator.open(f"file://{tmp_path}?app=orders", heal=False)
    assert newcomer.worker_id == 0
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not (gen.stats()["heals"] >= 1 and gen.is_active):
        time.sleep(0.005)
    assert gen.is_active and gen.worker_id == 1
    points = collect(reader)
    assert value(points, "clockflake.lease.losses", **at) == 1
    assert value(points, "clockflake.lease.heals", **at) == 1
    assert value(points, "clockflake.lease.active", **at) == 1
    assert value(points, "clockflake.lease.worker_id", **at) == 1
    assert value(points, "clockflake.lease.state", **at, state="active") == 1
    ids += gen.next_ids(1000) + newcomer.next_ids(1000)
    assert len(set(ids)) == len(ids)

    # After close: the generator is no longer observed (its counters restart at 0 once closed).
    gen.close()
    newcomer.close()
    points = collect(reader)
    assert not [key for key in points if dict(key[1]).get("service") == "orders"], points
    assert handle.closed
    handle.close()  # idempotent
    provider.shutdown()


def test_healing_and_lost_states_and_a_static_generator(tmp_path: Path) -> None:
    """heal=False: lost for good (active 0, worker -1, deadline 0, state lost). A static
    generator has no lease instruments, only the clock and wait counters."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    gen = Generator.open(f"file://{tmp_path}?app=orders", heal=False)
    static = Generator(worker_id=9)
    with instrument(gen, provider), instrument(static, provider, attributes={"kind": "static"}):
        at = {"clockflake.coordinator": gen.coordinator}
        (tmp_path / "orders" / "worker-0.lock").unlink()
        newcomer = Generator.open(f"file://{tmp_path}?app=orders", heal=False)
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and gen.stats()["state"] != "lost":
            time.sleep(0.005)
        points = collect(reader)
        assert value(points, "clockflake.lease.active", **at) == 0
        assert value(points, "clockflake.lease.worker_id", **at) == -1
        assert value(points, "clockflake.lease.deadline", **at) == 0
        assert value(points, "clockflake.lease.state", **at, state="lost") == 1
        assert value(points, "clockflake.lease.losses", **at) == gen.stats()["losses"]
        assert value(points, "clockflake.generator.waits", kind="static") == 0
        static_lease = [k for k in points if "lease" in k[0] and ("kind", "static") in k[1]]
        assert not static_lease
        newcomer.close()
    # Both handles closed on leaving the block: nothing observed, though the generators live.
    assert collect(reader) == {}
    gen.close()
    provider.shutdown()


def test_arguments_are_checked(tmp_path: Path) -> None:
    provider = MeterProvider(metric_readers=[InMemoryMetricReader()])
    gen = Generator.open(f"file://{tmp_path}?app=orders")
    handle = instrument(gen, provider)
    assert isinstance(handle, GeneratorMetrics)
    with pytest.raises(InvalidArgValueError, match="already instrumented"):
        instrument(gen, provider)
    handle.close()
    handle = instrument(gen, provider)  # again after close
    other = Generator.open(f"file://{tmp_path}?app=orders")
    with pytest.raises(InvalidArgValueError, match="same attributes"):
        instrument(other, provider)  # the same coordinator: its points would collide
    instrument(other, provider, attributes={"app": "other"}).close()
    other.close()
    reopened = Generator.open(f"file://{tmp_path}?app=orders")
    gen.close()
    instrument(reopened, provider)  # gen closed: its attributes are free again
    reopened.close()
    assert handle.closed
    with pytest.raises(InvalidArgTypeError, match=r"expected a clockflake\.Generator"):
        instrument("orders", provider)  # type: ignore[arg-type]
    provider.shutdown()


def test_the_global_provider_set_before_or_after_instrument(tmp_path: Path) -> None:
    """With meter_provider=None, generators instrumented before the application sets the SDK's
    global provider and after it are all observed (a process of its own: the global provider
    can be set once)."""
    script = textwrap.dedent(
        f"""
        from opentelemetry import metrics
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from clockflake import Generator
        from clockflake.otel import instrument
        before = Generator.open("file://{tmp_path}?app=orders")
        instrument(before, attributes={{"app": "before"}})
        reader = InMemoryMetricReader()
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        after = Generator.open("file://{tmp_path}?app=orders")
        instrument(after, attributes={{"app": "after"}})
        data = reader.get_metrics_data()
        for metric in data.resource_metrics[0].scope_metrics[0].metrics:
            if metric.name == "clockflake.lease.worker_id":
                for point in metric.data.data_points:
                    print(point.attributes["app"], point.value)
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert sorted(run.stdout.splitlines()) == ["after 1", "before 0"], run.stderr


def test_without_opentelemetry_the_documented_error() -> None:
    """`import clockflake` and `import clockflake.otel` never need OpenTelemetry; instrument()
    raises MissingDependencyError, an ImportError with a stable code."""
    script = textwrap.dedent(
        """
        import sys
        sys.modules["opentelemetry"] = None  # as if not installed
        import clockflake, clockflake.otel
        try:
            clockflake.otel.instrument(clockflake.Generator(worker_id=1))
        except ImportError as error:
            assert isinstance(error, clockflake.otel.MissingDependencyError)
            print(error.code, error.name, "clockflake[otel]" in str(error))
        """
    )
    run = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )
    assert run.stdout.split() == ["MISSING_DEPENDENCY", "opentelemetry", "True"], run.stderr
    with pytest.raises(ImportError):
        raise MissingDependencyError("x", name="opentelemetry")
