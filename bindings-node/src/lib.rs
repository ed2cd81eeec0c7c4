//! The native half of the npm package `clockflake`: leased generators (`Generator.open(uri)`),
//! napi-rs functions over the lease crate. Everything else (layouts, decoding, encoding, fixed
//! worker ids, public ids) runs on the wasm engine; this addon only builds the layout a lease
//! needs and serves the lease.
//!
//! These functions are internal. The public API is the hand-written JavaScript in `js/` (with
//! `index.d.ts`), which checks argument types and shapes, issues ids itself within the ticks
//! granted here (`leased_grant`, see js/leased.js), and turns the errors thrown here into
//! `Error`s with `.code` and `.retryAtMs`.
//!
//! Why free functions over `External`s rather than a `#[napi]` class: a class method call costs
//! several times a free function call.
//!
//! Every error thrown from here carries the core's stable code as `.code` (napi-rs sets `.code`
//! from the error's status string). The `retry_at_ms` of the last error thrown on this thread is
//! kept for `lastRetryAtMs()`, which the JavaScript side reads right after catching.

use std::cell::Cell;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use clockflake::{Error as CoreError, Field, Layout, Options, Policy};
use clockflake_lease::{
    HealEvent, HealStats, HealingGenerator, LeaseError, LeaseGrant, LeaseOptions, LeaseStats,
    LeasedGenerator,
};
use napi::bindgen_prelude::{BigInt, Either, External, Float64ArraySlice, Function, Object};
use napi::threadsafe_function::{
    ThreadsafeFunction, ThreadsafeFunctionCallMode, UnknownReturnValue,
};
use napi::{Env, Status};
use napi_derive::napi;

/// A napi error whose `.code` is the core's code (or one of this binding's argument codes).
type Result<T> = std::result::Result<T, napi::Error<&'static str>>;

/// Largest integer a JavaScript number holds exactly.
const MAX_SAFE: f64 = 9_007_199_254_740_991.0;

thread_local! {
    /// `retry_at_ms` of the last core error thrown on this thread (JS threads are OS threads).
    static LAST_RETRY_AT_MS: Cell<Option<u64>> = const { Cell::new(None) };
}

fn throw(error: CoreError) -> napi::Error<&'static str> {
    LAST_RETRY_AT_MS.with(|last| last.set(error.retry_at_ms()));
    napi::Error::new(error.code(), error.to_string())
}

fn core<T>(result: std::result::Result<T, CoreError>) -> Result<T> {
    result.map_err(throw)
}

/// An argument the JavaScript side should have checked already; kept as a second line of defence
/// so that no input can reach the core truncated or wrapped.
fn bad_value(message: String) -> napi::Error<&'static str> {
    LAST_RETRY_AT_MS.with(|last| last.set(None));
    napi::Error::new("INVALID_ARG_VALUE", message)
}

/// A JavaScript number that must be a non-negative safe integer.
fn whole(value: f64, what: &str) -> Result<u64> {
    if value.is_finite() && value.fract() == 0.0 && (0.0..=MAX_SAFE).contains(&value) {
        Ok(value as u64)
    } else {
        Err(bad_value(format!(
            "{what}: expected an integer 0..=2^53-1, found {value}"
        )))
    }
}

fn whole_u32(value: f64, what: &str) -> Result<u32> {
    let wide = whole(value, what)?;
    u32::try_from(wide).map_err(|_| {
        bad_value(format!(
            "{what}: expected an integer 0..=2^32-1, found {value}"
        ))
    })
}

/// A u64 that is known to be at most 2^53 - 1 (times and worker ids), as a JavaScript number.
fn number(value: u64) -> f64 {
    value as f64
}

// ---------------------------------------------------------------------------------------------
// Layouts

/// After a snapshot restore (JavaScript's `restored()`): every leased generator made before
/// refuses with `WORKER_ID_INVALIDATED`, as in a copy of the process.
#[napi(catch_unwind)]
pub fn restored() {
    clockflake_lease::fork::restored();
}

/// A preset layout by name (`UNKNOWN_LAYOUT` otherwise).
#[napi(catch_unwind)]
pub fn preset_layout(name: String) -> Result<External<Layout>> {
    core(Layout::by_name(&name)).map(External::new)
}

