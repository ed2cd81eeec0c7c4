//! The blocking calls never sleep for long: a full tick whose successor starts more than
//! `Generator::MAX_TICK_WAIT_MS` away is refused at once with its retry time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use clockflake::{Error, Field, Generator, Layout, MonotonicClock, Options};

const DAY_MS: u64 = 86_400_000;

/// One id a day per worker: a 1-day unit and no sequence bits, with the epoch 12 h ago so that
/// the current day has 12 h left whenever the test runs.
fn daily() -> (Layout, u64) {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let epoch = now - DAY_MS / 2;
    let layout = Layout::new(
        &[
            (Field::Timestamp, 20),
            (Field::Worker, 4),
            (Field::Sequence, 0),
        ],
        DAY_MS,
        epoch,
    )
    .unwrap();
    (layout, epoch + DAY_MS)
}

/// Runs `call` on a thread and gives its result, or fails if it takes more than a second (the
/// thread is left behind: before the bound it would sleep for half a day).
fn within_a_second<T: Send + 'static>(call: impl FnOnce() -> T + Send + 'static) -> (T, Duration) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let started = Instant::now();
        let outcome = call();
        let _ = tx.send((outcome, started.elapsed()));
    });
    rx.recv_timeout(Duration::from_secs(1))
        .expect("the blocking call was still waiting after a second")
}

fn assert_refused_with_retry(error: Error, retry_at_ms: u64) {
    assert_eq!(error.code(), "SEQUENCE_EXHAUSTED", "{error}");
    assert_eq!(error.retry_at_ms(), Some(retry_at_ms), "{error}");
    assert!(
        error.to_string().contains(&retry_at_ms.to_string()),
        "{error}"
    );
}

#[test]
fn next_id_refuses_at_once_when_the_next_tick_is_a_day_away() {
    let (layout, next_day) = daily();
    let (outcome, took) = within_a_second(move || {
        let gen = Generator::new(layout, 3, Options::default()).unwrap();
        gen.next_id().unwrap();
        gen.next_id()
    });
    assert_refused_with_retry(outcome.unwrap_err(), next_day);
    assert!(took < Duration::from_millis(100), "took {took:?}");
}

#[test]
fn next_ids_and_next_id_with_refuse_at_once_too() {
    let (layout, next_day) = daily();
    let (outcome, _) = within_a_second(move || {
        let gen = Generator::new(layout, 3, Options::default()).unwrap();
        let mut two = [0u64; 2];
        gen.next_ids_with(MonotonicClock::global(), &mut two)
    });
    assert_refused_with_retry(outcome.unwrap_err(), next_day);

    let (outcome, _) = within_a_second(move || {
        let gen = Generator::new(layout, 3, Options::default()).unwrap();
        let clock = || next_day - 3 * 3_600_000;
        gen.next_id_with(&clock).unwrap();
        gen.next_id_with(&clock)
    });
    assert_refused_with_retry(outcome.unwrap_err(), next_day);
}

#[test]
fn a_tick_that_ends_within_the_bound_is_still_waited_for() {
    // 1-second ticks, no sequence bits: the second id waits for the next second.
    let layout = Layout::new(
        &[
            (Field::Timestamp, 33),
            (Field::Worker, 4),
            (Field::Sequence, 0),
        ],
        1000,
        Layout::JS53.epoch_ms(),
    )
    .unwrap();
    assert!(Generator::MAX_TICK_WAIT_MS >= layout.unit_ms());
    let gen = Generator::new(layout, 3, Options::default()).unwrap();
    let a = gen.next_id().unwrap();
    let b = gen.next_id().unwrap();
    assert!(b > a);
    assert_eq!(
        layout.decode(b).unwrap().timestamp_ms,
        layout.decode(a).unwrap().timestamp_ms + 1000
    );
}
