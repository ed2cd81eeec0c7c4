//! The HTTP API: routes, handlers, and the request metrics middleware.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::{Body, Bytes};
use axum::extract::rejection::{BytesRejection, PathRejection};
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, RawQuery, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use clockflake::{Layout, PublicIds};
use clockflake_lease::{LeaseError, LeasedGenerator};
use serde_json::{json, Value};

use crate::error::{codes, ApiError};
use crate::supervisor::Supervisor;
use crate::telemetry::Telemetry;

/// The OpenAPI 3.1 description, committed beside the crate.
pub const OPENAPI: &str = include_str!("../openapi.json");

/// Largest request body any route reads (the public-id routes); larger ones get 413.
pub const MAX_BODY_BYTES: usize = 1024;

/// Longest one `GET /v1/id` waits for the generator (the next tick, a renewal in flight)
/// before answering 503 with the time to retry.
const ID_WAIT: Duration = Duration::from_millis(100);
/// Longest one `GET /v1/ids` takes to gather its ids (a batch spans ticks).
const BATCH_WAIT: Duration = Duration::from_secs(10);
/// Longest one request spins (yields) for next ticks before it sleeps on the timer instead.
const MAX_SPIN: Duration = Duration::from_millis(50);

pub struct App {
    pub supervisor: Arc<Supervisor>,
    pub public_ids: Option<PublicIds>,
    /// The bearer token `/v1/public/*` require, if one was given.
    pub public_token: Option<String>,
    pub max_count: u64,
    pub telemetry: Telemetry,
    pub ids_issued: AtomicU64,
}

type Shared = State<Arc<App>>;
/// A request's body, or why axum could not read it (answered as a coded error).
pub type JsonBody = Result<Bytes, BytesRejection>;

/// Every route, with the label its metrics carry.
pub const ROUTES: [&str; 10] = [
    "/v1/id",
    "/v1/ids",
    "/v1/decode/{id}",
    "/v1/public/encode",
    "/v1/public/decode",
    "/healthz",
    "/readyz",
    "/openapi.json",
    "/metrics",
    "/bench/constant",
];

pub fn router(app: Arc<App>, bench_constant_route: bool) -> Router {
    let mut router = Router::new()
        .route("/v1/id", get(get_id))
        .route("/v1/ids", get(get_ids))
        .route("/v1/decode/{id}", get(decode))
        .route("/v1/public/encode", post(public_encode))
        .route("/v1/public/decode", post(public_decode))
        .route("/healthz", get(healthz))
        .route("/readyz", get(readyz))
        .route("/openapi.json", get(openapi))
        .route("/metrics", get(metrics));
    if bench_constant_route {
        router = router.route("/bench/constant", get(constant));
    }
    router
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(DefaultBodyLimit::max(MAX_BODY_BYTES))
        .layer(axum::middleware::from_fn_with_state(
            Arc::clone(&app),
            track,
        ))
        .with_state(app)
}

/// Counts every request by route and status and records its latency.
async fn track(State(app): Shared, request: Request, next: Next) -> Response {
    let started = Instant::now();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .and_then(|matched| ROUTES.iter().find(|r| **r == matched.as_str()))
        .copied()
        .unwrap_or("unmatched");
    let response = next.run(request).await;
    app.telemetry
        .request(route, response.status(), started.elapsed());
    response
}

async fn not_found() -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        codes::NOT_FOUND,
        "not found: see /openapi.json for the routes",
    )
}

async fn method_not_allowed() -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        codes::METHOD_NOT_ALLOWED,
        "method not allowed: see /openapi.json for the routes",
    )
}

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

