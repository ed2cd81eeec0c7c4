//! Core errors (and the binding's own argument checks) become the Python exception classes of
//! `clockflake/_errors.py`, looked up by their stable code.

use pyo3::exceptions::{PyRuntimeError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyDict;

/// `clockflake._errors._RAISE_BY_CODE`: code -> exception class (core's, the lease crate's and
/// the binding's own `INVALID_ARG_TYPE` / `INVALID_ARG_VALUE`), imported on the first error.
static BY_CODE: PyOnceLock<Py<PyDict>> = PyOnceLock::new();

/// A refusal with a stable code: from core, or from the binding's own checks of an argument
/// (then with a message naming what Python type or value was found).
#[derive(Debug)]
pub struct Refusal {
    pub code: &'static str,
    pub input: bool,
    pub message: String,
    pub retry_at_ms: Option<u64>,
}

/// The binding's code for an argument of the wrong type (as Node's): `InvalidArgTypeError`, a
/// `TypeError`.
pub const ARG_TYPE: &str = "INVALID_ARG_TYPE";
/// The binding's code for an argument of the right type and the wrong shape (as Node's):
/// `InvalidArgValueError`, a `ValueError`.
pub const ARG_VALUE: &str = "INVALID_ARG_VALUE";

impl Refusal {
    /// A bad argument, under the code of the core error that covers it.
    pub fn input(code: &'static str, message: String) -> Refusal {
        Refusal {
            code,
            input: true,
            message,
            retry_at_ms: None,
        }
    }
}

impl From<clockflake::Error> for Refusal {
    fn from(error: clockflake::Error) -> Refusal {
        Refusal {
            code: error.code(),
            input: error.is_input_error(),
            message: error.to_string(),
            retry_at_ms: error.retry_at_ms(),
        }
    }
}

impl From<clockflake_lease::LeaseError> for Refusal {
    fn from(error: clockflake_lease::LeaseError) -> Refusal {
        Refusal {
            code: error.code(),
            input: error.is_input_error(),
            message: error.to_string(),
            retry_at_ms: error.retry_at_ms(),
        }
    }
}

impl From<Refusal> for PyErr {
    #[cold]
    fn from(refusal: Refusal) -> PyErr {
        Python::attach(|py| raise(py, refusal))
    }
}

/// The exception instance for a refusal: `_errors._RAISE_BY_CODE[code](message, retry_at_ms)`.
/// Falls back to a plain `TypeError`/`ValueError`/`RuntimeError` naming the code only if the
/// Python half of the package is missing (the tests check every core code has a class).
#[cold]
fn raise(py: Python<'_>, refusal: Refusal) -> PyErr {
    let class = BY_CODE
        .import(py, "clockflake._errors", "_RAISE_BY_CODE")
        .ok()
        .and_then(|table| table.get_item(refusal.code).ok().flatten());
    if let Some(class) = class {
        return match class.call1((refusal.message, refusal.retry_at_ms)) {
            Ok(instance) => PyErr::from_value(instance),
            Err(error) => error,
        };
    }
    let text = format!("[{}] {}", refusal.code, refusal.message);
    if refusal.code == ARG_TYPE {
        PyTypeError::new_err(text)
    } else if refusal.input {
        PyValueError::new_err(text)
    } else {
        PyRuntimeError::new_err(text)
    }
}

/// `(code, is_input_error)` of lease's table, one sample error per code it adds to core's
/// (`LeaseError::EXAMPLES`; the tests check the Python classes against them).
#[pyfunction]
pub fn _lease_error_codes() -> Vec<(&'static str, bool)> {
    clockflake_lease::LeaseError::EXAMPLES
        .iter()
        .map(|error| (error.code(), error.is_input_error()))
        .collect()
}
