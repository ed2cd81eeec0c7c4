//! The HTTP API: the router with every route, and the request metrics middleware. Each
//! route's handler lives in the module of its concept:
//!
//! | module | what |
//! |---|---|
//! | `app` | [`App`], the state every route shares |
//! | `ids` | `GET /v1/id`, `GET /v1/ids` and the retries through short refusals |
//! | `decode` | `GET /v1/decode/{id}` |
//! | `public` | `POST /v1/public/encode`, `/v1/public/decode` and their bearer token |
//! | `service` | `/healthz`, `/readyz`, `/openapi.json`, `/metrics`, `/bench/constant` |
//! | `negotiate` | `Accept` (JSON or text) and the response bodies |
//! | `input` | query values, the JSON body's field and its size limit, 400 or 422 |
//! | `rfc3339` | Unix ms as RFC 3339 text |

mod app;
mod decode;
mod ids;
mod input;
mod negotiate;
mod public;
mod rfc3339;
mod service;

use std::sync::Arc;
use std::time::Instant;

use axum::extract::{DefaultBodyLimit, MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use axum::routing::{get, post};
use axum::Router;

use crate::error::{codes, ApiError};
use app::Shared;

pub use app::App;
pub use ids::parse_count;
pub use input::{query_value, string_field, JsonBody, MAX_BODY_BYTES};
pub use negotiate::wants_text;
pub use rfc3339::rfc3339_ms;
pub use service::OPENAPI;

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

/// Every route on `app`, with the JSON 404 and 405 answers, the body limit and request
/// metrics; `/bench/constant` only with `bench_constant_route`.
pub fn router(app: Arc<App>, bench_constant_route: bool) -> Router {
    let mut router = Router::new()
        .route("/v1/id", get(ids::get_id))
        .route("/v1/ids", get(ids::get_ids))
        .route("/v1/decode/{id}", get(decode::decode))
        .route("/v1/public/encode", post(public::public_encode))
        .route("/v1/public/decode", post(public::public_decode))
        .route("/healthz", get(service::healthz))
        .route("/readyz", get(service::readyz))
        .route("/openapi.json", get(service::openapi))
        .route("/metrics", get(service::metrics));
    if bench_constant_route {
        router = router.route("/bench/constant", get(service::constant));
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
