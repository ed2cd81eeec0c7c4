//! A generator that heals: a lost lease is leased again in the background, a new worker id if
//! need be, while id calls refuse with a retryable error and a retry time.
//!
//! No second renewal loop: each lease is a [`LeasedGenerator`] whose renewal thread drives its
//! own [`crate::holder::Holder`], as for any lease. When that thread stops because the holder
//! (or the id path, or the coordinator) found the lease lost, it tells the healing generator
//! (the lease's `on_lost` hook, called once, after the thread has marked itself exited), which
//! starts one short-lived thread that gives the lost worker id back and leases again through
//! [`LeasedGenerator::start_with`] (a new holder, a new renewal thread), with the back-off of
//! the id service's supervisor: 100 ms, doubling, at most 5 s.
//!
//! Safety is the lost lease's own: it refuses every id from its deadline on, whatever this
//! module does, and a new lease continues above every id its worker id ever issued (the stored
//! record and the reservation), as every lease does.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError, RwLock, Weak};
use std::time::Duration;

use clockflake::Layout;

use crate::generator::LostHook;
use crate::holder::{Backoff, FIRST_BACKOFF};
use crate::{LeaseError, LeaseOptions, LeasedGenerator, TickGrant};

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// What a [`HealingGenerator`] has been through, for metrics and logs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct HealStats {
    /// `"active"`, `"healing"` (no lease: leasing again) or `"closed"`.
    pub state: &'static str,
    /// The worker id held now (`None` while healing or closed).
    pub worker_id: Option<u64>,
    /// Leases lost so far.
    pub losses: u64,
    /// Leases taken again after a loss.
    pub heals: u64,
    /// Failed attempts to lease again.
    pub failed_attempts: u64,
    /// Why the last lease was lost.
    pub last_loss: Option<String>,
    /// The last failed attempt's error.
    pub last_error: Option<String>,
}

/// What a [`HealingGenerator`] tells the callback of [`HealingGenerator::open_with_events`]
/// (for a log line or a metric), from the thread where it happened, never with a lock held.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum HealEvent {
    /// The lease was lost: ids are refused until a new one is held.
    Lost {
        /// The worker id it held (`None`: a lease lost before it was installed).
        worker_id: Option<u64>,
        /// Why.
        reason: String,
    },
    /// An attempt to lease again failed; the next one starts after `retry_in`.
    AttemptFailed {
        /// The attempt's error.
        error: LeaseError,
        /// The back-off before the next attempt.
        retry_in: Duration,
    },
    /// A new lease is held: ids again.
    Healed {
        /// The worker id now held (perhaps another than before).
        worker_id: u64,
    },
}

/// What [`HealingGenerator::grant_ticks`] grants: the ticks, and the lease they are under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeaseGrant {
    /// Which lease granted them: 1 for the first, one more for each lease taken since.
    pub lease_number: u64,
    /// That lease's worker id: the ids of the ticks carry it.
    pub worker_id: u64,
    /// The ticks ([`LeasedGenerator::grant_ticks`]).
    pub ticks: TickGrant,
}

/// The callback of [`HealingGenerator::open_with_events`].
type OnEvent = Box<dyn Fn(&HealEvent) + Send + Sync>;

#[derive(Default)]
struct Notes {
    healing: bool,
    /// A lease this healing took was lost before it was installed: lease again.
    lost_while_healing: bool,
    closed: bool,
    losses: u64,
    heals: u64,
    failed_attempts: u64,
    last_loss: Option<String>,
    last_error: Option<String>,
    /// When the next attempt starts, Unix ms (0: one is under way, or none is due).
    next_attempt_ms: u64,
    /// The counters of the leases given up so far (lost, then closed).
    retired: crate::LeaseCounters,
}

struct Healing {
    uri: String,
    layout: Layout,
    options: LeaseOptions,
    redacted_uri: String,
    current: RwLock<Option<Arc<LeasedGenerator>>>,
    /// How many leases have been installed in `current` (changed only with its write lock
    /// held, so that a reader holding the read lock sees the number of the lease it reads).
    installs: AtomicU64,
    notes: Mutex<Notes>,
    /// Wakes the healing thread's back-off (close).
    wake: Condvar,
    on_event: Option<OnEvent>,
}

