//! The native half of the npm package `clockflake`: napi-rs functions over the core crate.
//!
//! These functions are internal. The public API is the hand-written JavaScript in `index.js`
//! (with `index.d.ts`), which checks argument types and shapes, serves ids from the blocks
//! handed out here, and turns the errors thrown here into `Error`s with `.code` and `.retryAtMs`.
//!
//! Why free functions over `External`s rather than a `#[napi]` class: a class method call costs
//! several times a free function call, and the hot path (`take`) runs once per block of ids.
//!
//! Every error thrown from here carries the core's stable code as `.code` (napi-rs sets `.code`
//! from the error's status string). The `retry_at_ms` of the last error thrown on this thread is
//! kept for `lastRetryAtMs()`, which the JavaScript side reads right after catching.

use std::cell::Cell;

use std::time::Duration;

use clockflake::{
    Error as CoreError, Field, Generator, InvalidId, Layout, Options, Policy, PublicIdProblem,
    PublicIds, State,
};
use clockflake_lease::{fork, LeaseError, LeaseOptions, LeasedGenerator};
use napi::bindgen_prelude::{BigInt, BigUint64ArraySlice, External, Uint8Array};
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

/// One field of a layout, as `describeLayout` reports it.
#[napi(object, object_from_js = false)]
pub struct FieldInfo {
    pub name: String,
    pub bits: u32,
}

/// Everything the JavaScript side needs to know about a layout: the public description and the
/// shifts that its pure-JavaScript decoder uses (the core stays the source of every constant).
#[napi(object, object_from_js = false)]
pub struct LayoutInfo {
    /// The preset name, if the layout is one.
    pub name: Option<String>,
    /// Fields with at least one bit, most significant first.
    pub fields: Vec<FieldInfo>,
    pub unit_ms: f64,
    pub epoch_ms: f64,
    pub clock_seqs: u32,
    pub max_worker_id: f64,
    pub max_id: u64,
    pub fingerprint: u64,
    /// Shift and width of timestamp, clock_seq, worker, sequence (in that order).
    pub shifts: Vec<u32>,
    pub widths: Vec<u32>,
    /// First Unix ms the layout cannot hold.
    pub lifetime_end_ms: f64,
}

/// Describes a layout.
#[napi(catch_unwind)]
pub fn layout_info(layout: &External<Layout>) -> LayoutInfo {
    let layout: &Layout = layout;
    let all = [
        Field::Timestamp,
        Field::ClockSeq,
        Field::Worker,
        Field::Sequence,
    ];
    LayoutInfo {
        name: layout.preset_name().map(String::from),
        fields: layout
            .fields()
            .map(|(field, bits)| FieldInfo {
                name: field.name().into(),
                bits,
            })
            .collect(),
        unit_ms: number(layout.unit_ms()),
        epoch_ms: number(layout.epoch_ms()),
        clock_seqs: layout.clock_seqs() as u32,
        max_worker_id: number(layout.max_worker_id()),
        max_id: layout.max_id(),
        fingerprint: layout.fingerprint(),
        shifts: all.iter().map(|field| layout.shift(*field)).collect(),
        widths: all.iter().map(|field| layout.bits(*field)).collect(),
        lifetime_end_ms: number(layout.lifetime_end_ms()),
    }
}

/// The preset names, the default first.
#[napi(catch_unwind)]
pub fn preset_names() -> Vec<&'static str> {
    Layout::PRESETS.iter().map(|(name, _)| *name).collect()
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
// Ids

/// A JavaScript bigint as an id candidate: negative and wider-than-64-bit values are named
/// as the core names them when parsing text.
fn bigint_to_u64(id: &BigInt) -> std::result::Result<u64, CoreError> {
    if id.sign_bit && id.words.iter().any(|w| *w != 0) {
        return Err(CoreError::InvalidId(InvalidId::Negative));
    }
    if id.words.iter().skip(1).any(|w| *w != 0) {
        return Err(CoreError::InvalidId(InvalidId::TooLarge));
    }
    Ok(id.words.first().copied().unwrap_or(0))
}

