//! `clockflake-server`: the id service. Ids over HTTP from a worker id leased from a
//! `file://`, `postgres://`, `redis://`, `zookeeper://`, `k8s://` or `env://` coordinator (every
//! scheme of clockflake-lease, all built in), ready only while the lease is held,
//! with Prometheus metrics. HTTP only (no gRPC front).
//!
//! Start-up prints one line to stdout, `clockflake-server listening on http://ADDR`, once the
//! socket is bound (with `--listen 127.0.0.1:0` it names the port the system chose). Logs go to
//! stderr (`RUST_LOG`, default `info`). Exit codes: 0 after a graceful shutdown, 2 for a
//! configuration error, 1 for anything else.

use std::process::ExitCode;

use clap::Parser;
use clockflake_server::config::Config;
use clockflake_server::{probe, run, Failure};

fn main() -> ExitCode {
    // `clockflake-server healthcheck [URL]`: the container image's HEALTHCHECK (a scratch
    // image has no curl). Exit 0 when the URL (default: /healthz on CLOCKFLAKE_LISTEN)
    // answers 200 within 2 s, else 1.
    let mut args = std::env::args_os().skip(1);
    if args.next().as_deref() == Some(std::ffi::OsStr::new("healthcheck")) {
        let url = args.next().map(|url| url.to_string_lossy().into_owned());
        return match probe::check(url.as_deref()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(error) => {
                eprintln!("clockflake-server healthcheck: {error}");
                ExitCode::FAILURE
            }
        };
    }
    let config = Config::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .init();
    let mut builder = tokio::runtime::Builder::new_multi_thread();
    if config.threads > 0 {
        builder.worker_threads(config.threads);
    }
    let runtime = match builder.enable_all().build() {
        Ok(runtime) => runtime,
        Err(error) => {
            tracing::error!(%error, "cannot start the runtime");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(config)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Config(message)) => {
            tracing::error!("configuration: {message}");
            ExitCode::from(2)
        }
        Err(Failure::Runtime(message)) => {
            tracing::error!("{message}");
            ExitCode::FAILURE
        }
    }
}
