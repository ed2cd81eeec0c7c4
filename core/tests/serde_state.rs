//! With the `serde` feature, a saved state survives JSON and resumes without repeats.
#![cfg(feature = "serde")]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clockflake::{Generator, Layout, Options, Policy, State};

#[test]
fn state_survives_json_and_resumes_above_every_issued_id() {
    let t = 1_735_689_600_000;
    let gen = Generator::new(Layout::CLOCKSEQ, 9, Options::default()).unwrap();
    let mut issued = vec![gen.next_id_at(t).unwrap(), gen.next_id_at(t - 10).unwrap()];
    let json = serde_json::to_string(&gen.state()).unwrap();
    let state: State = serde_json::from_str(&json).unwrap();
    assert_eq!(state, gen.state());
    let resumed = Generator::resume(Layout::CLOCKSEQ, &state, Options::default()).unwrap();
    // The saved tick counts as full: nothing more is issued in it.
    let refusal = resumed.next_id_at(t - 10).unwrap_err();
    assert_eq!(refusal.code(), "SEQUENCE_EXHAUSTED");
    for back in [5, 0] {
        issued.push(resumed.next_id_at(t - back).unwrap());
    }
    let mut unique = issued.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), issued.len());
    assert_eq!(
        serde_json::to_string(&Policy::ClockSequence).unwrap(),
        "\"clock-sequence\""
    );
}