/// A custom layout from field names and widths, most significant first.
#[napi(catch_unwind)]
pub fn custom_layout(
    names: Vec<String>,
    bits: Vec<f64>,
    unit_ms: f64,
    epoch_ms: f64,
) -> Result<External<Layout>> {
    if names.len() != bits.len() {
        return Err(bad_value(
            "layout fields: names and widths differ in count".into(),
        ));
    }
    let mut fields = Vec::with_capacity(names.len());
    for (name, width) in names.iter().zip(bits) {
        let field = core(Field::from_name(name))?;
        fields.push((field, whole_u32(width, "layout field bits")?));
    }
    let unit_ms = whole(unit_ms, "layout unitMs")?;
    let epoch_ms = whole(epoch_ms, "layout epochMs")?;
    core(Layout::new(&fields, unit_ms, epoch_ms)).map(External::new)
}

/// Every code the core defines, then the codes only a lease can raise.
#[napi(catch_unwind)]
pub fn error_codes() -> Vec<&'static str> {
    let mut codes = CoreError::CODES.to_vec();
    codes.extend(LeaseError::CODES);
    codes
}

/// `retry_at_ms` of the last error thrown on this thread, or `null`.
#[napi(catch_unwind)]
pub fn last_retry_at_ms() -> Option<f64> {
    LAST_RETRY_AT_MS.with(Cell::get).map(number)
}

// ---------------------------------------------------------------------------------------------
// Options and state

fn options(
    policy: Option<String>,
    max_wait_ms: Option<f64>,
    max_drift_ms: Option<f64>,
) -> Result<Options> {
    let defaults = Options::default();
    Ok(Options {
        on_rollback: match policy {
            Some(name) => Some(core(Policy::from_name(&name))?),
            None => None,
        },
        max_wait_ms: match max_wait_ms {
            Some(ms) => whole(ms, "maxWaitMs")?,
            None => defaults.max_wait_ms,
        },
        max_drift_ms: match max_drift_ms {
            Some(ms) => whole(ms, "maxDriftMs")?,
            None => defaults.max_drift_ms,
        },
    })
}

/// The options in force, with the policy resolved.
#[napi(object, object_from_js = false)]
pub struct OptionsOut {
    pub on_rollback: String,
    pub max_wait_ms: f64,
    pub max_drift_ms: f64,
}

/// The generator's state, JSON-safe: the fingerprint as a decimal string.
#[napi(object, object_from_js = false)]
pub struct StateOut {
    pub layout_fingerprint: String,
    pub worker_id: f64,
    pub clock_seq: f64,
    pub high_water_ms: Vec<Option<f64>>,
}

// ---------------------------------------------------------------------------------------------
// Leased generators (Generator.open)
//
// JavaScript issues most ids itself within the ticks `leased_grant` hands it; the rest (a
// lease that grants nothing now, explicit times the grant cannot serve) come from
// `leased_next_id` and `leased_next_id_at`, checked like every id of the lease.

fn throw_lease(error: LeaseError) -> napi::Error<&'static str> {
    LAST_RETRY_AT_MS.with(|last| last.set(error.retry_at_ms()));
    napi::Error::new(error.code(), error.to_string())
}

fn lease<T>(result: std::result::Result<T, LeaseError>) -> Result<T> {
    result.map_err(throw_lease)
}

/// A leased generator, shared with the thread of an asynchronous close (`leased_close_async`).
type Lease = Arc<Held>;

/// What `Generator.open` holds: a lease that heals (the lease crate's `HealingGenerator`, the
/// default) or one lease that stays lost once lost (`heal: false`). Each call below is the
/// lease crate's; this only chooses which.
pub struct Held {
    kind: Kind,
    /// The worker id held when `close()` was called (`NONE`: none), which `workerId` keeps
    /// telling, as a closed lease does.
    closed_worker_id: AtomicU64,
    /// Where a healing generator's events go (`None`: nowhere, or closed).
    events: Events,
}

enum Kind {
    Once(LeasedGenerator),
    Healing(HealingGenerator),
}

/// `Held::closed_worker_id` before `close()`.
const NONE: u64 = u64::MAX;

impl Held {
    fn open(
        uri: &str,
        layout: Layout,
        options: LeaseOptions,
        heal: bool,
        events: Events,
    ) -> std::result::Result<Held, LeaseError> {
        let kind = if heal {
            let coordinator = clockflake_lease::redact(uri);
            let sink = Arc::clone(&events);
            Kind::Healing(HealingGenerator::open_with_events(
                uri,
                layout,
                options,
                move |event| tell(&sink, &coordinator, event),
            )?)
        } else {
            Kind::Once(clockflake_lease::open(uri, layout, options)?)
        };
        Ok(Held {
            kind,
            closed_worker_id: AtomicU64::new(NONE),
            events,
        })
    }

