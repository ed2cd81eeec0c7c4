//! Runs every shared vector in `tests/vectors/*.json` against core.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::PathBuf;

use clockflake::{Error, Field, Generator, Layout, Options, Parts, Policy};
use serde_json::{json, Value};

fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/vectors")
}

fn big(value: &Value) -> u64 {
    value
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("expected a decimal string, found {value}"))
}

fn small(value: &Value) -> u64 {
    value
        .as_u64()
        .unwrap_or_else(|| panic!("expected a number, found {value}"))
}

fn layout_from(spec: &Value) -> Result<Layout, Error> {
    if let Some(name) = spec.as_str() {
        return Layout::by_name(name);
    }
    let mut fields = Vec::new();
    for field in spec["fields"].as_array().expect("fields") {
        let name = field["name"].as_str().expect("field name");
        fields.push((Field::from_name(name)?, small(&field["bits"]) as u32));
    }
    Layout::new(&fields, small(&spec["unit_ms"]), big(&spec["epoch_ms"]))
}

fn describe(layout: &Layout) -> Value {
    let fields: Vec<Value> = layout
        .fields()
        .map(|(field, bits)| json!({"name": field.name(), "bits": bits}))
        .collect();
    json!({
        "fields": fields,
        "unit_ms": layout.unit_ms(),
        "epoch_ms": layout.epoch_ms().to_string(),
        "max_id": layout.max_id().to_string(),
        "fingerprint": layout.fingerprint().to_string(),
    })
}

fn parts_json(parts: &Parts) -> Value {
    json!({
        "timestamp_ms": parts.timestamp_ms.to_string(),
        "clock_seq": parts.clock_seq,
        "worker_id": parts.worker_id,
        "sequence": parts.sequence,
    })
}

/// Runs one case; returns what it produced, as `{"out": ..}` or `{"error": CODE}`.
fn run_case(file_layout: &Value, case: &Value) -> Value {
    let input = &case["in"];
    let result: Result<Value, Error> = (|| match case["op"].as_str().expect("op") {
        "layout" => Ok(describe(&layout_from(input)?)),
        "decode" => {
            let layout = layout_from(file_layout)?;
            let id = layout.parse_id(input.as_str().expect("decode takes a string"))?;
            Ok(parts_json(&layout.decode(id)?))
        }
        "encode" => {
            let layout = layout_from(file_layout)?;
            let parts = Parts {
                timestamp_ms: big(&input["timestamp_ms"]),
                clock_seq: small(&input["clock_seq"]),
                worker_id: small(&input["worker_id"]),
                sequence: small(&input["sequence"]),
            };
            Ok(json!(layout.encode(&parts)?.to_string()))
        }
        "id_range" => {
            let layout = layout_from(file_layout)?;
            let (lo, hi) = layout.id_range(big(&input["from_ms"]), big(&input["to_ms"]))?;
            Ok(json!([lo.to_string(), hi.to_string()]))
        }
        "generate" => run_generate(&layout_from(file_layout)?, case),
        other => panic!("{}: unknown op {other:?}", case["id"]),
    })();
    match result {
        Ok(out) => json!({ "out": out }),
        Err(error) => json!({ "error": error.code() }),
    }
}

/// Generator cases run twice: through the shared `&self` path and the exclusive `&mut` one.
fn run_generate(layout: &Layout, case: &Value) -> Result<Value, Error> {
    run_generate_with(layout, case, |gen, now| gen.next_id_at(now))?;
    run_generate_with(layout, case, |gen, now| gen.next_id_at_mut(now))
}

fn run_generate_with(
    layout: &Layout,
    case: &Value,
    next: impl Fn(&mut Generator, u64) -> Result<u64, Error>,
) -> Result<Value, Error> {
    let input = &case["in"];
    let defaults = Options::default();
    let options = Options {
        on_rollback: input
            .get("on_rollback")
            .map(|p| Policy::from_name(p.as_str().expect("policy")))
            .transpose()?,
        max_wait_ms: input.get("max_wait_ms").map_or(defaults.max_wait_ms, small),
        max_drift_ms: input
            .get("max_drift_ms")
            .map_or(defaults.max_drift_ms, small),
    };
    let mut gen = Generator::new(*layout, small(&input["worker_id"]), options)?;
    for (i, step) in input["steps"].as_array().expect("steps").iter().enumerate() {
        let name = format!("{} step {i}", case["id"]);
        if step.get("restart").is_some() {
            let mut state = gen.state();
            if let Some(reserve) = step.get("reserve_ms") {
                state.reserve(big(reserve));
            }
            gen = Generator::resume(*layout, &state, options).expect(&name);
            continue;
        }
        let now_ms = big(&step["now_ms"]);
        let repeat = step.get("repeat").map_or(1, small);
        let mut outcome = Ok(0);
        for _ in 0..repeat {
            outcome = next(&mut gen, now_ms);
            if repeat > 1 {
                assert!(outcome.is_ok(), "{name}: {outcome:?}");
            }
        }
        match (&outcome, step.get("out")) {
            (Ok(id), Some(expected)) => assert_eq!(*id, big(expected), "{name}"),
            (Err(error), None) => {
                assert_eq!(json!(error.code()), step["error"], "{name}: {error}");
                let retry = error.retry_at_ms().map(|ms| ms.to_string());
                assert_eq!(json!(retry), step["retry_at_ms"], "{name}: {error}");
            }
            _ => panic!("{name}: expected {step}, found {outcome:?}"),
        }
    }
    Ok(Value::Null)
}