/// Decoded parts, for ids the JavaScript fast path does not take (it takes every valid bigint).
#[napi(object, object_from_js = false)]
pub struct PartsOut {
    pub timestamp_ms: f64,
    pub clock_seq: f64,
    pub worker_id: f64,
    pub sequence: f64,
}

/// Decodes a bigint id through the core (the JavaScript decoder calls this for ids outside
/// `0..=maxId`, to throw the core's error).
#[napi(catch_unwind)]
pub fn decode_bigint(layout: &External<Layout>, id: BigInt) -> Result<PartsOut> {
    let value = core(bigint_to_u64(&id))?;
    let parts = core(layout.decode(value))?;
    Ok(PartsOut {
        timestamp_ms: number(parts.timestamp_ms),
        clock_seq: number(parts.clock_seq),
        worker_id: number(parts.worker_id),
        sequence: number(parts.sequence),
    })
}

/// Parses a decimal id and checks that it fits the layout.
#[napi(catch_unwind)]
pub fn parse_id(layout: &External<Layout>, text: String) -> Result<u64> {
    core(layout.parse_id(&text))
}

/// Joins parts into an id (every range checked by the core).
#[napi(catch_unwind)]
pub fn encode(
    layout: &External<Layout>,
    timestamp_ms: f64,
    clock_seq: f64,
    worker_id: f64,
    sequence: f64,
) -> Result<u64> {
    let parts = clockflake::Parts {
        timestamp_ms: whole(timestamp_ms, "timestampMs")?,
        clock_seq: whole(clock_seq, "clockSeq")?,
        worker_id: whole(worker_id, "workerId")?,
        sequence: whole(sequence, "sequence")?,
    };
    core(layout.encode(&parts))
}

/// The smallest and largest id of a time window.
#[napi(catch_unwind)]
pub fn id_range(layout: &External<Layout>, from_ms: f64, to_ms: f64) -> Result<Vec<u64>> {
    let (low, high) = core(layout.id_range(whole(from_ms, "fromMs")?, whole(to_ms, "toMs")?))?;
    Ok(vec![low, high])
}

// ---------------------------------------------------------------------------------------------
// Generators

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

/// A generator on a fixed worker id, with the fork generation of the process that made it.
/// In a child process (a `fork()` from a native addon or an embedding program: Node itself
/// does not fork) it refuses with `WORKER_ID_INVALIDATED`: the worker id is the parent's.
pub struct StaticGenerator {
    generator: Generator,
    fork_generation: u64,
}

impl StaticGenerator {
    fn new(generator: Generator) -> Self {
        StaticGenerator {
            generator,
            fork_generation: fork::watch(),
        }
    }

    /// The generator, if it may issue ids (or tell its state) in this process.
    #[inline(always)]
    fn checked(&self) -> Result<&Generator> {
        if fork::generation() == self.fork_generation {
            Ok(&self.generator)
        } else {
            Err(throw(CoreError::WorkerIdInvalidated))
        }
    }
}

/// A new generator. The JavaScript `Generator` owns it; the `External` is freed with it.
#[napi(catch_unwind)]
pub fn create_generator(
    layout: &External<Layout>,
    worker_id: f64,
    policy: Option<String>,
    max_wait_ms: Option<f64>,
    max_drift_ms: Option<f64>,
) -> Result<External<StaticGenerator>> {
    let options = options(policy, max_wait_ms, max_drift_ms)?;
    let worker_id = whole(worker_id, "workerId")?;
    core(Generator::new(**layout, worker_id, options))
        .map(|generator| External::new(StaticGenerator::new(generator)))
}

