//! clockflake's wasm engine: the raw WebAssembly exports under the npm package `clockflake`'s
//! hand-written JavaScript (`bindings-node/js/engine.js` and `api.js`), which is the public API
//! on every JS runtime.
//!
//! The exports take and return plain numbers so that a call costs a few nanoseconds: ids are
//! `u64`/`i64` (JS `bigint`), times and small fields `f64`/`u32`. Results with several fields go
//! through a small scratch area in wasm memory that the wrapper reads with typed-array views,
//! and a refusal returns a sentinel (`-1`) and leaves a [`Refusal`] (core's [`Error`], or the
//! engine's own) for [`error_take`], which the wrapper turns into a JS `Error` with `.code`.
//! Range checks on values coming from JS (numbers and bigints) happen in the wrapper before they
//! reach these functions; everything about ids and layouts is decided by the core crate.

use std::cell::{Cell, RefCell};
use std::string::String;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::thread::LocalKey;
use std::vec::Vec;

use clockflake::{
    Error, Field, Generator, Layout, LayoutProblem, Options, Parts, Policy, PublicIds, State,
    WaitStep, MAX_CLOCK_SEQS,
};
use wasm_bindgen::prelude::*;

mod error_numbers;

/// A small free-list allocator (merges neighbours on free) instead of std's dlmalloc: the same
/// job in about 1 KiB of code instead of 8.3 KiB, which keeps the `.wasm` with the public-id
/// codec well under the 32 KiB budget (25,440 bytes; with dlmalloc 32,965). Hot paths
/// (`decode`, `nextId`, `nextIds`, the codec) never allocate; only strings passed in and out,
/// and the handle tables, do. The spin lock is uncontended: a wasm instance is single-threaded.
#[cfg(target_arch = "wasm32")]
#[global_allocator]
static ALLOCATOR: lol_alloc::LockedAllocator<lol_alloc::FreeListAllocator> =
    lol_alloc::LockedAllocator::new(lol_alloc::FreeListAllocator::new());

/// 64-bit scratch words shared with JS (read as `Float64Array` and `BigUint64Array`).
static SCRATCH64: [AtomicU64; 32] = [const { AtomicU64::new(0) }; 32];
/// 32-bit scratch words shared with JS (read as `Uint32Array`).
static SCRATCH32: [AtomicU32; 32] = [const { AtomicU32::new(0) }; 32];
/// Ids written by [`gen_fill`], copied out by JS into a `BigUint64Array`.
const ID_BUFFER_LEN: usize = 4096;
static ID_BUFFER: [AtomicU64; ID_BUFFER_LEN] = [const { AtomicU64::new(0) }; ID_BUFFER_LEN];

/// Handles of custom layouts start after the presets'.
const PRESET_COUNT: usize = Layout::PRESETS.len();

/// The engine's handle tables, named in its own refusals.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Table {
    Generators = 0,
    Codecs = 1,
    Layouts = 2,
}

/// Why a call refused: core's error, or one of the engine's own, which core has no code for
/// (it knows nothing of handles) and which the wrapper never provokes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Refusal {
    Core(Error),
    /// `ENGINE_BUSY`: a handle table was in use by a call in progress (a call made from inside
    /// another, which single-threaded wasm never makes).
    Busy(Table),
    /// `UNKNOWN_HANDLE`: no value of the table has that handle (a freed codec; the wrapper
    /// frees codecs only at garbage collection, so it never passes one).
    UnknownHandle(Table, u32),
}

impl From<Error> for Refusal {
    fn from(error: Error) -> Refusal {
        Refusal::Core(error)
    }
}

impl Refusal {
    const fn code(&self) -> &'static str {
        match self {
            Refusal::Core(error) => error.code(),
            Refusal::Busy(_) => "ENGINE_BUSY",
            Refusal::UnknownHandle(..) => "UNKNOWN_HANDLE",
        }
    }
}

thread_local! {
    static LAST_ERROR: Cell<Option<Refusal>> = const { Cell::new(None) };
    static CUSTOM_LAYOUTS: RefCell<Vec<Layout>> = const { RefCell::new(Vec::new()) };
    static GENERATORS: Slots<Generator> = const { RefCell::new(Vec::new()) };
    static CODECS: Slots<PublicIds> = const { RefCell::new(Vec::new()) };
}

fn put64(slot: usize, value: u64) {
    if let Some(word) = SCRATCH64.get(slot) {
        word.store(value, Ordering::Relaxed);
    }
}

