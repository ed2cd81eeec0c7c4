//! `GET /v1/decode/{id}`: an id's parts under the server's layout or a named one. Needs no
//! lease.

use axum::extract::rejection::PathRejection;
use axum::extract::{Path, RawQuery, State};
use axum::http::StatusCode;
use axum::response::Response;
use clockflake::Layout;
use serde_json::json;

use super::app::Shared;
use super::input::{is_decimal, query_value, unprocessable_if};
use super::negotiate::json_response;
use super::rfc3339::rfc3339_ms;
use crate::error::ApiError;

pub(super) async fn decode(
    State(app): Shared,
    id: Result<Path<String>, PathRejection>,
    RawQuery(query): RawQuery,
) -> Result<Response, ApiError> {
    let Path(text) = id.map_err(|rejection| {
        ApiError::new(
            StatusCode::BAD_REQUEST,
            "INVALID_ID",
            format!("invalid id: {}", rejection.body_text()),
        )
    })?;
    let layout = match query_value(query.as_deref(), "layout")? {
        Some(name) => Layout::by_name(&name)?,
        None => *app.supervisor.layout(),
    };
    let id = layout
        .parse_id(&text)
        .map_err(|error| unprocessable_if(is_decimal(&text), error))?;
    let parts = layout.decode(id)?;
    let body = json!({
        "id": id.to_string(),
        "layout": layout.preset_name(),
        "timestampMs": parts.timestamp_ms,
        "time": rfc3339_ms(parts.timestamp_ms),
        "clockSeq": parts.clock_seq,
        "workerId": parts.worker_id,
        "sequence": parts.sequence,
    });
    Ok(json_response(&body))
}
