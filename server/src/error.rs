//! Errors as HTTP responses: `{"code", "message", "retryAtMs"}` with the core's and the lease
//! crate's stable codes, plus the few the HTTP layer adds.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use clockflake_lease::LeaseError;
use serde::Serialize;

/// Codes only the HTTP layer has (core's and the lease crate's are used as they are).
pub mod codes {
    /// A query value or body field of the wrong value (a count of 0, junk, too large).
    pub const INVALID_ARG_VALUE: &str = "INVALID_ARG_VALUE";
    /// A body field of the wrong JSON type (an id as a number instead of a string).
    pub const INVALID_ARG_TYPE: &str = "INVALID_ARG_TYPE";
    /// A body that is not JSON, or a request the route cannot read.
    pub const INVALID_REQUEST: &str = "INVALID_REQUEST";
    /// A body over the route's limit.
    pub const PAYLOAD_TOO_LARGE: &str = "PAYLOAD_TOO_LARGE";
    /// No route at that path.
    pub const NOT_FOUND: &str = "NOT_FOUND";
    /// The route exists, the method does not.
    pub const METHOD_NOT_ALLOWED: &str = "METHOD_NOT_ALLOWED";
    /// `/v1/public/*` without the bearer token the server was given.
    pub const UNAUTHORIZED: &str = "UNAUTHORIZED";
    /// `/v1/public/*` without a key configured.
    pub const PUBLIC_IDS_NOT_CONFIGURED: &str = "PUBLIC_IDS_NOT_CONFIGURED";
}

#[derive(Debug)]
pub struct ApiError {
    pub status: StatusCode,
    pub code: &'static str,
    pub message: String,
    pub retry_at_ms: Option<u64>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Body<'a> {
    code: &'a str,
    message: &'a str,
    retry_at_ms: Option<u64>,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> ApiError {
        ApiError {
            status,
            code,
            message: message.into(),
            retry_at_ms: None,
        }
    }

    pub fn bad_value(message: impl Into<String>) -> ApiError {
        ApiError::new(StatusCode::BAD_REQUEST, codes::INVALID_ARG_VALUE, message)
    }
}

/// The HTTP status for a refusal: 400 for bad input, 503 for what can succeed later (with
/// `Retry-After`), 500 for what cannot (a layout past its lifetime, a corrupt record).
///
/// `EPOCH_IN_FUTURE` is a 503: the clock reads before the layout's epoch, and the refusal ends
/// when the clock reaches it (`retryAtMs` is the epoch). `TIMESTAMP_EXHAUSTED` is a 500 with no
/// `retryAtMs`: the layout has no ticks left after this clock reading, so only a clock set
/// back (it was wrong) can end it.
pub fn status_of(error: &LeaseError) -> StatusCode {
    if error.is_input_error() && !matches!(error.code(), "INVALID_STATE" | "INVALID_URI") {
        return StatusCode::BAD_REQUEST;
    }
    match error.code() {
        "TIMESTAMP_EXHAUSTED" | "INVALID_STATE" | "INVALID_URI" | "INVALID_LAYOUT" => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// When a retry can succeed, Unix ms: the error's own time, or for `EPOCH_IN_FUTURE` the
/// layout's epoch (the first time the clock can be used).
pub fn retry_at_of(error: &LeaseError) -> Option<u64> {
    match error {
        LeaseError::Core(clockflake::Error::EpochInFuture { epoch_ms, .. }) => Some(*epoch_ms),
        _ => error.retry_at_ms(),
    }
}

impl From<LeaseError> for ApiError {
    fn from(error: LeaseError) -> ApiError {
        ApiError {
            status: status_of(&error),
            code: error.code(),
            message: error.to_string(),
            retry_at_ms: retry_at_of(&error),
        }
    }
}

impl From<clockflake::Error> for ApiError {
    fn from(error: clockflake::Error) -> ApiError {
        ApiError::from(LeaseError::Core(error))
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = serde_json::to_vec(&Body {
            code: self.code,
            message: &self.message,
            retry_at_ms: self.retry_at_ms,
        })
        .unwrap_or_default();
        let mut response = (
            self.status,
            [(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
            body,
        )
            .into_response();
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"clockflake public ids\""),
            );
        }
        if self.status == StatusCode::SERVICE_UNAVAILABLE {
            let now = clockflake_lease::wall_ms();
            let seconds = self
                .retry_at_ms
                .map_or(1, |at| at.saturating_sub(now).div_ceil(1000).max(1));
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}
