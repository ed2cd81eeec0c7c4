//! The renewer: the renewal thread and what only it (and start and close) touch, the
//! coordinator behind its mutex; id calls only ask it for a reservation and wait a bounded time.

use super::stats::WaitTimer;
use super::{lock, Shared, ACTIVE, RENEWAL_WAIT};
use crate::clock::boot_ms;
use crate::protocol::Book;
use crate::{Coordinator, LeaseError};
use clockflake::Field;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// How often the renewal thread looks at the wall clock (to follow it forward or back), even
/// when no renewal is due.
pub(super) const LOOK_INTERVAL_MS: u64 = 100;

/// The coordinator and what only the renewal thread (and close) touch. Its mutex is held
/// during coordinator I/O: no id call ever takes it.
pub(super) struct Control {
    pub(super) coordinator: Box<dyn Coordinator>,
    /// What the last persisted reservation covers and when the lease was last renewed.
    pub(super) book: Book,
}

/// Words for people, behind a mutex never held across I/O.
#[derive(Default)]
pub(super) struct Notes {
    pub(super) lost_reason: Option<String>,
    pub(super) last_error: Option<String>,
}

/// Between id calls, `close` and the renewal thread; never held across I/O.
#[derive(Default)]
pub(super) struct Signal {
    /// Close asked the renewal thread to stop.
    pub(super) stop: bool,
    /// An id call asked for a renewal now.
    pub(super) kick: bool,
    /// The renewal thread has exited.
    pub(super) exited: bool,
    /// Close stopped waiting for a renewal in flight: the renewal thread releases the worker
    /// id itself when that renewal returns.
    pub(super) release_on_exit: bool,
}

/// The renewal thread: renews the lease and the reservation on time, persists what id calls
/// ask for, follows the wall clock, and finds the lease lost at its deadline. It alone holds
/// the coordinator's mutex during I/O (besides `start` and `close`).
pub(super) fn renew_thread(shared: &Shared) {
    renew_loop(shared);
    let mut signal = lock(&shared.signal);
    signal.exited = true;
    let release = signal.release_on_exit;
    shared.renewed.notify_all();
    drop(signal);
    if release {
        // `close` stopped waiting for this thread's last call: give the worker id back now,
        // keeping the reservation (ids may have been issued up to it).
        let mut control = lock(&shared.control);
        let was_active = lock(&shared.notes).lost_reason.is_none();
        let _ = shared.release(&mut control, was_active, false);
    }
}

pub(super) fn renew_loop(shared: &Shared) {
    let interval_ms = shared.terms.renew_interval_ms();
    let mut retry_boot_ms = 0;
    loop {
        {
            let mut signal = lock(&shared.signal);
            if !signal.kick && !signal.stop {
                signal = shared
                    .wake
                    .wait_timeout(
                        signal,
                        Duration::from_millis(LOOK_INTERVAL_MS.min(interval_ms)),
                    )
                    .map_or_else(|poisoned| poisoned.into_inner().0, |(guard, _)| guard);
            }
            if signal.stop {
                return;
            }
            signal.kick = false;
        }
        if shared.lifecycle.load(Ordering::Acquire) != ACTIVE || shared.is_forked() {
            return;
        }
        if shared.time.follow_wall_clock() {
            shared
                .counters
                .clock_steps_back
                .fetch_add(1, Ordering::Relaxed);
        }
        if boot_ms() >= shared.limits.deadline_boot_ms() {
            shared.lose_at_deadline();
            return;
        }
        let mut control = lock(&shared.control);
        let wall = shared.wall_now();
        let boot = boot_ms();
        let wanted = shared.wanted_wall_ms.load(Ordering::Acquire);
        let reserved = shared.limits.reserved_wall_ms();
        let clock_seq = shared.gen.state().clock_seq;
        let due = (control.book).due(
            &shared.terms,
            boot,
            wall,
            wanted,
            reserved,
            clock_seq,
            retry_boot_ms,
        );
        if !due {
            // Between renewals, the coordinator's own cheap check (a lock file removed).
            if let Err(LeaseError::LeaseLost { reason }) = control.coordinator.check() {
                shared.lose(reason);
                return;
            }
            continue;
        }
        match shared.renew_locked(&mut control, wall.max(wanted)) {
            Ok(()) => retry_boot_ms = 0,
            Err(LeaseError::LeaseLost { .. }) => return,
            // Unreachable coordinator: try again soon; ids go on until the deadline.
            Err(_) => retry_boot_ms = boot_ms() + (interval_ms / 4).max(5),
        }
    }
}

