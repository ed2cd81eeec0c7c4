//! The routes for operators rather than clients: liveness, readiness, the OpenAPI document,
//! Prometheus metrics, and the constant body `--bench-constant-route` adds.

use std::sync::atomic::Ordering;

use axum::body::Body;
use axum::extract::State;
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use super::app::Shared;
use super::negotiate::{body_response, json_response, JSON};

/// The OpenAPI 3.1 description, committed beside the crate.
pub const OPENAPI: &str = include_str!("../../openapi.json");

pub(super) async fn healthz() -> Response {
    body_response(JSON, br#"{"status":"ok"}"#.to_vec())
}

pub(super) async fn readyz(State(app): Shared) -> Response {
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

pub(super) async fn openapi() -> Response {
    body_response(JSON, OPENAPI.as_bytes().to_vec())
}

pub(super) async fn metrics(State(app): Shared) -> Response {
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

/// A fixed id, with no generator behind it: the HTTP stack's own cost, for benchmarks only.
pub(super) async fn constant() -> Response {
    body_response(JSON, br#"{"id":"123456789012345678"}"#.to_vec())
}