fn putf(slot: usize, value: f64) {
    put64(slot, value.to_bits());
}

fn get64(slot: usize) -> u64 {
    SCRATCH64.get(slot).map_or(0, |w| w.load(Ordering::Relaxed))
}

fn getf(slot: usize) -> f64 {
    f64::from_bits(get64(slot))
}

fn put32(slot: usize, value: u32) {
    if let Some(word) = SCRATCH32.get(slot) {
        word.store(value, Ordering::Relaxed);
    }
}

fn get32(slot: usize) -> u32 {
    SCRATCH32.get(slot).map_or(0, |w| w.load(Ordering::Relaxed))
}

/// Keeps the refusal for [`error_take`] and returns the sentinel.
#[cold]
fn fail<T: From<i8>>(refusal: impl Into<Refusal>) -> T {
    keep(refusal.into());
    T::from(-1)
}

/// Keeps the refusal for [`error_take`]: [`fail`]'s one body for every type it is called with
/// (the .wasm's size).
#[cold]
#[inline(never)]
fn keep(refusal: Refusal) {
    LAST_ERROR.with(|last| last.set(Some(refusal)));
}

/// Address of the 64-bit scratch words.
#[wasm_bindgen]
pub fn scratch64_ptr() -> usize {
    SCRATCH64.as_ptr() as usize
}

/// Address of the 32-bit scratch words.
#[wasm_bindgen]
pub fn scratch32_ptr() -> usize {
    SCRATCH32.as_ptr() as usize
}

/// Address of the id buffer [`gen_fill`] writes.
#[wasm_bindgen]
pub fn id_buffer_ptr() -> usize {
    ID_BUFFER.as_ptr() as usize
}

/// Length of the id buffer, in ids.
#[wasm_bindgen]
pub fn id_buffer_len() -> u32 {
    ID_BUFFER_LEN as u32
}

/// The last refusal's code (empty if none). Scratch32\[0\] gets its kind and scratch64\[0..4\]
/// its fields (see `error_numbers.rs`, from which the wrapper rebuilds core's message; for the
/// engine's own refusals the kind is the [`Table`] and field 0 the handle), and scratch64\[4\]
/// its `retry_at_ms` as f64 (-1 for none).
#[wasm_bindgen]
pub fn error_take() -> String {
    let Some(refusal) = LAST_ERROR.with(Cell::take) else {
        return String::new();
    };
    let ((kind, fields), retry_at_ms) = match refusal {
        Refusal::Core(error) => (error_numbers::error_numbers(&error), error.retry_at_ms()),
        Refusal::Busy(table) => ((table as u32, [0; 4]), None),
        Refusal::UnknownHandle(table, handle) => {
            ((table as u32, [u64::from(handle), 0, 0, 0]), None)
        }
    };
    put32(0, kind);
    for (slot, value) in fields.into_iter().enumerate() {
        put64(slot, value);
    }
    putf(4, retry_at_ms.map_or(-1.0, |ms| ms as f64));
    String::from(refusal.code())
}

/// For the JS blocking wrapper, after a refusal at `now_ms`: the time to wait for and try again
/// at (core's `Generator::blocking_retry_at`: a full tick only if the next starts within
/// `Generator::MAX_TICK_WAIT_MS`, a clock step back only within `max_wait_ms`), the refusal then
/// dropped; or -1 for a final refusal, kept for [`error_take`].
#[wasm_bindgen]
pub fn error_retry_at(now_ms: f64) -> f64 {
    LAST_ERROR.with(|last| {
        let refusal = last.take();
        let retry_at = match &refusal {
            Some(Refusal::Core(error)) => Generator::blocking_retry_at(error, now_ms as u64),
            _ => None,
        };
        match retry_at {
            Some(at_ms) => at_ms as f64,
            None => {
                last.set(refusal);
                -1.0
            }
        }
    })
}

