//! The lease worker: a background worker that takes the server's worker id from the
//! coordinator `clockflake.lease` names (any URI `clockflake_lease::connect` takes:
//! `file://`, `postgres://`, `redis://`, `zookeeper://`, `etcd://`, `k8s://`, `env://`), resumes core's
//! generator from the lease's state record into shared memory (shared.rs), and drives the
//! lease's production state machine, `clockflake_lease::holder::Holder`, as the Rust renewal
//! thread (lease/src/generator/renewer.rs) and the simulator drive it: the Holder decides when
//! to renew, what each renewal reserves, the deadline, and when the lease is lost; this loop
//! only does the coordinator's I/O, sleeps on its latch, and writes what the Holder publishes
//! to the slot's limits in shared memory.
//!
//! Start-up is clockflake-lease's `start_lease`, the driver of the same start-up machine
//! (`holder::Start`) the leased generator starts with: the grant, the clock check, the
//! worker's record resumed, the first reservation, the grant's own deadline.
//!
//! Healing: a lost lease (the Holder at its deadline, the coordinator saying so, the cheap
//! check) stops its slot at once and publishes "no lease"; backends refuse with a retryable
//! error meanwhile, never waiting. The worker gives the lost worker id back untouched and
//! leases again at once, then after each failure with clockflake-lease's back-off
//! (`holder::Backoff`, the healing generator's), perhaps under another worker id; the new
//! generator goes into another slot and a new generation (shared.rs). The same loop takes the
//! first lease, so a coordinator down at server start is waited for the same way.
//!
//! Threads: coordinators may run threads of their own (tokio's, for `postgres://`,
//! `zookeeper://` and `etcd://`), in this process only, never in a backend; none of them calls into
//! PostgreSQL (clockflake-lease does not link it). Every call into clockflake-lease runs with
//! every signal blocked in this thread ([`unsignalled`]), so that a thread it starts inherits
//! a mask that blocks them all and PostgreSQL's signal handlers only ever run on this one.
//!
//! It starts once the server is out of recovery (a standby leases nothing until promoted).
//! SIGTERM (a shutdown, or an operator) stops ids, gives the worker id back with the stored
//! record and exits 0: the postmaster does not start it again before a server restart. An
//! exit on an error leaves backends refusing as while healing, and the postmaster starts the
//! worker again after 5 s, which leases again.

use std::time::Duration;

use clockflake::{Field, Layout, Options};
use clockflake_lease::holder::{Answer, Backoff, Holder, Now, Reply, Started, Turn};
use clockflake_lease::{boot_ms, Coordinator, LeaseError};
use pgrx::bgworkers::{
    BackgroundWorker, BackgroundWorkerBuilder, BgWorkerStartTime, SignalWakeFlags,
};
use pgrx::prelude::*;

use crate::shared::{Shared, Slot, HEALING, STOPPED};

/// How soon the postmaster starts the worker again after it exited on an error.
const RESTART_AFTER: Duration = Duration::from_secs(5);

/// Registers the worker (from `_PG_init`, in the postmaster).
pub fn register() {
    BackgroundWorkerBuilder::new("clockflake lease")
        .set_type("clockflake lease")
        .set_library("clockflake")
        .set_function("clockflake_lease_worker_main")
        .enable_shmem_access(None)
        .set_start_time(BgWorkerStartTime::RecoveryFinished)
        .set_restart_time(Some(RESTART_AFTER))
        .load();
}

/// The URI schemes `clockflake_lease::connect` takes, checked in the postmaster at start
/// (the rest of the URI is read by the worker: reading it may connect).
pub const SCHEMES: [&str; 10] = [
    "file",
    "postgres",
    "postgresql",
    "redis",
    "rediss",
    "zookeeper",
    "etcd",
    "etcds",
    "k8s",
    "env",
];

/// Runs `call` (a call into clockflake-lease) with every signal blocked in this thread, then
/// restores the mask: threads the call starts inherit the blocked mask, so that no signal of
/// PostgreSQL's is ever handled on them; one sent meanwhile waits for this thread.
fn unsignalled<T>(call: impl FnOnce() -> T) -> T {
    // SAFETY: plain calls on this thread's signal mask, with valid pointers to local sets.
    unsafe {
        let mut all: libc::sigset_t = std::mem::zeroed();
        let mut before: libc::sigset_t = std::mem::zeroed();
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_BLOCK, &all, &mut before);
        let made = call();
        libc::pthread_sigmask(libc::SIG_SETMASK, &before, std::ptr::null_mut());
        made
    }
}

