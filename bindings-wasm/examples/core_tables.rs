//! Writes core's tables for the npm package's JavaScript as an ES module on stdout: the message
//! template of every error kind (made from core's own `Display`), core's error codes, the preset
//! layouts and the default, and the names of the fields and rollback policies. `make build-js`
//! runs it into `bindings-node/wasm/core.js` (git-ignored: a build output, like the engine it
//! sits beside), which `js/messages.js`, `js/decode.js`, `js/layouts.js` and `js/engine.js`
//! import: `cargo run -q -p clockflake-wasm --example core_tables`.
//!
//! A template is core's message for an error built with sentinel values, each sentinel's text
//! replaced by a placeholder naming the field (in `src/error_numbers.rs` order, the numbers the
//! engine hands over) that it came from: `{0}` field 0 in decimal, `{0:char}` Rust's `{:?}` of
//! the char whose code point field 0 is, `{0:field}` the name of the layout field it numbers,
//! `{0-1}` field 0 less field 1 (0 if that is negative). A variant with an optional field (a
//! `retry_at_ms`) has a second template, for when that field is absent (`NONE`).

// A build step: a message whose shape no longer fits (a sentinel shown twice, a kind without a
// template) stops the build with a panic naming it.
#![allow(clippy::panic)]

#[path = "../src/error_numbers.rs"]
mod error_numbers;

use std::collections::BTreeMap;

use clockflake::{
    Error, Field, InvalidId, Layout, LayoutProblem, Policy, PublicIdProblem, StateProblem,
};
use error_numbers::{error_numbers, NONE};

/// Where a number of the error shows in its message.
#[derive(Clone, Copy)]
enum Hole {
    /// Field `i` in decimal.
    Decimal(usize),
    /// Rust's `{:?}` of the char whose code point is field `i`.
    Char(usize),
    /// The name of the layout field that field `i` numbers.
    FieldName(usize),
    /// Field `i` less field `j`, saturating at 0.
    Less(usize, usize),
}

/// Core's fields in the order of their numbers (`field as u64`, as error_numbers.rs hands them).
const FIELDS: [Field; 4] = [
    Field::Timestamp,
    Field::ClockSeq,
    Field::Worker,
    Field::Sequence,
];

/// Sentinels: distinctive numbers for each width a field can have, none a part of another, of
/// another's difference or of any message's own text (checked for each template).
const WIDE: [u64; 4] = [
    17_000_000_000_000_000_017,
    13_000_000_000_000_000_013,
    11_000_000_000_000_000_011,
    7_000_000_000_000_000_007,
];
const NARROW: [u32; 3] = [3_700_000_037, 3_100_000_031, 2_900_000_029];
const BYTE: u8 = 217;
const CHAR: char = 'Ж';
const FIELD: Field = Field::ClockSeq;

type Shape = (Error, Vec<Hole>, Option<usize>);

/// One kind's templates: with every field present, and (absent field, template) if it may be absent.
#[derive(Debug, Default)]
struct Templates {
    some: Option<String>,
    none: Option<(usize, String)>,
}

/// A shape whose numbers show where `holes` say.
fn shape(error: Error, holes: &[Hole]) -> Shape {
    (error, holes.to_vec(), None)
}

/// A shape that applies when field `absent` is absent (`NONE`).
fn absent(error: Error, holes: &[Hole], absent: usize) -> Shape {
    (error, holes.to_vec(), Some(absent))
}