/// One step of the JS blocking wrapper's wait for the clock to read `at_ms` (core's
/// `wait_step`): -1 once it does, else the ms to sleep before reading it again (0: spin once);
/// -2 when it has not advanced in time, with `CLOCK_NOT_ADVANCING` kept for [`error_take`].
#[wasm_bindgen]
pub fn wait_step(at_ms: f64, start_ms: f64, now_ms: f64, elapsed_ms: f64) -> f64 {
    let step = clockflake::wait_step(
        at_ms as u64,
        start_ms as u64,
        now_ms as u64,
        elapsed_ms as u64,
    );
    match step {
        Ok(WaitStep::Done) => -1.0,
        Ok(WaitStep::Sleep(ms)) => ms as f64,
        Ok(WaitStep::Spin) => 0.0,
        Err(error) => {
            fail::<i32>(error);
            -2.0
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Layouts. A handle is an index: 0..PRESET_COUNT are the presets in `Layout::PRESETS` order,
// the rest index the custom layouts registered so far (each distinct layout once).

fn layout_at(handle: u32) -> Result<Layout, Refusal> {
    let index = handle as usize;
    if let Some((_, preset)) = Layout::PRESETS.get(index) {
        return Ok(*preset);
    }
    CUSTOM_LAYOUTS.with(|all| match all.try_borrow() {
        Ok(all) => all
            .get(index - PRESET_COUNT)
            .copied()
            .ok_or(Refusal::Core(Error::UnknownLayout)),
        Err(_) => Err(Refusal::Busy(Table::Layouts)),
    })
}

/// `run` on layout `handle`, or `None` with the refusal (the handle's, or `run`'s) kept for
/// [`error_take`]: no `Result` of the engine's wider refusal to pass up (the .wasm's size).
fn on_layout<T>(handle: u32, run: impl FnOnce(Layout) -> Result<T, Error>) -> Option<T> {
    match layout_at(handle) {
        Ok(layout) => run(layout).map_err(|error| keep(Refusal::Core(error))).ok(),
        Err(refusal) => {
            keep(refusal);
            None
        }
    }
}

/// Number of presets.
#[wasm_bindgen]
pub fn preset_count() -> u32 {
    PRESET_COUNT as u32
}

/// Name of preset `index`.
#[wasm_bindgen]
pub fn preset_name(index: u32) -> String {
    Layout::PRESETS
        .get(index as usize)
        .map_or_else(String::new, |(name, _)| String::from(*name))
}

/// Handle of a preset by name, or -1 (`UNKNOWN_LAYOUT`).
#[wasm_bindgen]
pub fn layout_by_name(name: &str) -> i32 {
    match Layout::by_name(name) {
        Ok(layout) => Layout::PRESETS
            .iter()
            .position(|(_, preset)| *preset == layout)
            .map_or(-1, |i| i as i32),
        Err(error) => fail(error),
    }
}

fn field_from_code(code: u32) -> Result<Field, Error> {
    match code {
        0 => Ok(Field::Timestamp),
        1 => Ok(Field::ClockSeq),
        2 => Ok(Field::Worker),
        3 => Ok(Field::Sequence),
        _ => Err(Error::InvalidLayout(LayoutProblem::UnknownField)),
    }
}

fn field_code(field: Field) -> u32 {
    match field {
        Field::Timestamp => 0,
        Field::ClockSeq => 1,
        Field::Worker => 2,
        Field::Sequence => 3,
    }
}

/// Validates a custom layout and returns its handle, or -1. The fields are in scratch32 as
/// `count` pairs (field code, bits), field codes 0..=3 in `Field` order and 4 for an unknown name.
#[wasm_bindgen]
pub fn layout_custom(count: u32, unit_ms: f64, epoch_ms: f64) -> i32 {
    let mut fields = [(Field::Timestamp, 0u32); 16];
    let count = (count as usize).min(fields.len());
    for (i, slot) in fields.iter_mut().take(count).enumerate() {
        match field_from_code(get32(2 * i)) {
            Ok(field) => *slot = (field, get32(2 * i + 1)),
            Err(error) => return fail(error),
        }
    }
    match Layout::new(&fields[..count], unit_ms as u64, epoch_ms as u64) {
        Ok(layout) => register_layout(layout),
        Err(error) => fail(error),
    }
}

/// The handle of a valid layout: a preset's index, or the custom layout registered once.
fn register_layout(layout: Layout) -> i32 {
    if let Some(i) = Layout::PRESETS.iter().position(|(_, p)| *p == layout) {
        return i as i32;
    }
    CUSTOM_LAYOUTS.with(|all| {
        let Ok(mut all) = all.try_borrow_mut() else {
            return fail(Refusal::Busy(Table::Layouts));
        };
        let index = match all.iter().position(|known| *known == layout) {
            Some(i) => i,
            None => {
                all.push(layout);
                all.len() - 1
            }
        };
        (PRESET_COUNT + index) as i32
    })
}

/// Core's `Layout::suggest` for `workers` processes, `peak_ids_per_sec` each and
/// `lifetime_years`: the suggested layout's handle, or -1. The wrapper passes safe integers.
#[wasm_bindgen]
pub fn layout_suggest(workers: f64, peak_ids_per_sec: f64, lifetime_years: f64) -> i32 {
    match Layout::suggest(
        workers as u64,
        peak_ids_per_sec as u64,
        lifetime_years as u64,
    ) {
        Ok(layout) => register_layout(layout),
        Err(error) => fail(error),
    }
}

/// Describes a layout: returns its number of fields (or -1); scratch32 gets (code, bits) pairs
/// and at \[8\] the preset index or u32::MAX; scratch64 gets unit, epoch, clock sequences and
/// largest worker id as f64 at \[0..4\], largest id and fingerprint as u64 at \[4\] and \[5\].
#[wasm_bindgen]
pub fn layout_info(handle: u32) -> i32 {
    let layout = match layout_at(handle) {
        Ok(layout) => layout,
        Err(error) => return fail(error),
    };
    let mut count = 0;
    for (i, (field, bits)) in layout.fields().enumerate() {
        put32(2 * i, field_code(field));
        put32(2 * i + 1, bits);
        count += 1;
    }
    let preset = Layout::PRESETS.iter().position(|(_, p)| *p == layout);
    put32(8, preset.map_or(u32::MAX, |i| i as u32));
    putf(0, layout.unit_ms() as f64);
    putf(1, layout.epoch_ms() as f64);
    putf(2, layout.clock_seqs() as f64);
    putf(3, layout.max_worker_id() as f64);
    put64(4, layout.max_id());
    put64(5, layout.fingerprint());
    count
}

/// Core's `Layout::is_plausible`: 1 if `id` could have been issued under layout `layout` by
/// `now_ms` (it decodes, and its time is at most `now_ms + margin_ms`), 0 if not, -1 for a
/// handle that names no layout. The wrapper passes safe integers.
#[wasm_bindgen]
pub fn layout_plausible(layout: u32, id: u64, now_ms: f64, margin_ms: f64) -> i32 {
    match layout_at(layout) {
        Ok(layout) => i32::from(layout.is_plausible(id, now_ms as u64, margin_ms as u64)),
        Err(refusal) => fail(refusal),
    }
}

/// Core's `Layout::guess_preset`: the index of the preset under which `id` has the latest
/// plausible time, with the id decoded under it (its `timestamp_ms` at scratch64\[0\] as f64,
/// the other parts at scratch32\[0..3\]), or -1 when no preset fits (not a refusal).
#[wasm_bindgen]
pub fn guess_preset(id: u64, now_ms: f64, margin_ms: f64) -> i32 {
    let Some((name, parts)) = Layout::guess_preset(id, now_ms as u64, margin_ms as u64) else {
        return -1;
    };
    putf(0, put_parts(&parts));
    Layout::PRESETS
        .iter()
        .position(|(preset, _)| *preset == name)
        .map_or(-1, |i| i as i32)
}

// ---------------------------------------------------------------------------------------------
// Ids.

fn put_parts(parts: &Parts) -> f64 {
    // Each of these fits in 32 bits: the layout rules cap worker and sequence at 32 bits.
    put32(0, parts.clock_seq as u32);
    put32(1, parts.worker_id as u32);
    put32(2, parts.sequence as u32);
    parts.timestamp_ms as f64
}

/// Decodes an id: returns its `timestamp_ms` and puts clock sequence, worker id and sequence in
/// scratch32\[0..3\]; -1 if the id does not fit the layout.
#[wasm_bindgen]
pub fn decode(layout: u32, id: u64) -> f64 {
    on_layout(layout, |l| l.decode(id)).map_or(-1.0, |parts| put_parts(&parts))
}

/// [`decode`] of an id of at most 19 decimal digits that JS split in two numbers: the leading
/// digits (below 10^10) and the last nine (below 10^9). Both are exact in an f64, and
/// `high * 10^9 + low` is below 10^19 < 2^64, so this cannot overflow. It saves building a
/// BigInt (or passing a string) for every decimal id.
#[wasm_bindgen]
pub fn decode_split(layout: u32, high: f64, low: f64) -> f64 {
    decode(layout, (high as u64) * 1_000_000_000 + low as u64)
}

/// [`decode`] of a decimal id, parsed by the core's strict rules.
#[wasm_bindgen]
pub fn decode_text(layout: u32, text: &str) -> f64 {
    on_layout(layout, |l| l.parse_id(text).and_then(|id| l.decode(id)))
        .map_or(-1.0, |parts| put_parts(&parts))
}

/// Encodes parts into an id, or -1. The wrapper passes non-negative safe integers only.
#[wasm_bindgen]
pub fn encode(
    layout: u32,
    timestamp_ms: f64,
    clock_seq: f64,
    worker_id: f64,
    sequence: f64,
) -> i64 {
    let parts = Parts {
        timestamp_ms: timestamp_ms as u64,
        clock_seq: clock_seq as u64,
        worker_id: worker_id as u64,
        sequence: sequence as u64,
    };
    on_layout(layout, |l| l.encode(&parts)).map_or(-1, |id| id as i64)
}

/// The smallest id of a time window (returned) and the largest (scratch64\[0\]), or -1.
#[wasm_bindgen]
pub fn id_range(layout: u32, from_ms: f64, to_ms: f64) -> i64 {
    on_layout(layout, |l| l.id_range(from_ms as u64, to_ms as u64)).map_or(-1, |(low, high)| {
        put64(0, high);
        low as i64
    })
}

// ---------------------------------------------------------------------------------------------
// Handle tables (generators, codecs). A handle indexes a slot; freed slots are reused.

/// Values JS holds by handle.
type Slots<T> = RefCell<Vec<Option<T>>>;

/// Runs `run` on the value of slot `handle` of `table`, or gives `None` with the refusal kept
/// for [`error_take`]: `run`'s, `missing` for a freed or unknown handle, `ENGINE_BUSY` for a
/// table in use (which a single-threaded instance never sees).
fn slot_use<T, R>(
    slots: &'static LocalKey<Slots<T>>,
    table: Table,
    handle: u32,
    missing: Refusal,
    run: impl FnOnce(&T) -> Result<R, Error>,
) -> Option<R> {
    let refusal = slots.with(|all| match all.try_borrow() {
        Ok(all) => match all.get(handle as usize) {
            Some(Some(value)) => run(value).map_err(Refusal::Core),
            _ => Err(missing),
        },
        Err(_) => Err(Refusal::Busy(table)),
    });
    refusal.map_err(keep).ok()
}

/// Stores `value` in the first free slot of `table` and returns its handle (-1 and
/// `ENGINE_BUSY` if the table is in use).
fn slot_put<T>(slots: &'static LocalKey<Slots<T>>, table: Table, value: T) -> i32 {
    slots.with(|all| {
        let Ok(mut all) = all.try_borrow_mut() else {
            return fail(Refusal::Busy(table));
        };
        let handle = match all.iter().position(Option::is_none) {
            Some(free) => free,
            None => {
                all.push(None);
                all.len() - 1
            }
        };
        all[handle] = Some(value);
        handle as i32
    })
}

/// Empties slot `handle` (nothing for an unknown one).
fn slot_free<T>(slots: &'static LocalKey<Slots<T>>, handle: u32) {
    slots.with(|all| {
        if let Ok(mut all) = all.try_borrow_mut() {
            if let Some(slot) = all.get_mut(handle as usize) {
                *slot = None;
            }
        }
    });
}

// ---------------------------------------------------------------------------------------------
// Generators.

fn with_generator<T: From<i8>>(handle: u32, run: impl FnOnce(&Generator) -> Result<T, Error>) -> T {
    // A handle with no generator is one that was freed: the JS API frees on close().
    let closed = Refusal::Core(Error::GeneratorClosed);
    slot_use(&GENERATORS, Table::Generators, handle, closed, run).unwrap_or_else(|| T::from(-1))
}

fn options(policy: &str, max_wait_ms: f64, max_drift_ms: f64) -> Result<Options, Error> {
    let defaults = Options::default();
    Ok(Options {
        on_rollback: if policy.is_empty() {
            None
        } else {
            Some(Policy::from_name(policy)?)
        },
        max_wait_ms: if max_wait_ms < 0.0 {
            defaults.max_wait_ms
        } else {
            max_wait_ms as u64
        },
        max_drift_ms: if max_drift_ms < 0.0 {
            defaults.max_drift_ms
        } else {
            max_drift_ms as u64
        },
    })
}

fn register(generator: Generator) -> i32 {
    slot_put(&GENERATORS, Table::Generators, generator)
}

/// A new generator's handle, or -1. An empty `policy` takes the layout's default; a negative
/// `max_wait_ms` / `max_drift_ms` takes the default.
#[wasm_bindgen]
pub fn gen_new(
    layout: u32,
    worker_id: f64,
    policy: &str,
    max_wait_ms: f64,
    max_drift_ms: f64,
) -> i32 {
    let made = on_layout(layout, |layout| {
        let options = options(policy, max_wait_ms, max_drift_ms)?;
        Generator::new(layout, worker_id as u64, options)
    });
    made.map_or(-1, register)
}

/// A generator continued from a saved state record (core's `State::from_record`: the
/// fingerprint as decimal text, `mark_count` marks), or -1. The marks are in scratch64
/// \[0..16\] as f64 Unix ms, negative for none; marks past the 16th (no layout has them) count
/// but are not passed.
#[wasm_bindgen]
#[allow(clippy::too_many_arguments)]
pub fn gen_resume(
    layout: u32,
    fingerprint: &str,
    worker_id: f64,
    clock_seq: f64,
    mark_count: u32,
    policy: &str,
    max_wait_ms: f64,
    max_drift_ms: f64,
) -> i32 {
    let marks = (0..mark_count as usize).map(|k| {
        let ms = if k < MAX_CLOCK_SEQS { getf(k) } else { -1.0 };
        (ms >= 0.0).then_some(ms as u64)
    });
    let made = on_layout(layout, |layout| {
        let state = State::from_record(
            &layout,
            fingerprint,
            worker_id as u64,
            clock_seq as u64,
            marks,
        )?;
        Generator::resume(layout, &state, options(policy, max_wait_ms, max_drift_ms)?)
    });
    made.map_or(-1, register)
}

/// Frees a generator's slot.
#[wasm_bindgen]
pub fn gen_free(handle: u32) {
    slot_free(&GENERATORS, handle);
}

/// The next id at `now_ms`, or -1 (never blocks; the wrapper waits where the refusal says).
#[wasm_bindgen]
pub fn gen_next(handle: u32, now_ms: f64) -> i64 {
    with_generator(handle, |generator| {
        generator.next_id_at(now_ms as u64).map(|id| id as i64)
    })
}

/// Fills the id buffer with up to `wanted` new ids at `now_ms` (whole runs of a tick in one
/// atomic step each); returns how many, or -1 if not even one could be issued.
#[wasm_bindgen]
pub fn gen_fill(handle: u32, now_ms: f64, wanted: u32) -> i32 {
    let wanted = (wanted as usize).min(ID_BUFFER_LEN);
    with_generator(handle, |generator| {
        let mut filled = 0;
        while filled < wanted {
            match generator.next_block_at(now_ms as u64, (wanted - filled) as u64) {
                Ok(block) => {
                    for (id, slot) in block.zip(&ID_BUFFER[filled..]) {
                        slot.store(id, Ordering::Relaxed);
                        filled += 1;
                    }
                }
                Err(error) if filled == 0 => return Err(error),
                Err(_) => break,
            }
        }
        Ok(filled as i32)
    })
}

/// Saves a generator's state: returns its layout's number of clock sequences (or -1);
/// scratch64 gets the fingerprint (u64) at \[0\], worker id and clock sequence (f64) at \[1\]
/// and \[2\], and the high-water marks (f64 Unix ms, -1 for none) at \[3..19\].
#[wasm_bindgen]
pub fn gen_state(handle: u32) -> i32 {
    with_generator(handle, |generator| {
        let state = generator.state();
        put64(0, state.layout_fingerprint);
        putf(1, state.worker_id as f64);
        putf(2, state.clock_seq as f64);
        let marks = state.marks(generator.layout());
        for (k, mark) in marks.iter().enumerate() {
            putf(3 + k, mark.map_or(-1.0, |ms| ms as f64));
        }
        Ok(marks.len() as i32)
    })
}

/// A generator's options as in force: returns its policy's index in [`Policy::ALL`] order
/// (clock-sequence, wait, logical, fail), or -1; scratch64 gets `max_wait_ms` and
/// `max_drift_ms` as f64 at \[0\] and \[1\].
#[wasm_bindgen]
pub fn gen_options(handle: u32) -> i32 {
    with_generator(handle, |generator| {
        let options = generator.options();
        putf(0, options.max_wait_ms as f64);
        putf(1, options.max_drift_ms as f64);
        let policy = generator.policy();
        Ok(Policy::ALL
            .iter()
            .position(|p| *p == policy)
            .map_or(-1, |i| i as i32))
    })
}

/// The instance's memory, for the wrapper's typed-array views of the scratch area.
#[wasm_bindgen]
pub fn wasm_memory() -> JsValue {
    wasm_bindgen::memory()
}

// ---------------------------------------------------------------------------------------------
// Public ids (core's `PublicIds`). A handle indexes a slot; freed slots are reused. Keys come in
// through scratch64[0..2] (the 16 key bytes: wasm memory is little-endian) so that they need no
// BigInt, and text forms go out and in through the same 16 bytes. Few exports and no slicing:
// the codec is about a fifth of the .wasm, under a 32 KiB budget.

/// The 16 bytes at the start of the 64-bit scratch area.
fn scratch_bytes() -> [u8; 16] {
    let (low, high) = (get64(0), get64(1));
    let mut bytes = [0u8; 16];
    for (i, byte) in bytes.iter_mut().enumerate() {
        let word = if i < 8 { low } else { high };
        *byte = (word >> (8 * (i % 8))) as u8;
    }
    bytes
}

/// Writes up to 16 bytes to the start of the 64-bit scratch area.
fn put_scratch_bytes(bytes: &[u8]) {
    let (mut low, mut high) = (0u64, 0u64);
    for (i, &byte) in bytes.iter().enumerate().take(16) {
        let word = if i < 8 { &mut low } else { &mut high };
        *word |= u64::from(byte) << (8 * (i % 8));
    }
    put64(0, low);
    put64(1, high);
}

/// What [`pub_call`] does.
const PUB_ENCODE: u32 = 0;
const PUB_DECODE: u32 = 1;
const PUB_ENCODE_TEXT: u32 = 2;

/// Runs `run` on codec `handle`. A freed or unknown handle (the wrapper frees codecs only at
/// garbage collection, so it never passes one) is refused rather than served by another codec.
fn try_codec<T>(handle: u32, run: impl FnOnce(&PublicIds) -> Result<T, Error>) -> Option<T> {
    let unknown = Refusal::UnknownHandle(Table::Codecs, handle);
    slot_use(&CODECS, Table::Codecs, handle, unknown, run)
}

/// A new codec's handle, or -1. `base` < 0: a codec whose current key (scratch bytes 0..16) is
/// tagged `version`; else a copy of codec `base` with that key added as an old key. `legacy`:
/// the key is of the construction public ids used before FF1. JS passes versions 0..=255 only.
#[wasm_bindgen]
pub fn pub_new(base: i32, version: u32, legacy: bool) -> i32 {
    let key = scratch_bytes();
    let version = u8::try_from(version).unwrap_or(u8::MAX);
    let made = match (u32::try_from(base), legacy) {
        (Err(_), false) => PublicIds::new(version, key)
            .map_err(|e| keep(e.into()))
            .ok(),
        (Err(_), true) => PublicIds::legacy(version, key)
            .map_err(|e| keep(e.into()))
            .ok(),
        (Ok(base), false) => try_codec(base, |codec| codec.clone().with_old_key(version, key)),
        (Ok(base), true) => try_codec(base, |codec| codec.clone().with_legacy_key(version, key)),
    };
    made.map_or(-1, |codec| slot_put(&CODECS, Table::Codecs, codec))
}

/// Frees a codec's slot.
#[wasm_bindgen]
pub fn pub_free(handle: u32) {
    slot_free(&CODECS, handle);
}

/// One codec operation, or -1 (every result is below 2^63): `PUB_ENCODE` / `PUB_DECODE` map
/// `value` to its public number / id; `PUB_ENCODE_TEXT` writes `value`'s 16-character text form
/// (ASCII) to scratch bytes 0..16 and returns 0; `PUB_DECODE_ASCII` decodes the 16 ASCII
/// characters JS wrote there.
#[wasm_bindgen]
pub fn pub_call(handle: u32, op: u32, value: u64) -> i64 {
    let outcome = try_codec(handle, |codec| match op {
        PUB_ENCODE => codec.encode(value),
        PUB_DECODE => codec.decode(value),
        PUB_ENCODE_TEXT => codec.encode_text(value).map(|text| {
            put_scratch_bytes(text.as_str().as_bytes());
            0
        }),
        _ => {
            let bytes = scratch_bytes();
            // JS writes ASCII only; were it not, core refuses the replacement character.
            let text = core::str::from_utf8(&bytes).unwrap_or("\u{fffd}");
            codec.decode_text(text)
        }
    });
    outcome.map_or(-1, |result| result as i64)
}

/// The id behind any other text (not 16 ASCII characters): core words the refusal.
#[wasm_bindgen]
pub fn pub_decode_text(handle: u32, text: &str) -> i64 {
    try_codec(handle, |codec| codec.decode_text(text)).map_or(-1, |id| id as i64)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::*;

    /// The engine's scratch slots and last error are one per module, as in wasm, where one
    /// thread runs: the tests take turns (cargo runs them on threads at once).
    static ENGINE: std::sync::Mutex<()> = std::sync::Mutex::new(());

    fn engine() -> std::sync::MutexGuard<'static, ()> {
        ENGINE
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    #[test]
    fn plausibility_and_the_guess_are_cores() {
        let _engine = engine();
        let twitter_id = 2_125_537_250_721_665_024; // core's doc example, made 2026-11-25
        let now = 1_795_700_000_000.0;
        let day = 86_400_000.0;
        let twitter = u32::try_from(layout_by_name("twitter")).unwrap();
        assert_eq!(layout_plausible(twitter, twitter_id, now, day), 1);
        assert_eq!(
            layout_plausible(0, twitter_id, now, day),
            0,
            "the default reads 2040"
        );
        assert_eq!(layout_plausible(0, u64::MAX, now, day), 0);
        assert_eq!(layout_plausible(9_999, twitter_id, now, day), -1);
        assert_eq!(error_take(), "UNKNOWN_LAYOUT");
        let index = guess_preset(twitter_id, now, day);
        assert_eq!(
            Layout::PRESETS[usize::try_from(index).unwrap()].0,
            "twitter"
        );
        let parts = Layout::TWITTER.decode(twitter_id).unwrap();
        assert_eq!(getf(0), parts.timestamp_ms as f64);
        assert_eq!(get32(1), parts.worker_id as u32);
        assert_eq!(get32(2), parts.sequence as u32);
        assert_eq!(guess_preset(twitter_id, 0.0, 0.0), -1);
        assert_eq!(error_take(), "", "no fit is no refusal");
    }

    /// A table in use refuses with the engine's own code, never one of core's (a generator
    /// table in use once answered `WORKER_ID_INVALIDATED`, a codec table `UNKNOWN_KEY_VERSION`).
    #[test]
    fn a_table_in_use_refuses_with_the_engines_own_code() {
        let _engine = engine();
        let preset = 0;
        GENERATORS.with(|all| {
            let _in_use = all.borrow();
            assert_eq!(gen_new(preset, 1.0, "", -1.0, -1.0), -1);
        });
        assert_eq!(error_take(), "ENGINE_BUSY");
        assert_eq!(get32(0), Table::Generators as u32);
        let handle = u32::try_from(gen_new(preset, 1.0, "", -1.0, -1.0)).unwrap();
        GENERATORS.with(|all| {
            let _in_use = all.borrow_mut();
            assert_eq!(gen_next(handle, 1_767_225_600_000.0), -1);
        });
        assert_eq!(error_take(), "ENGINE_BUSY");
        assert!(gen_next(handle, 1_767_225_600_000.0) > 0);
        gen_free(handle);
        assert_eq!(gen_next(handle, 1_767_225_600_000.0), -1);
        assert_eq!(error_take(), "GENERATOR_CLOSED");

        CODECS.with(|all| {
            let _in_use = all.borrow();
            assert_eq!(pub_new(-1, 1, false), -1);
        });
        assert_eq!(error_take(), "ENGINE_BUSY");
        assert_eq!(get32(0), Table::Codecs as u32);
        let codec = u32::try_from(pub_new(-1, 1, false)).unwrap();
        pub_free(codec);
        assert_eq!(pub_call(codec, PUB_ENCODE, 5), -1);
        assert_eq!(error_take(), "UNKNOWN_HANDLE");
        assert_eq!(get64(0), u64::from(codec));

        let custom = CUSTOM_LAYOUTS.with(|all| {
            let _in_use = all.borrow_mut();
            decode(u32::try_from(PRESET_COUNT).unwrap(), 1)
        });
        assert_eq!(custom, -1.0);
        assert_eq!(error_take(), "ENGINE_BUSY");
        assert_eq!(get32(0), Table::Layouts as u32);
        assert_eq!(error_take(), "", "taken once");
    }
}
