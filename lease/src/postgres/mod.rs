//! The distributed coordinator: `postgres://USER@HOST:PORT/DB?app=NAME&ttl=10s`.
//!
//! One row per (application, worker id) in a table created if missing (see [`SCHEMA`]). A
//! lease is a row whose `owner` is set and whose `expires_at`, on the server's clock, is in
//! the future. Grant and renewal are single conditional `UPDATE`s: a renewal matches only
//! `owner = $me AND epoch = $mine AND expires_at > now()`, and zero rows means the lease is
//! gone. Row leases, not advisory locks: they survive connection poolers and reconnects.
//!
//! TLS ([`SslMode`], `sslrootcert=`) as libpq means it, with rustls (the `ring` provider).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use clockflake::{Error, Layout, State, MAX_CLOCK_SEQS};
use postgres::error::SqlState;
use postgres::{CancelToken, Client, Config, Row};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::coordinator::{preference_order, Coordinator, Grant};
use crate::LeaseError;

pub(crate) mod uri;

/// `sslmode=` of a `postgres://` URI, as libpq spells and means it.
///
/// | mode | encrypted | certificate checked |
/// |---|---|---|
/// | `disable` | never | - |
/// | `prefer` (default) | if the server offers TLS, else plain | only with `sslrootcert` (as `verify-ca`) |
/// | `require` | always: refused if the server offers no TLS | only with `sslrootcert` (as `verify-ca`) |
/// | `verify-ca` | always | chain against `sslrootcert` |
/// | `verify-full` | always | chain against `sslrootcert`, and the host name |
///
/// Without `sslrootcert`, `~/.postgresql/root.crt` is used when it exists (libpq's default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum SslMode {
    /// No TLS.
    Disable,
    /// TLS if the server offers it (and plain if the TLS handshake fails, as libpq does).
    #[default]
    Prefer,
    /// TLS or nothing, without checking the certificate (unless `sslrootcert` is given).
    Require,
    /// TLS, with the certificate chain checked against `sslrootcert`.
    VerifyCa,
    /// TLS, with the certificate chain and the host name checked.
    VerifyFull,
}

impl SslMode {
    /// The mode libpq spells `text`.
    pub fn parse(text: &str) -> Option<SslMode> {
        Some(match text {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            _ => return None,
        })
    }

    /// As libpq spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }
}

/// The TLS settings of a `postgres://` coordinator: [`SslMode`] and the CA certificates.
#[derive(Clone)]
pub(crate) struct PgTls {
    mode: SslMode,
    root_cert: Option<PathBuf>,
    connector: MakeRustlsConnect,
}

impl std::fmt::Debug for PgTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgTls")
            .field("mode", &self.mode)
            .field("root_cert", &self.root_cert)
            .finish_non_exhaustive()
    }
}

/// How far a certificate is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Check {
    /// Encryption only (the handshake's signatures are still checked).
    Nothing,
    /// The chain against the CA certificates.
    Chain,
    /// The chain and the host name.
    Full,
}

