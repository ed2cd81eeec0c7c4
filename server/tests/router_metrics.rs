//! `/metrics` after some traffic, in this process (the router called with
//! `tower::ServiceExt::oneshot`). Alone in its test binary: the Prometheus recorder is
//! process-wide, so the request counts it checks are exact only when no other test adds to them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod common;

use axum::body::Body;
use axum::http::Method;
use common::in_process::{PublicSettings, Service};

/// Every family the README promises, with the counts of the requests made here.
#[tokio::test]
async fn metrics_after_traffic() {
    let server = Service::start("metrics", &[], PublicSettings::default()).await;
    server.get("/v1/nope").await.assert_error(404, "NOT_FOUND");
    let reply = server
        .call(Method::POST, "/v1/id", &[], Body::empty())
        .await;
    reply.assert_error(405, "METHOD_NOT_ALLOWED");
    for _ in 0..3 {
        assert_eq!(server.get("/v1/id").await.status, 200);
    }
    assert_eq!(server.get("/v1/ids?count=10").await.status, 200);
    let metrics = server.get("/metrics").await;
    assert_eq!(metrics.status, 200);
    assert!(metrics.headers["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/plain"));
    let text = metrics.body;
    for needle in [
        "clockflake_ids_issued_total 13",
        "clockflake_http_requests_total{route=\"/v1/id\",status=\"200\"} 3",
        "clockflake_http_requests_total{route=\"/v1/id\",status=\"405\"} 1",
        "clockflake_http_requests_total{route=\"/v1/ids\",status=\"200\"} 1",
        "clockflake_http_requests_total{route=\"unmatched\",status=\"404\"} 1",
        "clockflake_http_request_duration_seconds_bucket{route=\"/v1/id\",le=\"0.001\"}",
        "clockflake_ready 1",
        "clockflake_lease_state{state=\"active\"} 1",
        "clockflake_lease_state{state=\"lost\"} 0",
        "clockflake_lease_worker_id 0",
        "clockflake_lease_deadline_seconds -1",
        "clockflake_leases_total 1",
        "clockflake_leases_lost_total 0",
        "clockflake_lease_renewals_total",
        "clockflake_lease_renewal_failures_total 0",
        "clockflake_clock_steps_back_total 0",
        "clockflake_clock_seq_switches_total 0",
        "clockflake_generator_waits_total",
        "clockflake_generator_wait_microseconds_total",
    ] {
        assert!(text.contains(needle), "{needle} missing from\n{text}");
    }
}
