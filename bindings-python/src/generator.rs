//! `Generator`: core's lock-free generator behind a frozen class, shared freely between threads.

use std::cell::Cell;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use clockflake::{Error, Generator, IdBlock, Layout, MonotonicClock, Options, State};
use clockflake_lease::{fork, HealStats, LeaseCounters, LeaseOptions, LeaseStats};
use pyo3::exceptions::{PyMemoryError, PyTypeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList, PyString, PyTuple, PyType};

use crate::args::{
    as_u64, generator_args, list_items, plain_u64, time_arg, type_name, worker_id_arg, Method,
    NotU64,
};
use crate::errors::Refusal;
use crate::healed::Healed;
use crate::leased::{invalid_uri, Leased};
use crate::parts::layout_dict;

/// How long one stretch of waiting runs without the GIL before checking for signals.
const WAIT_SLICE: Duration = Duration::from_millis(50);
/// A pause through the last 2 ms of a wait: short, and without the GIL (not a busy spin that
/// holds it).
const SPIN_PAUSE: Duration = Duration::from_micros(100);

/// Generates unique, time-sorted 63-bit ids for one worker id.
///
/// >>> gen = Generator(worker_id=7)
/// >>> a, b = gen.next_id(), gen.next_id()
/// >>> a < b
/// True
///
/// Keyword options: `layout` (a preset name such as "twitter", or a dict with `fields`,
/// `unit_ms`, `epoch_ms`), `on_rollback` ("clock-sequence", "wait", "logical", "fail"),
/// `max_wait_ms`, `max_drift_ms`, `clock` (a callable returning Unix ms as an int).
/// One generator may be shared by any number of threads.
///
/// `Generator.open(uri)` leases the worker id from a coordinator instead
/// (`file:///var/lib/app/ids?app=orders`, `postgres://...`, `zookeeper://...`):
///
/// >>> import tempfile
/// >>> with tempfile.TemporaryDirectory() as d:
/// ...     with Generator.open(f"file://{d}?app=orders") as leased:
/// ...         leased.worker_id, leased.next_id() > 0
/// (0, True)
///
/// After a fork (`os.fork()`, `multiprocessing`, or `fork()` called from C, as uWSGI does), a
/// generator made with `Generator(worker_id=...)` refuses in the child with
/// `WorkerIdInvalidatedError`; a leased one leases a new worker id for the child at its first
/// call there.
#[pyclass(frozen, module = "clockflake._clockflake", name = "Generator")]
pub struct PyGenerator {
    inner: Inner,
    clock: Option<Py<PyAny>>,
    /// The fork generation (`clockflake_lease::fork`) in which this (static) generator may issue
    /// ids: the process's when it was made. A fork from Python or from C moves the process's
    /// generation away from it.
    generation: u64,
    /// `close()` was called (in this process, or before the fork that made it): a static
    /// generator refuses with `GeneratorClosedError` from then on, in a forked child too.
    closed: AtomicBool,
}

/// A fixed worker id, a leased one, or a leased one that heals.
enum Inner {
    Static(Generator),
    Leased(Leased),
    Healed(Healed),
}

/// A Python callable as the clock, called with the GIL held. Its exception (or the
/// `TypeError`/`ValueError` for a value that is not Unix ms as an int) ends the call at once and
/// reaches the caller unchanged: in an attempt as the error of `try_next_id_from`, in a wait as
/// the error of the pause that read it. It is never read again after it raised.
struct PyClock<'a, 'py> {
    func: &'a Bound<'py, PyAny>,
    /// The time its last read gave: what core's retry loop reads. That loop reads its clock
    /// only right after an attempt (whose refusal came from a read, in `issue_slow`) or a pause
    /// (which reads it), so the time is current, and a read that may raise happens only where
    /// the exception can be carried.
    last_ms: Cell<u64>,
}

/// Why an attempt on a Python clock issued no id: core's refusal (a wait may clear it), or the
/// exception the clock raised (final).
enum PyClockRefusal {
    Core(Error),
    Raised(PyErr),
}