/// Every shape a message takes: an error of each variant and sub-kind built from sentinels,
/// where its numbers show, and which field (if any) must be absent for this shape to apply.
fn shapes() -> Vec<Shape> {
    use Hole::{Char, Decimal, FieldName, Less};
    use InvalidId as Id;
    use LayoutProblem as L;
    use PublicIdProblem as P;
    use StateProblem as S;
    let [w0, w1, w2, _] = WIDE;
    let [n0, n1, n2] = NARROW;
    let at = n1 as usize;
    let (one, two, three) = (
        [Decimal(0)],
        [Decimal(0), Decimal(1)],
        [Decimal(0), Decimal(1), Decimal(2)],
    );
    vec![
        shape(Error::InvalidId(Id::Empty), &[]),
        shape(Error::InvalidId(Id::Negative), &[]),
        shape(
            Error::InvalidId(Id::NotADigit { found: CHAR, at }),
            &[Char(0), Decimal(1)],
        ),
        shape(Error::InvalidId(Id::TooLarge), &[]),
        shape(Error::InvalidId(Id::SignBitSet(w0)), &one),
        shape(
            Error::InvalidId(Id::AboveLayoutMax { id: w0, max: w1 }),
            &two,
        ),
        shape(Error::InvalidLayout(L::TooWide { bits: n0 }), &one),
        shape(
            Error::InvalidLayout(L::FieldTooWide {
                field: FIELD,
                bits: n1,
                max: n2,
            }),
            &[FieldName(0), Decimal(1), Decimal(2)],
        ),
        shape(
            Error::InvalidLayout(L::FieldTooNarrow(FIELD)),
            &[FieldName(0)],
        ),
        shape(Error::InvalidLayout(L::DuplicateField), &[]),
        shape(Error::InvalidLayout(L::UnknownField), &[]),
        shape(Error::InvalidLayout(L::TimestampNotFirst), &[]),
        shape(Error::InvalidLayout(L::MissingSequence), &[]),
        shape(Error::InvalidLayout(L::ZeroUnit), &[]),
        shape(Error::InvalidLayout(L::LifetimeTooLong), &[]),
        shape(Error::UnknownLayout, &[]),
        shape(Error::UnknownPolicy, &[]),
        shape(
            Error::WorkerIdOutOfRange {
                worker_id: w0,
                max: w1,
            },
            &two,
        ),
        shape(
            Error::TimestampOutOfRange {
                timestamp_ms: w0,
                min_ms: w1,
                max_ms: w2,
            },
            &three,
        ),
        shape(
            Error::ClockSeqOutOfRange {
                clock_seq: w0,
                max: w1,
            },
            &two,
        ),
        shape(
            Error::SequenceOutOfRange {
                sequence: w0,
                max: w1,
            },
            &two,
        ),
        shape(
            Error::InvalidRange {
                from_ms: w0,
                to_ms: w1,
            },
            &two,
        ),
        shape(
            Error::EpochInFuture {
                now_ms: w0,
                epoch_ms: w1,
            },
            &two,
        ),
        shape(
            Error::TimestampExhausted {
                now_ms: w0,
                lifetime_end_ms: w1,
            },
            &two,
        ),
        shape(Error::SequenceExhausted { retry_at_ms: w0 }, &one),
        shape(
            Error::ClockMovedBackwards {
                last_ms: w0,
                now_ms: w1,
                retry_at_ms: Some(w2),
            },
            &[Decimal(0), Decimal(1), Less(0, 1), Decimal(2)],
        ),
        absent(
            Error::ClockMovedBackwards {
                last_ms: w0,
                now_ms: w1,
                retry_at_ms: None,
            },
            &[Decimal(0), Decimal(1), Less(0, 1)],
            2,
        ),
        shape(
            Error::ClockSequenceExhausted {
                now_ms: w0,
                retry_at_ms: Some(w1),
            },
            &two,
        ),
        absent(
            Error::ClockSequenceExhausted {
                now_ms: w0,
                retry_at_ms: None,
            },
            &one,
            1,
        ),
        shape(
            Error::InvalidState(S::LayoutMismatch {
                expected: w0,
                found: w1,
            }),
            &two,
        ),
        shape(Error::InvalidState(S::ClockSeqOutOfRange), &[]),
        shape(Error::InvalidState(S::HighWaterOutOfRange), &[]),
        shape(Error::InvalidState(S::FingerprintNotDecimal), &[]),
        shape(
            Error::InvalidState(S::MarkCount {
                expected: w0,
                found: w1,
            }),
            &two,
        ),
        shape(
            Error::ClockNotAdvancing {
                waiting_for_ms: w0,
                now_ms: w1,
            },
            &two,
        ),
        shape(Error::WorkerIdInvalidated, &[]),
        shape(Error::GeneratorClosed, &[]),
        shape(Error::InvalidPublicId(P::WrongLength { found: at }), &one),
        shape(
            Error::InvalidPublicId(P::BadCharacter { found: CHAR, at }),
            &[Char(0), Decimal(1)],
        ),
        shape(Error::InvalidPublicId(P::ChecksumMismatch), &[]),
        shape(Error::InvalidPublicId(P::OutOfRange), &[]),
        shape(Error::UnknownKeyVersion { version: BYTE }, &one),
        shape(Error::InvalidKeyVersion { version: BYTE }, &one),
    ]
}