    fn next_id(&self) -> std::result::Result<u64, LeaseError> {
        match &self.kind {
            Kind::Once(gen) => gen.next_id(),
            Kind::Healing(gen) => gen.next_id(),
        }
    }

    fn next_id_at(&self, now_ms: u64) -> std::result::Result<u64, LeaseError> {
        match &self.kind {
            Kind::Once(gen) => gen.next_id_at(now_ms),
            Kind::Healing(gen) => gen.next_id_at(now_ms),
        }
    }

    fn grant_ticks(
        &self,
        span_ms: u64,
        parked_id: u64,
        parked_under: u64,
    ) -> std::result::Result<Option<LeaseGrant>, LeaseError> {
        match &self.kind {
            // One lease, number 1, for as long as it lives.
            Kind::Once(gen) => Ok(gen
                .grant_ticks(span_ms, parked_id)?
                .map(|ticks| LeaseGrant {
                    lease_number: 1,
                    worker_id: gen.worker_id(),
                    ticks,
                })),
            Kind::Healing(gen) => gen.grant_ticks(span_ms, parked_id, parked_under),
        }
    }

    /// The lease held now's figures (`None` while a healing generator leases again).
    fn lease_stats(&self) -> Option<LeaseStats> {
        match &self.kind {
            Kind::Once(gen) => Some(gen.stats()),
            Kind::Healing(gen) => gen.lease_stats(),
        }
    }

    /// The counters of every lease held (a healing generator's survive its heals).
    fn counters(&self) -> clockflake_lease::LeaseCounters {
        match &self.kind {
            Kind::Once(gen) => gen.stats().counters,
            Kind::Healing(gen) => gen.counters(),
        }
    }

    fn heal_stats(&self) -> Option<HealStats> {
        match &self.kind {
            Kind::Once(_) => None,
            Kind::Healing(gen) => Some(gen.stats()),
        }
    }

    /// The worker id held; while a healing generator leases again, its retryable refusal.
    fn worker_id(&self) -> std::result::Result<u64, LeaseError> {
        match self.closed_worker_id.load(Ordering::Acquire) {
            NONE => {}
            closed_with => return Ok(closed_with),
        }
        match &self.kind {
            Kind::Once(gen) => Ok(gen.worker_id()),
            Kind::Healing(gen) => gen.held_worker_id(),
        }
    }

    fn is_active(&self) -> bool {
        match &self.kind {
            Kind::Once(gen) => gen.is_active(),
            Kind::Healing(gen) => gen.is_active(),
        }
    }

    fn coordinator(&self) -> &str {
        match &self.kind {
            Kind::Once(gen) => gen.coordinator(),
            Kind::Healing(gen) => gen.coordinator(),
        }
    }

    fn state(&self) -> std::result::Result<clockflake::State, LeaseError> {
        match &self.kind {
            Kind::Once(gen) => Ok(gen.state()),
            Kind::Healing(gen) => gen.state(),
        }
    }

    fn layout(&self) -> &Layout {
        match &self.kind {
            Kind::Once(gen) => gen.layout(),
            Kind::Healing(gen) => gen.layout(),
        }
    }

    fn close(&self) -> std::result::Result<(), LeaseError> {
        // No event after close: the function goes (released from whichever thread this is).
        drop(
            self.events
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .take(),
        );
        let held = match &self.kind {
            Kind::Once(gen) => Some(gen.worker_id()),
            Kind::Healing(gen) => gen.worker_id(),
        };
        if let Some(worker_id) = held {
            let _ = self.closed_worker_id.compare_exchange(
                NONE,
                worker_id,
                Ordering::AcqRel,
                Ordering::Acquire,
            );
        }
        match &self.kind {
            Kind::Once(gen) => gen.close(),
            Kind::Healing(gen) => gen.close(),
        }
    }
}