impl PgTls {
    /// The settings for `mode`, with the CA certificates of `root_cert` (a PEM file): given,
    /// or `~/.postgresql/root.crt` if it exists. The error says what is wrong, for
    /// `INVALID_URI`.
    pub fn new(mode: SslMode, root_cert: Option<&Path>) -> Result<PgTls, String> {
        let root_cert = match root_cert {
            Some(path) if path == Path::new("system") => {
                return Err("sslrootcert=system is not supported: give the CA file (PEM)".into())
            }
            Some(path) => Some(path.to_owned()),
            None => std::env::var_os("HOME")
                .map(|home| PathBuf::from(home).join(".postgresql/root.crt"))
                .filter(|path| path.is_file()),
        };
        let check = match (mode, &root_cert) {
            (SslMode::VerifyCa | SslMode::VerifyFull, None) => {
                return Err(format!(
                    "sslmode={} checks the server's certificate: give sslrootcert=FILE (the CA \
                     certificates, PEM)",
                    mode.as_str()
                ))
            }
            (SslMode::VerifyFull, Some(_)) => Check::Full,
            (SslMode::Disable, _) | (SslMode::Prefer | SslMode::Require, None) => Check::Nothing,
            (_, Some(_)) => Check::Chain,
        };
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let algorithms = provider.signature_verification_algorithms;
        let builder = rustls::ClientConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(|error| format!("TLS: {error}"))?;
        let webpki = match (&root_cert, check) {
            (Some(path), Check::Chain | Check::Full) => {
                let mut roots = RootCertStore::empty();
                let certs = CertificateDer::pem_file_iter(path)
                    .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                    .map_err(|error| {
                        format!("sslrootcert {}: cannot read it: {error}", path.display())
                    })?;
                let (added, _) = roots.add_parsable_certificates(certs);
                if added == 0 {
                    return Err(format!(
                        "sslrootcert {}: no CA certificate in it (expected PEM)",
                        path.display()
                    ));
                }
                let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                    .build()
                    .map_err(|error| format!("sslrootcert {}: {error}", path.display()))?;
                Some(webpki)
            }
            _ => None,
        };
        let check = if webpki.is_some() {
            check
        } else {
            Check::Nothing
        };
        let config = builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(Verifier {
                webpki,
                check,
                algorithms,
            }))
            .with_no_client_auth();
        Ok(PgTls {
            mode,
            root_cert: root_cert.filter(|_| check != Check::Nothing),
            connector: MakeRustlsConnect::new(config),
        })
    }
}

/// The certificate check of [`Check`]: webpki's, with the host-name part left out for
/// `verify-ca`, or none at all.
#[derive(Debug)]
struct Verifier {
    webpki: Option<Arc<WebPkiServerVerifier>>,
    check: Check,
    algorithms: rustls::crypto::WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(webpki) = self
            .webpki
            .as_ref()
            .filter(|_| self.check != Check::Nothing)
        else {
            return Ok(ServerCertVerified::assertion());
        };
        match webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if self.check == Check::Chain => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// Cancels the statements under way on a connection once the work has run for `patience`,
/// from a thread of its own (the connection's thread is blocked reading the answer).
struct Watchdog {
    /// Set when the statement ended; with the condition variable that wakes the thread.
    ended: Arc<(Mutex<bool>, Condvar)>,
    fired: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    fn arm(token: CancelToken, tls: Option<MakeRustlsConnect>, patience: Duration) -> Watchdog {
        let ended = Arc::new((Mutex::new(false), Condvar::new()));
        let fired = Arc::new(AtomicBool::new(false));
        let thread = {
            let (ended, fired) = (Arc::clone(&ended), Arc::clone(&fired));
            std::thread::Builder::new()
                .name("clockflake-pg-watchdog".into())
                .spawn(move || {
                    let (lock, wake) = &*ended;
                    let mut wait = patience;
                    loop {
                        let guard = lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
                        let (guard, _) = wake
                            .wait_timeout_while(guard, wait, |ended| !*ended)
                            .unwrap_or_else(|poisoned| poisoned.into_inner());
                        if *guard {
                            return;
                        }
                        fired.store(true, Ordering::Release);
                        drop(guard);
                        // Bounded by the connect timeout (the patience too). Again every
                        // 100 ms: the work may go on to another statement that waits too.
                        let _ = match &tls {
                            Some(tls) => token.cancel_query(tls.clone()),
                            None => token.cancel_query(postgres::NoTls),
                        };
                        wait = Duration::from_millis(100);
                    }
                })
                .ok()
        };
        Watchdog {
            ended,
            fired,
            thread,
        }
    }

    /// Ends the watch; whether the statement had to be cancelled.
    fn fired(mut self) -> bool {
        let (lock, wake) = &*self.ended;
        *lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = true;
        wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.fired.load(Ordering::Acquire)
    }
}

/// The rustls error somewhere in `error`'s chain (tokio-rustls wraps it in an `io::Error`,
/// whose `source()` skips it).
fn rustls_error<'a>(error: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut next = Some(error);
    while let Some(error) = next {
        if let Some(found) = error.downcast_ref::<rustls::Error>() {
            return Some(found);
        }
        if let Some(found) = error
            .downcast_ref::<std::io::Error>()
            .and_then(|io| io.get_ref())
            .and_then(|inner| inner.downcast_ref::<rustls::Error>())
        {
            return Some(found);
        }
        next = error.source();
    }
    None
}