/// The text a hole shows for these numbers, and the placeholder that stands for it.
fn hole_text(hole: Hole, fields: &[u64; 4]) -> (String, String) {
    match hole {
        Hole::Decimal(i) => (fields[i].to_string(), format!("{{{i}}}")),
        Hole::Char(i) => {
            let found = u32::try_from(fields[i]).ok().and_then(char::from_u32);
            let found = found.unwrap_or_else(|| panic!("field {i} is no char"));
            (format!("{found:?}"), format!("{{{i}:char}}"))
        }
        Hole::FieldName(i) => {
            let field = usize::try_from(fields[i]).ok().and_then(|n| FIELDS.get(n));
            let field = field.unwrap_or_else(|| panic!("field {i} numbers no layout field"));
            (field.name().to_string(), format!("{{{i}:field}}"))
        }
        Hole::Less(i, j) => (
            fields[i].saturating_sub(fields[j]).to_string(),
            format!("{{{i}-{j}}}"),
        ),
    }
}

/// Core's message of `error` with each hole's text replaced by its placeholder; panics unless
/// every hole shows exactly once and the message has no brace of its own.
fn template(error: &Error, holes: &[Hole]) -> String {
    let (_, fields) = error_numbers(error);
    let message = error.to_string();
    assert!(
        !message.contains(['{', '}']),
        "{}: a brace in core's message: {message}",
        error.code()
    );
    let texts: Vec<(String, String)> = holes.iter().map(|&h| hole_text(h, &fields)).collect();
    for (text, placeholder) in &texts {
        let seen = message.matches(text.as_str()).count();
        assert_eq!(
            seen,
            1,
            "{}: {placeholder} ({text}) shows {seen} times in {message}",
            error.code()
        );
        for (other, _) in &texts {
            assert!(
                other == text || !other.contains(text.as_str()),
                "{}: {text} is a part of {other}",
                error.code()
            );
        }
    }
    texts.iter().fold(message, |message, (text, placeholder)| {
        message.replacen(text.as_str(), placeholder, 1)
    })
}

