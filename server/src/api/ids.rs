//! `GET /v1/id` and `GET /v1/ids?count=N`: ids from the leased generator, as JSON or text,
//! waiting (never blocking the runtime) through the refusals that end soon.

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::Response;
use clockflake_lease::{HealingGenerator, LeaseError};

use super::app::{App, Shared};
use super::input::query_value;
use super::negotiate::{body_response, wants_text, JSON, TEXT};
use crate::error::ApiError;

/// Longest one `GET /v1/id` waits for the generator (the next tick, a renewal in flight)
/// before answering 503 with the time to retry.
const ID_WAIT: Duration = Duration::from_millis(100);
/// Longest one `GET /v1/ids` takes to gather its ids (a batch spans ticks).
const BATCH_WAIT: Duration = Duration::from_secs(10);
/// Longest one request spins (yields) for next ticks before it sleeps on the timer instead.
const MAX_SPIN: Duration = Duration::from_millis(50);

/// Calls `take` until it gives ids or a refusal that cannot succeed before `deadline`,
/// sleeping (never blocking the runtime) until each refusal's retry time.
async fn with_retries<T>(
    app: &App,
    gen: &HealingGenerator,
    deadline: Instant,
    mut take: impl FnMut(&HealingGenerator) -> Result<T, LeaseError>,
) -> Result<T, ApiError> {
    // Spinning (yielding to other tasks) for the next tick is bounded per request.
    let spin_until = Instant::now() + MAX_SPIN;
    loop {
        let error = match take(gen) {
            Ok(value) => return Ok(value),
            Err(error) => error,
        };
        let Some(retry_at_ms) = error.retry_at_ms() else {
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

pub(super) async fn get_id(State(app): Shared, headers: HeaderMap) -> Result<Response, ApiError> {
    let gen = app.supervisor.generator()?;
    let deadline = Instant::now() + ID_WAIT;
    let id = with_retries(&app, &gen, deadline, HealingGenerator::try_next_id).await?;
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

pub(super) async fn get_ids(
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use axum::http::StatusCode;

    use super::parse_count;
    use crate::error::codes;

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
}
