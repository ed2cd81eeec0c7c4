//! Public-id text (`PublicIds::decode_text`), with a current and an old key.
//! Properties: an accepted text decodes to an id whose text form under the same key version and
//! construction (FF1, or the legacy one: the text's construction bit says which) is the input
//! read the Crockford way (upper case, `O` as 0, `I` and `L` as 1); any id's text form and
//! public number decode back to it; a refusal carries a stable code.
#![no_main]

mod common;

use clockflake::PublicIds;
use libfuzzer_sys::fuzz_target;

const OLD: [u8; 16] = *b"clockflake-key-1";
const CURRENT: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
const ALPHABET: &str = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";

/// The keys of the shared vectors (tests/vectors/public/codec.json), so that their texts are
/// valid seeds: version 1 the old key, version 2 the current one.
fn codec() -> PublicIds {
    PublicIds::new(2, CURRENT)
        .and_then(|codec| codec.with_old_key(1, OLD))
        .unwrap_or_else(|e| panic!("the test keys are valid: {e}"))
}

/// A codec whose current key is the key of the canonical `text`'s version, in the construction
/// its construction bit names (the 8 of its first payload character).
fn encoder_of(text: &str) -> PublicIds {
    let key = if text.starts_with('1') { OLD } else { CURRENT };
    let version = if text.starts_with('1') { 1 } else { 2 };
    let ff1 = text
        .chars()
        .nth(1)
        .and_then(|c| ALPHABET.find(c))
        .is_some_and(|symbol| symbol & 8 != 0);
    let codec = if ff1 {
        PublicIds::new(version, key)
    } else {
        PublicIds::legacy(version, key)
    };
    codec.unwrap_or_else(|e| panic!("the test keys are valid: {e}"))
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
    let codec = codec();
    match codec.decode_text(text) {
        Ok(id) => {
            assert!(id >> 63 == 0, "{text:?} decoded to {id}, above 63 bits");
            let again = encoder_of(&canonical(text))
                .encode_text(id)
                .unwrap_or_else(|e| panic!("{e}"));
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
