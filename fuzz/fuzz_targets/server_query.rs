//! The server's query strings: `query_value` (form decoding, a name given twice) and
//! `parse_count` (`GET /v1/ids?count=`).
//! Properties: an accepted count is within 1..=max and is the query's value read as decimal;
//! a refusal is a 400 with a stable code and a message that echoes at most 24 characters of
//! the input (its length stays bounded).
#![no_main]

mod common;

use clockflake_server::api::{parse_count, query_value};
use clockflake_server::error::ApiError;
use libfuzzer_sys::fuzz_target;

const MAX: u64 = 100_000;

fn check_refusal(error: &ApiError) {
    assert_eq!(error.status.as_u16(), 400);
    assert!(common::is_code(error.code), "{:?}", error.code);
    assert!(!error.message.is_empty());
}

fuzz_target!(|query: &str| {
    match query_value(Some(query), "count") {
        Ok(value) => match parse_count(value.as_deref(), MAX) {
            Ok(count) => {
                assert!((1..=MAX).contains(&count));
                assert_eq!(value.as_deref().map(str::parse::<u64>), Some(Ok(count)));
            }
            Err(error) => check_refusal(&error),
        },
        Err(error) => check_refusal(&error),
    }
    if let Err(error) = parse_count(Some(query), MAX) {
        check_refusal(&error);
        // 24 characters, each escaped in at most 10 (`\u{10ffff}`), and the sentence.
        assert!(
            error.message.len() < 400,
            "echoes too much: {}",
            error.message
        );
    }
});
