//! The client's own deadline on a statement, kept by a thread: the server's
//! `statement_timeout` does not end every wait (see `connection.rs`).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use postgres::CancelToken;
use tokio_postgres_rustls::MakeRustlsConnect;

/// Cancels the statements under way on a connection once the work has run for `patience`,
/// from a thread of its own (the connection's thread is blocked reading the answer).
pub(super) struct Watchdog {
    /// Set when the statement ended; with the condition variable that wakes the thread.
    ended: Arc<(Mutex<bool>, Condvar)>,
    fired: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Watchdog {
    pub(super) fn arm(
        token: CancelToken,
        tls: Option<MakeRustlsConnect>,
        patience: Duration,
    ) -> Watchdog {
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
    pub(super) fn fired(mut self) -> bool {
        let (lock, wake) = &*self.ended;
        *lock.lock().unwrap_or_else(|poisoned| poisoned.into_inner()) = true;
        wake.notify_one();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
        self.fired.load(Ordering::Acquire)
    }
}