impl From<Error> for PyClockRefusal {
    fn from(error: Error) -> PyClockRefusal {
        PyClockRefusal::Core(error)
    }
}

impl<'a, 'py> PyClock<'a, 'py> {
    fn new(func: &'a Bound<'py, PyAny>) -> Self {
        PyClock {
            func,
            last_ms: Cell::new(0),
        }
    }

    fn read(&self) -> PyResult<u64> {
        let value = self.func.call0()?;
        let now_ms = as_u64(&value).map_err(|problem| match problem {
            NotU64::Type(what) => PyTypeError::new_err(format!(
                "clock: expected it to return Unix ms as an int, it returned {what}"
            )),
            other => PyValueError::new_err(format!(
                "clock: expected it to return Unix ms (0 or more), it returned {}",
                other.found()
            )),
        })?;
        self.last_ms.set(now_ms);
        Ok(now_ms)
    }

    /// The clock of an attempt: a read, or the exception as the attempt's refusal.
    fn try_now_ms(&self) -> Result<u64, PyClockRefusal> {
        self.read().map_err(PyClockRefusal::Raised)
    }
}

/// A clock the binding hands core, with its way of issuing and of waiting: the process's
/// `MonotonicClock` (core's refusals only) or a Python callable (which may raise).
trait BindingClock {
    /// Why an attempt issued nothing.
    type Refused;

    fn try_next_id(&self, gen: &Generator) -> Result<u64, Self::Refused>;

    fn try_next_block(&self, gen: &Generator, max_count: u64) -> Result<IdBlock, Self::Refused>;

    /// Core's retry loop (`clockflake::retry_after`) after a first `outcome`: waits for a
    /// refusal's retry time (the next tick within `Generator::MAX_TICK_WAIT_MS`, a clock step
    /// back within `max_wait_ms`) and tries again, each pause passed by `pass_time`.
    fn retry<T>(
        &self,
        py: Python<'_>,
        outcome: Result<T, Self::Refused>,
        attempt: impl FnMut() -> Result<T, Self::Refused>,
    ) -> PyResult<T>;
}

impl BindingClock for MonotonicClock {
    type Refused = Error;

    #[inline(always)]
    fn try_next_id(&self, gen: &Generator) -> Result<u64, Error> {
        gen.try_next_id_with(self)
    }

    fn try_next_block(&self, gen: &Generator, max_count: u64) -> Result<IdBlock, Error> {
        gen.try_next_block_with(self, max_count)
    }

    #[cold]
    fn retry<T>(
        &self,
        py: Python<'_>,
        outcome: Result<T, Error>,
        attempt: impl FnMut() -> Result<T, Error>,
    ) -> PyResult<T> {
        clockflake::retry_after(self, outcome, attempt, |pause| pass_time(py, pause))
            .map_err(|WaitInterrupted(error)| error)
    }
}

impl BindingClock for PyClock<'_, '_> {
    type Refused = PyClockRefusal;

    fn try_next_id(&self, gen: &Generator) -> Result<u64, PyClockRefusal> {
        gen.try_next_id_from(|| self.try_now_ms())
    }

    fn try_next_block(&self, gen: &Generator, max_count: u64) -> Result<IdBlock, PyClockRefusal> {
        gen.try_next_block_from(|| self.try_now_ms(), max_count)
    }

