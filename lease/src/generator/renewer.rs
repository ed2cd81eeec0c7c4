//! The renewer: the renewal thread and what only it (and start and close) touch, the
//! coordinator behind its mutex; id calls only ask it for a reservation and wait a bounded time.

use super::stats::WaitTimer;
use super::{lock, Shared, ACTIVE, LOST, RENEWAL_WAIT};
use crate::clock::boot_ms;
use crate::holder::{Answer, Holder, Now, Reply, Turn};
use crate::{Coordinator, LeaseError};
use clockflake::Field;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// The coordinator and what only the renewal thread (and close) touch. Its mutex is held
/// during coordinator I/O: no id call ever takes it.
pub(super) struct Control {
    pub(super) coordinator: Box<dyn Coordinator>,
    /// The renewal decisions, and what the last persisted reservation covers.
    pub(super) holder: Holder,
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

/// The renewal thread: drives the lease's [`Holder`] (renewals on time, what id calls ask for,
/// the deadline) and follows the wall clock. It alone holds the coordinator's mutex during I/O
/// (besides `start` and `close`).
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
    // Lost (not closed, not a forked child's copy): a healing generator leases again. Told
    // last, after `exited`, so that closing this generator never waits for the hook.
    if let Some(on_lost) = &shared.on_lost {
        if shared.lifecycle.load(Ordering::Acquire) == LOST && !shared.is_forked() {
            let reason = lock(&shared.notes).lost_reason.clone().unwrap_or_default();
            on_lost(reason);
        }
    }
}

pub(super) fn renew_loop(shared: &Shared) {
    let look_ms = lock(&shared.control).holder.look_interval_ms();
    loop {
        {
            let mut signal = lock(&shared.signal);
            if !signal.kick && !signal.stop {
                signal = shared
                    .wake
                    .wait_timeout(signal, Duration::from_millis(look_ms))
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
        let mut control = lock(&shared.control);
        let now = Now {
            wall_ms: shared.wall_now(),
            boot_ms: boot_ms(),
            wanted_wall_ms: shared.wanted_wall_ms.load(Ordering::Acquire),
            reserved_wall_ms: shared.limits.reserved_wall_ms(),
            deadline_boot_ms: shared.limits.deadline_boot_ms(),
            clock_seq: shared.gen.state().clock_seq,
        };
        match control.holder.poll(now) {
            Turn::Lose => {
                drop(control);
                shared.lose_at_deadline();
                return;
            }
            Turn::Renew { from_wall_ms } => {
                if let Err(LeaseError::LeaseLost { .. }) =
                    shared.renew_locked(&mut control, from_wall_ms)
                {
                    return;
                }
            }
            Turn::Check => {
                if let Err(LeaseError::LeaseLost { reason }) = control.coordinator.check() {
                    shared.lose(reason);
                    return;
                }
            }
            // `renew_locked` has its answer before it returns: never in flight here.
            Turn::Await => {}
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

    /// Persists a reservation from `from_wall_ms` on (and renews the lease with it), then lets
    /// ids use it as the holder says. Called with the coordinator's mutex held, by the renewal
    /// thread.
    pub(super) fn renew_locked(
        &self,
        control: &mut Control,
        from_wall_ms: u64,
    ) -> Result<(), LeaseError> {
        let sent_boot_ms = boot_ms();
        let sent = (control.holder).send(self.gen.state(), from_wall_ms, sent_boot_ms);
        let result = control.coordinator.renew(&sent.renewal.state);
        let answered_boot_ms = boot_ms();
        let answer = match &result {
            Ok(()) => {
                self.counters.renewals.fetch_add(1, Ordering::Relaxed);
                if !sent.renewal.same_clock_seq {
                    self.counters
                        .clock_seq_switches
                        .fetch_add(1, Ordering::Relaxed);
                }
                lock(&self.notes).last_error = None;
                Answer::Renewed
            }
            Err(LeaseError::LeaseLost { .. }) => Answer::LeaseLost,
            Err(error) => {
                self.counters
                    .renewal_failures
                    .fetch_add(1, Ordering::Relaxed);
                lock(&self.notes).last_error = Some(error.to_string());
                Answer::Failed
            }
        };
        let active = self.lifecycle.load(Ordering::Acquire) == ACTIVE;
        match (control.holder).answered(sent.request, answer, answered_boot_ms, active) {
            Reply::Publish {
                renewed,
                deadline_moves,
            } => {
                let cs_bits = self.layout().place(Field::ClockSeq, renewed.clock_seq);
                (self.limits).publish(&renewed, cs_bits, deadline_moves);
                // Lost or closed between the check above and the publish: stop ids again.
                if self.lifecycle.load(Ordering::Acquire) != ACTIVE {
                    self.stop_ids();
                }
                let _signal = lock(&self.signal);
                self.renewed.notify_all();
                result
            }
            Reply::Lose => Err(self.lose(match result {
                Err(LeaseError::LeaseLost { reason }) => reason,
                Err(error) => error.to_string(),
                Ok(()) => String::new(),
            })),
            Reply::Nothing => result,
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
        let state = control.holder.released(self.gen.state(), exact);
        control.coordinator.release(Some(&state))
    }
}
