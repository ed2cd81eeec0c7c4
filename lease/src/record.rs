//! The state record as text: what the file coordinator stores, with a checksum so that a torn
//! or edited file is refused instead of silently read.
//!
//! ```text
//! clockflake-state 1
//! layout_fingerprint 10663758419402815432
//! worker_id 5
//! clock_seq 0
//! high_water_ms 1795000001000 - - - - - - -
//! checksum 9f3a0c2b11d4e5f6
//! ```
//! `-` is a clock sequence never used; the checksum is FNV-1a 64 over every byte before the
//! `checksum` line.

use clockflake::{State, MAX_CLOCK_SEQS};

const MAGIC: &str = "clockflake-state 1";

fn fnv1a(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &byte in bytes {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3);
    }
    hash
}

/// The record as text.
pub fn encode(state: &State) -> String {
    let marks: Vec<String> = state
        .high_water_ms
        .iter()
        .map(|mark| mark.map_or_else(|| "-".to_owned(), |ms| ms.to_string()))
        .collect();
    let body = format!(
        "{MAGIC}\nlayout_fingerprint {}\nworker_id {}\nclock_seq {}\nhigh_water_ms {}\n",
        state.layout_fingerprint,
        state.worker_id,
        state.clock_seq,
        marks.join(" ")
    );
    let checksum = fnv1a(body.as_bytes());
    format!("{body}checksum {checksum:016x}\n")
}

/// Reads a record, or says exactly what is wrong with it.
pub fn decode(text: &[u8]) -> Result<State, String> {
    let text = std::str::from_utf8(text).map_err(|_| "not UTF-8 text".to_owned())?;
    if text.is_empty() {
        return Err("the file is empty".to_owned());
    }
    let checksum_at = text
        .rfind("checksum ")
        .ok_or_else(|| "no checksum line (truncated?)".to_owned())?;
    let (body, checksum_line) = text.split_at(checksum_at);
    let stored = checksum_line
        .strip_prefix("checksum ")
        .and_then(|rest| rest.strip_suffix('\n'))
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .ok_or_else(|| "malformed checksum line".to_owned())?;
    let actual = fnv1a(body.as_bytes());
    if stored != actual {
        return Err(format!(
            "checksum mismatch: stored {stored:016x}, computed {actual:016x}"
        ));
    }
    let mut lines = body.lines();
    if lines.next() != Some(MAGIC) {
        return Err(format!("expected first line {MAGIC:?}"));
    }
    let mut field = |name: &str| -> Result<&str, String> {
        lines
            .next()
            .and_then(|line| line.strip_prefix(name))
            .and_then(|rest| rest.strip_prefix(' '))
            .ok_or_else(|| format!("expected a {name} line"))
    };
    let number = |name: &str, text: &str| -> Result<u64, String> {
        text.parse()
            .map_err(|_| format!("{name}: expected an unsigned integer, found {text:?}"))
    };
    let layout_fingerprint = number("layout_fingerprint", field("layout_fingerprint")?)?;
    let worker_id = number("worker_id", field("worker_id")?)?;
    let clock_seq = number("clock_seq", field("clock_seq")?)?;
    let marks_text = field("high_water_ms")?;
    let mut high_water_ms = [None; MAX_CLOCK_SEQS];
    let marks: Vec<&str> = marks_text.split(' ').collect();
    if marks.len() != MAX_CLOCK_SEQS {
        return Err(format!(
            "high_water_ms: expected {MAX_CLOCK_SEQS} entries, found {}",
            marks.len()
        ));
    }
    for (slot, mark) in high_water_ms.iter_mut().zip(marks) {
        if mark != "-" {
            *slot = Some(number("high_water_ms", mark)?);
        }
    }
    Ok(State {
        layout_fingerprint,
        worker_id,
        clock_seq,
        high_water_ms,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> State {
        let mut high_water_ms = [None; MAX_CLOCK_SEQS];
        high_water_ms[0] = Some(1_795_000_001_000);
        high_water_ms[3] = Some(7);
        State {
            layout_fingerprint: u64::MAX - 3,
            worker_id: 5,
            clock_seq: 3,
            high_water_ms,
        }
    }

    #[test]
    fn round_trips() {
        let state = sample();
        assert_eq!(decode(encode(&state).as_bytes()), Ok(state));
    }

    #[test]
    fn every_truncation_and_every_flipped_byte_is_refused() {
        let text = encode(&sample()).into_bytes();
        for len in 0..text.len() {
            assert!(decode(&text[..len]).is_err(), "truncated to {len}");
        }
        for at in 0..text.len() {
            let mut bad = text.clone();
            bad[at] ^= 0x01;
            assert!(decode(&bad).is_err(), "byte {at} flipped");
        }
    }

    /// `state`'s record with `first` in place of the format line, under a valid checksum:
    /// what a writer of another format version would store.
    fn with_format_line(state: &State, first: &str) -> String {
        let text = encode(state);
        let body = text
            .split_at(text.rfind("checksum ").unwrap())
            .0
            .replacen(MAGIC, first, 1);
        format!("{body}checksum {:016x}\n", fnv1a(body.as_bytes()))
    }

    /// A record of a format version this reader does not know (a later one, or none) is
    /// refused, naming the version it reads, and never read as a version 1 record even when
    /// every line after the first is one it knows. The version's line is the only place a
    /// reader can tell formats apart: a reader that took any `clockflake-state N` would resume
    /// from marks it does not understand.
    #[test]
    fn a_record_of_another_format_version_is_refused() {
        assert_eq!(
            decode(with_format_line(&sample(), MAGIC).as_bytes()),
            Ok(sample())
        );
        for first in [
            "clockflake-state 2",
            "clockflake-state 10",
            "clockflake-state",
        ] {
            let reason = decode(with_format_line(&sample(), first).as_bytes()).unwrap_err();
            assert!(
                reason.contains("expected first line \"clockflake-state 1\""),
                "{first}: {reason}"
            );
        }
    }

    /// The same record met by a coordinator at `open`: `INVALID_STATE`, and the record left
    /// as it was (`file://`, no server needed; PostgreSQL rows carry no format line, and
    /// Redis and ZooKeeper store this same text, read by [`decode`]).
    #[test]
    fn a_newer_record_in_a_pool_refuses_open_with_invalid_state() {
        let dir = clockflake_test_support::TempDir::new("record-format");
        crate::FileCoordinator::new(&*dir, "pool").unwrap();
        let layout = clockflake::Layout::CLOCKSEQ;
        // A record this version could resume from but for its format line: this layout's,
        // worker id 5's, one clock sequence used, its mark long past.
        let mut high_water_ms = [None; MAX_CLOCK_SEQS];
        high_water_ms[0] = Some(1_750_000_000_000);
        let state = State {
            layout_fingerprint: layout.fingerprint(),
            worker_id: 5,
            clock_seq: 0,
            high_water_ms,
        };
        let path = dir.join("pool").join("worker-5.state");
        let newer = with_format_line(&state, "clockflake-state 2");
        std::fs::write(&path, &newer).unwrap();
        let uri = format!("file://{}?app=pool", dir.display());
        // Worker ids 0 to 4 are held, so that worker id 5 is the first free one.
        let held: Vec<_> = (0..5)
            .map(|_| crate::open(&uri, layout, crate::LeaseOptions::default()).unwrap())
            .collect();
        let error = crate::open(&uri, layout, crate::LeaseOptions::default()).unwrap_err();
        assert_eq!(error.code(), "INVALID_STATE", "{error}");
        assert!(error.to_string().contains("clockflake-state 1"), "{error}");
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            newer,
            "left as it was"
        );
        drop(held);
    }
}
