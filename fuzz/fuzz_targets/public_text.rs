//! Public-id text (`PublicIds::decode_text`), with a current and an old key.
//! Properties: an accepted text decodes to an id whose text form under the same key version
//! is the input read the Crockford way (upper case, `O` as 0, `I` and `L` as 1); any id's
//! text form and public number decode back to it; a refusal carries a stable code.
#![no_main]

mod common;

use clockflake::PublicIds;
use libfuzzer_sys::fuzz_target;

/// The keys of the shared vectors (tests/vectors/public/codec.json), so that their texts are
/// valid seeds: version 1 the old key, version 2 the current one.
fn codecs() -> (PublicIds, PublicIds) {
    let old = *b"clockflake-key-1";
    let current = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
    let both = PublicIds::new(2, current).and_then(|codec| codec.with_old_key(1, old));
    let old_only = PublicIds::new(1, old);
    match (both, old_only) {
        (Ok(both), Ok(old_only)) => (both, old_only),
        _ => panic!("the test keys are valid"),
    }
}

/// The text as the decoder reads it.
fn canonical(text: &str) -> String {
    text.chars()
        .map(|c| match c.to_ascii_uppercase() {
            'O' => '0',
            'I' | 'L' => '1',
            other => other,
        })
        .collect()
}

fuzz_target!(|text: &str| {
    let (codec, old_only) = codecs();
    match codec.decode_text(text) {
        Ok(id) => {
            assert!(id >> 63 == 0, "{text:?} decoded to {id}, above 63 bits");
            let reencoded = if canonical(text).starts_with('1') {
                &old_only
            } else {
                &codec
            };
            let again = reencoded.encode_text(id).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(again.as_str(), canonical(text));
        }
        Err(error) => common::check_error(&error),
    }
    let mut word = [0u8; 8];
    for (slot, byte) in word.iter_mut().zip(text.bytes()) {
        *slot = byte;
    }
    let id = u64::from_le_bytes(word) >> 1;
    let shown = codec.encode_text(id).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(codec.decode_text(shown.as_str()), Ok(id));
    let public = codec.encode(id).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(codec.decode(public), Ok(id));
});