/// Calls `take` until it gives ids or a refusal that cannot succeed before `deadline`,
/// sleeping (never blocking the runtime) until each refusal's retry time.
async fn with_retries<T>(
    app: &App,
    gen: &LeasedGenerator,
    deadline: Instant,
    mut take: impl FnMut(&LeasedGenerator) -> Result<T, LeaseError>,
) -> Result<T, ApiError> {
    // Spinning (yielding to other tasks) for the next tick is bounded per request.
    let spin_until = Instant::now() + MAX_SPIN;
    loop {
        let error = match take(gen) {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        let Some(retry_at_ms) = error.retry_at_ms() else {
            if matches!(error.code(), "LEASE_LOST" | "GENERATOR_CLOSED") {
                app.supervisor.poke();
            }
            return Err(error.into());
        };
        let wait_ms = retry_at_ms.saturating_sub(gen.now_ms());
        if Instant::now() + Duration::from_millis(wait_ms) > deadline {
            return Err(error.into());
        }
        app.telemetry.retry_pause();
        if wait_ms <= 1 && Instant::now() < spin_until {
            // The next tick is under a millisecond away: the timer (1 ms granularity) would
            // overshoot it, so yield to other tasks until it comes.
            tokio::task::yield_now().await;
        } else {
            tokio::time::sleep(Duration::from_millis(wait_ms.max(1))).await;
        }
    }
}

fn push_id(out: &mut Vec<u8>, id: u64) {
    out.extend_from_slice(itoa::Buffer::new().format(id).as_bytes());
}

fn body_response(content_type: &'static str, body: Vec<u8>) -> Response {
    (
        [(header::CONTENT_TYPE, HeaderValue::from_static(content_type))],
        body,
    )
        .into_response()
}

const JSON: &str = "application/json";
const TEXT: &str = "text/plain; charset=utf-8";

/// A JSON value as the response body.
fn json_response(body: &serde_json::Value) -> Response {
    body_response(JSON, body.to_string().into_bytes())
}

async fn get_id(State(app): Shared, headers: HeaderMap) -> Result<Response, ApiError> {
    let gen = app.supervisor.generator()?;
    let deadline = Instant::now() + ID_WAIT;
    let id = with_retries(&app, &gen, deadline, LeasedGenerator::try_next_id).await?;
    app.ids_issued.fetch_add(1, Ordering::Relaxed);
    let mut body = Vec::with_capacity(32);
    if wants_text(&headers) {
        push_id(&mut body, id);
        body.push(b'\n');
        return Ok(body_response(TEXT, body));
    }
    body.extend_from_slice(b"{\"id\":\"");
    push_id(&mut body, id);
    body.extend_from_slice(b"\"}");
    Ok(body_response(JSON, body))
}

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

/// `count`: decimal digits only, 1..=max.
pub fn parse_count(text: Option<&str>, max: u64) -> Result<u64, ApiError> {
    let expected = format!("expected count=1..={max}");
    let Some(text) = text else {
        return Err(ApiError::bad_value(format!(
            "invalid count: {expected}, found none"
        )));
    };
    let shown: String = text.chars().take(24).collect();
    let count = if !text.is_empty() && text.len() <= 20 && text.bytes().all(|b| b.is_ascii_digit())
    {
        text.parse::<u64>().ok()
    } else {
        None
    };
    match count {
        Some(count) if (1..=max).contains(&count) => Ok(count),
        _ => Err(ApiError::bad_value(format!(
            "invalid count: {expected}, found {shown:?}"
        ))),
    }
}

async fn get_ids(
    State(app): Shared,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let count = parse_count(
        query_value(query.as_deref(), "count")?.as_deref(),
        app.max_count,
    )?;
    let gen = app.supervisor.generator()?;
    let text = wants_text(&headers);
    let capacity = usize::try_from(count).unwrap_or(0).saturating_mul(22) + 16;
    let mut body = Vec::with_capacity(capacity);
    if !text {
        body.extend_from_slice(b"{\"ids\":[");
    }
    let deadline = Instant::now() + BATCH_WAIT;
    let mut remaining = count;
    while remaining > 0 {
        let block = with_retries(&app, &gen, deadline, |gen| gen.try_next_block(remaining)).await?;
        for id in block {
            if text {
                push_id(&mut body, id);
                body.push(b'\n');
            } else {
                if remaining != count {
                    body.push(b',');
                }
                body.push(b'"');
                push_id(&mut body, id);
                body.push(b'"');
            }
            remaining -= 1;
        }
    }
    app.ids_issued.fetch_add(count, Ordering::Relaxed);
    if text {
        return Ok(body_response(TEXT, body));
    }
    body.extend_from_slice(b"]}");
    Ok(body_response(JSON, body))
}

/// `2024-01-01T00:00:00.000Z` from Unix ms (proleptic Gregorian, UTC).
pub fn rfc3339_ms(unix_ms: u64) -> String {
    let days = (unix_ms / 86_400_000) as i64;
    let ms_of_day = unix_ms % 86_400_000;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        ms_of_day / 3_600_000,
        ms_of_day / 60_000 % 60,
        ms_of_day / 1000 % 60,
        ms_of_day % 1000
    )
}