/// The table, created if missing (`{table}` is replaced by the `table=` parameter,
/// `clockflake_leases` by default).
pub const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS {table} (
    app                text        NOT NULL,
    worker_id          integer     NOT NULL,
    owner              text,
    epoch              bigint      NOT NULL DEFAULT 0,
    expires_at         timestamptz,
    layout_fingerprint bigint,
    clock_seq          integer,
    high_water_ms      bigint[],
    updated_at         timestamptz NOT NULL DEFAULT now(),
    timeline           bigint,
    PRIMARY KEY (app, worker_id)
)";

/// The server's WAL timeline: 1 on a new cluster, one more at every promotion of a replica.
/// Every grant and renewal records it in the row; only a primary can say
/// (`pg_current_wal_lsn` fails on a standby, which refuses writes anyway).
const TIMELINE: &str =
    "('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::bigint";

/// A row last written on an earlier timeline than the server's: this server was promoted
/// since, and its copy of the row may miss writes the old primary acknowledged (an
/// asynchronous replica promoted while behind). A NULL timeline is a row written before
/// this column existed: read as current.
fn stale() -> String {
    format!("(timeline IS NOT NULL AND timeline < {TIMELINE})")
}

/// The state part of a grant's SET list (in a `SET` list every column reads its value
/// before the update).
///
/// A stale row (see [`stale`]): every clock sequence's mark is raised to at least the
/// server's clock plus `$5` ms (the first `$7`, the layout's clock sequences), the longest a lost renewal (or a lost grant to someone else)
/// could have let its holder go on issuing ids, so that the new holder issues none at or
/// below any the old one could have. A stale row never granted in this copy (`epoch` 0) may
/// have been granted on the old primary: it gets this layout's fingerprint (`$6`) and the
/// raised marks. A row whose marks are NULL though granted before stays so (refused as
/// `INVALID_STATE`).
///
/// Any other row at its first grant (`epoch` 0) gets an empty state record, so that from
/// then on NULL columns can only mean marks that were lost (a row reset by hand, a careless
/// migration), which is refused (`INVALID_STATE`) instead of read as "never used".
fn granted_marks() -> String {
    let stale = stale();
    format!(
        "layout_fingerprint = CASE WHEN {stale} AND epoch = 0 THEN $6 \
             WHEN epoch = 0 THEN 0 ELSE layout_fingerprint END, \
         clock_seq = CASE WHEN epoch = 0 THEN 0 ELSE clock_seq END, \
         high_water_ms = CASE \
             WHEN {stale} AND (epoch = 0 OR high_water_ms IS NOT NULL) THEN ARRAY( \
                 SELECT CASE WHEN n <= $7 \
                     THEN GREATEST(mark, floor(extract(epoch FROM now()) * 1000)::bigint + $5) END \
                 FROM unnest(coalesce(high_water_ms, \
                     array_fill(NULL::bigint, ARRAY[{MAX_CLOCK_SEQS}]))) \
                     WITH ORDINALITY AS marks(mark, n) ORDER BY n) \
             WHEN epoch = 0 THEN array_fill(NULL::bigint, ARRAY[{MAX_CLOCK_SEQS}]) \
             ELSE high_water_ms END, \
         timeline = {TIMELINE}"
    )
}

/// Worker ids from row leases in PostgreSQL.
pub struct PostgresCoordinator {
    config: Config,
    redacted_uri: String,
    client: Option<Client>,
    table: String,
    app: String,
    owner: String,
    ttl: Duration,
    held: Option<(u64, i64)>,
    schema_ready: bool,
    /// `None`: `sslmode=prefer` without `sslrootcert`, built at the first connection.
    tls: Option<PgTls>,
    max_skew: Option<Duration>,
    /// The TLS settings of the connection, for its cancel requests.
    cancel_tls: Option<MakeRustlsConnect>,
    /// Set when the server warns that it cancelled a wait for synchronous replication.
    sync_rep_notice: Arc<AtomicBool>,
}