/// A leased generator that re-leases after losing its lease (see the module's docs).
/// Share it between threads by reference (or `Arc`).
///
/// ```no_run
/// use clockflake::Layout;
/// use clockflake_lease::{HealingGenerator, LeaseOptions};
/// let ids = HealingGenerator::open(
///     "postgres://app@db/ids?app=orders&ttl=10s",
///     Layout::CLOCKSEQ,
///     LeaseOptions::default(),
/// )?;
/// match ids.next_id() {
///     Ok(id) => println!("{id}"),
///     // COORDINATOR_UNAVAILABLE while it leases again: retry at error.retry_at_ms().
///     Err(error) => eprintln!("{} (retry at {:?})", error, error.retry_at_ms()),
/// }
/// ids.close()?;
/// # Ok::<(), clockflake_lease::LeaseError>(())
/// ```
pub struct HealingGenerator {
    healing: Arc<Healing>,
}

impl std::fmt::Debug for HealingGenerator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HealingGenerator")
            .field("coordinator", &self.healing.redacted_uri)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl HealingGenerator {
    /// Leases a worker id as [`crate::open`] does (and fails as it does); from then on, a lost
    /// lease is leased again in the background.
    pub fn open(
        uri: &str,
        layout: Layout,
        options: LeaseOptions,
    ) -> Result<HealingGenerator, LeaseError> {
        Self::open_inner(uri, layout, options, None)
    }

    /// [`HealingGenerator::open`], telling `on_event` when a lease is lost, an attempt to lease
    /// again fails, and a new lease is held. It runs on the thread where that happened (the
    /// lease's renewal thread, the healing thread) with no lock held: keep it short.
    pub fn open_with_events(
        uri: &str,
        layout: Layout,
        options: LeaseOptions,
        on_event: impl Fn(&HealEvent) + Send + Sync + 'static,
    ) -> Result<HealingGenerator, LeaseError> {
        Self::open_inner(uri, layout, options, Some(Box::new(on_event)))
    }

    fn open_inner(
        uri: &str,
        layout: Layout,
        options: LeaseOptions,
        on_event: Option<OnEvent>,
    ) -> Result<HealingGenerator, LeaseError> {
        let healing = Arc::new(Healing {
            uri: uri.to_owned(),
            layout,
            options,
            redacted_uri: crate::redact(uri),
            current: RwLock::new(None),
            installs: AtomicU64::new(0),
            notes: Mutex::new(Notes::default()),
            wake: Condvar::new(),
            on_event,
        });
        let first = healing.lease()?;
        healing.install(Arc::new(first));
        Ok(HealingGenerator { healing })
    }

    /// The next id; while no lease is held (lost, leasing again) a retryable
    /// `COORDINATOR_UNAVAILABLE` ([`LeaseError::Healing`]) with the time to retry at. Never an
    /// id under a lost lease, never a wait for the coordinator.
    pub fn next_id(&self) -> Result<u64, LeaseError> {
        self.with_lease(LeasedGenerator::next_id)
    }

    /// [`HealingGenerator::next_id`], never waiting for the clock
    /// ([`LeasedGenerator::try_next_id`]): where it would wait, it refuses with the time to
    /// retry at.
    pub fn try_next_id(&self) -> Result<u64, LeaseError> {
        self.with_lease(LeasedGenerator::try_next_id)
    }

    /// [`HealingGenerator::next_id`] at an explicit time (Unix ms), for tests.
    pub fn next_id_at(&self, now_ms: u64) -> Result<u64, LeaseError> {
        self.with_lease(|gen| gen.next_id_at(now_ms))
    }

    /// Up to `max_count` ids of one tick ([`LeasedGenerator::next_block`]); while no lease is
    /// held, the retryable refusal of [`HealingGenerator::next_id`].
    pub fn next_block(&self, max_count: u64) -> Result<clockflake::IdBlock, LeaseError> {
        self.with_lease(|gen| gen.next_block(max_count))
    }

    /// The state of the lease held now ([`LeasedGenerator::state`]); while no lease is held,
    /// the retryable refusal of [`HealingGenerator::next_id`].
    pub fn state(&self) -> Result<clockflake::State, LeaseError> {
        self.with_lease(|gen| Ok(gen.state()))
    }

    /// The figures of the lease held now ([`LeasedGenerator::stats`]: renewals, waits,
    /// deadline); `None` while leasing again, or closed.
    pub fn lease_stats(&self) -> Option<crate::LeaseStats> {
        self.healing.read().as_ref().map(|gen| gen.stats())
    }

    /// The counters of every lease this generator has held (those lost and given back, and the
    /// one held now), so that totals survive leasing again.
    pub fn counters(&self) -> crate::LeaseCounters {
        let current = self.healing.read().as_ref().map(|gen| gen.stats().counters);
        let mut counters = lock(&self.healing.notes).retired;
        if let Some(current) = current {
            counters += current;
        }
        counters
    }

    /// [`HealingGenerator::next_block`], never waiting for the clock
    /// ([`LeasedGenerator::try_next_block`]).
    pub fn try_next_block(&self, max_count: u64) -> Result<clockflake::IdBlock, LeaseError> {
        self.with_lease(|gen| gen.try_next_block(max_count))
    }

    /// The time on the clock of the lease held ([`LeasedGenerator::now_ms`]), the system's
    /// wall clock while none is held: what retry times are to be compared with.
    pub fn now_ms(&self) -> u64 {
        self.healing
            .read()
            .as_ref()
            .map_or_else(crate::wall_ms, |gen| gen.now_ms())
    }

    /// The layout every lease of this generator uses.
    pub fn layout(&self) -> &Layout {
        &self.healing.layout
    }

    /// The options every lease of this generator is opened with.
    pub fn options(&self) -> &LeaseOptions {
        &self.healing.options
    }

    fn with_lease<T>(
        &self,
        call: impl FnOnce(&LeasedGenerator) -> Result<T, LeaseError>,
    ) -> Result<T, LeaseError> {
        let current = self.healing.read();
        let Some(gen) = current.as_ref() else {
            drop(current);
            return Err(self.healing.refusal());
        };
        match call(gen) {
            // In a copy of the process (a fork, a restored snapshot) the lease is the original's:
            // a copy never heals it, and refuses as every lease made before the copy does. (Its
            // renewal thread, if it still runs, may have found the lease stopped and called it
            // lost; the hook is not called in a copy.)
            Err(LeaseError::LeaseLost { .. }) if gen.is_copy() => {
                Err(LeaseError::Core(clockflake::Error::WorkerIdInvalidated))
            }
            Err(LeaseError::LeaseLost { .. }) => {
                drop(current);
                Err(self.healing.refusal())
            }
            other => other,
        }
    }

    /// [`LeasedGenerator::grant_ticks`] on the lease held now, for a binding that issues ids
    /// itself within the ticks a lease grants it (Node's), with that lease's number and worker
    /// id, read under the same lease. A grant being extended (`parked_id` not 0) under another
    /// lease than the one held now (`parked_under`, the number its grant came with) is not
    /// extended (`Ok(None)`): the binding drops it and asks anew, so that no grant outlives its
    /// lease, and a new lease's ticks are issued under the new lease's worker id. While no
    /// lease is held, the retryable refusal of [`HealingGenerator::next_id`].
    pub fn grant_ticks(
        &self,
        span_ms: u64,
        parked_id: u64,
        parked_under: u64,
    ) -> Result<Option<LeaseGrant>, LeaseError> {
        self.with_lease(|gen| {
            // The id path's read lock is held here: `installs` is the number of `gen`.
            let number = self.healing.installs.load(Ordering::Relaxed);
            if parked_id != 0 && parked_under != number {
                return Ok(None);
            }
            Ok(gen
                .grant_ticks(span_ms, parked_id)?
                .map(|ticks| LeaseGrant {
                    lease_number: number,
                    worker_id: gen.worker_id(),
                    ticks,
                }))
        })
    }

    /// The worker id held now (`None` while leasing again, or closed).
    pub fn worker_id(&self) -> Option<u64> {
        // One read of the lease: a lease found lost holds nothing, even before the healing
        // thread takes it out of the id path.
        self.healing
            .read()
            .as_ref()
            .filter(|gen| gen.is_active())
            .map(|gen| gen.worker_id())
    }

    /// [`HealingGenerator::worker_id`], or while no lease is held the retryable refusal of
    /// [`HealingGenerator::next_id`] (`GENERATOR_CLOSED` once closed). In a copy of the
    /// process (a fork, a restored snapshot), the worker id of the original's lease.
    pub fn held_worker_id(&self) -> Result<u64, LeaseError> {
        if let Some(worker_id) = self.worker_id() {
            return Ok(worker_id);
        }
        // In a copy of the process, the worker id of the original's lease, as a lease made
        // before a fork tells it.
        let current = self.healing.read();
        match current.as_ref().filter(|gen| gen.is_copy()) {
            Some(gen) => Ok(gen.worker_id()),
            None => Err(self.healing.refusal()),
        }
    }

    /// Whether ids can be issued now (a lease held and active).
    pub fn is_active(&self) -> bool {
        self.healing
            .read()
            .as_ref()
            .is_some_and(|gen| gen.is_active())
    }

    /// The coordinator, without any password.
    pub fn coordinator(&self) -> &str {
        &self.healing.redacted_uri
    }

    /// What happened so far: losses, heals, failed attempts and why.
    pub fn stats(&self) -> HealStats {
        // Active or not from the same read as the worker id: a lost lease shows as healing
        // with no worker id, never with the worker id it no longer holds.
        let current = self.healing.read().clone();
        let worker_id = current
            .as_ref()
            .filter(|gen| gen.is_active())
            .map(|gen| gen.worker_id());
        let active = worker_id.is_some();
        // A lease that stopped but is still the id path's: its renewal thread has not handed
        // the loss over yet (the healer records it), so its own reason is the last loss.
        let pending_loss = current
            .filter(|gen| !active && !gen.is_copy())
            .map(|gen| gen.loss_reason());
        let notes = lock(&self.healing.notes);
        HealStats {
            state: if notes.closed {
                "closed"
            } else if active {
                "active"
            } else {
                "healing"
            },
            worker_id,
            losses: notes.losses,
            heals: notes.heals,
            failed_attempts: notes.failed_attempts,
            last_loss: pending_loss.or_else(|| notes.last_loss.clone()),
            last_error: notes.last_error.clone(),
        }
    }

    /// Stops issuing ids and healing, and closes the lease held (storing its state and
    /// releasing its worker id). Idempotent.
    pub fn close(&self) -> Result<(), LeaseError> {
        {
            let mut notes = lock(&self.healing.notes);
            notes.closed = true;
            self.healing.wake.notify_all();
        }
        let held = self.healing.write().take();
        match held {
            Some(gen) => {
                let closed = gen.close();
                lock(&self.healing.notes).retired += gen.stats().counters;
                closed
            }
            None => Ok(()),
        }
    }
}