    /// The clock core's loop reads is `last_ms`; each pause reads the Python clock after it
    /// has passed time. The clock's exception ends the loop: from an attempt as its final
    /// outcome, from a pause as the pause's error.
    #[cold]
    fn retry<T>(
        &self,
        py: Python<'_>,
        outcome: Result<T, PyClockRefusal>,
        mut attempt: impl FnMut() -> Result<T, PyClockRefusal>,
    ) -> PyResult<T> {
        fn settle<T>(outcome: Result<T, PyClockRefusal>) -> Result<PyResult<T>, Error> {
            match outcome {
                Ok(value) => Ok(Ok(value)),
                Err(PyClockRefusal::Raised(exception)) => Ok(Err(exception)),
                Err(PyClockRefusal::Core(error)) => Err(error),
            }
        }
        let last_read = || self.last_ms.get();
        let settled = clockflake::retry_after(
            &last_read,
            settle(outcome),
            || settle(attempt()),
            |pause| {
                pass_time(py, pause)?;
                self.read().map(drop).map_err(WaitInterrupted)
            },
        );
        settled.map_err(|WaitInterrupted(error)| error)?
    }
}

/// A Python exception out of core's retry loop (`clockflake::retry_after`): a refusal, a
/// signal handler's, a Python clock's, or core's `CLOCK_NOT_ADVANCING`.
struct WaitInterrupted(PyErr);

impl From<Error> for WaitInterrupted {
    fn from(error: Error) -> WaitInterrupted {
        WaitInterrupted(Refusal::from(error).into())
    }
}

/// A pause of core's wait loop: sleeps without the GIL (at most `WAIT_SLICE`; `SPIN_PAUSE`
/// through the last 2 ms), then checks for signals (Ctrl-C).
fn pass_time(py: Python<'_>, pause: Option<Duration>) -> Result<(), WaitInterrupted> {
    let pause = pause.map_or(SPIN_PAUSE, |duration| duration.min(WAIT_SLICE));
    py.detach(|| std::thread::sleep(pause));
    py.check_signals().map_err(WaitInterrupted)
}

impl PyGenerator {
    /// A generator on a fixed worker id, made by `make` from the keyword options.
    fn build(
        options: Option<&Bound<'_, PyDict>>,
        method: Method,
        make: impl FnOnce(Layout, Options) -> Result<Generator, Refusal>,
    ) -> PyResult<PyGenerator> {
        let args = generator_args(options, method)?;
        Ok(PyGenerator {
            inner: Inner::Static(make(args.layout, args.options)?),
            clock: args.clock,
            generation: fork::watch(),
            closed: AtomicBool::new(false),
        })
    }

    /// Whether a static generator may issue ids now: not closed, and in the process that made it.
    #[inline(always)]
    fn is_issuing(&self) -> bool {
        !self.closed.load(Ordering::Relaxed) && fork::generation() == self.generation
    }

    /// The static generator, if it may issue ids in this process.
    #[inline(always)]
    fn check_fork<'a>(&self, gen: &'a Generator) -> PyResult<&'a Generator> {
        if self.is_issuing() {
            Ok(gen)
        } else {
            Err(self.not_issuing())
        }
    }

    /// The refusal of a static generator that is closed (first: a generator closed before a
    /// fork is closed in the child too) or belongs to the parent process.
    #[cold]
    fn not_issuing(&self) -> PyErr {
        let error = if self.closed.load(Ordering::Relaxed) {
            Error::GeneratorClosed
        } else {
            Error::WorkerIdInvalidated
        };
        Refusal::from(error).into()
    }

    /// `next_id()` after its first attempt on `clock` (the fast path's, on the process's
    /// clock, or one on a Python clock): waits and tries again until an id or a final refusal.
    #[cold]
    #[inline(never)]
    fn next_id_waiting<C: BindingClock>(
        &self,
        py: Python<'_>,
        gen: &Generator,
        clock: &C,
        outcome: Result<u64, C::Refused>,
    ) -> PyResult<u64> {
        clock.retry(py, outcome, || clock.try_next_id(gen))
    }

    /// Fills `out` with whole runs of a tick at a time, waiting when a tick is full.
    fn fill<C: BindingClock>(
        &self,
        py: Python<'_>,
        gen: &Generator,
        clock: &C,
        out: &mut [u64],
    ) -> PyResult<()> {
        let mut filled = 0;
        while filled < out.len() {
            let wanted = (out.len() - filled) as u64;
            let attempt = || clock.try_next_block(gen, wanted);
            let block = match attempt() {
                Ok(block) => block,
                first => clock.retry(py, first, attempt)?,
            };
            for (slot, id) in out[filled..].iter_mut().zip(block) {
                *slot = id;
                filled += 1;
            }
        }
        Ok(())
    }
}