impl Shared {
    /// Asks the renewal thread for a reservation reaching `wanted_ms` (in the current clock
    /// sequence) and, when `wait`, waits at most [`RENEWAL_WAIT`] until `done` holds. Never
    /// takes the coordinator's mutex.
    pub(super) fn await_renewal(
        &self,
        wanted_ms: u64,
        wait: bool,
        done: impl Fn() -> bool,
    ) -> Result<(), LeaseError> {
        if done() {
            return Ok(());
        }
        self.wanted_wall_ms.fetch_max(wanted_ms, Ordering::AcqRel);
        let started = Instant::now();
        let _timer = wait.then(|| WaitTimer::new(&self.counters, started));
        let give_up = started + if wait { RENEWAL_WAIT } else { Duration::ZERO };
        let mut signal = lock(&self.signal);
        signal.kick = true;
        self.wake.notify_all();
        loop {
            if done() {
                return Ok(());
            }
            if signal.exited {
                drop(signal);
                self.check_alive()?;
                return Err(LeaseError::lost("the renewal thread has stopped"));
            }
            drop(signal);
            self.check_alive()?;
            if boot_ms() >= self.limits.deadline_boot_ms() {
                return Err(self.lose_at_deadline());
            }
            signal = lock(&self.signal);
            let now = Instant::now();
            if now >= give_up {
                break;
            }
            signal = self
                .renewed
                .wait_timeout(signal, give_up - now)
                .map_or_else(|poisoned| poisoned.into_inner().0, |(guard, _)| guard);
        }
        drop(signal);
        Err(LeaseError::RenewalLate {
            coordinator: self.redacted_uri.clone(),
            reserved_until_ms: self.limits.reserved_wall_ms(),
            last_error: lock(&self.notes).last_error.clone(),
            retry_at_ms: self.wall_now() + RENEWAL_WAIT.as_millis() as u64,
        })
    }

    /// Persists a reservation from `wall_ms` on (and renews the lease with it), then lets ids
    /// use it. Called with the coordinator's mutex held, by the renewal thread (and once at
    /// start). A reservation never shrinks within one clock sequence; in a new clock sequence
    /// (the time went back) it starts from `wall_ms`, so an excursion to the future does not
    /// mark the new clock sequence far ahead.
    pub(super) fn renew_locked(
        &self,
        control: &mut Control,
        wall_ms: u64,
    ) -> Result<(), LeaseError> {
        let sent_boot_ms = boot_ms();
        let renewal = control.book.renewal(&self.terms, self.gen.state(), wall_ms);
        match control.coordinator.renew(&renewal.state) {
            Ok(()) => {
                let renewed =
                    (control.book).renewed(&self.terms, &renewal, sent_boot_ms, boot_ms());
                self.counters.renewals.fetch_add(1, Ordering::Relaxed);
                if !renewed.same_clock_seq {
                    self.counters
                        .clock_seq_switches
                        .fetch_add(1, Ordering::Relaxed);
                }
                lock(&self.notes).last_error = None;
                if self.lifecycle.load(Ordering::Acquire) != ACTIVE {
                    // A late answer never revives a lease found lost (or closed) meanwhile.
                    return Ok(());
                }
                let cs_bits = self.layout().place(Field::ClockSeq, renewed.clock_seq);
                // Without a TTL the deadline never moves (and stays 0 once stopped).
                (self.limits).publish(&renewed, cs_bits, self.terms.ttl_ms.is_some());
                if self.lifecycle.load(Ordering::Acquire) != ACTIVE {
                    self.stop_ids();
                }
                let _signal = lock(&self.signal);
                self.renewed.notify_all();
                Ok(())
            }
            Err(LeaseError::LeaseLost { reason }) => Err(self.lose(reason)),
            Err(error) => {
                self.counters
                    .renewal_failures
                    .fetch_add(1, Ordering::Relaxed);
                lock(&self.notes).last_error = Some(error.to_string());
                Err(error)
            }
        }
    }

    /// Gives the worker id back: with the state (and, unless `exact`, the reservation, which
    /// covers a thread between its check and its id) when the lease was active, untouched
    /// when it was lost.
    pub(super) fn release(
        &self,
        control: &mut Control,
        was_active: bool,
        exact: bool,
    ) -> Result<(), LeaseError> {
        if !was_active {
            return control.coordinator.release(None);
        }
        let state = control.book.released(self.gen.state(), exact);
        control.coordinator.release(Some(&state))
    }
}
