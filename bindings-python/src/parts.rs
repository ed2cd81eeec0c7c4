//! `Parts`, `decode`, `encode`, `id_range` and `describe_layout`.

use clockflake::{Field, Layout, Parts};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList, PyTuple, PyType};

use crate::args::{field_arg, id_arg, layout_arg, time_arg, type_name};
use crate::errors::{Refusal, ARG_TYPE};

/// What an id says: when (`timestamp_ms`, the start of its tick in Unix ms), which clock
/// sequence, which worker, which sequence number.
///
/// >>> from clockflake import decode
/// >>> parts = decode(381399806771204096)
/// >>> parts.worker_id, parts.datetime.isoformat()
/// (1, '2026-11-18T11:06:40+00:00')
#[pyclass(frozen, eq, hash, module = "clockflake._clockflake", name = "Parts")]
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PyParts {
    /// Start of the id's tick, Unix ms.
    #[pyo3(get)]
    pub timestamp_ms: u64,
    /// Clock sequence (0 when the layout has none).
    #[pyo3(get)]
    pub clock_seq: u64,
    /// Worker id.
    #[pyo3(get)]
    pub worker_id: u64,
    /// Sequence number within the tick.
    #[pyo3(get)]
    pub sequence: u64,
}

impl From<Parts> for PyParts {
    fn from(p: Parts) -> PyParts {
        PyParts {
            timestamp_ms: p.timestamp_ms,
            clock_seq: p.clock_seq,
            worker_id: p.worker_id,
            sequence: p.sequence,
        }
    }
}

impl From<PyParts> for Parts {
    fn from(p: PyParts) -> Parts {
        Parts {
            timestamp_ms: p.timestamp_ms,
            clock_seq: p.clock_seq,
            worker_id: p.worker_id,
            sequence: p.sequence,
        }
    }
}

impl PyParts {
    fn fields(&self) -> [u64; 4] {
        [
            self.timestamp_ms,
            self.clock_seq,
            self.worker_id,
            self.sequence,
        ]
    }
}

/// What `__reduce__` returns: the class and its constructor arguments.
type Reduced<'py> = (Bound<'py, PyType>, (u64, u64, u64, u64));

static UNIX_EPOCH: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
static TIMEDELTA: PyOnceLock<Py<PyType>> = PyOnceLock::new();

#[pymethods]
impl PyParts {
    #[new]
    #[pyo3(signature = (timestamp_ms, clock_seq, worker_id, sequence))]
    fn new(
        timestamp_ms: &Bound<'_, PyAny>,
        clock_seq: &Bound<'_, PyAny>,
        worker_id: &Bound<'_, PyAny>,
        sequence: &Bound<'_, PyAny>,
    ) -> PyResult<PyParts> {
        Ok(PyParts {
            timestamp_ms: time_arg(timestamp_ms, "timestamp_ms")?,
            clock_seq: field_arg(clock_seq, Field::ClockSeq)?,
            worker_id: field_arg(worker_id, Field::Worker)?,
            sequence: field_arg(sequence, Field::Sequence)?,
        })
    }

    /// `timestamp_ms` as an aware `datetime` in UTC (exact to the millisecond).
    #[getter]
    fn datetime<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        let epoch = UNIX_EPOCH.get_or_try_init(py, || -> PyResult<Py<PyAny>> {
            let datetime = py.import("datetime")?;
            let utc = datetime.getattr("timezone")?.getattr("utc")?;
            let kwargs = PyDict::new(py);
            kwargs.set_item("tzinfo", utc)?;
            Ok(datetime
                .getattr("datetime")?
                .call((1970, 1, 1), Some(&kwargs))?
                .unbind())
        })?;
        let timedelta = TIMEDELTA.import(py, "datetime", "timedelta")?;
        let kwargs = PyDict::new(py);
        kwargs.set_item("milliseconds", self.timestamp_ms)?;
        let delta = timedelta.call((), Some(&kwargs))?;
        epoch.bind(py).add(delta)
    }

    /// The four fields as a dict.
    fn as_dict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let dict = PyDict::new(py);
        for (key, value) in ["timestamp_ms", "clock_seq", "worker_id", "sequence"]
            .into_iter()
            .zip(self.fields())
        {
            dict.set_item(key, value)?;
        }
        Ok(dict)
    }

    /// The four fields as a dict, under the name namedtuples use (simplejson's
    /// `namedtuple_as_object`, and code written for namedtuples, call it).
    fn _asdict<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        self.as_dict(py)
    }

    fn __iter__<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyAny>> {
        PyTuple::new(py, self.fields())?
            .as_any()
            .try_iter()
            .map(|it| it.into_any())
    }

    fn __reduce__<'py>(slf: &Bound<'py, Self>) -> PyResult<Reduced<'py>> {
        let [timestamp_ms, clock_seq, worker_id, sequence] = slf.get().fields();
        Ok((
            slf.get_type(),
            (timestamp_ms, clock_seq, worker_id, sequence),
        ))
    }

    fn __repr__(&self) -> String {
        let [timestamp_ms, clock_seq, worker_id, sequence] = self.fields();
        format!("Parts(timestamp_ms={timestamp_ms}, clock_seq={clock_seq}, worker_id={worker_id}, sequence={sequence})")
    }
}