/// A state as the dict `state()` returns.
fn state_dict<'py>(
    py: Python<'py>,
    state: &State,
    layout: &Layout,
) -> PyResult<Bound<'py, PyDict>> {
    let dict = PyDict::new(py);
    dict.set_item("layout_fingerprint", state.layout_fingerprint.to_string())?;
    dict.set_item("worker_id", state.worker_id)?;
    dict.set_item("clock_seq", state.clock_seq)?;
    dict.set_item("high_water_ms", PyList::new(py, state.marks(layout))?)?;
    Ok(dict)
}

#[pymethods]
impl PyGenerator {
    #[new]
    #[pyo3(signature = (*, worker_id, **options))]
    fn new(worker_id: &Bound<'_, PyAny>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        PyGenerator::build(options, Method::New, |layout, options| {
            let worker_id = worker_id_arg(worker_id, &layout)?;
            Ok(Generator::new(layout, worker_id, options)?)
        })
    }

    /// A generator on a worker id leased from the coordinator `uri` names:
    /// `file:///DIR?app=NAME` (one host: a lock file per worker id in DIR/NAME),
    /// `postgres://USER@HOST:PORT/DB?app=NAME&ttl=10s` (row leases) or
    /// `zookeeper://HOST:2181/PATH?ttl=10s`. The worker id is kept, with the generator's state,
    /// until `close()` (or the end of a `with` block); `gen.worker_id` tells which one it is.
    ///
    /// Takes the options of `Generator(...)` except `worker_id` (the lease chooses it) and
    /// `clock` (leases run on the system clock), plus `max_handover_wait_ms`: how long the
    /// first id may wait for the clock to pass the previous holder's ids (default 15000).
    /// Raises `InvalidUriError`, `CoordinatorUnavailableError`, `WorkerPoolExhaustedError`
    /// (every worker id of the layout is held) or `InvalidStateError` (a stored record that is
    /// corrupt: refused, never reset).
    ///
    /// `heal` (default True): a lost lease (a coordinator down or frozen past the TTL, a paused
    /// VM, a row taken away) is leased again in the background, a new worker id if need be,
    /// retrying after 100 ms, doubling up to 5 s (the id service's back-off). Meanwhile ids raise
    /// `CoordinatorUnavailableError` with `retry_at_ms`, at once (never a wait on the
    /// coordinator), the class and code any coordinator outage raises, so code that already
    /// handles an outage handles a loss too; no id is ever issued under the lost lease, and the
    /// new lease continues above every id its worker id issued. `gen.is_active` says whether ids
    /// are issued now, `gen.stats()` counts `losses`, `heals` and `heal_failures`. On by
    /// default, as database drivers and pools reconnect by default: a generator in a process
    /// that runs for months should not turn every later request into an error until a restart
    /// because the database failed over once, and healing costs no safety (it is the same lease
    /// a restart would take). `heal=False` keeps the lost generator dead (`LeaseLostError`
    /// from then on) for a process that would rather exit and be restarted by its supervisor.
    ///
    /// In a child process after a fork (from Python or from C), the first call leases a new
    /// worker id for the child from the same URI; the parent keeps its own.
    #[classmethod]
    #[pyo3(signature = (uri, **options))]
    fn open(
        _cls: &Bound<'_, PyType>,
        py: Python<'_>,
        uri: &Bound<'_, PyAny>,
        options: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<PyGenerator> {
        let args = generator_args(options, Method::Open)?;
        let uri = match uri.cast::<PyString>() {
            Ok(text) => text.to_str()?.to_owned(),
            Err(_) => return Err(invalid_uri(format!("a {}", type_name(uri)))),
        };
        let max_handover_wait = args.max_handover_wait_ms.map_or(
            LeaseOptions::default().max_handover_wait,
            Duration::from_millis,
        );
        let inner = if args.heal.unwrap_or(true) {
            let options = LeaseOptions {
                generator: args.options,
                clock: None,
                max_handover_wait,
            };
            Inner::Healed(Healed::open(py, uri, args.layout, options)?)
        } else {
            Inner::Leased(Leased::open(
                py,
                uri,
                args.layout,
                args.options,
                max_handover_wait,
            )?)
        };
        Ok(PyGenerator {
            inner,
            clock: None,
            generation: fork::watch(),
            closed: AtomicBool::new(false),
        })
    }

    /// Continues from a `state()` dict (after a restart, or taking over a worker id): no id at
    /// or below a saved high-water mark is issued again. Takes the same keyword options as
    /// `Generator(...)` except `worker_id`, which the state carries; the layout must match.
    #[staticmethod]
    #[pyo3(signature = (state, **options))]
    fn resume(state: &Bound<'_, PyAny>, options: Option<&Bound<'_, PyDict>>) -> PyResult<Self> {
        PyGenerator::build(options, Method::Resume, |layout, options| {
            let state = state_arg(state, &layout)?;
            Ok(Generator::resume(layout, &state, options)?)
        })
    }

    /// The next id. Waits (with the GIL released) when the current tick is used up and the
    /// next starts within a second, or the policy allows a short wait for the clock
    /// (`max_wait_ms`); otherwise raises at once (`SequenceExhaustedError` with `retry_at_ms`
    /// for a long tick, such as a 1-day unit).
    #[inline]
    fn next_id(&self, py: Python<'_>) -> PyResult<u64> {
        match &self.inner {
            Inner::Static(gen) => {
                let gen = self.check_fork(gen)?;
                match &self.clock {
                    None => {
                        let clock = MonotonicClock::global();
                        match gen.try_next_id_with(clock) {
                            Ok(id) => Ok(id),
                            error => self.next_id_waiting(py, gen, clock, error),
                        }
                    }
                    Some(func) => {
                        let clock = PyClock::new(func.bind(py));
                        match clock.try_next_id(gen) {
                            Ok(id) => Ok(id),
                            first => self.next_id_waiting(py, gen, &clock, first),
                        }
                    }
                }
            }
            Inner::Leased(leased) => leased.next_id(py),
            Inner::Healed(healed) => healed.next_id(py),
        }
    }

    /// The next id at an explicit time (Unix ms). Never waits: where `next_id()` would, it
    /// raises with `retry_at_ms` set.
    fn next_id_at(&self, py: Python<'_>, now_ms: &Bound<'_, PyAny>) -> PyResult<u64> {
        match &self.inner {
            Inner::Static(gen) => {
                let gen = self.check_fork(gen)?;
                let now_ms = time_arg(now_ms, "now_ms")?;
                Ok(gen.next_id_at(now_ms).map_err(Refusal::from)?)
            }
            Inner::Leased(leased) => leased.next_id_at(py, time_arg(now_ms, "now_ms")?),
            Inner::Healed(healed) => healed.next_id_at(py, time_arg(now_ms, "now_ms")?),
        }
    }

    /// `n` new ids, strictly increasing within a clock sequence, taken a whole run of a tick at
    /// a time. Waits like `next_id()` when a tick is used up.
    fn next_ids<'py>(
        &self,
        py: Python<'py>,
        n: &Bound<'py, PyAny>,
    ) -> PyResult<Bound<'py, PyList>> {
        if let Inner::Static(gen) = &self.inner {
            self.check_fork(gen)?;
        }
        let n = plain_u64(n, "n")?;
        let n =
            usize::try_from(n).map_err(|_| PyMemoryError::new_err("next_ids: n is too large"))?;
        let mut out: Vec<u64> = Vec::new();
        out.try_reserve_exact(n)
            .map_err(|_| PyMemoryError::new_err(format!("next_ids: cannot hold {n} ids")))?;
        out.resize(n, 0);
        match &self.inner {
            Inner::Static(gen) => match &self.clock {
                None => self.fill(py, gen, MonotonicClock::global(), &mut out)?,
                Some(func) => self.fill(py, gen, &PyClock::new(func.bind(py)), &mut out)?,
            },
            Inner::Leased(leased) => leased.fill(py, &mut out)?,
            Inner::Healed(healed) => healed.fill(py, &mut out)?,
        }
        PyList::new(py, out)
    }

    /// A snapshot to save (JSON-safe): `{"layout_fingerprint": str, "worker_id": int,
    /// "clock_seq": int, "high_water_ms": [int | None, one per clock sequence]}`. Ids issued
    /// after the call are not in it: save it after the last id, or raise the current clock
    /// sequence's mark ahead of time (a reservation) and issue no id past it. (A leased
    /// generator stores its state with the coordinator by itself.)
    fn state<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match &self.inner {
            Inner::Static(gen) => {
                let gen = self.check_fork(gen)?;
                state_dict(py, &gen.state(), gen.layout())
            }
            Inner::Leased(leased) => state_dict(py, &leased.state(py)?, leased.layout()),
            Inner::Healed(healed) => state_dict(py, &healed.state(py)?, healed.layout()),
        }
    }

    /// Stops the generator: later calls raise `GeneratorClosedError`. A leased generator
    /// stops renewing, stores its state with the coordinator and releases its worker id
    /// (with the GIL released). Idempotent; `with Generator.open(...) as gen:` calls it.
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        match &self.inner {
            Inner::Static(_) => {
                self.closed.store(true, Ordering::SeqCst);
                Ok(())
            }
            Inner::Leased(leased) => leased.close(py),
            Inner::Healed(healed) => healed.close(py),
        }
    }

    fn __enter__(slf: Py<Self>) -> Py<Self> {
        slf
    }

    #[pyo3(signature = (*_exc_info))]
    fn __exit__(&self, py: Python<'_>, _exc_info: &Bound<'_, PyTuple>) -> PyResult<bool> {
        self.close(py)?;
        Ok(false)
    }

    /// The worker id (of a leased generator: the one leased; in a forked child, the child's
    /// own, leased at the first call there). While a healing generator holds no lease, raises
    /// `CoordinatorUnavailableError` (with `retry_at_ms`), as ids do; after `close()`, the
    /// worker id it released.
    #[getter]
    fn worker_id(&self, py: Python<'_>) -> PyResult<u64> {
        match &self.inner {
            Inner::Static(gen) => Ok(gen.worker_id()),
            Inner::Leased(leased) => leased.worker_id(py),
            Inner::Healed(healed) => healed.worker_id(py),
        }
    }

    /// Counters for metrics, as a dict: `worker_id`, `state` ("active", "lost", "closed" or
    /// "forked"), `leased`, and for a leased generator `renewals`, `renewal_failures`,
    /// `clock_steps_back`, `clock_seq_switches`, `waits`, `wait_us`, `deadline_in_ms` (None:
    /// the lease never expires), `reserved_until_ms` (0 for a fixed worker id) and
    /// `measured_skew_ms` (the start-up clock check: local minus the coordinator's clock, ms;
    /// None when not measured: file://, max_skew=off, a static worker id). Counted on
    /// slow paths only; reading them never leases or waits.
    fn stats<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        match &self.inner {
            Inner::Static(gen) => {
                let state = if self.closed.load(Ordering::Relaxed) {
                    "closed"
                } else if self.generation != fork::generation() {
                    "forked"
                } else {
                    "active"
                };
                stats_dict(py, false, Some(gen.worker_id()), state, None, None)
            }
            Inner::Leased(leased) => match leased.lease_if_current() {
                Some(lease) => {
                    let figures = lease.stats();
                    stats_dict(
                        py,
                        true,
                        Some(figures.worker_id),
                        figures.state,
                        Some(&figures),
                        None,
                    )
                }
                // A forked child that has not leased its own worker id yet.
                None => stats_dict(py, true, None, "forked", None, None),
            },
            Inner::Healed(healed) => match healed.stats() {
                Some((heal, lease)) => stats_dict(
                    py,
                    true,
                    heal.worker_id,
                    heal.state,
                    lease.as_ref(),
                    Some(&heal),
                ),
                // A forked child that has not opened its own yet.
                None => stats_dict(py, true, None, "forked", None, Some(&HealStats::default())),
            },
        }
    }

    /// The coordinator of a leased generator (its URI without password), else None.
    #[getter]
    fn coordinator(&self) -> Option<String> {
        match &self.inner {
            Inner::Static(_) => None,
            Inner::Leased(leased) => Some(leased.coordinator()),
            Inner::Healed(healed) => Some(healed.coordinator()),
        }
    }

    /// Whether ids are issued now: False after `close()`, in a forked child for a fixed worker
    /// id, while a leased generator has no valid lease (lost, or leasing again after a loss
    /// with `heal=True`), and in a forked child that has not leased its own worker id yet
    /// (its first call leases one). For a readiness probe; it never leases or waits.
    #[getter]
    fn is_active(&self) -> bool {
        match &self.inner {
            Inner::Static(_) => self.is_issuing(),
            Inner::Leased(leased) => leased
                .lease_if_current()
                .is_some_and(|lease| lease.is_active()),
            Inner::Healed(healed) => healed.is_active(),
        }
    }

    /// The layout, described as by `describe_layout`.
    #[getter]
    fn layout<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        layout_dict(py, self.layout_ref())
    }

    /// The rollback policy in force: "clock-sequence", "wait", "logical" or "fail".
    #[getter]
    fn on_rollback(&self) -> &'static str {
        self.policy().name()
    }

    /// Longest wait for the clock a refusal may ask for and still carry a retry time.
    #[getter]
    fn max_wait_ms(&self) -> u64 {
        self.options().max_wait_ms
    }

    /// How far ahead of the clock the "logical" policy may run.
    #[getter]
    fn max_drift_ms(&self) -> u64 {
        self.options().max_drift_ms
    }

    fn __repr__(&self) -> String {
        let layout = self.layout_ref();
        let layout = layout
            .preset_name()
            .map_or_else(|| "custom".to_owned(), |name| format!("{name:?}"));
        let policy = self.policy().name();
        match &self.inner {
            Inner::Static(gen) => format!(
                "Generator(worker_id={}, layout={layout}, on_rollback={policy:?})",
                gen.worker_id(),
            ),
            Inner::Leased(leased) => {
                let worker = leased
                    .worker_id_if_current()
                    .map_or_else(|| "None".to_owned(), |id| id.to_string());
                format!(
                    "Generator.open({:?}, worker_id={worker}, layout={layout}, on_rollback={policy:?}, heal=False)",
                    leased.coordinator(),
                )
            }
            Inner::Healed(healed) => {
                let worker = healed
                    .worker_id_if_current()
                    .map_or_else(|| "None".to_owned(), |id| id.to_string());
                format!(
                    "Generator.open({:?}, worker_id={worker}, layout={layout}, on_rollback={policy:?})",
                    healed.coordinator(),
                )
            }
        }
    }
}

