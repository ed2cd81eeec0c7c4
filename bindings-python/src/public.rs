//! `PublicIds`: core's keyed, reversible codec for ids shown to the outside.

use clockflake::{Error, PublicIdProblem, PublicIds};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyString};

use crate::args::{as_u64, type_name};
use crate::errors::{Refusal, ARG_TYPE, ARG_VALUE};

/// Turns raw ids into public ones and back with a secret 16-byte key: the public numbers
/// look random, cannot be walked and tell nothing of time, worker or volume.
///
/// >>> codec = PublicIds(1, b"0123456789abcdef")
/// >>> text = codec.encode_text(383188013854781440)
/// >>> len(text), codec.decode_text(text.lower())
/// (16, 383188013854781440)
///
/// `version` (0..=31) tags the key in the text form, so that keys can rotate:
/// `PublicIds(2, new_key).with_old_key(1, old_key)` encodes with the new key and still
/// decodes texts made with the old one. The construction is NIST FF1 with AES-128; a key whose
/// public ids were issued before FF1 (clockflake 0.1's Feistel network) is registered as
/// legacy: `PublicIds(2, new_key).with_legacy_key(1, old_key)`, or `PublicIds.legacy(1, key)`
/// to keep encoding with it. It hides ids; it does not authenticate: anyone can submit a
/// public id and get some raw id back, so never use it for authorisation.
#[pyclass(frozen, module = "clockflake._clockflake", name = "PublicIds")]
pub struct PyPublicIds {
    inner: PublicIds,
}

fn key_version(value: &Bound<'_, PyAny>) -> Result<u8, Refusal> {
    let invalid = |found: String| {
        Refusal::input(
            "INVALID_KEY_VERSION",
            format!("invalid key version: expected an int in 0..=31, found {found}"),
        )
    };
    match as_u64(value) {
        Ok(version) => u8::try_from(version).map_err(|_| invalid(version.to_string())),
        Err(problem) => Err(invalid(problem.found())),
    }
}

fn key_bytes(value: &Bound<'_, PyAny>) -> Result<[u8; 16], Refusal> {
    let bytes = value.cast::<PyBytes>().map_err(|_| {
        Refusal::input(
            ARG_TYPE,
            format!("key: expected 16 bytes, found {}", type_name(value)),
        )
    })?;
    <[u8; 16]>::try_from(bytes.as_bytes()).map_err(|_| {
        Refusal::input(
            ARG_VALUE,
            format!("key: expected 16 bytes, found {}", bytes.as_bytes().len()),
        )
    })
}

#[pymethods]
impl PyPublicIds {
    #[new]
    fn new(version: &Bound<'_, PyAny>, key: &Bound<'_, PyAny>) -> PyResult<PyPublicIds> {
        let version = key_version(version)?;
        let key = key_bytes(key)?;
        Ok(PyPublicIds {
            inner: PublicIds::new(version, key).map_err(Refusal::from)?,
        })
    }

    /// A codec whose current key is a legacy key (public ids issued before FF1, which must
    /// stay the same): prefer a new key with `with_legacy_key` for this one.
    #[staticmethod]
    fn legacy(version: &Bound<'_, PyAny>, key: &Bound<'_, PyAny>) -> PyResult<PyPublicIds> {
        let version = key_version(version)?;
        let key = key_bytes(key)?;
        Ok(PyPublicIds {
            inner: PublicIds::legacy(version, key).map_err(Refusal::from)?,
        })
    }

    /// A new codec that also decodes text forms made with an older key of `version`.
    fn with_old_key(
        &self,
        version: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<PyPublicIds> {
        let version = key_version(version)?;
        let key = key_bytes(key)?;
        Ok(PyPublicIds {
            inner: self
                .inner
                .clone()
                .with_old_key(version, key)
                .map_err(Refusal::from)?,
        })
    }

    /// A new codec that also decodes text forms made before FF1 with the legacy key of
    /// `version`.
    fn with_legacy_key(
        &self,
        version: &Bound<'_, PyAny>,
        key: &Bound<'_, PyAny>,
    ) -> PyResult<PyPublicIds> {
        let version = key_version(version)?;
        let key = key_bytes(key)?;
        Ok(PyPublicIds {
            inner: self
                .inner
                .clone()
                .with_legacy_key(version, key)
                .map_err(Refusal::from)?,
        })
    }

    /// The version of the key that encodes.
    #[getter]
    fn current_version(&self) -> u8 {
        self.inner.current_version()
    }

    /// The public number of an id (an int below 2**63), under the current key.
    fn encode(&self, id: &Bound<'_, PyAny>) -> PyResult<u64> {
        let id = public_id_arg(id, "INVALID_ID")?;
        Ok(self.inner.encode(id).map_err(Refusal::from)?)
    }

    /// The id behind a public number, under the current key.
    fn decode(&self, public: &Bound<'_, PyAny>) -> PyResult<u64> {
        let public = public_id_arg(public, "INVALID_PUBLIC_ID")?;
        Ok(self.inner.decode(public).map_err(Refusal::from)?)
    }

    /// The 16-character text form of an id (Crockford base32 with a key version and a check).
    fn encode_text(&self, id: &Bound<'_, PyAny>) -> PyResult<String> {
        let id = public_id_arg(id, "INVALID_ID")?;
        let text = self.inner.encode_text(id).map_err(Refusal::from)?;
        Ok(text.as_str().to_owned())
    }

    /// The id behind a text form (case-insensitive); a typo, a wrong length or an unknown key
    /// version raises, never returns a wrong id.
    fn decode_text(&self, text: &Bound<'_, PyAny>) -> PyResult<u64> {
        let text = text.cast::<PyString>().map_err(|_| {
            Refusal::input(
                "INVALID_PUBLIC_ID",
                format!(
                    "invalid public id: expected a str, found {}",
                    type_name(text)
                ),
            )
        })?;
        let text = text.to_str().map_err(|_| {
            Refusal::from(Error::InvalidPublicId(PublicIdProblem::BadCharacter {
                found: '?',
                at: 0,
            }))
        })?;
        Ok(self.inner.decode_text(text).map_err(Refusal::from)?)
    }

    fn __repr__(&self) -> String {
        // Never shows a key.
        format!(
            "PublicIds(current_version={})",
            self.inner.current_version()
        )
    }
}

/// An int in `0..2^64` (core checks the sign bit), refused under `code` otherwise.
fn public_id_arg(value: &Bound<'_, PyAny>, code: &'static str) -> Result<u64, Refusal> {
    as_u64(value).map_err(|problem| {
        let what = if code == "INVALID_ID" {
            "invalid id"
        } else {
            "invalid public id"
        };
        Refusal::input(
            code,
            format!(
                "{what}: expected an int in 0..2^63, found {}",
                problem.found()
            ),
        )
    })
}
