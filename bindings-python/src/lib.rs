//! Python bindings for clockflake: the native module `clockflake._clockflake`.
//!
//! The module converts types, maps errors to the classes of `clockflake/_errors.py` by their
//! code, supplies a clock and releases the GIL while waiting; every rule lives in core.

use pyo3::prelude::*;

mod args;
mod errors;
mod generator;
mod healed;
mod leased;
mod parts;
mod public;
mod suggest;

/// Names of the preset layouts, the default first.
fn preset_names() -> Vec<&'static str> {
    clockflake::Layout::PRESETS
        .iter()
        .map(|(name, _)| *name)
        .collect()
}

/// `(code, is_input_error, message)` of core's table of one error per code
/// (`clockflake::Error::EXAMPLES`): the tests check the Python classes against it (ValueError
/// for input errors, RuntimeError for the others) and that each message passes through unchanged.
#[pyfunction]
fn _error_codes() -> Vec<(&'static str, bool, String)> {
    clockflake::Error::EXAMPLES
        .iter()
        .map(|error| (error.code(), error.is_input_error(), error.to_string()))
        .collect()
}

/// Raises core's example error of `code` through the binding's error mapping, as any call would.
#[pyfunction]
fn _raise_error_example(code: &str) -> PyResult<()> {
    match clockflake::Error::EXAMPLES
        .iter()
        .find(|error| error.code() == code)
    {
        Some(error) => Err(errors::Refusal::from(*error).into()),
        None => Ok(()),
    }
}

/// Tells clockflake that this process was restored from a snapshot (CRIU, a VM snapshot,
/// serverless snapshot-restore): copies made from outside the process, which nothing inside
/// it can see. Every generator made before refuses from now on (`WorkerIdInvalidatedError`),
/// as in a forked child; a leased one leases a worker id of its own at its next call. Call
/// it first thing after a restore, before any id. Forks (any kind) need no call.
///
/// >>> import clockflake
/// >>> gen = clockflake.Generator(worker_id=3)
/// >>> clockflake.restored()
/// >>> try:
/// ...     gen.next_id()
/// ... except clockflake.WorkerIdInvalidatedError as error:
/// ...     print(error.code)
/// WORKER_ID_INVALIDATED
#[pyfunction]
fn restored() {
    clockflake_lease::fork::restored();
}

/// Snowflake-style 64-bit ids that never repeat, even when the wall clock steps back.
///
/// `gil_used = false`: the module keeps no Python state behind the GIL's back (the generator is
/// lock-free Rust state in a frozen class), so it may run on the free-threaded interpreter.
#[pymodule(gil_used = false)]
fn _clockflake(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<generator::PyGenerator>()?;
    m.add_class::<parts::PyParts>()?;
    m.add_class::<public::PyPublicIds>()?;
    m.add_function(wrap_pyfunction!(parts::decode, m)?)?;
    m.add_function(wrap_pyfunction!(parts::encode, m)?)?;
    m.add_function(wrap_pyfunction!(parts::id_range, m)?)?;
    m.add_function(wrap_pyfunction!(parts::describe_layout, m)?)?;
    m.add_function(wrap_pyfunction!(restored, m)?)?;
    m.add_function(wrap_pyfunction!(suggest::suggest_layout, m)?)?;
    m.add_function(wrap_pyfunction!(suggest::is_plausible, m)?)?;
    m.add_function(wrap_pyfunction!(suggest::guess_layout, m)?)?;
    m.add_function(wrap_pyfunction!(_error_codes, m)?)?;
    m.add_function(wrap_pyfunction!(_raise_error_example, m)?)?;
    m.add_function(wrap_pyfunction!(errors::_lease_error_codes, m)?)?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add("PRESET_NAMES", preset_names())?;
    m.add("ERROR_CODES", clockflake::Error::CODES.to_vec())?;
    m.add(
        "LEASE_ERROR_CODES",
        clockflake_lease::LeaseError::CODES.to_vec(),
    )?;
    Ok(())
}
