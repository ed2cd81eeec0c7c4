//! Python arguments to core types, with a coded refusal for every bad value: `bool` and `float`
//! are never taken for an int, and a negative or oversized int never escapes as `OverflowError`.

use clockflake::{Field, Layout, Options, Policy};
use pyo3::exceptions::{PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyInt, PyList, PyString, PyTuple};

use crate::errors::Refusal;

/// Why a Python value is not a `u64`.
pub enum NotU64 {
    /// Not an int at all (or a bool); carries the type and repr.
    Type(String),
    /// Below zero; carries the repr.
    Negative(String),
    /// 2^64 or more; carries the repr.
    TooLarge(String),
}

impl NotU64 {
    /// "found <what>" for a message.
    pub fn found(&self) -> String {
        match self {
            NotU64::Type(what) => what.clone(),
            NotU64::Negative(repr) | NotU64::TooLarge(repr) => repr.clone(),
        }
    }
}

/// The name of a value's type, for "found ..." in a message.
pub fn type_name(value: &Bound<'_, PyAny>) -> String {
    value
        .get_type()
        .name()
        .map_or_else(|_| "?".to_owned(), |name| name.to_string())
}

fn repr_of(value: &Bound<'_, PyAny>) -> String {
    value
        .repr()
        .map_or_else(|_| "?".to_owned(), |repr| repr.to_string())
}

/// "<repr> (<type name>)" of a value that was refused, for "found ..." in a message.
fn repr_and_type(value: &Bound<'_, PyAny>) -> String {
    let mut repr: String = repr_of(value).chars().take(60).collect();
    if repr.len() >= 60 {
        repr.push('…');
    }
    format!("{repr} ({})", type_name(value))
}

/// The items of a `list` or `tuple`; `None` for anything else.
pub fn list_items<'py>(value: &Bound<'py, PyAny>) -> Option<Vec<Bound<'py, PyAny>>> {
    if let Ok(list) = value.cast::<PyList>() {
        Some(list.iter().collect())
    } else {
        value
            .cast::<PyTuple>()
            .ok()
            .map(|tuple| tuple.iter().collect())
    }
}

/// An `int` (not a `bool`) in `0..2^64`.
#[inline]
pub fn as_u64(value: &Bound<'_, PyAny>) -> Result<u64, NotU64> {
    if let Ok(int) = value.cast_exact::<PyInt>() {
        if let Ok(v) = int.extract::<u64>() {
            return Ok(v);
        }
    } else if value.is_instance_of::<PyBool>() || !value.is_instance_of::<PyInt>() {
        return Err(NotU64::Type(repr_and_type(value)));
    } else if let Ok(v) = value.extract::<u64>() {
        return Ok(v);
    }
    // An int out of range: which side?
    if value.lt(0).unwrap_or(false) {
        Err(NotU64::Negative(repr_of(value)))
    } else {
        Err(NotU64::TooLarge(repr_of(value)))
    }
}

/// An id: an `int` or a decimal `str`, checked against the layout.
#[inline]
pub fn id_arg(value: &Bound<'_, PyAny>, layout: &Layout) -> Result<u64, Refusal> {
    match as_u64(value) {
        Ok(id) => Ok(id),
        Err(NotU64::Type(what)) => match value.cast::<PyString>() {
            Ok(text) => {
                let text = text.to_str().map_err(|_| {
                    Refusal::input(
                        "INVALID_ID",
                        "invalid id: expected a decimal str, found one that is not valid UTF-8"
                            .into(),
                    )
                })?;
                Ok(layout.parse_id(text)?)
            }
            Err(_) => Err(Refusal::input(
                "INVALID_ID",
                format!("invalid id: expected an int in 0..2^63 or a decimal str, found {what}"),
            )),
        },
        Err(problem) => Err(Refusal::input(
            "INVALID_ID",
            format!(
                "invalid id: expected an int in 0..2^63 (below 9223372036854775808), found {}",
                problem.found()
            ),
        )),
    }
}

/// A worker id of the layout.
pub fn worker_id_arg(value: &Bound<'_, PyAny>, layout: &Layout) -> Result<u64, Refusal> {
    let max = layout.max_worker_id();
    as_u64(value).map_err(|problem| {
        Refusal::input(
            "WORKER_ID_OUT_OF_RANGE",
            format!(
                "worker id out of range: expected an int in 0..={max} for this layout, found {}",
                problem.found()
            ),
        )
    })
}

/// A Unix-ms time given as input (`next_id_at`, `id_range`, `Parts.timestamp_ms`).
pub fn time_arg(value: &Bound<'_, PyAny>, what: &str) -> Result<u64, Refusal> {
    as_u64(value).map_err(|problem| {
        Refusal::input(
            "TIMESTAMP_OUT_OF_RANGE",
            format!(
                "timestamp out of range: expected {what} as an int of Unix ms (0 or more), found {}",
                problem.found()
            ),
        )
    })
}

