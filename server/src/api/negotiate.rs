//! Content negotiation (`Accept`: JSON or text) and the response bodies every route writes.

use axum::http::{header, HeaderMap, HeaderValue};
use axum::response::{IntoResponse, Response};

/// The JSON media type, the default answer.
pub const JSON: &str = "application/json";
/// The text answer of the id routes (one decimal id per line).
pub const TEXT: &str = "text/plain; charset=utf-8";

/// Whether the client asked for `text/plain` over JSON (by `Accept`, with q-values; JSON wins
/// ties and is the default).
pub fn wants_text(headers: &HeaderMap) -> bool {
    let mut json_q = -1.0f32;
    let mut text_q = -1.0f32;
    for value in headers.get_all(header::ACCEPT) {
        let Ok(value) = value.to_str() else { continue };
        for item in value.split(',') {
            let mut parts = item.split(';');
            let media = parts.next().unwrap_or("").trim().to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.trim().strip_prefix("q="))
                .find_map(|q| q.trim().parse::<f32>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                "text/plain" => text_q = text_q.max(q),
                "application/json" | "application/*" | "*/*" => json_q = json_q.max(q),
                _ => {}
            }
        }
    }
    text_q > 0.0 && text_q > json_q
}

/// `body` with its `Content-Type`, status 200.
pub fn body_response(content_type: &'static str, body: Vec<u8>) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response()
}

/// A JSON value as the response body.
pub fn json_response(body: &serde_json::Value) -> Response {
    body_response(JSON, body.to_string().into_bytes())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn accept_negotiation() {
        let with = |value: &str| {
            let mut headers = HeaderMap::new();
            headers.insert(header::ACCEPT, HeaderValue::from_str(value).unwrap());
            wants_text(&headers)
        };
        assert!(!wants_text(&HeaderMap::new()));
        assert!(with("text/plain"));
        assert!(with("text/plain, application/json;q=0.5"));
        assert!(!with("application/json, text/plain"));
        assert!(!with("text/plain;q=0, */*"));
        assert!(!with("*/*"));
        assert!(!with("text/html"));
    }
}
