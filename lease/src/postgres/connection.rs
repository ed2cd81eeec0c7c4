//! The connection: opened under the TLS settings, reopened once broken, every statement
//! bounded by the patience (the server's `statement_timeout`, and the client's own bound: see
//! `session.rs`), and every error scrubbed of the password.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::CertificateError;

use super::session::{patience, Failure, Session, Statements};
use super::tls::{rustls_error, PgTls, SslMode};
use super::PostgresCoordinator;
use crate::LeaseError;

impl PostgresCoordinator {
    /// A new connection under the TLS settings, within the patience. A multi-host URI's hosts
    /// are tried one at a time from the one that answered last, each within its share of the
    /// time left: a frozen host (whose kernel accepts connections) then spends only its share.
    fn connect(&mut self) -> Result<Session, LeaseError> {
        let tls = match &self.tls {
            Some(tls) => tls.clone(),
            None => PgTls::new(SslMode::Prefer, None).map_err(|error| self.unavailable(error))?,
        };
        let hosts = if self.each_host.is_empty() {
            vec![self.config.clone()]
        } else {
            self.each_host.clone()
        };
        let give_up_at = Instant::now() + self.patience();
        let mut failure = None;
        for tried in 0..hosts.len() {
            let at = (self.first_host + tried) % hosts.len();
            let left = give_up_at.saturating_duration_since(Instant::now());
            let share = left / (hosts.len() - tried) as u32;
            match self.connect_to(hosts[at].clone(), &tls, share) {
                Ok(session) => {
                    self.first_host = at;
                    return Ok(session);
                }
                Err(error) => failure = Some(error),
            }
        }
        let failure = failure.unwrap_or(Failure::NoAnswer { closed: true });
        Err(self.connect_error(&tls, &failure))
    }

    /// A connection to `config`'s host within `within`. Under `prefer`, a server that offers no
    /// TLS is used in plain text, and so (as libpq does) is one whose TLS handshake fails.
    fn connect_to(
        &self,
        mut config: tokio_postgres::Config,
        tls: &PgTls,
        within: Duration,
    ) -> Result<Session, Failure> {
        use tokio_postgres::config::SslMode as Wire;
        config.ssl_mode(match tls.mode {
            SslMode::Disable => Wire::Disable,
            SslMode::Prefer => Wire::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Wire::Require,
        });
        let started = Instant::now();
        let connect = |config: &tokio_postgres::Config, within: Duration| {
            let notice = Arc::clone(&self.sync_rep_notice);
            Session::connect(
                config,
                tls.connector.clone(),
                within,
                self.patience(),
                notice,
            )
        };
        match connect(&config, within) {
            Err(Failure::Server(error))
                if tls.mode == SslMode::Prefer && rustls_error(&error).is_some() =>
            {
                config.ssl_mode(Wire::Disable);
                connect(&config, within.saturating_sub(started.elapsed()))
            }
            connected => connected,
        }
    }

    /// `COORDINATOR_UNAVAILABLE` for a failed connection, saying plainly when it was TLS: a
    /// server that offers none, or a certificate check (which one).
    fn connect_error(&self, tls: &PgTls, failure: &Failure) -> LeaseError {
        let error = match failure {
            Failure::Server(error) => error,
            Failure::NoAnswer { .. } => {
                let hosts = match self.each_host.len() {
                    0 | 1 => String::new(),
                    hosts => format!(" from the last of {hosts} hosts tried in turn"),
                };
                return self.unavailable(format!(
                    "no answer{hosts} within {} ms: the connection was given up (a server that \
                     accepts connections but does not answer: frozen, overloaded or starting)",
                    self.patience().as_millis()
                ));
            }
            Failure::Runtime(error) => return self.unavailable(error),
        };
        let text = described(error);
        let reason = if text.contains("server does not support TLS") {
            format!(
                "the server does not offer TLS, and sslmode={} requires it",
                tls.mode.as_str()
            )
        } else if let Some(rustls::Error::InvalidCertificate(problem)) = rustls_error(error) {
            let shown = rustls::Error::InvalidCertificate(problem.clone());
            let roots = tls
                .root_cert
                .as_ref()
                .map_or_else(String::new, |path| path.display().to_string());
            match problem {
                CertificateError::NotValidForName
                | CertificateError::NotValidForNameContext { .. } => {
                    format!(
                        "TLS certificate check (host name) failed: the server's certificate does \
                         not name the host connected to ({shown}); sslmode={} checks the host \
                         name: connect by a name the certificate carries",
                        tls.mode.as_str()
                    )
                }
                CertificateError::UnknownIssuer | CertificateError::BadSignature => format!(
                    "TLS certificate check (chain) failed: the server's certificate is not \
                     signed by a CA of sslrootcert {roots} ({shown}); sslmode={}",
                    tls.mode.as_str()
                ),
                _ => format!(
                    "TLS certificate check failed ({shown}); sslmode={}",
                    tls.mode.as_str()
                ),
            }
        } else {
            text
        };
        self.unavailable(reason)
    }

