//! The atomics the generator shares between threads, from `core` in every build and from
//! [loom](https://docs.rs/loom) under `--cfg loom`, so the loom models in `tests/loom.rs`
//! explore the same code every build runs.
//!
//! The pattern, for any crate whose atomics should be model-checked: import atomics only
//! through a module like this one; give loom a dependency under `[target.'cfg(loom)'.dependencies]`
//! (the root `Cargo.toml` declares the `loom` cfg to the `unexpected_cfgs` lint); spin with
//! [`spin_loop`], which yields to loom's scheduler; reach a `&mut` atomic's value through
//! [`load_mut`] and [`store_mut`] (loom has no `get_mut`). `make test-loom` builds with
//! `RUSTFLAGS="--cfg loom"` in its own target directory.

#[cfg(not(loom))]
pub(crate) use core::sync::atomic::{AtomicBool, AtomicU64, Ordering};
#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// One turn of a spin-wait: a CPU hint, or under loom a yield so that the model checker
/// schedules the thread holding the lock.
#[inline(always)]
pub(crate) fn spin_loop() {
    #[cfg(not(loom))]
    core::hint::spin_loop();
    #[cfg(loom)]
    loom::thread::yield_now();
}

/// The value of an atomic this thread owns, without an atomic instruction.
#[inline(always)]
pub(crate) fn load_mut(atomic: &mut AtomicU64) -> u64 {
    #[cfg(not(loom))]
    return *atomic.get_mut();
    #[cfg(loom)]
    return atomic.with_mut(|value| *value);
}

/// Sets an atomic this thread owns, without an atomic instruction.
#[inline(always)]
pub(crate) fn store_mut(atomic: &mut AtomicU64, value: u64) {
    #[cfg(not(loom))]
    {
        *atomic.get_mut() = value;
    }
    #[cfg(loom)]
    atomic.with_mut(|slot| *slot = value);
}