/// A JSON string (the templates and names are plain text: no control characters).
fn json(text: &str) -> String {
    let mut out = String::from("\"");
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn main() {
    for (n, field) in FIELDS.iter().enumerate() {
        assert_eq!(
            *field as usize, n,
            "error_numbers.rs numbers fields as `field as u64`"
        );
    }
    let mut templates: BTreeMap<&str, BTreeMap<u32, Templates>> = BTreeMap::new();
    for (error, holes, absent) in shapes() {
        let (kind, fields) = error_numbers(&error);
        assert_ne!(
            kind,
            255,
            "{}: error_numbers.rs does not know it",
            error.code()
        );
        let text = template(&error, &holes);
        let entry = templates
            .entry(error.code())
            .or_default()
            .entry(kind)
            .or_default();
        match absent {
            None => {
                assert!(entry.some.is_none(), "{} kind {kind} twice", error.code());
                entry.some = Some(text);
            }
            Some(field) => {
                assert_eq!(
                    fields[field],
                    NONE,
                    "{}: field {field} is not absent",
                    error.code()
                );
                entry.none = Some((field, text));
            }
        }
    }
    let mut out = String::from(
        "// core's tables for the package's JavaScript, written by make build-js from core itself\n\
         // (cargo run -q -p clockflake-wasm --example core_tables): a build output, never edited.\n\n",
    );
    let codes: Vec<String> = Error::CODES.iter().map(|code| json(code)).collect();
    out.push_str(&format!(
        "/** Every error code of core (`Error::CODES`). */\nexport const CODES = [{}];\n\n",
        codes.join(", ")
    ));
    // One constant per code, so that a bundle keeps only the codes it names (the decode-only
    // entry: INVALID_ID and UNKNOWN_LAYOUT), and MESSAGES gathering them for the full package.
    out.push_str(
        "// Core's message templates, by kind (bindings-wasm/src/error_numbers.rs): a template, or\n\
         // `{ field, some, none }` when field `field` may be absent (NONE).\n",
    );
    for code in Error::CODES {
        let kinds = templates
            .remove(code)
            .unwrap_or_else(|| panic!("{code}: no message shape"));
        let mut rendered = Vec::new();
        for (n, (kind, entry)) in kinds.into_iter().enumerate() {
            assert_eq!(
                kind as usize, n,
                "{code}: kinds are numbered from 0 without gaps"
            );
            let some = entry
                .some
                .unwrap_or_else(|| panic!("{code} kind {kind}: no template"));
            rendered.push(match entry.none {
                None => format!("  {},", json(&some)),
                Some((field, none)) => format!(
                    "  {{ field: {field}, some: {}, none: {} }},",
                    json(&some),
                    json(&none)
                ),
            });
        }
        out.push_str(&format!(
            "export const {code}_MESSAGES = [\n{}\n];\n",
            rendered.join("\n")
        ));
    }
    assert!(
        templates.is_empty(),
        "codes missing from Error::CODES: {templates:?}"
    );
    let entries: Vec<String> = Error::CODES
        .iter()
        .map(|code| format!("  {code}: {code}_MESSAGES,"))
        .collect();
    out.push_str(&format!(
        "\n/** Every code's templates. */\nexport const MESSAGES = {{\n{}\n}};\n\n",
        entries.join("\n")
    ));

    let names: Vec<String> = FIELDS.iter().map(|f| json(f.name())).collect();
    out.push_str(&format!(
        "/** Layout field names by number (`Field` order). */\nexport const FIELD_NAMES = [{}];\n\n",
        names.join(", ")
    ));
    let policies: Vec<String> = Policy::ALL.iter().map(|p| json(p.name())).collect();
    out.push_str(&format!(
        "/** Rollback policy names by number (`Policy::ALL` order). */\nexport const POLICY_NAMES = [{}];\n\n",
        policies.join(", ")
    ));
    let default = Layout::default()
        .preset_name()
        .unwrap_or_else(|| panic!("the default layout is no preset"));
    out.push_str(&format!(
        "/** The default layout's preset name. */\nexport const DEFAULT_PRESET = {};\n\n",
        json(default)
    ));
    out.push_str("/** Every preset layout (`Layout::PRESETS`), described as `describeLayout` describes it. */\nexport const PRESETS = [\n");
    for (name, layout) in Layout::PRESETS {
        let fields: Vec<String> = layout
            .fields()
            .map(|(field, bits)| format!("{{ name: {}, bits: {bits} }}", json(field.name())))
            .collect();
        out.push_str(&format!(
            "  {{ name: {}, fields: [{}], unitMs: {}, epochMs: {}, clockSeqs: {}, maxWorkerId: {}, maxId: {}n, fingerprint: {}n }},\n",
            json(name),
            fields.join(", "),
            layout.unit_ms(),
            layout.epoch_ms(),
            layout.clock_seqs(),
            layout.max_worker_id(),
            layout.max_id(),
            layout.fingerprint(),
        ));
    }
    out.push_str("];\n");
    print!("{out}");
}
