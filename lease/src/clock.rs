//! The clocks a lease is measured on.

use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds on a clock that never steps and keeps counting while the machine is
/// suspended (and while the process is stopped): `CLOCK_BOOTTIME` on Linux. Lease deadlines
/// are measured on it, so a suspend or a `SIGSTOP` can only bring a deadline closer.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[inline]
pub fn boot_ms() -> u64 {
    let now = rustix::time::clock_gettime(rustix::time::ClockId::Boottime);
    // Both fields are non-negative for CLOCK_BOOTTIME.
    (now.tv_sec as u64) * 1000 + (now.tv_nsec as u64) / 1_000_000
}

/// Milliseconds on the process's monotonic clock (elsewhere than Linux: it may not count
/// suspended time, which the deadline's safety margin then has to cover).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
#[inline]
pub fn boot_ms() -> u64 {
    use std::sync::OnceLock;
    use std::time::Instant;
    static ORIGIN: OnceLock<Instant> = OnceLock::new();
    let origin = ORIGIN.get_or_init(Instant::now);
    // Start at 1 s so that 0 can mean "already expired".
    1000 + origin.elapsed().as_millis() as u64
}

/// The wall clock, Unix ms.
pub fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_millis() as u64)
}
