//! `/metrics`: the `metrics` facade with the Prometheus exporter's recorder. Request counters
//! and latencies are recorded as requests finish; the lease figures are read from
//! `LeasedGenerator::stats()` when `/metrics` is scraped.

use std::time::Duration;

use axum::http::StatusCode;
use metrics::{
    counter, describe_counter, describe_gauge, describe_histogram, gauge, histogram, Unit,
};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::supervisor::Snapshot;

const REQUESTS: &str = "clockflake_http_requests_total";
const LATENCY: &str = "clockflake_http_request_duration_seconds";
const OPEN_FAILURES: &str = "clockflake_lease_open_failures_total";

/// Latency buckets, seconds: 50 µs to 10 s.
const BUCKETS: [f64; 15] = [
    0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0,
    2.5, 10.0,
];

/// Lease states exported as `clockflake_lease_state{state=...}` (1 for the current one).
const STATES: [&str; 5] = ["leasing", "active", "lost", "closed", "forked"];

/// The handle to the process-wide recorder; clones share it (in-process tests install it once
/// and give each of their apps a clone).
#[derive(Clone)]
pub struct Telemetry {
    handle: PrometheusHandle,
}

fn status_label(status: StatusCode) -> &'static str {
    match status.as_u16() {
        200 => "200",
        400 => "400",
        401 => "401",
        404 => "404",
        405 => "405",
        413 => "413",
        422 => "422",
        500 => "500",
        501 => "501",
        503 => "503",
        _ if status.is_success() => "2xx",
        _ if status.is_client_error() => "4xx",
        _ => "5xx",
    }
}

impl Telemetry {
    /// Installs the process-wide recorder.
    pub fn install() -> Result<Telemetry, String> {
        let handle = PrometheusBuilder::new()
            .set_buckets_for_metric(Matcher::Full(LATENCY.to_owned()), &BUCKETS)
            .and_then(|builder| builder.install_recorder())
            .map_err(|error| format!("metrics: {error}"))?;
        describe_counter!(REQUESTS, "HTTP requests by route and status");
        describe_histogram!(LATENCY, Unit::Seconds, "HTTP request latency by route");
        describe_counter!("clockflake_ids_issued_total", "Ids served");
        describe_counter!(
            "clockflake_server_retry_pauses_total",
            "Pauses of id requests for the next tick or a renewal in flight"
        );
        describe_gauge!("clockflake_ready", "1 while /readyz is green");
        describe_gauge!(
            "clockflake_lease_state",
            "1 for the lease's current state (leasing: none held)"
        );
        describe_gauge!(
            "clockflake_lease_worker_id",
            "The leased worker id (-1: none)"
        );
        describe_gauge!(
            "clockflake_lease_deadline_seconds",
            "Time to the lease deadline (-1: never expires; 0: passed or none held)"
        );
        describe_counter!("clockflake_leases_total", "Leases taken by this process");
        describe_counter!(
            "clockflake_leases_lost_total",
            "Leases lost (deadline passed)"
        );
        describe_counter!(
            OPEN_FAILURES,
            "Failed attempts to take a lease, by code (COORDINATOR_UNAVAILABLE, \
             WORKER_POOL_EXHAUSTED, CLOCK_SKEW, ...)"
        );
        describe_gauge!(
            "clockflake_clock_in_range",
            "1 while the wall clock is within the layout's lifetime (0: before its epoch or \
             past its last tick; no ids are served)"
        );
        describe_gauge!(
            "clockflake_worker_ids",
            "Worker ids in the layout's pool (the most generators that can hold one at once)"
        );
        describe_counter!(
            "clockflake_lease_renewals_total",
            "Successful lease renewals"
        );
        describe_counter!(
            "clockflake_lease_renewal_failures_total",
            "Failed lease renewals"
        );
        describe_counter!(
            "clockflake_clock_steps_back_total",
            "Times the generator's time followed the wall clock back"
        );
        describe_counter!(
            "clockflake_clock_seq_switches_total",
            "Clock-sequence switches after the time went back"
        );
        describe_counter!(
            "clockflake_generator_waits_total",
            "Waits of id calls inside the generator"
        );
        describe_counter!(
            "clockflake_generator_wait_microseconds_total",
            "Total time of those waits, microseconds"
        );
        Ok(Telemetry { handle })
    }

    /// Drains histogram samples into their buckets; run it periodically.
    pub fn upkeep(&self) {
        self.handle.run_upkeep();
    }

    pub fn request(&self, route: &'static str, status: StatusCode, elapsed: Duration) {
        counter!(REQUESTS, "route" => route, "status" => status_label(status)).increment(1);
        histogram!(LATENCY, "route" => route).record(elapsed.as_secs_f64());
    }

    /// One failed attempt to take a lease, by its code.
    pub fn open_failure(code: &'static str) {
        counter!(OPEN_FAILURES, "code" => code).increment(1);
    }

    pub fn retry_pause(&self) {
        counter!("clockflake_server_retry_pauses_total").increment(1);
    }

    pub fn render(&self, snapshot: &Snapshot, ids_issued: u64) -> String {
        counter!("clockflake_ids_issued_total").absolute(ids_issued);
        gauge!("clockflake_ready").set(f64::from(u8::from(snapshot.ready)));
        for state in STATES {
            gauge!("clockflake_lease_state", "state" => state)
                .set(f64::from(u8::from(state == snapshot.state)));
        }
        gauge!("clockflake_lease_worker_id").set(snapshot.worker_id.map_or(-1.0, |id| id as f64));
        let deadline = match (&snapshot.stats, snapshot.deadline_in_ms) {
            (Some(_), Some(ms)) => ms as f64 / 1000.0,
            (Some(_), None) => -1.0,
            (None, _) => 0.0,
        };
        gauge!("clockflake_lease_deadline_seconds").set(deadline);
        counter!("clockflake_leases_total").absolute(snapshot.leases);
        counter!("clockflake_leases_lost_total").absolute(snapshot.leases_lost);
        gauge!("clockflake_clock_in_range").set(f64::from(u8::from(snapshot.clock_in_range)));
        gauge!("clockflake_worker_ids").set(snapshot.worker_ids as f64);
        let totals = &snapshot.totals;
        counter!("clockflake_lease_renewals_total").absolute(totals.renewals);
        counter!("clockflake_lease_renewal_failures_total").absolute(totals.renewal_failures);
        counter!("clockflake_clock_steps_back_total").absolute(totals.clock_steps_back);
        counter!("clockflake_clock_seq_switches_total").absolute(totals.clock_seq_switches);
        counter!("clockflake_generator_waits_total").absolute(totals.waits);
        counter!("clockflake_generator_wait_microseconds_total").absolute(totals.wait_us);
        self.handle.render()
    }
}