    /// `COORDINATOR_UNAVAILABLE` with `error`'s text scrubbed of the password: the client's
    /// errors (and the server's) may echo connection settings.
    pub(super) fn unavailable(&self, error: impl std::fmt::Display) -> LeaseError {
        let secrets = self
            .config
            .get_password()
            .map(crate::secrets::password_forms)
            .unwrap_or_default();
        LeaseError::unavailable(
            &self.redacted_uri,
            crate::secrets::scrub(&error.to_string(), &secrets),
        )
    }

    /// Runs `work` on a connection, reconnecting once if the connection was broken.
    pub(super) fn with_client<T>(
        &mut self,
        mut work: impl FnMut(&Statements<'_>, &str) -> Result<T, Failure>,
    ) -> Result<T, LeaseError> {
        if self.session.as_ref().is_none_or(Session::is_closed) {
            self.session = None;
            let session = self.connect()?;
            let timeout_ms = self.patience().as_millis();
            let set = session
                .statements()
                .batch_execute(&format!("SET statement_timeout = {timeout_ms}"));
            if let Err(failure) = set {
                return Err(self.failed(failure));
            }
            self.session = Some(session);
        }
        let table = self.table.clone();
        let Some(session) = self.session.as_ref() else {
            return Err(self.unavailable("no connection"));
        };
        self.sync_rep_notice.store(false, Ordering::Relaxed);
        let result = work(&session.statements(), &table);
        let closed = session.is_closed();
        match result {
            Ok(value) => Ok(value),
            Err(failure) => {
                if !matches!(failure, Failure::Server(_)) || closed {
                    self.session = None;
                }
                Err(self.failed(failure))
            }
        }
    }

    /// `COORDINATOR_UNAVAILABLE` for a failed statement.
    fn failed(&self, failure: Failure) -> LeaseError {
        match failure {
            Failure::Server(error) => self.unavailable(described(&error)),
            Failure::Runtime(error) => self.unavailable(error),
            Failure::NoAnswer { closed } => {
                let cause = if self.sync_rep_notice.load(Ordering::Relaxed) {
                    "; the commit was waiting for a synchronous standby to confirm it: check \
                     synchronous_standby_names on the server (a promoted replica keeps it) and \
                     that a standby it names is connected"
                } else {
                    "; if it was a commit, a synchronous standby may not be confirming it \
                     (synchronous_standby_names)"
                };
                let closed = if closed {
                    " and its connection closed (no answer to the cancel either)"
                } else {
                    ""
                };
                self.unavailable(format!(
                    "no answer within {} ms: the statement was cancelled{closed}{cause}",
                    self.patience().as_millis()
                ))
            }
        }
    }

    /// How long one request may take (see [`patience`]).
    fn patience(&self) -> Duration {
        patience(self.ttl)
    }
}

/// What a `tokio-postgres` error says. The crate's own text stops at "db error" or "error
/// connecting to server": the server's message and SQLSTATE, or the cause, are in its source.
pub(super) fn described(error: &tokio_postgres::Error) -> String {
    if let Some(db) = error.as_db_error() {
        return format!("{} {}: {}", db.severity(), db.code().code(), db.message());
    }
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}