/// A field of `Parts` other than the timestamp, refused under that field's code.
pub fn field_arg(value: &Bound<'_, PyAny>, field: Field) -> Result<u64, Refusal> {
    let (code, label) = match field {
        Field::ClockSeq => ("CLOCK_SEQ_OUT_OF_RANGE", "clock sequence"),
        Field::Worker => ("WORKER_ID_OUT_OF_RANGE", "worker id"),
        Field::Sequence => ("SEQUENCE_OUT_OF_RANGE", "sequence"),
        Field::Timestamp => return time_arg(value, "timestamp_ms"),
    };
    as_u64(value).map_err(|problem| {
        Refusal::input(
            code,
            format!(
                "{label} out of range: expected an int of 0 or more, found {}",
                problem.found()
            ),
        )
    })
}

/// A count or a millisecond option: a plain `TypeError`/`ValueError`, as core has no code for them.
pub fn plain_u64(value: &Bound<'_, PyAny>, name: &str) -> PyResult<u64> {
    as_u64(value).map_err(|problem| match problem {
        NotU64::Type(what) => {
            PyTypeError::new_err(format!("{name}: expected an int, found {what}"))
        }
        other => PyValueError::new_err(format!(
            "{name}: expected an int in 0..2^64, found {}",
            other.found()
        )),
    })
}

fn invalid_layout(message: String) -> Refusal {
    Refusal::input("INVALID_LAYOUT", format!("invalid layout: {message}"))
}

/// Keys of a layout dict besides `fields`, `unit_ms` and `epoch_ms`: those `describe_layout`
/// adds, ignored so that its output can be passed back in.
const DESCRIBED_KEYS: [&str; 5] = [
    "name",
    "clock_seqs",
    "max_worker_id",
    "max_id",
    "fingerprint",
];

/// `None` (the default `clockseq`), a preset name, or `{"fields": [{"name", "bits"}], "unit_ms", "epoch_ms"}`.
#[inline]
pub fn layout_arg(value: Option<&Bound<'_, PyAny>>) -> Result<Layout, Refusal> {
    let Some(value) = value else {
        return Ok(Layout::CLOCKSEQ);
    };
    if value.is_none() {
        return Ok(Layout::CLOCKSEQ);
    }
    if let Ok(name) = value.cast::<PyString>() {
        let name = name
            .to_str()
            .map_err(|_| Refusal::from(clockflake::Error::UnknownLayout))?;
        return Layout::by_name(name).map_err(|error| {
            Refusal::input(error.code(), format!("{error}, found {}", repr_of(value)))
        });
    }
    let Ok(spec) = value.cast::<PyDict>() else {
        return Err(invalid_layout(format!(
            "expected a preset name or a dict with fields, unit_ms and epoch_ms, found {}",
            repr_and_type(value)
        )));
    };
    custom_layout(spec)
}

fn custom_layout(spec: &Bound<'_, PyDict>) -> Result<Layout, Refusal> {
    let mut fields_value = None;
    let mut unit_ms = 1;
    let mut epoch_ms = None;
    for (key, value) in spec.iter() {
        let key: String = key.extract().map_err(|_| {
            invalid_layout(format!("expected str keys, found {}", repr_and_type(&key)))
        })?;
        match key.as_str() {
            "fields" => fields_value = Some(value),
            "unit_ms" => {
                unit_ms = as_u64(&value).map_err(|p| {
                    invalid_layout(format!(
                        "expected unit_ms as an int of 1 or more, found {}",
                        p.found()
                    ))
                })?
            }
            "epoch_ms" => {
                epoch_ms = Some(as_u64(&value).map_err(|p| {
                    invalid_layout(format!(
                        "expected epoch_ms as an int of Unix ms, found {}",
                        p.found()
                    ))
                })?)
            }
            other if DESCRIBED_KEYS.contains(&other) => {}
            other => {
                return Err(invalid_layout(format!(
                    "unknown key {other:?}: expected fields, unit_ms and epoch_ms"
                )))
            }
        }
    }
    let fields_value =
        fields_value.ok_or_else(|| invalid_layout("missing key \"fields\"".into()))?;
    let epoch_ms = epoch_ms.ok_or_else(|| invalid_layout("missing key \"epoch_ms\"".into()))?;
    let items = list_items(&fields_value).ok_or_else(|| {
        invalid_layout(format!(
            "expected fields as a list of {{\"name\", \"bits\"}} dicts, found {}",
            repr_and_type(&fields_value)
        ))
    })?;
    let mut fields = Vec::with_capacity(items.len());
    for item in &items {
        let bad = || {
            invalid_layout(format!(
                "expected each field as {{\"name\": str, \"bits\": int}}, found {}",
                repr_and_type(item)
            ))
        };
        let field = item.cast::<PyDict>().map_err(|_| bad())?;
        let name_value = field.get_item("name").ok().flatten().ok_or_else(bad)?;
        let name = name_value.cast::<PyString>().map_err(|_| bad())?;
        let name = name.to_str().map_err(|_| bad())?;
        let bits = field.get_item("bits").ok().flatten().ok_or_else(bad)?;
        let bits = as_u64(&bits).map_err(|_| bad())?;
        let bits = u32::try_from(bits).unwrap_or(u32::MAX);
        let field = Field::from_name(name).map_err(|error| {
            Refusal::input(
                error.code(),
                format!("{error}, found {}", repr_of(&name_value)),
            )
        })?;
        fields.push((field, bits));
    }
    Ok(Layout::new(&fields, unit_ms, epoch_ms)?)
}