/// What a healing generator tells JavaScript (js/leased.js makes it an event of the generator
/// and a `NODE_DEBUG=clockflake` line): `kind` is `"lost"` (`worker_id`, `reason`),
/// `"attemptFailed"` (`code`, `message`, `retry_at_ms` of the attempt's error, and
/// `retry_in_ms`, the pause before the next attempt) or `"healed"` (`worker_id`).
#[napi(object, object_from_js = false)]
pub struct HealEventOut {
    pub kind: String,
    /// The coordinator, without any password.
    pub coordinator: String,
    pub worker_id: Option<f64>,
    pub reason: Option<String>,
    pub code: Option<String>,
    pub message: Option<String>,
    pub retry_at_ms: Option<f64>,
    pub retry_in_ms: Option<f64>,
}

/// A JavaScript function called on the event loop from the lease's threads: weak (it never
/// keeps the event loop alive by itself), never blocking the caller (an unbounded queue).
type OnEvent =
    ThreadsafeFunction<HealEventOut, UnknownReturnValue, HealEventOut, Status, false, true>;

/// A healing generator's events' way to JavaScript, dropped (released) at close.
type Events = Arc<Mutex<Option<OnEvent>>>;

/// The events' way to `on_event` (none: `None`), made on the JavaScript thread.
fn events(on_event: Option<Function<HealEventOut, UnknownReturnValue>>) -> Result<Events> {
    let function = match on_event {
        Some(on_event) => Some(
            on_event
                .build_threadsafe_function::<HealEventOut>()
                .weak::<true>()
                .build()
                .map_err(|error| bad_value(format!("onEvent: {error}")))?,
        ),
        None => None,
    };
    Ok(Arc::new(Mutex::new(function)))
}

/// Queues `event` for JavaScript, from the thread where it happened (the lease crate holds no
/// lock meanwhile); dropped when nothing listens or the generator is closed.
fn tell(events: &Events, coordinator: &str, event: &HealEvent) {
    let out = |kind: &str| HealEventOut {
        kind: kind.to_owned(),
        coordinator: coordinator.to_owned(),
        worker_id: None,
        reason: None,
        code: None,
        message: None,
        retry_at_ms: None,
        retry_in_ms: None,
    };
    let out = match event {
        HealEvent::Lost { worker_id, reason } => HealEventOut {
            worker_id: worker_id.map(number),
            reason: Some(reason.clone()),
            ..out("lost")
        },
        HealEvent::AttemptFailed { error, retry_in } => HealEventOut {
            code: Some(error.code().to_owned()),
            message: Some(error.to_string()),
            retry_at_ms: error.retry_at_ms().map(number),
            retry_in_ms: Some(retry_in.as_millis() as f64),
            ..out("attemptFailed")
        },
        HealEvent::Healed { worker_id } => HealEventOut {
            worker_id: Some(number(*worker_id)),
            ..out("healed")
        },
        _ => return,
    };
    let slot = events.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(on_event) = slot.as_ref() {
        // Refused only while Node shuts the function down: nothing left to tell.
        let _ = on_event.call(out, ThreadsafeFunctionCallMode::NonBlocking);
    }
}

fn lease_options(
    policy: Option<String>,
    max_wait_ms: Option<f64>,
    max_drift_ms: Option<f64>,
    max_handover_wait_ms: Option<f64>,
) -> Result<LeaseOptions> {
    let mut lease_options = LeaseOptions {
        generator: options(policy, max_wait_ms, max_drift_ms)?,
        ..LeaseOptions::default()
    };
    if let Some(ms) = max_handover_wait_ms {
        lease_options.max_handover_wait = Duration::from_millis(whole(ms, "maxHandoverWaitMs")?);
    }
    Ok(lease_options)
}

/// Leases a worker id from the coordinator `uri` names and starts a generator under it, on
/// the calling thread (`Generator.openSync`).
#[napi(catch_unwind)]
// The options arrive from JavaScript one by one (see `open_leased_async`).
#[allow(clippy::too_many_arguments)]
pub fn open_leased(
    layout: &External<Layout>,
    uri: String,
    policy: Option<String>,
    max_wait_ms: Option<f64>,
    max_drift_ms: Option<f64>,
    max_handover_wait_ms: Option<f64>,
    heal: bool,
    on_event: Option<Function<HealEventOut, UnknownReturnValue>>,
) -> Result<External<Lease>> {
    let lease_options = lease_options(policy, max_wait_ms, max_drift_ms, max_handover_wait_ms)?;
    let events = events(on_event)?;
    lease(Held::open(&uri, **layout, lease_options, heal, events))
        .map(|generator| External::new(Arc::new(generator)))
}

