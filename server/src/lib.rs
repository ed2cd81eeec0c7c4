//! `clockflake-server` as a library: the modules of the id service, and [`run`], which
//! `main.rs` calls with the parsed flags. Nothing here is a stable API; it exists so that the
//! fuzz targets (`fuzz/`) and in-process tests reach the parsers and the router. The modules
//! whose items are not documented yet are `#[doc(hidden)]`.

#[doc(hidden)]
pub mod api;
pub mod config;
#[doc(hidden)]
pub mod error;
pub mod probe;
#[doc(hidden)]
pub mod supervisor;
#[doc(hidden)]
pub mod telemetry;
#[doc(hidden)]
pub mod tls;

use std::future::IntoFuture;
use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use clockflake::Options;
use clockflake_lease::{LeaseError, LeaseOptions};

use crate::config::Config;
use crate::supervisor::Supervisor;
use crate::telemetry::Telemetry;

/// Why the server stopped other than gracefully: exit code 2 for configuration, 1 for the rest.
#[derive(Debug)]
pub enum Failure {
    /// A flag, the environment or the lease URI is wrong.
    Config(String),
    /// Anything else.
    Runtime(String),
}

/// The keeper of the lease `config` names (its URI, layout, rollback policy and ready margin),
/// not leasing yet. [`run`] starts from it; in-process tests build their app on one too.
pub fn supervisor_for(config: &Config) -> Result<Supervisor, Failure> {
    let layout = config.layout().map_err(Failure::Config)?;
    let policy = config.policy().map_err(Failure::Config)?;
    let options = LeaseOptions {
        generator: Options {
            on_rollback: policy,
            ..Options::default()
        },
        ..LeaseOptions::default()
    };
    Ok(Supervisor::new(
        config.lease.clone(),
        layout,
        options,
        config.ready_margin,
    ))
}

/// Runs the server until SIGTERM or Ctrl-C, on the current tokio runtime.
pub async fn run(config: Config) -> Result<(), Failure> {
    let supervisor = Arc::new(supervisor_for(&config)?);
    let public_ids = config::public_ids_from_env().map_err(Failure::Config)?;
    let public_token = config::public_token_from_env().map_err(Failure::Config)?;
    let tls = match (&config.tls_cert, &config.tls_key) {
        (Some(cert), Some(key)) => Some(tls::config(cert, key).map_err(Failure::Config)?),
        _ => None,
    };
    let telemetry = Telemetry::install().map_err(Failure::Runtime)?;

    // The first lease in the foreground: a bad URI or layout stops the server here; a
    // coordinator that is down does not (the supervisor keeps trying, /readyz stays red).
    let first = Arc::clone(&supervisor);
    match tokio::task::spawn_blocking(move || first.lease_blocking()).await {
        Ok(Ok(())) => {}
        Ok(Err(error))
            if error.is_input_error()
                || matches!(
                    error,
                    LeaseError::CorruptState { .. }
                        | LeaseError::Core(clockflake::Error::InvalidState(_))
                ) =>
        {
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

    let app = Arc::new(api::App::new(
        Arc::clone(&supervisor),
        public_ids,
        public_token,
        config.max_count,
        telemetry,
    ));
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