async fn decode(
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

/// Whether `text` is what the OpenAPI description calls an id: 1 to 20 decimal digits.
fn is_decimal(text: &str) -> bool {
    (1..=20).contains(&text.len()) && text.bytes().all(|b| b.is_ascii_digit())
}

/// Whether `text` is what the OpenAPI description calls a public id: 16 Crockford base32
/// characters (any case; `U` is not one).
fn is_public_text(text: &str) -> bool {
    text.len() == 16
        && text
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() && !b.eq_ignore_ascii_case(&b'u'))
}

/// A refusal of input the OpenAPI description calls well-formed (an id past the layout's
/// range, a public id whose check fails or whose key version is not held) is 422 with its
/// code; 400 stays for malformed input.
fn unprocessable_if(well_formed: bool, error: clockflake::Error) -> ApiError {
    let mut refusal = ApiError::from(error);
    if well_formed && refusal.status == StatusCode::BAD_REQUEST {
        refusal.status = StatusCode::UNPROCESSABLE_ENTITY;
    }
    refusal
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

async fn public_encode(
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

async fn public_decode(
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

async fn healthz() -> Response {
    body_response(JSON, br#"{"status":"ok"}"#.to_vec())
}

async fn readyz(State(app): Shared) -> Response {
    let snapshot = app.supervisor.snapshot();
    let body = json!({
        "ready": snapshot.ready,
        "state": snapshot.state,
        "workerId": snapshot.worker_id,
        "deadlineInMs": snapshot.deadline_in_ms,
        "leases": snapshot.leases,
        "leasesLost": snapshot.leases_lost,
        "coordinator": app.supervisor.coordinator(),
        "lastError": snapshot.last_error.map(|(code, message)| json!({"code": code, "message": message})),
    });
    let status = if snapshot.ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    let mut response = (status, json_response(&body)).into_response();
    if !snapshot.ready {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
    }
    response
}

async fn openapi() -> Response {
    body_response(JSON, OPENAPI.as_bytes().to_vec())
}

async fn metrics(State(app): Shared) -> Response {
    let text = app.telemetry.render(
        &app.supervisor.snapshot(),
        app.ids_issued.load(Ordering::Relaxed),
    );
    (
        [(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
        )],
        Body::from(text),
    )
        .into_response()
}

async fn constant() -> Response {
    body_response(JSON, br#"{"id":"123456789012345678"}"#.to_vec())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
    use super::*;

    #[test]
    fn counts() {
        assert_eq!(parse_count(Some("1"), 10).unwrap(), 1);
        assert_eq!(parse_count(Some("0010"), 10).unwrap(), 10);
        for bad in [
            None,
            Some(""),
            Some("0"),
            Some("11"),
            Some("-1"),
            Some("+1"),
            Some(" 1"),
            Some("1e3"),
            Some("99999999999999999999999999"),
            Some("18446744073709551616"),
            Some("\u{fffd}"),
        ] {
            let error = parse_count(bad, 10).unwrap_err();
            assert_eq!(error.status, StatusCode::BAD_REQUEST);
            assert_eq!(error.code, codes::INVALID_ARG_VALUE);
        }
    }

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

    #[test]
    fn times() {
        assert_eq!(rfc3339_ms(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(1_704_067_200_000), "2024-01-01T00:00:00.000Z");
        assert_eq!(rfc3339_ms(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339_ms(1_709_251_199_999), "2024-02-29T23:59:59.999Z");
    }
}