/// A generator continuing from a saved state.
#[napi(catch_unwind)]
#[allow(clippy::too_many_arguments)]
pub fn resume_generator(
    layout: &External<Layout>,
    layout_fingerprint: String,
    worker_id: f64,
    clock_seq: f64,
    high_water_ms: Vec<Option<f64>>,
    policy: Option<String>,
    max_wait_ms: Option<f64>,
    max_drift_ms: Option<f64>,
) -> Result<External<StaticGenerator>> {
    let invalid_state = |what: &str| {
        bad_state(format!(
            "invalid state: {what}: expected a decimal fingerprint, a worker id, a clock sequence and {} high-water marks",
            layout.clock_seqs()
        ))
    };
    let options = options(policy, max_wait_ms, max_drift_ms)?;
    let fingerprint = layout_fingerprint
        .parse::<u64>()
        .ok()
        .filter(|_| layout_fingerprint.bytes().all(|b| b.is_ascii_digit()))
        .ok_or_else(|| invalid_state("layoutFingerprint"))?;
    if high_water_ms.len() as u64 != layout.clock_seqs() {
        return Err(invalid_state("highWaterMs"));
    }
    let mut marks = [None; clockflake::MAX_CLOCK_SEQS];
    for (slot, mark) in marks.iter_mut().zip(&high_water_ms) {
        *slot = match mark {
            Some(ms) => Some(whole(*ms, "highWaterMs").map_err(|_| invalid_state("highWaterMs"))?),
            None => None,
        };
    }
    let state = State {
        layout_fingerprint: fingerprint,
        worker_id: whole(worker_id, "workerId")?,
        clock_seq: whole(clock_seq, "clockSeq").map_err(|_| invalid_state("clockSeq"))?,
        high_water_ms: marks,
    };
    core(Generator::resume(**layout, &state, options))
        .map(|generator| External::new(StaticGenerator::new(generator)))
}

fn bad_state(message: String) -> napi::Error<&'static str> {
    LAST_RETRY_AT_MS.with(|last| last.set(None));
    napi::Error::new("INVALID_STATE", message)
}

/// Takes the next block of ids at `now_ms` into `out`: consecutive ids of one tick (the core
/// hands out the tick's remaining run at once, up to `max_count` and the buffer's size; the
/// caller asks for few ids at the start of a tick and more as the tick keeps it busy, because
/// writing a whole tick's 4,096 ids costs about a microsecond). Returns how many
/// ids were written, or 0 when the tick's sequence is exhausted (the last slot then holds the
/// retry time instead). The buffer's last slot receives the block's tick start (Unix ms) as the
/// bits of an f64, so that JavaScript reads it through a `Float64Array` on the same memory.
/// Never blocks: refusals throw, with `retry_at_ms` for `lastRetryAtMs()`; in a forked child,
/// `WORKER_ID_INVALIDATED`.
#[napi(catch_unwind)]
pub fn take(
    generator: &External<StaticGenerator>,
    now_ms: f64,
    mut out: BigUint64ArraySlice,
    max_count: u32,
) -> Result<u32> {
    let generator = generator.checked()?;
    let now_ms = whole(now_ms, "the clock's time")?;
    // SAFETY: the JavaScript thread is inside this call, so nothing else reads or writes the
    // typed array's memory meanwhile, and `out` is not used again after this function.
    let slots = unsafe { out.as_mut() };
    let Some((tick_slot, ids)) = slots.split_last_mut() else {
        return Err(bad_value(
            "take: expected a buffer of at least 2 slots".into(),
        ));
    };
    let wanted = ids.len().min(max_count as usize) as u64;
    let block = match generator.next_block_at(now_ms, wanted) {
        Ok(block) => block,
        // The common refusal, reported without building an exception: the caller waits for the
        // next tick (or, for `nextIdAt`, throws it through `sequenceExhausted`).
        Err(CoreError::SequenceExhausted { retry_at_ms }) => {
            *tick_slot = number(retry_at_ms).to_bits();
            return Ok(0);
        }
        Err(error) => return Err(throw(error)),
    };
    let mut count = 0u32;
    let mut first = None;
    for (id, slot) in block.zip(ids.iter_mut()) {
        *slot = id;
        first.get_or_insert(id);
        count += 1;
    }
    let tick_start_ms = match first {
        Some(id) => core(generator.layout().decode(id))?.timestamp_ms,
        None => now_ms,
    };
    *tick_slot = number(tick_start_ms).to_bits();
    Ok(count)
}