#[test]
fn every_shared_vector() {
    let mut files: Vec<PathBuf> = std::fs::read_dir(vectors_dir())
        .expect("tests/vectors")
        .map(|entry| entry.expect("entry").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "json"))
        .collect();
    files.sort();
    let mut ran = 0;
    for path in files {
        let file: Value = serde_json::from_str(&std::fs::read_to_string(&path).expect("read"))
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        for case in file["cases"].as_array().expect("cases") {
            let got = run_case(&file["layout"], case);
            let expected = match (case.get("out"), case.get("error")) {
                (Some(out), None) => json!({ "out": out }),
                (None, Some(error)) => json!({ "error": error }),
                // Generator cases carry their expectations in the steps.
                (None, None) => json!({ "out": Value::Null }),
                _ => panic!("{}: both out and error", case["id"]),
            };
            assert_eq!(got, expected, "{} ({})", case["id"], path.display());
            ran += 1;
        }
    }
    assert!(ran >= 80, "ran only {ran} vector cases");
    println!("ran {ran} vector cases");
}

/// The codec from a vector's key ring: the first key is current, the rest are old; each key's
/// `construction` is `ff1` or `legacy`.
fn codec_from(keys: &Value) -> Result<clockflake::PublicIds, Error> {
    let keys = keys.as_array().expect("keys");
    let key_of = |entry: &Value| -> (u8, [u8; 16], bool) {
        let hex = entry["key_hex"].as_str().expect("key_hex");
        let bytes: Vec<u8> = (0..32)
            .step_by(2)
            .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("hex"))
            .collect();
        let version = u8::try_from(small(&entry["version"])).expect("version");
        let legacy = match entry["construction"].as_str() {
            Some("ff1") => false,
            Some("legacy") => true,
            other => panic!("unknown construction {other:?}"),
        };
        (version, bytes.try_into().expect("16 bytes"), legacy)
    };
    let (version, key, legacy) = key_of(&keys[0]);
    let mut codec = if legacy {
        clockflake::PublicIds::legacy(version, key)?
    } else {
        clockflake::PublicIds::new(version, key)?
    };
    for entry in &keys[1..] {
        let (version, key, legacy) = key_of(entry);
        codec = if legacy {
            codec.with_legacy_key(version, key)?
        } else {
            codec.with_old_key(version, key)?
        };
    }
    Ok(codec)
}

#[test]
fn every_public_id_vector() {
    let path = vectors_dir().join("public/codec.json");
    let file: Value =
        serde_json::from_str(&std::fs::read_to_string(&path).expect("read")).expect("json");
    let mut ran = 0;
    for case in file["cases"].as_array().expect("cases") {
        let input = &case["in"];
        let result: Result<Value, Error> = (|| {
            let codec = codec_from(&input["keys"])?;
            match case["op"].as_str().expect("op") {
                "public_encode" => {
                    let id = big(&input["id"]);
                    Ok(json!({
                        "number": codec.encode(id)?.to_string(),
                        "text": codec.encode_text(id)?.as_str(),
                    }))
                }
                "public_decode_text" => Ok(json!(codec
                    .decode_text(input["text"].as_str().expect("text"))?
                    .to_string())),
                "public_decode" => Ok(json!(codec.decode(big(&input["number"]))?.to_string())),
                other => panic!("{}: unknown op {other:?}", case["id"]),
            }
        })();
        let got = match result {
            Ok(out) => json!({ "out": out }),
            Err(error) => json!({ "error": error.code() }),
        };
        let expected = match (case.get("out"), case.get("error")) {
            (Some(out), None) => json!({ "out": out }),
            (None, Some(error)) => json!({ "error": error }),
            _ => panic!("{}: expected exactly one of out and error", case["id"]),
        };
        assert_eq!(got, expected, "{}", case["id"]);
        ran += 1;
    }
    assert!(ran >= 80, "ran only {ran} public-id cases");
}
