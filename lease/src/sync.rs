//! The atomics the id path and the renewal thread share (`generator::limits`), from `std` in
//! every build and from [loom](https://docs.rs/loom) under `--cfg loom`, so that the loom models
//! in `limits.rs` explore the code every build runs (`make test-loom`). The same
//! pattern as core's `sync.rs`.

#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{AtomicU64, Ordering};

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, Ordering};
