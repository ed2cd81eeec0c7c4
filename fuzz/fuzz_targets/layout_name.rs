//! Layout, policy and field names (`Layout` and `Policy` `FromStr`, `Field::from_name`).
//! Properties: an accepted name is the value's own name (so it round-trips); a refusal is
//! `UNKNOWN_LAYOUT`, `UNKNOWN_POLICY` or `INVALID_LAYOUT`.
#![no_main]

mod common;

use clockflake::{Field, Layout, Policy};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    match text.parse::<Layout>() {
        Ok(layout) => assert_eq!(layout.preset_name(), Some(text)),
        Err(error) => {
            assert_eq!(error.code(), "UNKNOWN_LAYOUT");
            common::check_error(&error);
        }
    }
    match text.parse::<Policy>() {
        Ok(policy) => assert_eq!(policy.name(), text),
        Err(error) => {
            assert_eq!(error.code(), "UNKNOWN_POLICY");
            common::check_error(&error);
        }
    }
    match Field::from_name(text) {
        Ok(field) => assert_eq!(field.name(), text),
        Err(error) => {
            assert_eq!(error.code(), "INVALID_LAYOUT");
            common::check_error(&error);
        }
    }
});