impl std::fmt::Debug for PostgresCoordinator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PostgresCoordinator")
            .field("coordinator", &self.redacted_uri)
            .field("owner", &self.owner)
            .field("held", &self.held)
            .finish_non_exhaustive()
    }
}

impl PostgresCoordinator {
    /// A coordinator for `app` on the server `config` points to. Connects lazily.
    pub fn new(
        mut config: Config,
        redacted_uri: String,
        table: &str,
        app: &str,
        ttl: Duration,
        owner: String,
    ) -> PostgresCoordinator {
        // A dead server must not hold a renewal past the lease: bound every wait by the TTL.
        let patience = (ttl / 2).max(Duration::from_millis(200));
        config.connect_timeout(patience);
        config.tcp_user_timeout(patience);
        if config.get_application_name().is_none() {
            config.application_name("clockflake-lease");
        }
        PostgresCoordinator {
            config,
            redacted_uri,
            client: None,
            table: table.to_owned(),
            app: app.to_owned(),
            owner,
            ttl,
            held: None,
            schema_ready: false,
            tls: None,
            max_skew: Some(crate::coordinator::DEFAULT_MAX_SKEW),
            cancel_tls: None,
            sync_rep_notice: Arc::default(),
        }
    }

    /// Connects with these TLS settings (`sslmode`, `sslrootcert`) instead of libpq's default
    /// (`prefer`).
    pub(crate) fn with_tls(mut self, tls: PgTls) -> PostgresCoordinator {
        self.tls = Some(tls);
        self
    }

