//! State records: the lease crate's file record (`lease/src/record.rs`, compiled in from its
//! source: the module is private to the lease crate) and core's `State::from_record` (what the
//! bindings hand back), then `Generator::resume` on what they accept.
//! Properties: an accepted record re-encodes to one that reads back the same; a refusal says
//! why; a resumed generator issues or refuses with a stable code, never panics.
//! The input is tried as it is and with a valid checksum line appended, so that the fuzzer
//! reaches the fields behind the checksum.
#![no_main]

mod common;

#[path = "../../lease/src/record.rs"]
#[allow(dead_code)]
mod record;

use clockflake::{Generator, Options, State};
use libfuzzer_sys::fuzz_target;

/// FNV-1a 64, the record's checksum (record.rs keeps its own private).
fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

fn resume_and_issue(state: &State) {
    for layout in common::layouts() {
        match Generator::resume(layout, state, Options::default()) {
            Ok(gen) => {
                for now_ms in [0, layout.epoch_ms(), 1_795_000_000_000, u64::MAX] {
                    if let Err(error) = gen.next_id_at(now_ms) {
                        common::check_error(&error);
                    }
                }
            }
            Err(error) => common::check_error(&error),
        }
    }
}

fn check_file_record(bytes: &[u8]) {
    match record::decode(bytes) {
        Ok(state) => {
            assert_eq!(record::decode(record::encode(&state).as_bytes()), Ok(state));
            resume_and_issue(&state);
        }
        Err(reason) => assert!(!reason.is_empty()),
    }
}

/// Core's record: the fingerprint text on the first line, one mark per further line
/// (`-` for none, digits for Unix ms; anything else is left out).
fn check_core_record(text: &str) {
    let mut lines = text.split('\n');
    let fingerprint = lines.next().unwrap_or("");
    let marks: Vec<Option<u64>> = lines
        .filter_map(|line| match line {
            "-" => Some(None),
            digits => digits.parse().ok().map(Some),
        })
        .collect();
    for layout in common::layouts() {
        let worker_id = marks.len() as u64 % 4;
        let clock_seq = marks.len() as u64 % 3;
        match State::from_record(&layout, fingerprint, worker_id, clock_seq, marks.clone()) {
            Ok(state) => {
                let text = state.layout_fingerprint.to_string();
                let again = State::from_record(
                    &layout,
                    &text,
                    worker_id,
                    clock_seq,
                    state.marks(&layout).to_vec(),
                );
                assert_eq!(again, Ok(state));
                resume_and_issue(&state);
            }
            Err(error) => {
                assert_eq!(error.code(), "INVALID_STATE");
                common::check_error(&error);
            }
        }
    }
}

fuzz_target!(|bytes: &[u8]| {
    check_file_record(bytes);
    let mut sealed = bytes.to_vec();
    if !sealed.ends_with(b"\n") {
        sealed.push(b'\n');
    }
    let checksum = fnv1a(&sealed);
    sealed.extend_from_slice(format!("checksum {checksum:016x}\n").as_bytes());
    check_file_record(&sealed);
    if let Ok(text) = std::str::from_utf8(bytes) {
        check_core_record(text);
    }
});