/// One lease: its coordinator, the Holder driving it, and its slot in shared memory.
struct Lease {
    coordinator: Box<dyn Coordinator>,
    holder: Holder,
    slot: usize,
    worker_id: u64,
    /// The last renewal's error, for the reason of a loss at the deadline.
    last_error: Option<String>,
}

/// Why a lease ended.
enum Ended {
    Lost(String),
    Shutdown,
}

impl Lease {
    /// Takes a worker id, resumes the generator from its record, persists the first
    /// reservation and installs both in a free slot.
    fn start(shared: &Shared, layout: Layout, uri: &str) -> Result<Lease, LeaseError> {
        let (mut coordinator, reserve) = unsignalled(|| clockflake_lease::connect(uri))?;
        shared.coordinator.set(&coordinator.redacted_uri());
        // Nothing ahead of the clock (core's default policy, clock sequences): see shared.rs.
        let started = unsignalled(|| {
            clockflake_lease::start_lease(
                coordinator.as_mut(),
                layout,
                Options::default(),
                reserve,
                || shared.now_ms(),
            )
        })?;
        let limits = started.limits();
        let Started {
            generator,
            holder,
            worker_id,
            deadline_boot_ms,
            ..
        } = started;
        // A slot no backend reads: one is free unless backends paused inside calls hold
        // every other (then a moment later, within the lease's deadline).
        let slot = loop {
            if let Some(slot) = shared.free_slot() {
                break slot;
            }
            if !BackgroundWorker::wait_latch(Some(Duration::from_millis(10)))
                || boot_ms() >= deadline_boot_ms
            {
                let _ = unsignalled(|| coordinator.release(None));
                return Err(LeaseError::CoordinatorUnavailable {
                    coordinator: coordinator.redacted_uri(),
                    reason: "every generator slot still has a backend inside a call".into(),
                });
            }
        };
        shared.install(slot, generator, &limits);
        log!(
            "clockflake: leased worker id {worker_id} from {} (reservations of {} ms)",
            coordinator.redacted_uri(),
            holder.terms().reserve_ms
        );
        Ok(Lease {
            holder,
            coordinator,
            slot,
            worker_id,
            last_error: None,
        })
    }

    /// Drives the Holder until the lease is lost or the worker is told to stop.
    fn run(&mut self, shared: &Shared) -> Ended {
        let look = Duration::from_millis(self.holder.look_interval_ms());
        let slot: &Slot = shared.slot(self.slot);
        let generator = slot.generator();
        let layout = *generator.layout();
        loop {
            if !BackgroundWorker::wait_latch(Some(look)) {
                return Ended::Shutdown;
            }
            let now = Now {
                boot_ms: boot_ms(),
                wall_ms: shared.now_ms(),
                wanted_wall_ms: shared.wanted_wall_ms(),
                deadline_boot_ms: slot.limits().deadline_boot_ms(),
                reserved_wall_ms: slot.limits().reserved_wall_ms(),
                clock_seq: generator.state().clock_seq,
            };
            match self.holder.poll(now) {
                Turn::Lose => {
                    return Ended::Lost(match &self.last_error {
                        Some(error) => {
                            format!("no renewal before the lease deadline (last error: {error})")
                        }
                        None => "no renewal before the lease deadline".to_owned(),
                    })
                }
                Turn::Renew { from_wall_ms } => {
                    let sent = self.holder.send(generator.state(), from_wall_ms, boot_ms());
                    let result = unsignalled(|| self.coordinator.renew(&sent.renewal.state));
                    let answer = match &result {
                        Ok(()) => {
                            self.last_error = None;
                            Answer::Renewed
                        }
                        Err(LeaseError::LeaseLost { .. }) => Answer::LeaseLost,
                        Err(error) => {
                            self.last_error = Some(error.to_string());
                            Answer::Failed
                        }
                    };
                    match self.holder.answered(sent.request, answer, boot_ms(), true) {
                        Reply::Publish {
                            renewed,
                            deadline_moves,
                        } => {
                            let cs_bits = layout.place(Field::ClockSeq, renewed.clock_seq);
                            slot.limits().publish(&renewed, cs_bits, deadline_moves);
                        }
                        Reply::Lose => {
                            return Ended::Lost(match result {
                                Err(LeaseError::LeaseLost { reason }) => reason,
                                Err(error) => error.to_string(),
                                Ok(()) => String::new(),
                            })
                        }
                        Reply::Nothing => {
                            if let Err(error) = result {
                                warning!("clockflake: renewal failed, retrying: {error}");
                            }
                        }
                    }
                }
                Turn::Check => {
                    if let Err(LeaseError::LeaseLost { reason }) =
                        unsignalled(|| self.coordinator.check())
                    {
                        return Ended::Lost(reason);
                    }
                }
                // Renewals here are answered before `send` returns: never in flight.
                Turn::Await => {}
            }
        }
    }

