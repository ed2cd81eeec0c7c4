//! `suggest_layout`, `is_plausible` and `guess_layout`: core's layout advice (core/src/suggest.rs).

use clockflake::{Clock, Layout};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use crate::args::{id_arg, layout_arg, plain_u64, time_arg};
use crate::errors::Refusal;
use crate::parts::{layout_dict, PyParts};

/// Unix ms now, or the `now_ms` given.
fn now_or(now_ms: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
    match now_ms {
        Some(value) if !value.is_none() => Ok(time_arg(value, "now_ms")?),
        _ => Ok(clockflake::SystemClock.now_ms()),
    }
}

/// A layout sized for a fleet (described as by `describe_layout`): `workers` processes alive
/// at once, `peak_ids_per_sec` from any one of them, ids made for `lifetime_years` from
/// 2024-01-01. Raises `InvalidLayoutError` when the needs add up to more than 63 bits.
///
/// >>> from clockflake import suggest_layout
/// >>> [(f["name"], f["bits"]) for f in suggest_layout(300, 10_000, 30)["fields"]]
/// [('timestamp', 41), ('clock_seq', 3), ('worker', 9), ('sequence', 10)]
#[pyfunction]
pub fn suggest_layout<'py>(
    py: Python<'py>,
    workers: &Bound<'py, PyAny>,
    peak_ids_per_sec: &Bound<'py, PyAny>,
    lifetime_years: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let layout = Layout::suggest(
        plain_u64(workers, "workers")?,
        plain_u64(peak_ids_per_sec, "peak_ids_per_sec")?,
        plain_u64(lifetime_years, "lifetime_years")?,
    )
    .map_err(Refusal::from)?;
    layout_dict(py, &layout)
}

/// Whether `id` could have been issued under `layout` by now (or `now_ms`): it decodes and its
/// time is not after now plus `margin_ms` (default a day: 86,400,000 ms of clock differences). False most often means another
/// layout: an old Twitter id decoded with the default layout reads 2040.
///
/// >>> from clockflake import is_plausible
/// >>> is_plausible(2125537250721665024, "twitter"), is_plausible(2125537250721665024)
/// (True, False)
#[pyfunction]
#[pyo3(signature = (id, layout = None, *, now_ms = None, margin_ms = 86_400_000))]
pub fn is_plausible(
    id: &Bound<'_, PyAny>,
    layout: Option<&Bound<'_, PyAny>>,
    now_ms: Option<&Bound<'_, PyAny>>,
    margin_ms: u64,
) -> PyResult<bool> {
    let layout = layout_arg(layout)?;
    let id = id_arg(id, &Layout::CLOCKSEQ)?;
    Ok(layout.is_plausible(id, now_or(now_ms)?, margin_ms))
}

/// The preset under which `id` has a plausible time (the latest such time when several do),
/// with the id decoded under it, or None.
///
/// >>> from clockflake import guess_layout
/// >>> name, parts = guess_layout(2125537250721665024, now_ms=1_795_700_000_000)
/// >>> name, parts.timestamp_ms
/// ('twitter', 1795602545801)
#[pyfunction]
#[pyo3(signature = (id, *, now_ms = None, margin_ms = 86_400_000))]
pub fn guess_layout(
    id: &Bound<'_, PyAny>,
    now_ms: Option<&Bound<'_, PyAny>>,
    margin_ms: u64,
) -> PyResult<Option<(&'static str, PyParts)>> {
    let id = id_arg(id, &Layout::CLOCKSEQ)?;
    Ok(Layout::guess_preset(id, now_or(now_ms)?, margin_ms)
        .map(|(name, parts)| (name, parts.into())))
}
