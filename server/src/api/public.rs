//! `POST /v1/public/encode` and `/v1/public/decode`: ids to and from their public text form,
//! behind the bearer token when the server has one.

use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use clockflake::PublicIds;
use serde_json::json;

use super::app::{App, Shared};
use super::input::{is_decimal, string_field, unprocessable_if, JsonBody};
use super::negotiate::json_response;
use crate::error::{codes, ApiError};

/// Whether `text` is what the OpenAPI description calls a public id: 16 Crockford base32
/// characters (any case; `U` is not one).
fn is_public_text(text: &str) -> bool {
    text.len() == 16
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() && !b.eq_ignore_ascii_case(&b'u'))
}

/// Whether `a` and `b` are equal, in time that depends on their lengths only.
fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The codec, once the request carries the bearer token (when the server has one).
fn public_ids<'a>(app: &'a App, headers: &HeaderMap) -> Result<&'a PublicIds, ApiError> {
    if let Some(token) = &app.public_token {
        let given = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.as_bytes().strip_prefix(b"Bearer "))
            .unwrap_or_default();
        if !same_bytes(given, token.as_bytes()) {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                codes::UNAUTHORIZED,
                "unauthorized: the public-id routes need Authorization: Bearer <token>",
            ));
        }
    }
    app.public_ids.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::NOT_IMPLEMENTED,
            codes::PUBLIC_IDS_NOT_CONFIGURED,
            "public ids are not configured: start the server with CLOCKFLAKE_PUBLIC_KEY or \
             CLOCKFLAKE_PUBLIC_KEY_FILE",
        )
    })
}

pub(super) async fn public_encode(
    State(app): Shared,
    headers: HeaderMap,
    body: JsonBody,
) -> Result<Response, ApiError> {
    let codec = public_ids(&app, &headers)?;
    let text = string_field(body, "id")?;
    let id = app
        .supervisor
        .layout()
        .parse_id(&text)
        .map_err(|error| unprocessable_if(is_decimal(&text), error))?;
    let public = codec.encode_text(id)?;
    Ok(json_response(
        &json!({ "id": id.to_string(), "public": public.as_str() }),
    ))
}

pub(super) async fn public_decode(
    State(app): Shared,
    headers: HeaderMap,
    body: JsonBody,
) -> Result<Response, ApiError> {
    let codec = public_ids(&app, &headers)?;
    let text = string_field(body, "public")?;
    let id = codec
        .decode_text(&text)
        .map_err(|error| unprocessable_if(is_public_text(&text), error))?;
    Ok(json_response(
        &json!({ "public": text.to_ascii_uppercase(), "id": id.to_string() }),
    ))
}
