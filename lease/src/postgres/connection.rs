//! The connection: opened under the TLS settings, reopened once broken, every statement
//! bounded by the patience (the server's `statement_timeout` and the client's [`Watchdog`]),
//! and every error scrubbed of the password.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use postgres::Client;
use rustls::CertificateError;

use super::tls::{rustls_error, PgTls, SslMode};
use super::watchdog::Watchdog;
use super::PostgresCoordinator;
use crate::LeaseError;

impl PostgresCoordinator {
    /// A new connection under the TLS settings. Under `prefer`, a server that offers no TLS
    /// is used in plain text, and so (as libpq does) is one whose TLS handshake fails.
    fn connect(&mut self) -> Result<Client, LeaseError> {
        use postgres::config::SslMode as Wire;
        let tls = match &self.tls {
            Some(tls) => tls.clone(),
            None => PgTls::new(SslMode::Prefer, None).map_err(|error| self.unavailable(error))?,
        };
        let mut config = self.config.clone();
        let notice = Arc::clone(&self.sync_rep_notice);
        config.notice_callback(move |message| {
            if message.message().contains("synchronous replication") {
                notice.store(true, Ordering::Relaxed);
            }
        });
        self.cancel_tls = Some(tls.connector.clone());
        config.ssl_mode(match tls.mode {
            SslMode::Disable => Wire::Disable,
            SslMode::Prefer => Wire::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => Wire::Require,
        });
        match config.connect(tls.connector.clone()) {
            Ok(client) => Ok(client),
            Err(error) if tls.mode == SslMode::Prefer && rustls_error(&error).is_some() => {
                config.ssl_mode(Wire::Disable);
                config
                    .connect(tls.connector.clone())
                    .map_err(|error| self.connect_error(&tls, &error))
            }
            Err(error) => Err(self.connect_error(&tls, &error)),
        }
    }

    /// `COORDINATOR_UNAVAILABLE` for a failed connection, saying plainly when it was TLS: a
    /// server that offers none, or a certificate check (which one).
    fn connect_error(&self, tls: &PgTls, error: &postgres::Error) -> LeaseError {
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

    /// `COORDINATOR_UNAVAILABLE` with `error`'s text scrubbed of the password: the `postgres`
    /// crate's errors (and the server's) may echo connection settings.
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
        mut work: impl FnMut(&mut Client, &str) -> Result<T, postgres::Error>,
    ) -> Result<T, LeaseError> {
        if self.client.as_ref().is_none_or(|client| client.is_closed()) {
            self.client = None;
            let mut client = self.connect()?;
            let timeout_ms = self.patience().as_millis();
            client
                .batch_execute(&format!("SET statement_timeout = {timeout_ms}"))
                .map_err(|error| self.unavailable(described(&error)))?;
            self.client = Some(client);
        }
        let table = self.table.clone();
        let (patience, cancel_tls) = (self.patience(), self.cancel_tls.clone());
        let Some(client) = self.client.as_mut() else {
            return Err(self.unavailable("no connection"));
        };
        // statement_timeout does not end every wait: a commit waiting for a synchronous
        // standby ignores it. The client cancels whatever runs past the patience, and a
        // statement it had to cancel never counts, whatever the server answered: a commit
        // whose wait for the standby is cancelled reports success, unreplicated.
        self.sync_rep_notice.store(false, Ordering::Relaxed);
        let watchdog = Watchdog::arm(client.cancel_token(), cancel_tls, patience);
        let result = work(client, &table);
        if watchdog.fired() {
            self.client = None;
            let cause = if self.sync_rep_notice.load(Ordering::Relaxed) {
                "; the commit was waiting for a synchronous standby to confirm it: check \
                 synchronous_standby_names on the server (a promoted replica keeps it) and that \
                 a standby it names is connected"
            } else {
                "; if it was a commit, a synchronous standby may not be confirming it \
                 (synchronous_standby_names)"
            };
            return Err(self.unavailable(format!(
                "no answer within {} ms: the statement was cancelled{cause}",
                patience.as_millis()
            )));
        }
        match result {
            Ok(value) => Ok(value),
            Err(error) => {
                if client.is_closed() {
                    self.client = None;
                }
                Err(self.unavailable(described(&error)))
            }
        }
    }

    /// How long one request may take: half the TTL (at least 200 ms), so that a renewal that
    /// fails still leaves time for another before the lease ends.
    fn patience(&self) -> Duration {
        (self.ttl / 2).max(Duration::from_millis(200))
    }
}

/// What a `postgres` error says. The crate's own text stops at "db error" or "error
/// connecting to server": the server's message and SQLSTATE, or the cause, are in its source.
pub(super) fn described(error: &postgres::Error) -> String {
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
