//! A connection and the statements sent on it, every wait bounded by the client itself: the
//! async client (`tokio_postgres`) driven on a one-thread runtime of the connection's own.
//!
//! The server's answers cannot be relied on to end a wait. A frozen server (SIGSTOP, a paused
//! VM, a process starved of CPU) still has its kernel accept connections and acknowledge
//! packets, so no socket timeout fires: the start-up exchange of a connection, a statement and
//! the cancel request sent for it all wait for as long as it is frozen. And a commit waiting
//! for a synchronous standby ignores `statement_timeout`. So a connection is given up after
//! its patience, and a statement past its patience is cancelled, given a little longer to
//! answer, then given up with its connection closed.

use std::future::{poll_fn, Future};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::runtime::Runtime;
use tokio::task::JoinHandle;
use tokio::time::timeout_at;
use tokio_postgres::types::ToSql;
use tokio_postgres::{AsyncMessage, Client, Config, Error, Row};
use tokio_postgres_rustls::MakeRustlsConnect;

/// Why a connection or a statement failed.
#[derive(Debug)]
pub(super) enum Failure {
    /// The server's or the connection's error.
    Server(Error),
    /// No answer in time. For a statement: it was cancelled and never counts, whatever the
    /// server did with it (a commit whose wait for a standby is cancelled is committed
    /// locally, unreplicated).
    NoAnswer {
        /// The connection is closed (the statement did not answer its cancel either).
        closed: bool,
    },
    /// The connection's runtime could not be built.
    Runtime(std::io::Error),
}

impl From<Error> for Failure {
    fn from(error: Error) -> Failure {
        Failure::Server(error)
    }
}

/// How long one request (a connection, a statement) may take under `ttl`: half the TTL (at
/// least 200 ms), so that a renewal that fails still leaves time for another before the lease
/// ends.
pub(super) fn patience(ttl: Duration) -> Duration {
    (ttl / 2).max(Duration::from_millis(200))
}

/// How long a statement past its patience and cancelled still has to answer before its
/// connection is closed: a quarter of the TTL, at most a second.
fn grace(patience: Duration) -> Duration {
    (patience / 2).min(Duration::from_secs(1))
}

/// An open connection.
pub(super) struct Session {
    runtime: Runtime,
    client: Client,
    /// Reads the server's messages (answers, notices) while a statement runs.
    driver: JoinHandle<()>,
    /// The TLS settings of the connection, for its cancel requests.
    tls: MakeRustlsConnect,
    patience: Duration,
}

impl Session {
    /// Connects (TCP, TLS, the start-up exchange) within `within`, or gives up (`NoAnswer`);
    /// each statement then has `patience`. `sync_rep_notice` is set when the server warns that
    /// it cancelled a commit's wait for synchronous replication.
    pub(super) fn connect(
        config: &Config,
        tls: MakeRustlsConnect,
        within: Duration,
        patience: Duration,
        sync_rep_notice: Arc<AtomicBool>,
    ) -> Result<Session, Failure> {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .map_err(Failure::Runtime)?;
        let deadline = Instant::now() + within;
        let connecting = config.connect(tls.clone());
        let (client, mut connection) = runtime
            .block_on(async { timeout_at(deadline.into(), connecting).await })
            .map_err(|_| Failure::NoAnswer { closed: true })??;
        let driver = runtime.spawn(async move {
            while let Some(message) = poll_fn(|cx| connection.poll_message(cx)).await {
                match message {
                    Ok(AsyncMessage::Notice(notice))
                        if notice.message().contains("synchronous replication") =>
                    {
                        sync_rep_notice.store(true, Ordering::Relaxed);
                    }
                    Ok(_) => {}
                    Err(_) => break,
                }
            }
        });
        Ok(Session {
            runtime,
            client,
            driver,
            tls,
            patience,
        })
    }

    /// Whether the server closed the connection (or it broke).
    pub(super) fn is_closed(&self) -> bool {
        self.client.is_closed() || self.driver.is_finished()
    }

    /// What statements may be sent now: each within the patience from its start.
    pub(super) fn statements(&self) -> Statements<'_> {
        Statements { session: self }
    }

    /// `request`'s answer within the patience; past it, a cancel request and the grace to
    /// answer it (the cancel bounded by them too), then `NoAnswer`.
    fn bounded<T>(&self, request: impl Future<Output = Result<T, Error>>) -> Result<T, Failure> {
        let cancel_at = Instant::now() + self.patience;
        let give_up_at = cancel_at + grace(self.patience);
        let token = self.client.cancel_token();
        let tls = self.tls.clone();
        self.runtime.block_on(async move {
            let mut request = std::pin::pin!(request);
            if let Ok(answer) = timeout_at(cancel_at.into(), &mut request).await {
                return answer.map_err(Failure::Server);
            }
            let _ = timeout_at(give_up_at.into(), token.cancel_query(tls)).await;
            let answered = timeout_at(give_up_at.into(), request).await.is_ok();
            Err(Failure::NoAnswer { closed: !answered })
        })
    }
}

impl Drop for Session {
    /// Closes the socket: a statement given up must not be answered on a later one's behalf.
    fn drop(&mut self) {
        self.driver.abort();
    }
}

/// The statements of one piece of work on a [`Session`], each bounded (see
/// [`Session::bounded`]).
pub(super) struct Statements<'a> {
    session: &'a Session,
}

impl Statements<'_> {
    pub(super) fn execute(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, Failure> {
        let client = &self.session.client;
        self.session.bounded(client.execute(sql, params))
    }

    pub(super) fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Failure> {
        let client = &self.session.client;
        self.session.bounded(client.query(sql, params))
    }

    pub(super) fn query_one(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, Failure> {
        let client = &self.session.client;
        self.session.bounded(client.query_one(sql, params))
    }

    /// Statements without parameters, in one request (`BEGIN`, `COMMIT`, the schema).
    pub(super) fn batch_execute(&self, sql: &str) -> Result<(), Failure> {
        let client = &self.session.client;
        self.session.bounded(client.batch_execute(sql))
    }
}

#[cfg(test)]
mod tests {
    use std::net::TcpListener;
    use std::time::{Duration, Instant};

    use clockflake::Layout;

    use crate::{open, LeaseOptions};

    /// A server whose kernel accepts the connection but which never answers (a frozen or
    /// starved one; here a socket that listens and never reads): `open` gives up after the
    /// patience (half the TTL) with `COORDINATOR_UNAVAILABLE`. It waited for ever: only the
    /// TCP connect had a timeout.
    #[test]
    fn open_gives_up_on_a_server_that_accepts_and_never_answers() {
        let silent = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = silent.local_addr().unwrap().port();
        let uri = format!("postgres://me@127.0.0.1:{port}/db?app=silent&ttl=1s&sslmode=disable");
        let (sender, receiver) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let started = Instant::now();
            let result = open(&uri, Layout::CLOCKSEQ, LeaseOptions::default())
                .map(|gen| gen.worker_id())
                .map_err(|error| (error.code(), error.to_string()));
            let _ = sender.send((result, started.elapsed()));
        });
        let (result, took) = receiver
            .recv_timeout(Duration::from_secs(10))
            .expect("open() still waiting after 10 s");
        let (code, message) = result.expect_err("a lease from a silent server");
        assert_eq!(code, "COORDINATOR_UNAVAILABLE", "{message}");
        assert!(message.contains("no answer within 500 ms"), "{message}");
        assert!(took < Duration::from_secs(3), "open() took {took:?}");
        drop(silent);
    }
}