/// The rollback policy: `None` for the layout's default, or one of the four names.
pub fn policy_arg(value: Option<&Bound<'_, PyAny>>) -> Result<Option<Policy>, Refusal> {
    let Some(value) = value.filter(|v| !v.is_none()) else {
        return Ok(None);
    };
    let unknown = |found: String| {
        let error = clockflake::Error::UnknownPolicy;
        Refusal::input(error.code(), format!("{error}, found {found}"))
    };
    let name = value
        .cast::<PyString>()
        .map_err(|_| unknown(repr_and_type(value)))?;
    let name = name.to_str().map_err(|_| unknown(repr_and_type(value)))?;
    Policy::from_name(name)
        .map(Some)
        .map_err(|_| unknown(repr_of(value)))
}

/// The keyword options of `Generator(...)`, `Generator.resume(...)` and `Generator.open(...)`,
/// read from one `**options` dict: a value of `None` means the default.
pub struct GeneratorArgs {
    pub layout: Layout,
    pub options: Options,
    pub clock: Option<Py<PyAny>>,
    /// `Generator.open` only.
    pub max_handover_wait_ms: Option<u64>,
    /// `Generator.open` only: whether a lost lease is leased again (default: yes).
    pub heal: Option<bool>,
}

/// Which method the options are for: each takes the four generator options and some of
/// `clock` and `max_handover_wait_ms`.
#[derive(Clone, Copy, PartialEq)]
pub enum Method {
    New,
    Resume,
    Open,
}

impl Method {
    fn name(self) -> &'static str {
        match self {
            Method::New => "Generator()",
            Method::Resume => "Generator.resume()",
            Method::Open => "Generator.open()",
        }
    }
}

/// Reads `**options` for `method`: an unknown keyword is a `TypeError` naming it, as Python's
/// own functions raise; the rules of each value are core's.
pub fn generator_args(
    options: Option<&Bound<'_, PyDict>>,
    method: Method,
) -> PyResult<GeneratorArgs> {
    let mut args = GeneratorArgs {
        layout: Layout::CLOCKSEQ,
        options: Options::default(),
        clock: None,
        max_handover_wait_ms: None,
        heal: None,
    };
    for (key, value) in options.into_iter().flat_map(|dict| dict.iter()) {
        let key = key.cast::<PyString>()?.to_str()?.to_owned();
        let known = match key.as_str() {
            "layout" | "on_rollback" | "max_wait_ms" | "max_drift_ms" | "clock" => true,
            "max_handover_wait_ms" | "worker_id" | "heal" => method == Method::Open,
            _ => false,
        };
        if !known {
            return Err(PyTypeError::new_err(format!(
                "{} got an unexpected keyword argument '{key}'",
                method.name()
            )));
        }
        if value.is_none() {
            continue;
        }
        match key.as_str() {
            "layout" => args.layout = layout_arg(Some(&value))?,
            "on_rollback" => args.options.on_rollback = policy_arg(Some(&value))?,
            "max_wait_ms" => args.options.max_wait_ms = plain_u64(&value, "max_wait_ms")?,
            "max_drift_ms" => args.options.max_drift_ms = plain_u64(&value, "max_drift_ms")?,
            "max_handover_wait_ms" => {
                args.max_handover_wait_ms = Some(plain_u64(&value, "max_handover_wait_ms")?)
            }
            "heal" => match value.cast::<PyBool>() {
                Ok(flag) => args.heal = Some(flag.is_true()),
                Err(_) => {
                    return Err(PyTypeError::new_err(format!(
                        "heal: expected a bool, found {}",
                        repr_and_type(&value)
                    )))
                }
            },
            "worker_id" => return Err(PyTypeError::new_err(
                "Generator.open() takes no worker_id: the coordinator leases one (read it from \
                     gen.worker_id); for a fixed worker id use Generator(worker_id=...)",
            )),
            _ if method == Method::Open => {
                return Err(PyTypeError::new_err(
                    "Generator.open() takes no clock: lease deadlines and reservations run on the \
                     system clock; use Generator(worker_id=..., clock=...) to drive time in tests",
                ))
            }
            _ if value.is_callable() => args.clock = Some(value.unbind()),
            _ => {
                return Err(PyTypeError::new_err(format!(
                    "clock: expected a callable returning Unix ms as an int, found {}",
                    repr_and_type(&value)
                )))
            }
        }
    }
    Ok(args)
}
