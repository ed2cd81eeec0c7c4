"""Typed shapes of the dicts clockflake takes and returns (for type checkers; plain dicts at run time)."""

from __future__ import annotations

from typing import Literal, TypedDict


class LayoutField(TypedDict):
    """One field of a layout: ``name`` is timestamp, clock_seq, worker or sequence."""

    name: str
    bits: int


class _LayoutSpecRequired(TypedDict):
    fields: list[LayoutField]
    epoch_ms: int


class LayoutSpec(_LayoutSpecRequired, total=False):
    """A custom layout: fields from most to least significant bit, the epoch (Unix ms) and the tick (ms, default 1)."""

    unit_ms: int


class LayoutInfo(TypedDict):
    """What ``describe_layout`` returns (and takes back as a layout)."""

    name: str | None
    fields: list[LayoutField]
    unit_ms: int
    epoch_ms: int
    clock_seqs: int
    max_worker_id: int
    max_id: int
    fingerprint: str


class GeneratorState(TypedDict):
    """What ``Generator.state()`` returns and ``Generator.resume()`` takes: JSON-safe."""

    layout_fingerprint: str
    worker_id: int
    clock_seq: int
    high_water_ms: list[int | None]


class GeneratorStats(TypedDict):
    """What ``Generator.stats()`` returns: counters for metrics (slow paths only)."""

    worker_id: int | None
    state: Literal["active", "healing", "lost", "closed", "forked"]
    leased: bool
    renewals: int
    renewal_failures: int
    clock_steps_back: int
    clock_seq_switches: int
    waits: int
    wait_us: int
    deadline_in_ms: int | None
    reserved_until_ms: int
    measured_skew_ms: int | None
    heal: bool
    """Whether a lost lease is leased again (``Generator.open(uri, heal=True)``, the default)."""
    losses: int
    heals: int
    heal_failures: int
    """Failed attempts to lease again (each followed by a back-off: 100 ms doubling to 5 s)."""
    last_loss: str | None
    last_heal_error: str | None


LayoutArg = str | LayoutSpec | LayoutInfo | None
"""A layout argument: None (the default ``clockseq``), a preset name, or a dict."""
