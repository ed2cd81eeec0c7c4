//! The blocking driver of a lease's start-up ([`crate::holder::Start`]): the machine decides,
//! this does the coordinator's requests and reads the clocks.

use std::time::{Duration, Instant};

use clockflake::{Layout, Options};

use crate::clock::boot_ms;
use crate::holder::{Clocks, ServerClock, Start, Started, Step};
use crate::{Coordinator, LeaseError};

/// Takes a worker id from `coordinator` under `layout`, resumes core's generator (with
/// `options`) from the worker's record and persists the first reservation, `reserve` ahead of
/// the generator's time `wall_ms()`. Refused, a granted worker id goes back untouched.
///
/// Every request is bounded by the coordinator's own timeouts. Used by the leased and healing
/// generators and by the PostgreSQL extension's lease worker, which then publish
/// [`Started::limits`] and drive [`Started::holder`].
pub fn start_lease(
    coordinator: &mut dyn Coordinator,
    layout: Layout,
    options: Options,
    reserve: Duration,
    wall_ms: impl Fn() -> u64,
) -> Result<Started, LeaseError> {
    let now = || Clocks {
        boot_ms: boot_ms(),
        wall_ms: wall_ms(),
    };
    let mut start = Start::new(
        layout,
        options,
        reserve,
        coordinator.redacted_uri(),
        coordinator.max_skew(),
    );
    let mut step = start.begin(now());
    loop {
        step = match step {
            Step::Acquire { wall_ms } => match coordinator.acquire(&layout, wall_ms) {
                Ok(grant) => start.granted(grant, now()),
                Err(error) => start.failed(error),
            },
            Step::ReadClock => {
                let sent_ms = wall_ms();
                // The round trip on a monotonic clock (an injected wall clock may stand still).
                let sent = Instant::now();
                match coordinator.server_time_ms() {
                    Ok(server_ms) => {
                        let round_trip_ms =
                            u64::try_from(sent.elapsed().as_millis()).unwrap_or(u64::MAX);
                        let read = server_ms.map(|server_ms| ServerClock {
                            sent_ms,
                            round_trip_ms,
                            server_ms,
                        });
                        start.clock_read(read, now())
                    }
                    Err(error) => start.failed(error),
                }
            }
            Step::Persist(record) => match coordinator.renew(&record) {
                Ok(()) => start.persisted(now()),
                Err(error) => start.failed(error),
            },
            Step::Started(started) => return Ok(*started),
            Step::Refuse { error, release } => {
                if release {
                    let _ = coordinator.release(None);
                }
                return Err(error);
            }
        }
    }
}
