//! The server's JSON bodies (`POST /v1/decode` and the public-id routes: `{"id": "..."}`),
//! read by `string_field`, then the id inside read as the routes read it.
//! Properties: an accepted body is a JSON object whose only field is a string; a refusal is
//! a 4xx with a stable code and a message.
#![no_main]

mod common;

use axum::body::Bytes;
use clockflake::Layout;
use clockflake_server::api::string_field;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|body: &[u8]| {
    match string_field(Ok(Bytes::copy_from_slice(body)), "id") {
        Ok(text) => {
            let value: serde_json::Value =
                serde_json::from_slice(body).unwrap_or_else(|e| panic!("accepted, yet {e}"));
            let object = value
                .as_object()
                .unwrap_or_else(|| panic!("accepted a non-object"));
            assert_eq!(object.len(), 1);
            assert_eq!(
                object.get("id").and_then(|v| v.as_str()),
                Some(text.as_str())
            );
            if let Err(error) = Layout::CLOCKSEQ.parse_id(&text) {
                common::check_error(&error);
            }
        }
        Err(error) => {
            assert!(error.status.is_client_error(), "{}", error.status);
            assert!(common::is_code(error.code), "{:?}", error.code);
            assert!(!error.message.is_empty());
        }
    }
});