/// What an asynchronous open or close settles with when it failed: the error's code, message
/// and retry time, which JavaScript throws as the synchronous calls' errors are thrown (a
/// promise rejected from here would carry napi's status as its code, and the thread-local
/// `lastRetryAtMs` is another thread's).
#[napi(object, object_from_js = false)]
pub struct LeaseFailure {
    pub code: String,
    pub message: String,
    pub retry_at_ms: Option<f64>,
}

fn failure(error: &LeaseError) -> LeaseFailure {
    LeaseFailure {
        code: error.code().to_owned(),
        message: error.to_string(),
        retry_at_ms: error.retry_at_ms().map(number),
    }
}

/// A panic on a thread of this addon (a bug: the lease crate refuses with typed errors) as a
/// coded failure, never an abort of the host.
fn panicked(uri: &str, what: &str) -> LeaseError {
    LeaseError::CoordinatorUnavailable {
        coordinator: clockflake_lease::redact(uri),
        reason: format!("internal error: {what} panicked (please report it)"),
    }
}

/// Runs `work` on a thread of its own and settles a promise with its outcome: off the event
/// loop, and off libuv's thread pool too (an open may wait for its coordinator up to
/// `maxHandoverWaitMs`, 15 s by default, and four such waits would hold every thread of the
/// pool that Node's file system, DNS and crypto calls share).
fn settle_on_thread<'env, T, V>(
    env: &'env Env,
    name: &str,
    uri: String,
    work: impl FnOnce() -> std::result::Result<T, LeaseError> + Send + 'static,
    value: impl FnOnce(T) -> V + Send + 'static,
) -> Result<Object<'env>>
where
    T: Send + 'static,
    V: napi::bindgen_prelude::ToNapiValue + 'static,
{
    let (deferred, promise) = env.create_deferred().map_err(|error| {
        throw_lease(LeaseError::CoordinatorUnavailable {
            coordinator: clockflake_lease::redact(&uri),
            reason: format!("could not make a promise: {error}"),
        })
    })?;
    let shown = clockflake_lease::redact(&uri);
    let what = name.to_owned();
    let spawned = std::thread::Builder::new()
        .name(format!("clockflake-{name}"))
        .spawn(move || {
            let outcome =
                catch_unwind(AssertUnwindSafe(work)).unwrap_or_else(|_| Err(panicked(&uri, &what)));
            // Settled on the JavaScript thread: only the outcome crosses threads.
            deferred.resolve(move |_env| {
                Ok(match outcome {
                    Ok(done) => Either::<V, LeaseFailure>::A(value(done)),
                    Err(error) => Either::B(failure(&error)),
                })
            });
        });
    if let Err(error) = spawned {
        return Err(throw_lease(LeaseError::CoordinatorUnavailable {
            coordinator: shown,
            reason: format!("could not start a thread: {error}"),
        }));
    }
    Ok(promise)
}

/// `Generator.open`: leases a worker id on a thread of its own. The promise resolves to the
/// lease, or to a `LeaseFailure` (never rejects, but for an argument refused here at once).
#[napi(
    catch_unwind,
    ts_return_type = "Promise<ExternalObject<Lease> | LeaseFailure>"
)]
// The options arrive from JavaScript one by one (a napi object would cost a conversion per
// field for nothing), beside the environment napi passes.
#[allow(clippy::too_many_arguments)]
pub fn open_leased_async<'env>(
    env: &'env Env,
    layout: &External<Layout>,
    uri: String,
    policy: Option<String>,
    max_wait_ms: Option<f64>,
    max_drift_ms: Option<f64>,
    max_handover_wait_ms: Option<f64>,
    heal: bool,
    on_event: Option<Function<HealEventOut, UnknownReturnValue>>,
) -> Result<Object<'env>> {
    let lease_options = lease_options(policy, max_wait_ms, max_drift_ms, max_handover_wait_ms)?;
    let events = events(on_event)?;
    let layout = **layout;
    let target = uri.clone();
    settle_on_thread(
        env,
        "open",
        uri,
        move || Held::open(&target, layout, lease_options, heal, events),
        |generator| External::new(Arc::new(generator)),
    )
}

/// The options a generator with these settings resolves to (the policy named), without making
/// one that issues ids.
#[napi(catch_unwind)]
pub fn resolve_options(
    layout: &External<Layout>,
    policy: Option<String>,
    max_wait_ms: Option<f64>,
    max_drift_ms: Option<f64>,
) -> Result<OptionsOut> {
    let options = options(policy, max_wait_ms, max_drift_ms)?;
    Ok(OptionsOut {
        on_rollback: options.policy_for(layout).name().into(),
        max_wait_ms: number(options.max_wait_ms),
        max_drift_ms: number(options.max_drift_ms),
    })
}