/// Splits an id (an `int`, or a decimal `str`) into its `Parts` under a layout (default `clockseq`).
///
/// >>> decode(381399806771204096).timestamp_ms
/// 1795000000000
#[pyfunction]
#[pyo3(signature = (id, layout = None))]
pub fn decode(id: &Bound<'_, PyAny>, layout: Option<&Bound<'_, PyAny>>) -> PyResult<PyParts> {
    let layout = layout_arg(layout)?;
    let id = id_arg(id, &layout)?;
    Ok(layout.decode(id).map_err(Refusal::from)?.into())
}

/// Joins `Parts` (or a dict with the same four keys) into an id, checking every field's range.
/// A `timestamp_ms` inside a tick is rounded down to the tick's start.
#[pyfunction]
#[pyo3(signature = (parts, layout = None))]
pub fn encode(parts: &Bound<'_, PyAny>, layout: Option<&Bound<'_, PyAny>>) -> PyResult<u64> {
    let layout = layout_arg(layout)?;
    let parts: Parts = if let Ok(p) = parts.cast::<PyParts>() {
        (*p.get()).into()
    } else if let Ok(dict) = parts.cast::<PyDict>() {
        let get = |key: &str| -> PyResult<Bound<'_, PyAny>> {
            dict.get_item(key)?.ok_or_else(|| {
                Refusal::input(
                    ARG_TYPE,
                    format!("encode: the parts dict has no key {key:?}"),
                )
                .into()
            })
        };
        Parts {
            timestamp_ms: time_arg(&get("timestamp_ms")?, "timestamp_ms")?,
            clock_seq: field_arg(&get("clock_seq")?, Field::ClockSeq)?,
            worker_id: field_arg(&get("worker_id")?, Field::Worker)?,
            sequence: field_arg(&get("sequence")?, Field::Sequence)?,
        }
    } else {
        return Err(Refusal::input(
            ARG_TYPE,
            format!("encode: expected Parts or a dict with timestamp_ms, clock_seq, worker_id and sequence, found {}", type_name(parts)),
        )
        .into());
    };
    Ok(layout.encode(&parts).map_err(Refusal::from)?)
}

/// The smallest and largest id that can carry a time in `from_ms..=to_ms` (Unix ms, both
/// inclusive): for range scans such as `WHERE id BETWEEN lo AND hi`.
#[pyfunction]
#[pyo3(signature = (from_ms, to_ms, layout = None))]
pub fn id_range(
    from_ms: &Bound<'_, PyAny>,
    to_ms: &Bound<'_, PyAny>,
    layout: Option<&Bound<'_, PyAny>>,
) -> PyResult<(u64, u64)> {
    let layout = layout_arg(layout)?;
    let from_ms = time_arg(from_ms, "from_ms")?;
    let to_ms = time_arg(to_ms, "to_ms")?;
    Ok(layout.id_range(from_ms, to_ms).map_err(Refusal::from)?)
}

/// A layout (preset name or dict) described: name (None for a custom layout), fields, unit_ms,
/// epoch_ms, clock_seqs, max_worker_id, max_id, fingerprint (a decimal str: it may exceed 2^53).
#[pyfunction]
pub fn describe_layout<'py>(
    py: Python<'py>,
    layout: &Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    let layout = layout_arg(Some(layout))?;
    layout_dict(py, &layout)
}

/// The dict `describe_layout` and `Generator.layout` return.
pub fn layout_dict<'py>(py: Python<'py>, layout: &Layout) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("name", layout.preset_name())?;
    let fields = PyList::empty(py);
    for (field, bits) in layout.fields() {
        let entry = PyDict::new(py);
        entry.set_item("name", field.name())?;
        entry.set_item("bits", bits)?;
        fields.append(entry)?;
    }
    dict.set_item("fields", fields)?;
    dict.set_item("unit_ms", layout.unit_ms())?;
    dict.set_item("epoch_ms", layout.epoch_ms())?;
    dict.set_item("clock_seqs", layout.clock_seqs())?;
    dict.set_item("max_worker_id", layout.max_worker_id())?;
    dict.set_item("max_id", layout.max_id())?;
    dict.set_item("fingerprint", layout.fingerprint().to_string())?;
    Ok(dict)
}
