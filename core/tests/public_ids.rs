//! The public-id codec: a bijection, with avalanche, whose text form rejects every typo; keys of
//! the legacy construction keep decoding their texts.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clockflake::{PublicIds, MAX_KEY_VERSION};

const KEY: [u8; 16] = *b"clockflake-key-1";

/// A small deterministic generator of test ids (splitmix64), kept below 2^63.
fn ids(seed: u64, count: usize) -> impl Iterator<Item = u64> {
    let mut state = seed;
    (0..count).map(move |_| {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) >> 1
    })
}

/// Both constructions are permutations (FF1 by its definition, the legacy one as a Feistel
/// network); this checks the codec around them. Counts suit a debug build, where one FF1 call
/// takes about 40 us.
#[test]
fn a_bijection_on_consecutive_and_random_ids() {
    for codec in [
        PublicIds::new(1, KEY).unwrap(),
        PublicIds::legacy(1, KEY).unwrap(),
    ] {
        assert_bijection(&codec);
    }
}

fn assert_bijection(codec: &PublicIds) {
    // Consecutive ids, as a generator issues them: all outputs distinct and below 2^63.
    let start = 383_188_013_854_781_440u64;
    let mut outputs: Vec<u64> = (start..start + 100_000)
        .map(|id| codec.encode(id).unwrap())
        .collect();
    assert!(outputs.iter().all(|p| p >> 63 == 0));
    outputs.sort_unstable();
    outputs.dedup();
    assert_eq!(outputs.len(), 100_000);
    // Random ids, the edges included: decode inverts encode.
    for id in ids(7, 20_000).chain([0, 1, (1 << 63) - 1, 1 << 62]) {
        let public = codec.encode(id).unwrap();
        assert_eq!(codec.decode(public).unwrap(), id);
        assert_eq!(
            codec
                .decode_text(codec.encode_text(id).unwrap().as_str())
                .unwrap(),
            id
        );
    }
}

#[test]
fn one_flipped_input_bit_flips_about_half_the_output_bits() {
    let codec = PublicIds::new(0, KEY).unwrap();
    let samples = 1_500;
    let mut per_bit = [0u64; 63];
    for id in ids(11, samples) {
        let public = codec.encode(id).unwrap();
        for (bit, flips) in per_bit.iter_mut().enumerate() {
            let other = codec.encode(id ^ (1 << bit)).unwrap();
            *flips += u64::from((public ^ other).count_ones());
        }
    }
    let mean = |flips: u64| flips as f64 / samples as f64;
    let overall = per_bit.iter().map(|f| mean(*f)).sum::<f64>() / 63.0;
    assert!(
        (31.0..=32.0).contains(&overall),
        "mean flipped bits {overall}"
    );
    for (bit, flips) in per_bit.iter().enumerate() {
        assert!(
            (29.5..=33.5).contains(&mean(*flips)),
            "input bit {bit}: {}",
            mean(*flips)
        );
    }
}

#[test]
fn every_single_typo_and_adjacent_swap_is_refused() {
    let codec = PublicIds::new(3, KEY).unwrap();
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
    for id in ids(13, 60) {
        let text = codec.encode_text(id).unwrap();
        let bytes = text.as_str().as_bytes().to_vec();
        for at in 0..bytes.len() {
            for &c in ALPHABET {
                if c == bytes[at] {
                    continue;
                }
                let mut typo = bytes.clone();
                typo[at] = c;
                let typo = String::from_utf8(typo).unwrap();
                let error = codec.decode_text(&typo).unwrap_err();
                assert_eq!(error.code(), "INVALID_PUBLIC_ID", "{typo}: {error}");
            }
            if at + 1 < bytes.len() && bytes[at] != bytes[at + 1] {
                let mut swapped = bytes.clone();
                swapped.swap(at, at + 1);
                let swapped = String::from_utf8(swapped).unwrap();
                assert!(codec.decode_text(&swapped).is_err(), "{swapped}");
            }
        }
    }
}

#[test]
fn text_is_case_insensitive_and_reads_look_alikes() {
    let codec = PublicIds::new(0, KEY).unwrap();
    let id = 42;
    let text = codec.encode_text(id).unwrap().as_str().to_string();
    assert_eq!(text.len(), 16);
    assert!(text
        .bytes()
        .all(|b| b.is_ascii_digit() || b.is_ascii_uppercase()));
    assert!(!text.contains(['I', 'L', 'O', 'U']));
    assert_eq!(codec.decode_text(&text.to_lowercase()).unwrap(), id);
    // Version 0 starts with '0': an 'O' typed for it still reads as 0.
    let look_alike = format!("O{}", &text[1..]);
    assert_eq!(codec.decode_text(&look_alike).unwrap(), id);
}