/// The next id of a leased generator, checked like every id (`LeasedGenerator::next_id`): what
/// JavaScript calls where no grant serves. Waits out a full tick and a handover.
#[napi(catch_unwind)]
pub fn leased_next_id(generator: &External<Lease>) -> Result<u64> {
    lease(generator.next_id())
}

/// Ticks handed to JavaScript (`LeasedGenerator::grant_ticks`, which decides the park): the
/// ticks between the lease's last id and the parked id are JavaScript's to issue, in the same
/// clock sequence, on the wasm engine. What JavaScript must still check itself, on every id, is
/// the time: before the parked tick, and before the deadline handed over here (see
/// js/leased.js). `parked` is JavaScript's current parked id (0: none), granted under the lease
/// numbered `parked_under` (a healing generator's leases are numbered from 1; a grant is never
/// extended under another). Returns the parked id, or 0 where nothing can be granted now:
/// JavaScript then takes its id through `leased_next_id`, which refuses or waits as the lease
/// decides.
///
/// `out` receives, as f64s: the lease's time when it was read (Unix ms), the ms left to the
/// deadline (-1: never expires), the parked tick's start (Unix ms), the clock sequence, that
/// clock sequence's high-water mark before the park (Unix ms, -1: none), the number of the
/// lease that granted, and its worker id (the ids of the ticks carry it).
#[napi(catch_unwind)]
pub fn leased_grant(
    generator: &External<Lease>,
    span_ms: f64,
    parked: BigInt,
    parked_under: f64,
    mut out: Float64ArraySlice,
) -> Result<u64> {
    // SAFETY: the JavaScript thread is inside this call, so nothing else reads or writes the
    // typed array's memory meanwhile, and `out` is not used again after this function.
    let slots = unsafe { out.as_mut() };
    if slots.len() < GRANT_SLOTS {
        return Err(bad_value(format!(
            "leasedGrant: expected {GRANT_SLOTS} slots"
        )));
    }
    let span_ms = whole(span_ms, "spanMs")?;
    let parked_under = whole(parked_under, "parkedUnder")?;
    let (negative, parked, lossless) = parked.get_u64();
    if negative || !lossless {
        return Err(bad_value("leasedGrant: expected a parked id".into()));
    }
    let Some(grant) = lease(generator.grant_ticks(span_ms, parked, parked_under))? else {
        return Ok(0);
    };
    let ticks = grant.ticks;
    let or_none = |ms: Option<u64>| ms.map_or(-1.0, number);
    slots[..GRANT_SLOTS].copy_from_slice(&[
        number(ticks.now_ms),
        or_none(ticks.deadline_in_ms),
        or_none(ticks.parked_tick_ms),
        number(ticks.clock_seq),
        or_none(ticks.last_ms),
        number(grant.lease_number),
        number(grant.worker_id),
    ]);
    Ok(ticks.parked_id)
}

/// How many f64s `leased_grant` writes.
const GRANT_SLOTS: usize = 7;

/// The next id at an explicit time (Unix ms); never waits.
#[napi(catch_unwind)]
pub fn leased_next_id_at(generator: &External<Lease>, now_ms: f64) -> Result<u64> {
    let now_ms = whole(now_ms, "nowMs")?;
    lease(generator.next_id_at(now_ms))
}

/// How long until the lease deadline, in ms (0 once lost or closed), or null for a lease that
/// never expires (`file://`).
#[napi(catch_unwind)]
pub fn leased_remaining_ms(generator: &External<Lease>) -> Option<f64> {
    // A healing generator between leases has no time left.
    generator
        .lease_stats()
        .map_or(Some(0), |stats| stats.deadline_in_ms)
        .map(number)
}

/// The leased worker id; while a healing generator leases again, its retryable refusal.
#[napi(catch_unwind)]
pub fn leased_worker_id(generator: &External<Lease>) -> Result<f64> {
    lease(generator.worker_id()).map(number)
}