impl PyGenerator {
    fn layout_ref(&self) -> &Layout {
        match &self.inner {
            Inner::Static(gen) => gen.layout(),
            Inner::Leased(leased) => leased.layout(),
            Inner::Healed(healed) => healed.layout(),
        }
    }

    fn policy(&self) -> clockflake::Policy {
        match &self.inner {
            Inner::Static(gen) => gen.policy(),
            Inner::Leased(leased) => leased.policy(),
            Inner::Healed(healed) => healed.policy(),
        }
    }

    fn options(&self) -> clockflake::Options {
        match &self.inner {
            Inner::Static(gen) => gen.options(),
            Inner::Leased(leased) => leased.options(),
            Inner::Healed(healed) => healed.options(),
        }
    }
}

/// A `state()` dict back to core's `State`; anything malformed is `INVALID_STATE`.
fn state_arg(value: &Bound<'_, PyAny>, layout: &Layout) -> Result<State, Refusal> {
    let invalid =
        |message: String| Refusal::input("INVALID_STATE", format!("invalid state: {message}"));
    let dict = value
        .cast::<PyDict>()
        .map_err(|_| invalid("expected the dict that Generator.state() returns".into()))?;
    let get = |key: &str| {
        dict.get_item(key)
            .ok()
            .flatten()
            .ok_or_else(|| invalid(format!("missing key {key:?}")))
    };
    // The fingerprint as a decimal str (or the int it stands for), read by core.
    let fingerprint = get("layout_fingerprint")?;
    let fingerprint = match fingerprint.cast::<PyString>() {
        Ok(text) => text.to_str().map(str::to_owned).ok(),
        Err(_) => as_u64(&fingerprint).ok().map(|n| n.to_string()),
    }
    .ok_or_else(|| invalid("expected layout_fingerprint as a decimal str".into()))?;
    let worker_id = worker_id_arg(&get("worker_id")?, layout)?;
    let clock_seq = as_u64(&get("clock_seq")?)
        .map_err(|p| invalid(format!("expected clock_seq as an int, found {}", p.found())))?;
    let marks = get("high_water_ms")?;
    let marks =
        list_items(&marks).ok_or_else(|| invalid("expected high_water_ms as a list".into()))?;
    let marks = marks
        .iter()
        .map(|mark| {
            if mark.is_none() {
                return Ok(None);
            }
            as_u64(mark).map(Some).map_err(|p| {
                invalid(format!(
                    "expected each high-water mark as Unix ms or None, found {}",
                    p.found()
                ))
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(State::from_record(
        layout,
        &fingerprint,
        worker_id,
        clock_seq,
        marks,
    )?)
}

/// The dict `stats()` returns: the lease crate's figures, or (`lease` None: a fixed worker id,
/// or a forked child that has not leased its own yet) its zero counters and no deadline.
fn stats_dict<'py>(
    py: Python<'py>,
    leased: bool,
    worker_id: Option<u64>,
    state: &str,
    lease: Option<&LeaseStats>,
    heal: Option<&HealStats>,
) -> PyResult<Bound<'py, PyDict>> {
    let counters = lease.map_or_else(LeaseCounters::default, |figures| figures.counters);
    let stats = PyDict::new(py);
    stats.set_item("worker_id", worker_id)?;
    stats.set_item("state", state)?;
    stats.set_item("leased", leased)?;
    stats.set_item("renewals", counters.renewals)?;
    stats.set_item("renewal_failures", counters.renewal_failures)?;
    stats.set_item("clock_steps_back", counters.clock_steps_back)?;
    stats.set_item("clock_seq_switches", counters.clock_seq_switches)?;
    stats.set_item("waits", counters.waits)?;
    stats.set_item("wait_us", counters.wait_us)?;
    stats.set_item("deadline_in_ms", lease.and_then(|f| f.deadline_in_ms))?;
    stats.set_item(
        "reserved_until_ms",
        lease.map_or(0, |f| f.reserved_until_ms),
    )?;
    stats.set_item("measured_skew_ms", lease.and_then(|f| f.measured_skew_ms))?;
    let healing = heal.cloned().unwrap_or_default();
    stats.set_item("heal", heal.is_some())?;
    stats.set_item("losses", healing.losses)?;
    stats.set_item("heals", healing.heals)?;
    stats.set_item("heal_failures", healing.failed_attempts)?;
    stats.set_item("last_loss", healing.last_loss)?;
    stats.set_item("last_heal_error", healing.last_error)?;
    Ok(stats)
}