    /// The start-up clock check's bound (`max_skew`; `None`: off); 5 s by default.
    pub fn with_max_skew(mut self, max_skew: Option<Duration>) -> PostgresCoordinator {
        self.max_skew = max_skew;
        self
    }

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
        let text = error.to_string();
        let mut chain = text.clone();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            chain.push_str(&format!(": {cause}"));
            source = cause.source();
        }
        let reason = if chain.contains("server does not support TLS") {
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

    /// How far past the server's clock a grant raises the marks of a stale row (see
    /// [`granted_marks`]), ms: the TTL (the longest a lost renewal extended a lease) and
    /// twice `max_skew` (the old primary's clock against this one's, each within `max_skew`
    /// of the holders'; 5 s when the check is off).
    fn fence_ms(&self) -> u64 {
        let skew = self
            .max_skew
            .unwrap_or(crate::coordinator::DEFAULT_MAX_SKEW);
        crate::protocol::failover::fence_ms(self.ttl, skew)
    }

    /// The owner token this coordinator writes into the rows it holds.
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// `COORDINATOR_UNAVAILABLE` with `error`'s text scrubbed of the password: the `postgres`
    /// crate's errors (and the server's) may echo connection settings.
    fn unavailable(&self, error: impl std::fmt::Display) -> LeaseError {
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
    fn with_client<T>(
        &mut self,
        mut work: impl FnMut(&mut Client, &str) -> Result<T, postgres::Error>,
    ) -> Result<T, LeaseError> {
        if self.client.as_ref().is_none_or(|client| client.is_closed()) {
            self.client = None;
            let mut client = self.connect()?;
            let timeout_ms = self.patience().as_millis();
            client
                .batch_execute(&format!("SET statement_timeout = {timeout_ms}"))
                .map_err(|error| self.unavailable(error))?;
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
                Err(self.unavailable(error))
            }
        }
    }

    /// How long one request may take: half the TTL (at least 200 ms), so that a renewal that
    /// fails still leaves time for another before the lease ends.
    fn patience(&self) -> Duration {
        (self.ttl / 2).max(Duration::from_millis(200))
    }

    fn ensure_schema(&mut self, layout: &Layout) -> Result<(), LeaseError> {
        if self.schema_ready {
            return Ok(());
        }
        let app = self.app.clone();
        let max = i32::try_from(layout.max_worker_id()).unwrap_or(i32::MAX);
        self.with_client(|client, table| {
            let create = SCHEMA.replace("{table}", table);
            match client.batch_execute(&create) {
                Ok(()) => {}
                // Two clients creating the table at once: the loser sees the winner's type.
                Err(error)
                    if error.code() == Some(&SqlState::UNIQUE_VIOLATION)
                        || error.code() == Some(&SqlState::DUPLICATE_TABLE) => {}
                Err(error) => return Err(error),
            }
            // Tables made before the timeline column (rows without one read as current).
            client.batch_execute(&format!(
                "ALTER TABLE {table} ADD COLUMN IF NOT EXISTS timeline bigint"
            ))?;
            client.execute(
                &format!(
                    "INSERT INTO {table} (app, worker_id, timeline) \
                     SELECT $1, g, {TIMELINE} FROM generate_series(0, $2::integer) AS g \
                     ON CONFLICT DO NOTHING"
                ),
                &[&app, &max],
            )?;
            Ok(())
        })?;
        self.schema_ready = true;
        Ok(())
    }

    /// The record of a row; `leased_before`: the row was granted before the grant at hand
    /// (its first grant wrote an empty record, so all-NULL columns mean lost marks).
    fn state_of(
        &self,
        row: &Row,
        worker_id: u64,
        leased_before: bool,
    ) -> Result<Option<State>, LeaseError> {
        let location = format!(
            "{} table {} row (app={}, worker_id={worker_id})",
            self.redacted_uri, self.table, self.app
        );
        let fingerprint: Option<i64> = row.get("layout_fingerprint");
        let clock_seq: Option<i32> = row.get("clock_seq");
        let marks: Option<Vec<Option<i64>>> = row.get("high_water_ms");
        let (fingerprint, clock_seq, marks) =
            match (fingerprint, clock_seq, marks) {
                (None, None, None) if leased_before => {
                    return Err(LeaseError::corrupt(
                        location,
                        "the row was leased before (epoch > 0) but its state record is NULL: its \
                     high-water marks were lost (a reset or restored row?); see the README's \
                     restore procedure",
                    ))
                }
                (None, None, None) => return Ok(None),
                (Some(f), Some(c), Some(m)) => (f, c, m),
                _ => return Err(LeaseError::corrupt(
                    location,
                    "layout_fingerprint, clock_seq and high_water_ms must be all set or all NULL",
                )),
            };
        let clock_seq = u64::try_from(clock_seq).map_err(|_| {
            LeaseError::corrupt(location.clone(), format!("negative clock_seq {clock_seq}"))
        })?;
        if marks.len() != MAX_CLOCK_SEQS {
            return Err(LeaseError::corrupt(
                location,
                format!(
                    "high_water_ms: expected {MAX_CLOCK_SEQS} entries, found {}",
                    marks.len()
                ),
            ));
        }
        if fingerprint == 0 && marks.iter().all(Option::is_none) {
            // The empty record of a first grant (fingerprint 0): never used, any layout may
            // start here.
            return Ok(None);
        }
        let mut high_water_ms = [None; MAX_CLOCK_SEQS];
        for (slot, mark) in high_water_ms.iter_mut().zip(marks) {
            if let Some(ms) = mark {
                *slot = Some(u64::try_from(ms).map_err(|_| {
                    LeaseError::corrupt(location.clone(), format!("negative high-water mark {ms}"))
                })?);
            }
        }
        Ok(Some(State {
            // Stored as its two's-complement bit pattern (bigint is signed).
            layout_fingerprint: fingerprint as u64,
            worker_id,
            clock_seq,
            high_water_ms,
        }))
    }
}

fn marks_of(state: &State) -> Vec<Option<i64>> {
    state
        .high_water_ms
        .iter()
        .map(|mark| mark.map(|ms| i64::try_from(ms).unwrap_or(i64::MAX)))
        .collect()
}

impl Coordinator for PostgresCoordinator {
    fn redacted_uri(&self) -> String {
        self.redacted_uri.clone()
    }

