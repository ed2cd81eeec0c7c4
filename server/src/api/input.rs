//! Reading a request: query values, the one string field of a JSON body, and which refusals
//! of well-formed input are 422 rather than 400.

use axum::body::Bytes;
use axum::extract::rejection::BytesRejection;
use axum::http::StatusCode;
use serde_json::Value;

use crate::error::{codes, ApiError};

/// Largest request body any route reads (the public-id routes); larger ones get 413.
pub const MAX_BODY_BYTES: usize = 1024;

/// A request's body, or why axum could not read it (answered as a coded error).
pub type JsonBody = Result<Bytes, BytesRejection>;

/// The query's value for `name`, percent-decoded (invalid UTF-8 becomes U+FFFD); a name given
/// twice is an error.
pub fn query_value(query: Option<&str>, name: &str) -> Result<Option<String>, ApiError> {
    let mut found = None;
    for (key, value) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if key == name {
            if found.is_some() {
                return Err(ApiError::bad_value(format!(
                    "invalid {name}: expected it once, found it more than once"
                )));
            }
            found = Some(value.into_owned());
        }
    }
    Ok(found)
}

/// The body as a JSON object and its string field `name`.
pub fn string_field(body: JsonBody, name: &str) -> Result<String, ApiError> {
    let bytes = body.map_err(|rejection| {
        let status = rejection.status();
        let code = if status == StatusCode::PAYLOAD_TOO_LARGE {
            codes::PAYLOAD_TOO_LARGE
        } else {
            codes::INVALID_REQUEST
        };
        ApiError::new(
            status,
            code,
            format!(
                "invalid request body: {} (at most {MAX_BODY_BYTES} bytes)",
                rejection.body_text()
            ),
        )
    })?;
    let value: Value = serde_json::from_slice(&bytes).map_err(|error| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            codes::INVALID_REQUEST,
            format!("invalid request body: expected a JSON object like {{\"{name}\": \"...\"}} ({error})"),
        )
    })?;
    let Value::Object(mut object) = value else {
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            codes::INVALID_REQUEST,
            format!("invalid request body: expected a JSON object like {{\"{name}\": \"...\"}}"),
        ));
    };
    if let Some(other) = object.keys().find(|key| *key != name) {
        let shown: String = other.chars().take(32).collect();
        return Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            codes::INVALID_REQUEST,
            format!("invalid request body: unexpected field {shown:?}; expected only \"{name}\""),
        ));
    }
    match object.remove(name) {
        Some(Value::String(text)) => Ok(text),
        None => Err(ApiError::bad_value(format!(
            "invalid {name}: expected a field \"{name}\", found none"
        ))),
        Some(other) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            codes::INVALID_ARG_TYPE,
            format!(
                "invalid {name}: expected a string (ids are decimal strings), found {}",
                json_type(&other)
            ),
        )),
    }
}

fn json_type(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Whether `text` is what the OpenAPI description calls an id: 1 to 20 decimal digits.
pub fn is_decimal(text: &str) -> bool {
    (1..=20).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit())
}

/// A refusal of input the OpenAPI description calls well-formed (an id past the layout's
/// range, a public id whose check fails or whose key version is not held) is 422 with its
/// code; 400 stays for malformed input.
pub fn unprocessable_if(well_formed: bool, error: clockflake::Error) -> ApiError {
    let mut refusal = ApiError::from(error);
    if well_formed && refusal.status == StatusCode::BAD_REQUEST {
        refusal.status = StatusCode::UNPROCESSABLE_ENTITY;
    }
    refusal
}
