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
    /// An id request while the server holds no lease and has no refusal of its own to give:
    /// its first attempt to lease has not ended, or the clock just came back within the
    /// layout's lifetime and the next attempt has not ended. A 503, retried at the next attempt.
    pub const NOT_LEASED_YET: &str = "NOT_LEASED_YET";
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

/// The HTTP status for a refusal, by its variant: 400 for bad input, 503 for what can succeed
/// later (with `Retry-After`), 500 for what cannot (a layout past its lifetime, a corrupt
/// record, a lease URI the server cannot use).
///
/// `EPOCH_IN_FUTURE` is a 503: the clock reads before the layout's epoch, and the refusal ends
/// when the clock reaches it (`retryAtMs` is the epoch). `TIMESTAMP_EXHAUSTED` is a 500 with no
/// `retryAtMs`: the layout has no ticks left after this clock reading, so only a clock set
/// back (it was wrong) can end it.
pub fn status_of(error: &LeaseError) -> StatusCode {
    match error {
        LeaseError::Core(error) => status_of_core(error),
        LeaseError::InvalidUri { .. } | LeaseError::CorruptState { .. } => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
        LeaseError::AssignedOutOfRange { .. } | LeaseError::TooManyWorkers { .. } => {
            StatusCode::BAD_REQUEST
        }
        LeaseError::LeaseLost { .. }
        | LeaseError::WorkerPoolExhausted { .. }
        | LeaseError::RangeExhausted { .. }
        | LeaseError::WorkerRangeConflict { .. }
        | LeaseError::CoordinatorUnavailable { .. }
        | LeaseError::RenewalLate { .. }
        | LeaseError::Healing { .. }
        | LeaseError::ClockSkew { .. }
        | LeaseError::Closed => StatusCode::SERVICE_UNAVAILABLE,
        // A variant of a later clockflake-lease: bad input or later, as it says.
        _ if error.is_input_error() => StatusCode::BAD_REQUEST,
        _ => StatusCode::SERVICE_UNAVAILABLE,
    }
}

/// [`status_of`] for core's refusals.
fn status_of_core(error: &clockflake::Error) -> StatusCode {
    use clockflake::Error;
    match error {
        Error::TimestampExhausted { .. } | Error::InvalidState(_) => {
            StatusCode::INTERNAL_SERVER_ERROR
        }
        Error::EpochInFuture { .. }
        | Error::SequenceExhausted { .. }
        | Error::ClockMovedBackwards { .. }
        | Error::ClockSequenceExhausted { .. }
        | Error::ClockNotAdvancing { .. }
        | Error::WorkerIdInvalidated
        | Error::GeneratorClosed => StatusCode::SERVICE_UNAVAILABLE,
        Error::InvalidId(_)
        | Error::InvalidLayout(_)
        | Error::UnknownLayout
        | Error::UnknownPolicy
        | Error::WorkerIdOutOfRange { .. }
        | Error::TimestampOutOfRange { .. }
        | Error::ClockSeqOutOfRange { .. }
        | Error::SequenceOutOfRange { .. }
        | Error::InvalidRange { .. }
        | Error::InvalidPublicId(_)
        | Error::UnknownKeyVersion { .. }
        | Error::InvalidKeyVersion { .. } => StatusCode::BAD_REQUEST,
        // A variant of a later core: bad input or later, as it says.
        _ if error.is_input_error() => StatusCode::BAD_REQUEST,
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    /// The status of every code, as docs/operations/errors.md lists them: checked against one
    /// error of each of core's and the lease crate's codes, so that a new variant or a moved
    /// one shows up here.
    fn documented(code: &str) -> u16 {
        match code {
            "TIMESTAMP_EXHAUSTED" | "INVALID_STATE" | "INVALID_URI" => 500,
            "EPOCH_IN_FUTURE"
            | "SEQUENCE_EXHAUSTED"
            | "CLOCK_MOVED_BACKWARDS"
            | "CLOCK_SEQUENCE_EXHAUSTED"
            | "CLOCK_NOT_ADVANCING"
            | "WORKER_ID_INVALIDATED"
            | "GENERATOR_CLOSED"
            | "LEASE_LOST"
            | "WORKER_POOL_EXHAUSTED"
            | "WORKER_RANGE_CONFLICT"
            | "COORDINATOR_UNAVAILABLE"
            | "CLOCK_SKEW" => 503,
            _ => 400,
        }
    }

    #[test]
    fn every_code_has_its_documented_status() {
        let mut errors: Vec<LeaseError> = clockflake::Error::EXAMPLES
            .into_iter()
            .map(LeaseError::Core)
            .collect();
        errors.extend(LeaseError::EXAMPLES);
        errors.extend([
            LeaseError::RangeExhausted {
                coordinator: String::new(),
                range: "0-63".to_owned(),
            },
            LeaseError::CorruptState {
                location: String::new(),
                reason: String::new(),
            },
            LeaseError::Closed,
            LeaseError::TooManyWorkers { workers: 1 << 20 },
            LeaseError::AssignedOutOfRange {
                worker_id: 9,
                source: String::new(),
                range: "0-7".to_owned(),
            },
            LeaseError::RenewalLate {
                coordinator: String::new(),
                reserved_until_ms: 0,
                last_error: None,
                retry_at_ms: 1,
            },
            LeaseError::Healing {
                coordinator: String::new(),
                lost: String::new(),
                last_error: None,
                retry_at_ms: 1,
            },
        ]);
        for error in errors {
            let refusal = ApiError::from(error.clone());
            assert_eq!(refusal.code, error.code());
            assert_eq!(
                refusal.status.as_u16(),
                documented(error.code()),
                "{error:?}"
            );
        }
    }
}