    fn acquire(&mut self, layout: &Layout, now_ms: u64) -> Result<Grant, LeaseError> {
        if self.held.is_some() {
            return Err(self.unavailable("this coordinator already holds a lease"));
        }
        self.ensure_schema(layout)?;
        let (app, owner) = (self.app.clone(), self.owner.clone());
        let ttl_s = self.ttl.as_secs_f64();
        let max = i32::try_from(layout.max_worker_id()).unwrap_or(i32::MAX);
        const FREE: &str = "(owner IS NULL OR expires_at IS NULL OR expires_at <= now())";
        // How many free rows are read to find one whose record is usable at once.
        const CANDIDATES: usize = 256;
        // The lowest free worker ids and their records, tried in `preference_order`.
        let stale = stale();
        let listed = self.with_client(|client, table| {
            client.query(
                &format!(
                    "SELECT worker_id, epoch, layout_fingerprint, clock_seq, high_water_ms, \
                         {stale} AS stale \
                     FROM {table} \
                     WHERE app = $1 AND worker_id <= $2 AND {FREE} \
                     ORDER BY worker_id LIMIT {CANDIDATES}"
                ),
                &[&app, &max],
            )
        })?;
        // A stale row is usable only once its raised marks pass (see `granted_marks`).
        let fence_ms = self.fence_ms();
        let order: Vec<i32> = preference_order(
            layout,
            now_ms,
            listed.iter().map(|row| {
                let worker: i32 = row.get("worker_id");
                let leased_before = row.get::<_, i64>("epoch") > 0;
                let state = self.state_of(row, u64::try_from(worker).unwrap_or(0), leased_before);
                let state = match state {
                    Ok(state) if row.get::<_, bool>("stale") => {
                        Ok(Some(crate::protocol::failover::fenced(
                            layout,
                            state,
                            now_ms.saturating_add(fence_ms),
                        )))
                    }
                    other => other,
                };
                (worker, state)
            }),
        );
        // One statement: the first candidate nobody else is taking right now (SKIP LOCKED),
        // taken only if it is still free when locked. If every candidate went to others
        // meanwhile, the lowest free row, as one statement too.
        let fence_ms = i64::try_from(fence_ms).unwrap_or(i64::MAX);
        let fingerprint = layout.fingerprint() as i64;
        let clock_seqs = layout.clock_seqs() as i64;
        let rows = self.with_client(|client, table| {
            let marks = granted_marks();
            let grant = |filter: &str, order: &str| {
                format!(
                    "UPDATE {table} SET owner = $2, epoch = epoch + 1, \
                         expires_at = now() + $3::float8 * interval '1 second', updated_at = now(), \
                         {marks} \
                     WHERE app = $1 AND worker_id = ( \
                         SELECT worker_id FROM {table} WHERE app = $1 AND {filter} AND {FREE} \
                         ORDER BY {order} LIMIT 1 FOR UPDATE SKIP LOCKED) \
                       AND {FREE} \
                     RETURNING worker_id, epoch, layout_fingerprint, clock_seq, high_water_ms"
                )
            };
            let preferred = client.query(
                &grant("worker_id = ANY($4)", "array_position($4, worker_id)"),
                &[&app, &owner, &ttl_s, &order, &fence_ms, &fingerprint, &clock_seqs],
            )?;
            if !preferred.is_empty() {
                return Ok(preferred);
            }
            client.query(
                &grant("worker_id <= $4", "worker_id"),
                &[&app, &owner, &ttl_s, &max, &fence_ms, &fingerprint, &clock_seqs],
            )
        })?;
        let Some(row) = rows.first() else {
            return Err(LeaseError::Core(Error::WorkerPoolExhausted {
                workers: layout.max_worker_id() + 1,
            }));
        };
        let worker_id: i32 = row.get("worker_id");
        let worker_id = u64::try_from(worker_id).unwrap_or(0);
        let epoch: i64 = row.get("epoch");
        self.held = Some((worker_id, epoch));
        let state = self.state_of(row, worker_id, epoch > 1);
        let ttl = self.ttl;
        Grant::or_release(self, worker_id, state, ttl)
    }