/// The generator's state, JSON-safe: the fingerprint as a decimal string.
#[napi(object, object_from_js = false)]
pub struct StateOut {
    pub layout_fingerprint: String,
    pub worker_id: f64,
    pub clock_seq: f64,
    pub high_water_ms: Vec<Option<f64>>,
}

/// A snapshot of the generator's state (`WORKER_ID_INVALIDATED` in a forked child, as in Python).
#[napi(catch_unwind)]
pub fn generator_state(generator: &External<StaticGenerator>) -> Result<StateOut> {
    let generator = generator.checked()?;
    Ok(state_out(
        &generator.state(),
        generator.layout().clock_seqs(),
    ))
}

fn state_out(state: &State, clock_seqs: u64) -> StateOut {
    let count = clock_seqs as usize;
    StateOut {
        layout_fingerprint: state.layout_fingerprint.to_string(),
        worker_id: number(state.worker_id),
        clock_seq: number(state.clock_seq),
        high_water_ms: state
            .high_water_ms
            .iter()
            .take(count)
            .map(|mark| mark.map(number))
            .collect(),
    }
}

/// The options in force, with the policy resolved.
#[napi(object, object_from_js = false)]
pub struct OptionsOut {
    pub on_rollback: String,
    pub max_wait_ms: f64,
    pub max_drift_ms: f64,
}

/// The generator's resolved options.
#[napi(catch_unwind)]
pub fn generator_options(generator: &External<StaticGenerator>) -> OptionsOut {
    generator_options_of(&generator.generator)
}

fn generator_options_of(generator: &Generator) -> OptionsOut {
    let options = generator.options();
    OptionsOut {
        on_rollback: generator.policy().name().into(),
        max_wait_ms: number(options.max_wait_ms),
        max_drift_ms: number(options.max_drift_ms),
    }
}

/// Throws the core's `SEQUENCE_EXHAUSTED` for a `take` that returned 0.
#[napi(catch_unwind)]
pub fn sequence_exhausted(retry_at_ms: f64) -> Result<()> {
    Err(throw(CoreError::SequenceExhausted {
        retry_at_ms: whole(retry_at_ms, "retryAtMs")?,
    }))
}

/// Throws the core's `CLOCK_NOT_ADVANCING` (a wait on a clock that never got there).
#[napi(catch_unwind)]
pub fn clock_not_advancing(waiting_for_ms: f64, now_ms: f64) -> Result<()> {
    Err(throw(CoreError::ClockNotAdvancing {
        waiting_for_ms: whole(waiting_for_ms, "waitingForMs")?,
        now_ms: whole(now_ms, "nowMs")?,
    }))
}

// ---------------------------------------------------------------------------------------------
// Leased generators (Generator.open)
//
// `nextId()` serves blocks from JavaScript as for a fixed worker id, taken by `leased_take`
// through `LeasedGenerator::next_block`: a block of more than one id is granted only while
// the lease deadline is more than two ticks + 10 ms away (closer, one id checked like
// `next_id`), and JavaScript hands its ids out only while `Date.now()` reads within the
// window the lease gave the block (its tick, on the system clock), so the last one goes out
// well before the deadline. `close()` empties the block before closing. Every id of a block lies inside the
// persisted reservation, like every id of `next_id`.

fn throw_lease(error: LeaseError) -> napi::Error<&'static str> {
    LAST_RETRY_AT_MS.with(|last| last.set(error.retry_at_ms()));
    napi::Error::new(error.code(), error.to_string())
}

fn lease<T>(result: std::result::Result<T, LeaseError>) -> Result<T> {
    result.map_err(throw_lease)
}

