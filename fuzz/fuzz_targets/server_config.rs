//! The server's configuration parsers: `--layout` (a preset name or
//! `FIELD:BITS,...;unit=DURATION;epoch=TIME`) and the public-id keys (`VERSION:HEX,...`).
//! Properties: an accepted custom layout, written back as a spec, parses to the same layout;
//! a refused key list never repeats a key's hex digits; refusals have a message.
#![no_main]

use clockflake::Field;
use clockflake_server::config::{parse_keys, parse_layout};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    match parse_layout(text) {
        Ok(layout) => {
            // fields() lists the fields wider than 0 bits; a spec always names sequence.
            let mut fields: Vec<String> = layout
                .fields()
                .map(|(field, bits)| format!("{}:{bits}", field.name()))
                .collect();
            if layout.bits(Field::Sequence) == 0 {
                fields.push("sequence:0".to_owned());
            }
            let spec = format!(
                "{};unit={}ms;epoch={}",
                fields.join(","),
                layout.unit_ms(),
                layout.epoch_ms()
            );
            assert_eq!(parse_layout(&spec), Ok(layout), "{text:?} -> {spec:?}");
        }
        Err(reason) => assert!(!reason.is_empty()),
    }
    if let Err(reason) = parse_keys(text) {
        assert!(!reason.is_empty());
        for entry in text.split(|c: char| c == ',' || c.is_whitespace()) {
            if let Some((_, hex)) = entry.split_once(':') {
                if hex.len() >= 8 && hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                    assert!(!reason.contains(hex), "{reason:?} repeats {hex:?}");
                }
            }
        }
    }
});