#[test]
fn rotation_keeps_old_text_decodable_and_unknown_versions_are_refused() {
    let old = PublicIds::new(1, KEY).unwrap();
    let old_text = old.encode_text(99).unwrap();
    let rotated = PublicIds::new(2, *b"another-16b-key!")
        .unwrap()
        .with_old_key(1, KEY)
        .unwrap();
    assert_eq!(rotated.decode_text(old_text.as_str()).unwrap(), 99);
    let new_text = rotated.encode_text(99).unwrap();
    assert_ne!(new_text, old_text);
    assert!(new_text.as_str().starts_with('2'));
    let error = old.decode_text(new_text.as_str()).unwrap_err();
    assert_eq!(error.code(), "UNKNOWN_KEY_VERSION");
}

#[test]
fn a_legacy_key_keeps_its_links_after_the_move_to_ff1() {
    // Made before FF1 with key version 1 (tests/vectors/public/codec.json).
    let text = "17T3G30P67GKXXA6";
    let id = 383_188_013_854_781_440;
    assert_eq!(
        PublicIds::legacy(1, KEY)
            .unwrap()
            .decode_text(text)
            .unwrap(),
        id
    );
    let moved = PublicIds::new(2, *b"another-16b-key!")
        .unwrap()
        .with_legacy_key(1, KEY)
        .unwrap();
    assert_eq!(moved.decode_text(text).unwrap(), id);
    assert!(moved.encode_text(id).unwrap().as_str().starts_with('2'));
    // Under the same key bytes registered as FF1, the text still decodes to its id: its
    // construction bit says it was made before FF1. A bare public number carries no such bit,
    // so numbers need the old key registered as legacy.
    let as_ff1 = PublicIds::new(1, KEY).unwrap();
    assert_eq!(as_ff1.decode_text(text).unwrap(), id);
    let legacy_number = PublicIds::legacy(1, KEY).unwrap().encode(id).unwrap();
    assert_ne!(as_ff1.decode(legacy_number).unwrap(), id);
    // And an FF1 text under a key registered as legacy.
    let ff1_text = as_ff1.encode_text(id).unwrap();
    assert_eq!(
        PublicIds::legacy(1, KEY)
            .unwrap()
            .decode_text(ff1_text.as_str())
            .unwrap(),
        id
    );
    assert_eq!(
        moved.with_old_key(1, KEY).unwrap_err().code(),
        "INVALID_KEY_VERSION"
    );
}

#[test]
fn bad_input_gets_typed_errors() {
    let codec = PublicIds::new(0, KEY).unwrap();
    let code = |text: &str| codec.decode_text(text).unwrap_err().code();
    assert_eq!(code(""), "INVALID_PUBLIC_ID");
    assert_eq!(code("0123456789ABCDEF0"), "INVALID_PUBLIC_ID");
    assert_eq!(code("0123456789ABCDEU"), "INVALID_PUBLIC_ID");
    assert_eq!(code("012345678é9ABCDE"), "INVALID_PUBLIC_ID");
    assert_eq!(codec.encode(1 << 63).unwrap_err().code(), "INVALID_ID");
    assert_eq!(
        codec.decode(1 << 63).unwrap_err().code(),
        "INVALID_PUBLIC_ID"
    );
    assert_eq!(
        PublicIds::new(MAX_KEY_VERSION + 1, KEY).unwrap_err().code(),
        "INVALID_KEY_VERSION"
    );
    assert_eq!(
        codec.clone().with_old_key(0, KEY).unwrap_err().code(),
        "INVALID_KEY_VERSION"
    );
    // Keys never reach Debug output. (A payload above 2^63 with a valid check is a vector.)
    assert!(!format!("{codec:?}").contains("clockflake-key"));
}

#[test]
fn sixteen_characters_with_a_non_ascii_one_name_the_character_not_the_length() {
    let codec = PublicIds::new(0, KEY).unwrap();
    let text = codec.encode_text(42).unwrap().as_str().to_string();
    let accented = format!("{}é", &text[..15]);
    let error = codec.decode_text(&accented).unwrap_err();
    assert_eq!(error.code(), "INVALID_PUBLIC_ID");
    assert!(
        error.to_string().contains("found 'é' at byte 15"),
        "{error}"
    );
    let long = format!("{text}é");
    assert!(codec
        .decode_text(&long)
        .unwrap_err()
        .to_string()
        .contains("found 17"));
}