/// Leases a worker id from the coordinator `uri` names and starts a generator under it.
#[napi(catch_unwind)]
pub fn open_leased(
    layout: &External<Layout>,
    uri: String,
    policy: Option<String>,
    max_wait_ms: Option<f64>,
    max_drift_ms: Option<f64>,
    max_handover_wait_ms: Option<f64>,
) -> Result<External<LeasedGenerator>> {
    let mut lease_options = LeaseOptions {
        generator: options(policy, max_wait_ms, max_drift_ms)?,
        ..LeaseOptions::default()
    };
    if let Some(ms) = max_handover_wait_ms {
        lease_options.max_handover_wait = Duration::from_millis(whole(ms, "maxHandoverWaitMs")?);
    }
    lease(clockflake_lease::open(&uri, **layout, lease_options)).map(External::new)
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
    let probe = core(Generator::new(**layout, 0, options))?;
    Ok(generator_options_of(&probe))
}

/// The next id of a leased generator, checked like every id (`LeasedGenerator::next_id`): what
/// JavaScript calls for the first id of a tick, where a block would cost more to take (a typed
/// array argument) than it saves. Waits out a full tick and a handover.
#[napi(catch_unwind)]
pub fn leased_next_id(generator: &External<LeasedGenerator>) -> Result<u64> {
    lease(generator.next_id())
}

/// Takes the next block of a leased generator into `out`, as `take` does for a fixed worker
/// id: consecutive ids of one tick, at least one, up to `max_count` and the buffer's size
/// (waits out a full tick and a handover; refuses once the lease is lost or closed). The
/// buffer's last three slots receive, as the bits of f64s, the block's tick (Unix ms, on the
/// lease's time) and the window the lease gives it on the system clock, `[from, until)`:
/// JavaScript serves the block only while `Date.now()` reads within it.
#[napi(catch_unwind)]
pub fn leased_take(
    generator: &External<LeasedGenerator>,
    mut out: BigUint64ArraySlice,
    max_count: u32,
) -> Result<u32> {
    // SAFETY: the JavaScript thread is inside this call, so nothing else reads or writes the
    // typed array's memory meanwhile, and `out` is not used again after this function.
    let slots = unsafe { out.as_mut() };
    if slots.len() < 4 {
        return Err(bad_value(
            "leasedTake: expected a buffer of at least 4 slots".into(),
        ));
    }
    let (ids, meta) = slots.split_at_mut(slots.len() - 3);
    let wanted = (ids.len().min(max_count as usize) as u64).max(1);
    let block = lease(generator.next_block(wanted))?;
    let window = [
        block.tick_ms(),
        block.serve_from_ms(),
        block.serve_until_ms(),
    ];
    for (slot, ms) in meta.iter_mut().zip(window) {
        *slot = (ms as f64).to_bits();
    }
    let mut count = 0u32;
    for (id, slot) in block.zip(ids.iter_mut()) {
        *slot = id;
        count += 1;
    }
    Ok(count)
}

/// The next id at an explicit time (Unix ms); never waits.
#[napi(catch_unwind)]
pub fn leased_next_id_at(generator: &External<LeasedGenerator>, now_ms: f64) -> Result<u64> {
    let now_ms = whole(now_ms, "nowMs")?;
    lease(generator.next_id_at(now_ms))
}

/// How long until the lease deadline, in ms (0 once lost or closed), or null for a lease that
/// never expires (`file://`).
#[napi(catch_unwind)]
pub fn leased_remaining_ms(generator: &External<LeasedGenerator>) -> Option<f64> {
    generator
        .deadline_boot_ms()
        .map(|deadline| number(deadline.saturating_sub(clockflake_lease::boot_ms())))
}

/// The leased worker id.
#[napi(catch_unwind)]
pub fn leased_worker_id(generator: &External<LeasedGenerator>) -> f64 {
    number(generator.worker_id())
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
}

/// The counters of a leased generator (never waits, never leases).
#[napi(catch_unwind)]
pub fn leased_stats(generator: &External<LeasedGenerator>) -> LeaseStatsOut {
    let stats = generator.stats();
    LeaseStatsOut {
        worker_id: number(stats.worker_id),
        state: stats.state.to_owned(),
        renewals: number(stats.counters.renewals),
        renewal_failures: number(stats.counters.renewal_failures),
        clock_steps_back: number(stats.counters.clock_steps_back),
        clock_seq_switches: number(stats.counters.clock_seq_switches),
        waits: number(stats.counters.waits),
        wait_us: number(stats.counters.wait_us),
        deadline_in_ms: stats.deadline_in_ms.map(number),
        reserved_until_ms: number(stats.reserved_until_ms),
        measured_skew_ms: stats.measured_skew_ms.map(|ms| ms as f64),
    }
}