    /// Gives the worker id back at shutdown, with the record (the reservation kept: a backend
    /// may be between its check and its id).
    fn release(mut self, shared: &Shared) {
        let state = self
            .holder
            .released(shared.slot(self.slot).generator().state(), false);
        if let Err(error) = unsignalled(|| self.coordinator.release(Some(&state))) {
            warning!("clockflake: releasing the worker id failed: {error}");
        }
        unsignalled(|| drop(self.coordinator));
    }

    /// Gives a lost lease's worker id back untouched (the coordinator keeps whatever record it
    /// last stored).
    fn abandon(mut self) {
        let _ = unsignalled(|| self.coordinator.release(None));
        unsignalled(|| drop(self.coordinator));
    }
}

/// At this process's exit any way but a crash (an ERROR, SIGTERM): no lease from now on, and
/// no latch to set. After SIGTERM the worker gave its worker id back (stopped); after an error
/// the postmaster starts the worker again, which heals.
#[pg_guard]
unsafe extern "C-unwind" fn at_exit(_code: std::ffi::c_int, _arg: pg_sys::Datum) {
    let shared = crate::SHARED.get();
    shared.set_worker_latch(0);
    let state = if BackgroundWorker::sigterm_received() || shared.state() == STOPPED {
        STOPPED
    } else {
        HEALING
    };
    shared.drop_lease(state);
}

#[pg_guard]
#[unsafe(no_mangle)]
pub extern "C-unwind" fn clockflake_lease_worker_main(_arg: pg_sys::Datum) {
    BackgroundWorker::attach_signal_handlers(SignalWakeFlags::SIGHUP | SignalWakeFlags::SIGTERM);
    let shared = crate::SHARED.get();
    // SAFETY: registering a callback PostgreSQL runs at this process's exit.
    unsafe { pg_sys::before_shmem_exit(Some(at_exit), pg_sys::Datum::from(0usize)) };
    let Some((layout, uri)) = crate::lease_config() else {
        return;
    };
    // SAFETY: MyLatch is this process's latch in its PGPROC (shared memory), set once the
    // process started.
    shared.set_worker_latch(unsafe { pg_sys::MyLatch } as usize);
    // A worker started again after an error: whatever lease its predecessor held is stopped
    // (its process is gone, and with it a file lock; a TTL lease expires).
    if shared.current_slot().is_some() {
        shared.drop_lease(HEALING);
    }
    let mut backoff = Backoff::new();
    loop {
        match Lease::start(shared, layout, &uri) {
            Ok(mut lease) => {
                backoff.succeeded();
                shared.set_retry_at_ms(0);
                if shared.losses.load(std::sync::atomic::Ordering::Relaxed) > 0 {
                    shared
                        .heals
                        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                }
                match lease.run(shared) {
                    Ended::Shutdown => {
                        // Ids stop first, then the worker id goes back with the record, which
                        // covers every id handed out.
                        shared.drop_lease(STOPPED);
                        lease.release(shared);
                        return;
                    }
                    Ended::Lost(reason) => {
                        shared.drop_lease(HEALING);
                        shared
                            .losses
                            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                        shared.last_loss.set(&reason);
                        warning!(
                            "clockflake: the lease on worker id {} is lost ({reason}); ids \
                             are refused while the worker leases again",
                            lease.worker_id
                        );
                        lease.abandon();
                        continue;
                    }
                }
            }
            Err(error) => {
                shared.set_problem(&error);
                shared
                    .failed_attempts
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let pause = backoff.failed();
                let retry_in_ms = u64::try_from(pause.as_millis()).unwrap_or(u64::MAX);
                shared.set_retry_at_ms(clockflake_lease::wall_ms() + retry_in_ms);
                warning!(
                    "clockflake: no worker id leased, trying again in {retry_in_ms} ms: {}: \
                     {error}",
                    error.code()
                );
                if !BackgroundWorker::wait_latch(Some(pause)) {
                    shared.drop_lease(STOPPED);
                    return;
                }
                shared.set_retry_at_ms(0);
            }
        }
    }
}