/// A leased generator's slow-path counters, for metrics (`stats()` in JS).
#[napi(object, object_from_js = false)]
pub struct LeaseStatsOut {
    pub worker_id: f64,
    pub state: String,
    pub renewals: f64,
    pub renewal_failures: f64,
    pub clock_steps_back: f64,
    pub clock_seq_switches: f64,
    pub waits: f64,
    pub wait_us: f64,
    pub deadline_in_ms: Option<f64>,
    pub reserved_until_ms: f64,
    /// The start-up clock check: local minus the coordinator's clock, ms (`None`: not measured).
    pub measured_skew_ms: Option<f64>,
    /// Whether the generator heals (`heal`, the default), and what healing went through.
    pub heal: bool,
    pub losses: f64,
    pub heals: f64,
    pub heal_failures: f64,
    pub last_loss: Option<String>,
    pub last_heal_error: Option<String>,
}

/// The counters of a leased generator (never waits, never leases).
#[napi(catch_unwind)]
pub fn leased_stats(generator: &External<Lease>) -> LeaseStatsOut {
    let heal = generator.heal_stats();
    let lease = generator.lease_stats();
    let counters = generator.counters();
    // The state: the lease's own ("active", "lost", "closed"), or while a healing generator
    // holds none, "healing" (or "closed").
    let state = match (&heal, &lease) {
        (Some(heal), _) if heal.state != "active" => heal.state,
        (_, Some(lease)) => lease.state,
        (_, None) => "healing",
    };
    LeaseStatsOut {
        worker_id: generator.worker_id().map_or(-1.0, number),
        state: state.to_owned(),
        renewals: number(counters.renewals),
        renewal_failures: number(counters.renewal_failures),
        clock_steps_back: number(counters.clock_steps_back),
        clock_seq_switches: number(counters.clock_seq_switches),
        waits: number(counters.waits),
        wait_us: number(counters.wait_us),
        deadline_in_ms: match &lease {
            Some(lease) => lease.deadline_in_ms.map(number),
            None => Some(0.0),
        },
        reserved_until_ms: lease
            .as_ref()
            .map_or(0.0, |lease| number(lease.reserved_until_ms)),
        measured_skew_ms: lease
            .as_ref()
            .and_then(|lease| lease.measured_skew_ms)
            .map(|ms| ms as f64),
        heal: heal.is_some(),
        losses: heal.as_ref().map_or(0.0, |heal| number(heal.losses)),
        heals: heal.as_ref().map_or(0.0, |heal| number(heal.heals)),
        heal_failures: heal
            .as_ref()
            .map_or(0.0, |heal| number(heal.failed_attempts)),
        last_loss: heal.as_ref().and_then(|heal| heal.last_loss.clone()),
        last_heal_error: heal.and_then(|heal| heal.last_error),
    }
}

/// Whether the generator can still issue ids (not lost, not closed).
#[napi(catch_unwind)]
pub fn leased_is_active(generator: &External<Lease>) -> bool {
    generator.is_active()
}

/// The coordinator, without any password.
#[napi(catch_unwind)]
pub fn leased_coordinator(generator: &External<Lease>) -> String {
    generator.coordinator().to_owned()
}

/// A snapshot of the leased generator's state; while a healing generator leases again, its
/// retryable refusal.
#[napi(catch_unwind)]
pub fn leased_state(generator: &External<Lease>) -> Result<StateOut> {
    let state = lease(generator.state())?;
    Ok(StateOut {
        layout_fingerprint: state.layout_fingerprint.to_string(),
        worker_id: number(state.worker_id),
        clock_seq: number(state.clock_seq),
        high_water_ms: state
            .marks(generator.layout())
            .iter()
            .map(|mark| mark.map(number))
            .collect(),
    })
}

/// Stops issuing ids, stores the state and releases the worker id, on the calling thread
/// (`closeSync`). Idempotent.
#[napi(catch_unwind)]
pub fn leased_close(generator: &External<Lease>) -> Result<()> {
    lease(generator.close())
}

/// `close()`: the same on a thread of its own. The promise resolves to `null`, or to a
/// `LeaseFailure`.
#[napi(catch_unwind, ts_return_type = "Promise<null | LeaseFailure>")]
pub fn leased_close_async<'env>(
    env: &'env Env,
    generator: &External<Lease>,
) -> Result<Object<'env>> {
    let closing: Lease = Arc::clone(generator);
    settle_on_thread(
        env,
        "close",
        generator.coordinator().to_owned(),
        move || closing.close(),
        |()| napi::bindgen_prelude::Null,
    )
}