/// Whether the generator can still issue ids (not lost, not closed).
#[napi(catch_unwind)]
pub fn leased_is_active(generator: &External<LeasedGenerator>) -> bool {
    generator.is_active()
}

/// The coordinator, without any password.
#[napi(catch_unwind)]
pub fn leased_coordinator(generator: &External<LeasedGenerator>) -> String {
    generator.coordinator().to_owned()
}

/// A snapshot of the leased generator's state.
#[napi(catch_unwind)]
pub fn leased_state(generator: &External<LeasedGenerator>) -> StateOut {
    state_out(&generator.state(), generator.layout().clock_seqs())
}

/// Stops issuing ids, stores the state and releases the worker id. Idempotent.
#[napi(catch_unwind)]
pub fn leased_close(generator: &External<LeasedGenerator>) -> Result<()> {
    lease(generator.close())
}

// ---------------------------------------------------------------------------------------------
// Public ids (PublicIds)

fn key_bytes(key: &Uint8Array) -> Result<[u8; 16]> {
    let bytes: &[u8] = key;
    bytes.try_into().map_err(|_| {
        bad_value(format!(
            "key: expected 16 bytes, found {} bytes",
            bytes.len()
        ))
    })
}

fn key_version(version: f64) -> Result<u8> {
    match u8::try_from(whole(version, "version")?) {
        Ok(version) => Ok(version),
        // Above 255: the core's error for any version out of 0..=31.
        Err(_) => Err(throw(CoreError::InvalidKeyVersion { version: u8::MAX })),
    }
}

/// A codec whose current key is `key`, tagged `version` (0..=31).
#[napi(catch_unwind)]
pub fn public_ids_new(version: f64, key: Uint8Array) -> Result<External<PublicIds>> {
    let version = key_version(version)?;
    core(PublicIds::new(version, key_bytes(&key)?)).map(External::new)
}

/// A new codec holding the keys of `codec` plus an older key, used only to decode texts.
#[napi(catch_unwind)]
pub fn public_ids_with_old_key(
    codec: &External<PublicIds>,
    version: f64,
    key: Uint8Array,
) -> Result<External<PublicIds>> {
    let version = key_version(version)?;
    let key = key_bytes(&key)?;
    core(PublicIds::clone(codec).with_old_key(version, key)).map(External::new)
}

/// The current key's version.
#[napi(catch_unwind)]
pub fn public_ids_current_version(codec: &External<PublicIds>) -> u32 {
    u32::from(codec.current_version())
}

/// The public number of an id.
#[napi(catch_unwind)]
pub fn public_encode(codec: &External<PublicIds>, id: BigInt) -> Result<u64> {
    let id = core(bigint_to_u64(&id))?;
    core(codec.encode(id))
}

/// The id behind a public number.
#[napi(catch_unwind)]
pub fn public_decode(codec: &External<PublicIds>, public: BigInt) -> Result<u64> {
    let public = bigint_to_u64(&public)
        .map_err(|_| throw(CoreError::InvalidPublicId(PublicIdProblem::OutOfRange)))?;
    core(codec.decode(public))
}

/// The 16-character text form of an id.
#[napi(catch_unwind)]
pub fn public_encode_text(codec: &External<PublicIds>, id: BigInt) -> Result<String> {
    let id = core(bigint_to_u64(&id))?;
    core(codec.encode_text(id)).map(|text| text.as_str().to_owned())
}

/// The id behind a text form.
#[napi(catch_unwind)]
pub fn public_decode_text(codec: &External<PublicIds>, text: String) -> Result<u64> {
    core(codec.decode_text(&text))
}