impl Drop for HealingGenerator {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

impl Healing {
    fn read(&self) -> std::sync::RwLockReadGuard<'_, Option<Arc<LeasedGenerator>>> {
        self.current.read().unwrap_or_else(PoisonError::into_inner)
    }

    fn write(&self) -> std::sync::RwLockWriteGuard<'_, Option<Arc<LeasedGenerator>>> {
        self.current.write().unwrap_or_else(PoisonError::into_inner)
    }

    /// Puts `gen` where the id path finds it, as the next lease by number.
    fn install(&self, gen: Arc<LeasedGenerator>) {
        let mut current = self.write();
        self.installs.fetch_add(1, Ordering::Relaxed);
        *current = Some(gen);
    }

    /// One lease, whose renewal thread tells this generator when it is lost.
    fn lease(self: &Arc<Self>) -> Result<LeasedGenerator, LeaseError> {
        let target = crate::uri::connect(&self.uri)?;
        let weak: Weak<Healing> = Arc::downgrade(self);
        let on_lost: LostHook = Box::new(move |reason| {
            if let Some(healing) = weak.upgrade() {
                healing.lost(reason);
            }
        });
        LeasedGenerator::start_with(
            target.coordinator,
            self.layout,
            self.options.clone(),
            target.reserve,
            Some(on_lost),
        )
    }

    /// The id path's refusal while no lease is held.
    fn refusal(&self) -> LeaseError {
        let notes = lock(&self.notes);
        if notes.closed {
            return LeaseError::Closed;
        }
        let now_ms = crate::wall_ms();
        let retry_at_ms = match notes.next_attempt_ms {
            0 => now_ms + FIRST_BACKOFF.as_millis() as u64,
            at => at.max(now_ms + 1),
        };
        LeaseError::Healing {
            coordinator: self.redacted_uri.clone(),
            lost: notes.last_loss.clone().unwrap_or_default(),
            last_error: notes.last_error.clone(),
            retry_at_ms,
        }
    }

    fn tell(&self, event: HealEvent) {
        if let Some(on_event) = &self.on_event {
            on_event(&event);
        }
    }

    /// Told by a lease's renewal thread that it was lost: one thread leases again.
    fn lost(self: &Arc<Self>, reason: String) {
        // The lost lease is still the id path's (the healing thread takes it out), unless it
        // was lost before it was installed.
        let worker_id = self.read().as_ref().map(|gen| gen.worker_id());
        let start = {
            let mut notes = lock(&self.notes);
            notes.losses += 1;
            notes.last_loss = Some(reason.clone());
            if notes.healing {
                notes.lost_while_healing = true;
            }
            let start = !notes.closed && !notes.healing;
            if start {
                notes.healing = true;
                notes.next_attempt_ms = 0;
            }
            start
        };
        let closed = lock(&self.notes).closed;
        if !closed {
            let worker_id = if start { worker_id } else { None };
            self.tell(HealEvent::Lost { worker_id, reason });
        }
        if !start {
            return;
        }
        let healing = Arc::clone(self);
        let spawned = std::thread::Builder::new()
            .name("clockflake-heal".to_owned())
            .spawn(move || healing.heal());
        if let Err(error) = spawned {
            let mut notes = lock(&self.notes);
            notes.healing = false;
            notes.last_error = Some(format!("could not start a thread to lease again: {error}"));
        }
    }

    /// Gives the lost lease back, then leases again until it works or the generator closes.
    fn heal(self: Arc<Self>) {
        // Out of the id path first (it refuses from here on), then closed: a lost lease gives
        // its worker id back untouched, within the coordinator's bounds.
        let lost = self.write().take();
        if let Some(lost) = lost {
            let _ = lost.close();
            lock(&self.notes).retired += lost.stats().counters;
        }
        let mut backoff = Backoff::new();
        loop {
            if lock(&self.notes).closed {
                break;
            }
            match self.lease() {
                Ok(gen) => {
                    let gen = Arc::new(gen);
                    let mut notes = lock(&self.notes);
                    if notes.closed {
                        drop(notes);
                        let _ = gen.close();
                        break;
                    }
                    self.install(gen);
                    if std::mem::take(&mut notes.lost_while_healing) {
                        // Lost before it was installed (its hook found this healing under
                        // way): give it back and lease again.
                        drop(notes);
                        if let Some(lost) = self.write().take() {
                            let _ = lost.close();
                        }
                        continue;
                    }
                    notes.heals += 1;
                    notes.healing = false;
                    notes.next_attempt_ms = 0;
                    drop(notes);
                    if let Some(worker_id) = self.read().as_ref().map(|gen| gen.worker_id()) {
                        self.tell(HealEvent::Healed { worker_id });
                    }
                    return;
                }
                Err(error) => {
                    let pause = backoff.failed();
                    self.tell(HealEvent::AttemptFailed {
                        error: error.clone(),
                        retry_in: pause,
                    });
                    let mut notes = lock(&self.notes);
                    notes.failed_attempts += 1;
                    notes.last_error = Some(error.to_string());
                    notes.next_attempt_ms = crate::wall_ms() + pause.as_millis() as u64;
                    let (notes_after, _) = self
                        .wake
                        .wait_timeout_while(notes, pause, |notes| !notes.closed)
                        .unwrap_or_else(PoisonError::into_inner);
                    let mut notes = notes_after;
                    notes.next_attempt_ms = 0;
                }
            }
        }
        lock(&self.notes).healing = false;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]

    use std::time::{Duration, Instant};

    use super::*;

    /// A grant of ticks never outlives its lease: after a heal, a grant being extended under
    /// the lost lease's number grants nothing, and a new grant comes with the new lease's
    /// number and worker id (Node's side resumes its generator from it). (The park rule,
    /// `holder::park`, refuses a park that is not the lease's own last id too.)
    #[test]
    fn a_grant_is_not_extended_under_another_lease() {
        let dir =
            std::env::temp_dir().join(format!("clockflake-heal-grant-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let uri = format!("file://{}?app=grant&reserve=10s", dir.display());
        // A park far ahead (within the reservation), still ahead of the clock after the heal.
        const SPAN_MS: u64 = 5_000;
        let gen = HealingGenerator::open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
        let first = gen.grant_ticks(SPAN_MS, 0, 0).unwrap().unwrap();
        assert_eq!((first.lease_number, first.worker_id), (1, 0));
        let parked = first.ticks.parked_id;
        assert_ne!(parked, 0);
        let extended = gen.grant_ticks(SPAN_MS, parked, 1).unwrap().unwrap();
        assert_eq!(extended.lease_number, 1);
        std::fs::remove_file(dir.join("grant").join("worker-0.lock")).unwrap();
        let newcomer = crate::open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
        let until = Instant::now() + Duration::from_secs(10);
        while gen.stats().heals == 0 {
            assert!(Instant::now() < until, "not healed: {:?}", gen.stats());
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(gen.grant_ticks(SPAN_MS, parked, 1).unwrap(), None);
        let second = gen.grant_ticks(SPAN_MS, 0, 0).unwrap().unwrap();
        assert_eq!((second.lease_number, second.worker_id), (2, 1));
        assert_eq!(
            gen.grant_ticks(SPAN_MS, second.ticks.parked_id, 2)
                .unwrap()
                .unwrap()
                .lease_number,
            2
        );
        gen.close().unwrap();
        assert!(matches!(
            gen.grant_ticks(SPAN_MS, 0, 0),
            Err(LeaseError::Closed)
        ));
        newcomer.close().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A `file://` lease whose lock file is removed (as an operator or a clean-up job might)
    /// is lost at its next renewal: the generator heals onto another worker id (a newcomer
    /// holds the old one), and its counters keep the lost lease's.
    #[test]
    fn counters_survive_a_heal() {
        let dir = std::env::temp_dir().join(format!("clockflake-heal-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let uri = format!("file://{}?app=heal", dir.display());
        let gen = HealingGenerator::open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
        assert_eq!(gen.worker_id(), Some(0));
        let mut ids: Vec<u64> = (0..1000).map(|_| gen.next_id().unwrap()).collect();
        let before = gen.counters();
        assert!(before.renewals >= 1, "{before:?}");
        std::fs::remove_file(dir.join("heal").join("worker-0.lock")).unwrap();
        let newcomer = crate::open(&uri, Layout::CLOCKSEQ, LeaseOptions::default()).unwrap();
        assert_eq!(newcomer.worker_id(), 0);
        let until = Instant::now() + Duration::from_secs(10);
        while gen.stats().heals == 0 {
            assert!(Instant::now() < until, "not healed: {:?}", gen.stats());
            if let Ok(id) = gen.next_id() {
                ids.push(id);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(gen.worker_id(), Some(1));
        ids.extend((0..1000).map(|_| gen.next_id().unwrap()));
        ids.extend((0..1000).map(|_| newcomer.next_id().unwrap()));
        let after = gen.counters();
        let held_now = gen.lease_stats().unwrap().counters;
        assert!(
            after.renewals >= before.renewals + held_now.renewals,
            "{before:?} then {after:?} (now held: {held_now:?})"
        );
        let stats = gen.stats();
        assert_eq!((stats.losses, stats.heals), (1, 1), "{stats:?}");
        let count = ids.len();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), count, "a duplicate id");
        gen.close().unwrap();
        newcomer.close().unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