    fn renew(&mut self, state: &State) -> Result<(), LeaseError> {
        let Some((worker_id, epoch)) = self.held else {
            return Err(LeaseError::lost("this coordinator holds no lease"));
        };
        let (app, owner) = (self.app.clone(), self.owner.clone());
        let ttl_s = self.ttl.as_secs_f64();
        let worker = worker_id as i32;
        let fingerprint = state.layout_fingerprint as i64;
        let clock_seq = state.clock_seq as i32;
        let marks = marks_of(state);
        // A lease granted before a promotion is not renewed: the old primary may have
        // acknowledged writes this server never saw (see `stale`).
        let stale = stale();
        let updated = self.with_client(|client, table| {
            client.execute(
                &format!(
                    "UPDATE {table} SET expires_at = now() + $5::float8 * interval '1 second', \
                         layout_fingerprint = $6, clock_seq = $7, high_water_ms = $8, \
                         updated_at = now(), timeline = {TIMELINE} \
                     WHERE app = $1 AND worker_id = $2 AND owner = $3 AND epoch = $4 \
                       AND expires_at > now() AND NOT {stale}"
                ),
                &[
                    &app,
                    &worker,
                    &owner,
                    &epoch,
                    &ttl_s,
                    &fingerprint,
                    &clock_seq,
                    &marks,
                ],
            )
        })?;
        LeaseError::unless_renewed(updated == 1, &mut self.held, worker_id, epoch)
    }

    fn release(&mut self, state: Option<&State>) -> Result<(), LeaseError> {
        let Some((worker_id, epoch)) = self.held.take() else {
            return Ok(());
        };
        let (app, owner) = (self.app.clone(), self.owner.clone());
        let worker = worker_id as i32;
        match state {
            Some(state) => {
                let fingerprint = state.layout_fingerprint as i64;
                let clock_seq = state.clock_seq as i32;
                let marks = marks_of(state);
                self.with_client(|client, table| {
                    client.execute(
                        &format!(
                            "UPDATE {table} SET owner = NULL, expires_at = NULL, \
                                 layout_fingerprint = $5, clock_seq = $6, high_water_ms = $7, \
                                 updated_at = now() \
                             WHERE app = $1 AND worker_id = $2 AND owner = $3 AND epoch = $4"
                        ),
                        &[
                            &app,
                            &worker,
                            &owner,
                            &epoch,
                            &fingerprint,
                            &clock_seq,
                            &marks,
                        ],
                    )
                })?;
            }
            None => {
                self.with_client(|client, table| {
                    client.execute(
                        &format!(
                            "UPDATE {table} SET owner = NULL, expires_at = NULL, updated_at = now() \
                             WHERE app = $1 AND worker_id = $2 AND owner = $3 AND epoch = $4"
                        ),
                        &[&app, &worker, &owner, &epoch],
                    )
                })?;
            }
        }
        Ok(())
    }

    /// PostgreSQL's `clock_timestamp()`: one statement on the grant's connection.
    fn server_time_ms(&mut self) -> Result<Option<u64>, LeaseError> {
        let row = self.with_client(|client, _| {
            client.query_one(
                "SELECT floor(extract(epoch FROM clock_timestamp()) * 1000)::bigint",
                &[],
            )
        })?;
        let ms: i64 = row.get(0);
        Ok(u64::try_from(ms).ok())
    }

    fn max_skew(&self) -> Option<Duration> {
        self.max_skew
    }

    fn read_state(&mut self, worker_id: u64) -> Result<Option<State>, LeaseError> {
        let app = self.app.clone();
        let worker = i32::try_from(worker_id).unwrap_or(i32::MAX);
        let rows = self.with_client(|client, table| {
            client.query(
                &format!(
                    "SELECT epoch, layout_fingerprint, clock_seq, high_water_ms FROM {table} \
                     WHERE app = $1 AND worker_id = $2"
                ),
                &[&app, &worker],
            )
        })?;
        match rows.first() {
            Some(row) => self.state_of(row, worker_id, row.get::<_, i64>("epoch") > 0),
            None => Ok(None),
        }
    }
}
