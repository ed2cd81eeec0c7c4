//! Prints core's own code and message for every case of `tests/errors.test.mjs`, one line a
//! case: `name<TAB>code<TAB>message`. The test provokes the same refusal with the same input
//! through the package's API and compares, so the JavaScript mapping is checked against core
//! itself, never against a retyped copy. `make test-node` runs it into `pkg/core-errors.tsv`:
//! `cargo run -q -p clockflake-node --example core_errors`.

use std::process::ExitCode;

use clockflake::{
    Error, Field, Generator, Layout, Options, Parts, Policy, PublicIds, State, MAX_CLOCK_SEQS,
};

const T: u64 = 1_767_225_600_000; // 2026-01-01
const KEY: [u8; 16] = [7; 16];

/// A case's name (its code first) and the call through core that must refuse.
type Case = (&'static str, fn() -> Result<(), Error>);

fn clockseq() -> Result<Layout, Error> {
    Layout::by_name("clockseq")
}

/// A layout from field names, as the API takes it (`Field::from_name` refuses unknown names).
fn custom(fields: &[(&str, u32)], unit_ms: u64, epoch_ms: u64) -> Result<(), Error> {
    let fields = fields
        .iter()
        .map(|&(name, bits)| Ok((Field::from_name(name)?, bits)))
        .collect::<Result<Vec<_>, Error>>()?;
    Layout::new(&fields, unit_ms, epoch_ms).map(drop)
}

fn generator(layout: &str, worker_id: u64, policy: Option<&str>) -> Result<Generator, Error> {
    let options = Options {
        on_rollback: policy.map(Policy::from_name).transpose()?,
        ..Options::default()
    };
    Generator::new(Layout::by_name(layout)?, worker_id, options)
}

fn encode(
    layout: &str,
    timestamp_ms: u64,
    clock_seq: u64,
    worker_id: u64,
    sequence: u64,
) -> Result<(), Error> {
    let parts = Parts {
        timestamp_ms,
        clock_seq,
        worker_id,
        sequence,
    };
    Layout::by_name(layout)?.encode(&parts).map(drop)
}

fn public(version: u8) -> Result<PublicIds, Error> {
    PublicIds::new(version, KEY)
}

const CASES: &[Case] = &[
    ("INVALID_ID empty", || clockseq()?.parse_id("").map(drop)),
    ("INVALID_ID minus", || clockseq()?.parse_id("-5").map(drop)),
    ("INVALID_ID letter", || {
        clockseq()?.parse_id("12a").map(drop)
    }),
    ("INVALID_ID emoji", || clockseq()?.parse_id("1😀").map(drop)),
    ("INVALID_ID too large", || {
        clockseq()?.parse_id("99999999999999999999").map(drop)
    }),
    ("INVALID_ID sign bit", || {
        clockseq()?.decode(1 << 63).map(drop)
    }),
    ("INVALID_ID sign bit text", || {
        clockseq()?.parse_id(&(1u64 << 63).to_string()).map(drop)
    }),
    ("INVALID_ID above layout", || {
        Layout::by_name("js53")?.decode(1 << 53).map(drop)
    }),
    ("INVALID_LAYOUT too wide", || {
        custom(&[("timestamp", 60), ("sequence", 10)], 1, 0)
    }),
    ("INVALID_LAYOUT unknown field", || {
        custom(&[("timestamp", 41), ("shard", 3)], 1, 0)
    }),
    ("INVALID_LAYOUT no sequence", || {
        custom(&[("timestamp", 41)], 1, 0)
    }),
    ("INVALID_LAYOUT zero unit", || {
        custom(&[("timestamp", 41), ("sequence", 12)], 0, 0)
    }),
    ("UNKNOWN_LAYOUT", || Layout::by_name("snowflake").map(drop)),
    ("UNKNOWN_POLICY", || {
        generator("clockseq", 1, Some("retry")).map(drop)
    }),
    ("WORKER_ID_OUT_OF_RANGE", || {
        generator("clockseq", 128, None).map(drop)
    }),
    ("WORKER_ID_OUT_OF_RANGE encode", || {
        encode("twitter", T, 0, 1024, 0)
    }),
    ("TIMESTAMP_OUT_OF_RANGE", || encode("clockseq", 5, 0, 1, 0)),
    ("CLOCK_SEQ_OUT_OF_RANGE", || encode("clockseq", T, 8, 1, 0)),
    ("SEQUENCE_OUT_OF_RANGE", || {
        encode("clockseq", T, 0, 1, 4096)
    }),
    ("INVALID_RANGE", || clockseq()?.id_range(T + 1, T).map(drop)),
    ("EPOCH_IN_FUTURE", || {
        generator("clockseq", 1, None)?.next_id_at(1000).map(drop)
    }),
    ("TIMESTAMP_EXHAUSTED", || {
        generator("baidu", 1, None)?.next_id_at(T).map(drop)
    }),
    ("CLOCK_MOVED_BACKWARDS", || {
        let generator = generator("clockseq", 1, Some("fail"))?;
        generator.next_id_at(T)?;
        generator.next_id_at(T - 10).map(drop)
    }),
    ("INVALID_STATE layout", || {
        let state = State {
            layout_fingerprint: 3,
            worker_id: 1,
            clock_seq: 0,
            high_water_ms: [None; MAX_CLOCK_SEQS],
        };
        Generator::resume(clockseq()?, &state, Options::default()).map(drop)
    }),
    ("INVALID_PUBLIC_ID length", || {
        public(1)?.decode_text("ABC").map(drop)
    }),
    ("INVALID_PUBLIC_ID character", || {
        public(1)?.decode_text("1ABCDEFGHJKMNPQ!").map(drop)
    }),
    ("INVALID_PUBLIC_ID range", || {
        public(1)?.decode(1 << 63).map(drop)
    }),
    ("UNKNOWN_KEY_VERSION", || {
        let text = public(5)?.encode_text(1)?;
        public(1)?.decode_text(text.as_str()).map(drop)
    }),
    ("INVALID_KEY_VERSION duplicate", || {
        public(1)?.with_old_key(1, KEY).map(drop)
    }),
];

fn main() -> ExitCode {
    for (name, call) in CASES {
        let Err(error) = call() else {
            eprintln!("{name}: core accepted the input");
            return ExitCode::FAILURE;
        };
        let message = error.to_string();
        if message.contains(['\t', '\n']) {
            eprintln!("{name}: a tab or a line break in the message: {message:?}");
            return ExitCode::FAILURE;
        }
        println!("{name}\t{}\t{message}", error.code());
    }
    ExitCode::SUCCESS
}
