//! `clockflake-server`: the id service. Ids over HTTP from a worker id leased from a
//! `file://`, `postgres://` or `zookeeper://` coordinator, ready only while the lease is held,
//! with Prometheus metrics. HTTP only (no gRPC front).
//!
//! Start-up prints one line to stdout, `clockflake-server listening on http://ADDR`, once the
//! socket is bound (with `--listen 127.0.0.1:0` it names the port the system chose). Logs go to
//! stderr (`RUST_LOG`, default `info`). Exit codes: 0 after a graceful shutdown, 2 for a
//! configuration error, 1 for anything else.

mod api;
mod config;
mod error;
mod probe;
mod supervisor;
mod telemetry;
mod tls;

use std::future::IntoFuture;
use std::io::Write;
use std::process::ExitCode;
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::Duration;

use clap::Parser;
use clockflake::Options;
use clockflake_lease::LeaseOptions;

use crate::config::Config;
use crate::supervisor::Supervisor;
use crate::telemetry::Telemetry;

enum Failure {
    Config(String),
    Runtime(String),
}

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

async fn run(config: Config) -> Result<(), Failure> {
    let layout = config.layout().map_err(Failure::Config)?;
    let policy = config.policy().map_err(Failure::Config)?;
    let public_ids = config::public_ids_from_env().map_err(Failure::Config)?;
    let public_token = config::public_token_from_env().map_err(Failure::Config)?;
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(tls::config(cert, key).map_err(Failure::Config)?),
        _ => None,
    };
    let telemetry = Telemetry::install().map_err(Failure::Runtime)?;
    let options = LeaseOptions {
        generator: Options {
            on_rollback: policy,
            ..Options::default()
        },
        ..LeaseOptions::default()
    };
    let supervisor = Arc::new(Supervisor::new(
        config.lease.clone(),
        layout,
        options,
        config.ready_margin,
    ));

    // The first lease in the foreground: a bad URI or layout stops the server here; a
    // coordinator that is down does not (the supervisor keeps trying, /readyz stays red).
    let first = Arc::clone(&supervisor);
    match tokio::task::spawn_blocking(move || first.lease_blocking()).await {
        Ok(Ok(())) => {}
        Ok(Err(error)) if error.is_input_error() || error.code() == "INVALID_STATE" => {
            return Err(Failure::Config(format!(
                "lease {}: {error}",
                supervisor.coordinator()
            )));
        }
        Ok(Err(error)) => {
            tracing::warn!(code = error.code(), %error, "no lease yet: id requests are refused with this code until one is taken");
        }
        Err(error) => return Err(Failure::Runtime(format!("leasing task: {error}"))),
    }

    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|error| Failure::Config(format!("--listen {}: {error}", config.listen)))?;
    let address = listener
        .local_addr()
        .map_err(|error| Failure::Runtime(format!("listener: {error}")))?;

    let app = Arc::new(api::App {
        supervisor: Arc::clone(&supervisor),
        public_ids,
        public_token,
        max_count: config.max_count,
        telemetry,
        ids_issued: AtomicU64::new(0),
    });
    let router = api::router(Arc::clone(&app), config.bench_constant_route);

    tokio::spawn(Arc::clone(&supervisor).run());
    let upkeep = Arc::clone(&app);
    tokio::spawn(async move {
        loop {
            tokio::time::sleep(Duration::from_secs(5)).await;
            upkeep.telemetry.upkeep();
        }
    });

    tracing::info!(%address, layout = config.layout, "listening");
    let mut stdout = std::io::stdout();
    let scheme = if tls.is_some() { "https" } else { "http" };
    let _ = writeln!(
        stdout,
        "clockflake-server listening on {scheme}://{address}"
    );
    let _ = stdout.flush();

    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let stopping = Arc::clone(&supervisor);
    let signal = async move {
        shutdown_signal().await;
        tracing::info!("shutting down: no new connections, finishing requests in flight");
        // Unready at once; ids are still served to requests in flight.
        stopping.stop();
        let _ = stop_tx.send(true);
    };
    let serve: std::pin::Pin<Box<dyn std::future::Future<Output = std::io::Result<()>> + Send>> =
        match tls {
            Some(tls) => {
                let listener = tls::TlsListener::new(listener, tls)
                    .map_err(|error| Failure::Runtime(format!("listener: {error}")))?;
                Box::pin(
                    axum::serve(listener, router)
                        .with_graceful_shutdown(signal)
                        .into_future(),
                )
            }
            None => Box::pin(
                axum::serve(listener, router)
                    .with_graceful_shutdown(signal)
                    .into_future(),
            ),
        };
    let timeout = config.shutdown_timeout;
    let drain_limit = async move {
        let mut stop_rx = stop_rx;
        let _ = stop_rx.wait_for(|stopped| *stopped).await;
        tokio::time::sleep(timeout).await;
    };
    tokio::select! {
        result = serve => {
            if let Err(error) = result {
                tracing::error!(%error, "server");
            }
        }
        () = drain_limit => {
            tracing::warn!(?timeout, "requests still in flight after the shutdown timeout");
        }
    }
    supervisor.close().await;
    tracing::info!("stopped");
    Ok(())
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{signal, SignalKind};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = term.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
