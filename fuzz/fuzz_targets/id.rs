//! Decimal ids (`Layout::parse_id`) under every preset, and `decode`/`encode` of any 64 bits.
//! Properties: an accepted text is the decimal of the id (leading zeros aside) and the id
//! decodes and re-encodes to itself; a refusal carries a stable code.
#![no_main]

mod common;

use libfuzzer_sys::fuzz_target;

fuzz_target!(|text: &str| {
    for layout in common::layouts() {
        match layout.parse_id(text) {
            Ok(id) => {
                assert_eq!(
                    text.trim_start_matches('0').len(),
                    id.to_string().trim_start_matches('0').len()
                );
                assert_eq!(layout.parse_id(&id.to_string()), Ok(id));
                let parts = layout
                    .decode(id)
                    .unwrap_or_else(|e| panic!("{id} parsed but {e}"));
                assert_eq!(layout.encode(&parts), Ok(id));
            }
            Err(error) => {
                assert_eq!(error.code(), "INVALID_ID", "{text:?}: {error}");
                common::check_error(&error);
            }
        }
        // The same bytes as a raw id.
        let mut word = [0u8; 8];
        for (slot, byte) in word.iter_mut().zip(text.bytes()) {
            *slot = byte;
        }
        let raw = u64::from_le_bytes(word);
        match layout.decode(raw) {
            Ok(parts) => assert_eq!(layout.encode(&parts), Ok(raw)),
            Err(error) => common::check_error(&error),
        }
    }
});
