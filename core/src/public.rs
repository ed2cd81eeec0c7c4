//! Public ids that reveal nothing: a keyed, reversible permutation of the 63-bit id space.
//!
//! A raw id tells anyone who sees it when it was made, by which worker, and how many ids that
//! worker made that millisecond. [`PublicIds`] maps ids to public numbers and back with a
//! secret key, so the outside sees values that look random and cannot be walked.
//!
//! # Construction
//! An FF1-style alternating Feistel network over 63 bits: halves of 31 and 32 bits, 6 rounds,
//! each round adding `F(key, round, half)` to the other half modulo its size, where `F` is
//! SipHash-1-3 (the 128-bit key, the 8-byte message `round << 32 | half`). Being a Feistel
//! network it is a permutation for every key, whatever `F` is.
//!
//! # Bounds
//! With a secret key and a pseudo-random `F`, a 6-round Feistel network on 2n bits resists
//! chosen-plaintext and chosen-ciphertext distinguishers up to about 2^n queries (Patarin,
//! "Security of balanced Feistel schemes", 2004); here n is 31.5, so about 2^31 known
//! (id, public) pairs. Beyond that volume an observer may tell it from a random permutation,
//! though not read ids. Six rounds is the minimum the design allows; more rounds would not
//! raise this bound, which is set by the 63-bit width. It hides; it does not authenticate:
//! anyone can submit a public id and get *some* raw id back, so never use it for authorisation.
//!
//! # Text form
//! 16 characters of Crockford base32 (`0-9 A-Z` without `I L O U`), case-insensitive on input
//! (with `O` read as 0 and `I`, `L` as 1): 1 key-version character, 13 payload characters
//! (65 bits, the top 2 always 0), 2 check characters: a CRC-10 over the 70 bits before it,
//! which catches every single mistyped character and every swap of two adjacent characters.
//! The version character picks the key, so old links keep working after a key rotation.

use core::fmt;

use crate::error::{Error, InvalidId, PublicIdProblem};

/// Key versions are 0..=31: one base32 character.
pub const MAX_KEY_VERSION: u8 = 31;

const ROUNDS: u64 = 6;
const LEFT_BITS: u32 = 31;
const RIGHT_BITS: u32 = 32;
const TEXT_LEN: usize = 16;
const PAYLOAD_CHARS: usize = 13;
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// CRC-10/ATM: x^10 + x^9 + x^5 + x^4 + x + 1.
const CRC10_POLY: u16 = 0x233;

/// A SipHash key, split into its two little-endian words.
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    k0: u64,
    k1: u64,
}

/// Keyed encoder/decoder for public ids, holding the current key and older ones for decoding.
///
/// ```
/// use clockflake::PublicIds;
/// let codec = PublicIds::new(1, *b"0123456789abcdef")?;
/// let id = 383_188_013_854_781_440;
/// let public = codec.encode(id)?;
/// assert_ne!(public, id);
/// assert_eq!(codec.decode(public)?, id);
/// let text = codec.encode_text(id)?;
/// assert_eq!(text.as_str().len(), 16);
/// assert_eq!(codec.decode_text(&text.as_str().to_lowercase())?, id);
/// # Ok::<(), clockflake::Error>(())
/// ```
#[derive(Clone)]
pub struct PublicIds {
    keys: [Option<Key>; MAX_KEY_VERSION as usize + 1],
    current: u8,
}

impl PublicIds {
    /// A codec whose current key is `key`, tagged `version` (0..=31) in the text form.
    pub fn new(version: u8, key: [u8; 16]) -> Result<PublicIds, Error> {
        let mut keys = [None; MAX_KEY_VERSION as usize + 1];
        *slot(&mut keys, version)? = Some(Key::from_bytes(key));
        Ok(PublicIds {
            keys,
            current: version,
        })
    }

    /// Adds an older key, used only to decode text forms that carry its version.
    pub fn with_old_key(mut self, version: u8, key: [u8; 16]) -> Result<PublicIds, Error> {
        let entry = slot(&mut self.keys, version)?;
        if entry.is_some() {
            return Err(Error::InvalidKeyVersion { version });
        }
        *entry = Some(Key::from_bytes(key));
        Ok(self)
    }

    /// The version of the current key.
    pub fn current_version(&self) -> u8 {
        self.current
    }

    fn key(&self, version: u8) -> Result<Key, Error> {
        self.keys
            .get(usize::from(version))
            .copied()
            .flatten()
            .ok_or(Error::UnknownKeyVersion { version })
    }

    /// The public number of an id, under the current key. The number carries neither the key
    /// version nor a check: prefer [`PublicIds::encode_text`] where ids may outlive a key.
    pub fn encode(&self, id: u64) -> Result<u64, Error> {
        if id >> 63 != 0 {
            return Err(Error::InvalidId(InvalidId::SignBitSet(id)));
        }
        Ok(self.key(self.current)?.permute(id))
    }

    /// The id behind a public number, under the current key.
    pub fn decode(&self, public: u64) -> Result<u64, Error> {
        if public >> 63 != 0 {
            return Err(Error::InvalidPublicId(PublicIdProblem::OutOfRange));
        }
        Ok(self.key(self.current)?.unpermute(public))
    }

    /// The text form of an id under the current key: 16 URL-safe characters.
    pub fn encode_text(&self, id: u64) -> Result<PublicText, Error> {
        let public = self.encode(id)?;
        let mut symbols = [0u8; TEXT_LEN];
        symbols[0] = self.current;
        for (i, symbol) in symbols[1..=PAYLOAD_CHARS].iter_mut().enumerate() {
            let shift = 5 * (PAYLOAD_CHARS - 1 - i);
            *symbol = ((public >> shift) & 31) as u8;
        }
        let check = crc10(&symbols[..=PAYLOAD_CHARS]);
        symbols[TEXT_LEN - 2] = (check >> 5) as u8;
        symbols[TEXT_LEN - 1] = (check & 31) as u8;
        Ok(PublicText(symbols.map(|s| ALPHABET[usize::from(s)])))
    }

    /// The id behind a text form; the version character picks the key. A mistyped character,
    /// a wrong length or an unknown key version is an error, never a wrong id.
    pub fn decode_text(&self, text: &str) -> Result<u64, Error> {
        let invalid = |problem| Err(Error::InvalidPublicId(problem));
        let bytes = text.as_bytes();
        if bytes.len() != TEXT_LEN {
            let found = text.chars().count();
            // 16 characters in more than 16 bytes: the length is right, a character is not.
            if let (TEXT_LEN, Some((at, bad))) =
                (found, text.char_indices().find(|(_, c)| !c.is_ascii()))
            {
                return invalid(PublicIdProblem::BadCharacter { found: bad, at });
            }
            return invalid(PublicIdProblem::WrongLength { found });
        }
        let mut symbols = [0u8; TEXT_LEN];
        for (at, (&byte, symbol)) in bytes.iter().zip(&mut symbols).enumerate() {
            *symbol = match symbol_of(byte) {
                Some(value) => value,
                None => {
                    return invalid(PublicIdProblem::BadCharacter {
                        found: text.get(at..).and_then(|t| t.chars().next()).unwrap_or('?'),
                        at,
                    })
                }
            };
        }
        let check = (u16::from(symbols[TEXT_LEN - 2]) << 5) | u16::from(symbols[TEXT_LEN - 1]);
        if crc10(&symbols[..=PAYLOAD_CHARS]) != check {
            return invalid(PublicIdProblem::ChecksumMismatch);
        }
        let public = symbols[1..=PAYLOAD_CHARS]
            .iter()
            .fold(0u128, |acc, &s| (acc << 5) | u128::from(s));
        let Ok(public) = u64::try_from(public) else {
            return invalid(PublicIdProblem::OutOfRange);
        };
        if public >> 63 != 0 {
            return invalid(PublicIdProblem::OutOfRange);
        }
        Ok(self.key(symbols[0])?.unpermute(public))
    }
}

impl fmt::Debug for PublicIds {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never print keys.
        f.debug_struct("PublicIds")
            .field("current_version", &self.current)
            .finish_non_exhaustive()
    }
}

fn slot(keys: &mut [Option<Key>; 32], version: u8) -> Result<&mut Option<Key>, Error> {
    keys.get_mut(usize::from(version))
        .ok_or(Error::InvalidKeyVersion { version })
}

/// The 16-character text form of a public id.
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct PublicText([u8; TEXT_LEN]);

impl PublicText {
    /// The text, upper case.
    pub fn as_str(&self) -> &str {
        // Always ASCII from ALPHABET.
        core::str::from_utf8(&self.0).unwrap_or_default()
    }
}

impl fmt::Display for PublicText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl fmt::Debug for PublicText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "PublicText({:?})", self.as_str())
    }
}

/// A base32 character's value; Crockford's reading of look-alikes included.
fn symbol_of(byte: u8) -> Option<u8> {
    match SYMBOL_OF[usize::from(byte)] {
        NOT_A_SYMBOL => None,
        value => Some(value),
    }
}

const NOT_A_SYMBOL: u8 = 0xff;

/// Every byte's base32 value (or [`NOT_A_SYMBOL`]): lower case and the look-alikes
/// `O` -> 0, `I`/`L` -> 1 read as Crockford says. A table, because a search of the alphabet
/// per character was most of `decode_text`'s cost.
const SYMBOL_OF: [u8; 256] = {
    let mut table = [NOT_A_SYMBOL; 256];
    let mut value = 0;
    while value < ALPHABET.len() {
        let upper = ALPHABET[value];
        table[upper as usize] = value as u8;
        table[upper.to_ascii_lowercase() as usize] = value as u8;
        value += 1;
    }
    table[b'O' as usize] = 0;
    table[b'o' as usize] = 0;
    table[b'I' as usize] = 1;
    table[b'i' as usize] = 1;
    table[b'L' as usize] = 1;
    table[b'l' as usize] = 1;
    table
};

/// CRC-10 over 5-bit symbols, most significant bit first: one table step per symbol.
fn crc10(symbols: &[u8]) -> u16 {
    symbols.iter().fold(0u16, |crc, &symbol| {
        ((crc << 5) & 0x3ff) ^ CRC10_STEP[usize::from(((crc >> 5) ^ u16::from(symbol)) & 0x1f)]
    })
}

/// The CRC-10 register after shifting 5 zero bits through a register whose top 5 bits are
/// the index (the classic table-driven CRC, 5 bits at a time).
const CRC10_STEP: [u16; 32] = {
    let mut table = [0u16; 32];
    let mut index = 0;
    while index < 32 {
        let mut crc = (index as u16) << 5;
        let mut bit = 0;
        while bit < 5 {
            crc = if crc & 0x200 != 0 {
                ((crc << 1) & 0x3ff) ^ (CRC10_POLY & 0x3ff)
            } else {
                (crc << 1) & 0x3ff
            };
            bit += 1;
        }
        table[index] = crc;
        index += 1;
    }
    table
};

impl Key {
    fn from_bytes(key: [u8; 16]) -> Key {
        let mut k0 = [0u8; 8];
        let mut k1 = [0u8; 8];
        k0.copy_from_slice(&key[..8]);
        k1.copy_from_slice(&key[8..]);
        Key {
            k0: u64::from_le_bytes(k0),
            k1: u64::from_le_bytes(k1),
        }
    }

    /// The round function: SipHash-1-3 of the 8-byte little-endian message `round << 32 | half`.
    #[inline(always)]
    fn round(&self, round: u64, half: u64) -> u64 {
        siphash13(self.k0, self.k1, (round << 32) | half)
    }

    #[inline]
    fn permute(&self, id: u64) -> u64 {
        let mut a = id >> RIGHT_BITS; // 31 bits
        let mut b = id & mask(RIGHT_BITS); // 32 bits
        for round in 0..ROUNDS {
            let bits = if round % 2 == 0 {
                LEFT_BITS
            } else {
                RIGHT_BITS
            };
            let c = a.wrapping_add(self.round(round, b)) & mask(bits);
            a = b;
            b = c;
        }
        (a << RIGHT_BITS) | b
    }

    #[inline]
    fn unpermute(&self, public: u64) -> u64 {
        let mut a = public >> RIGHT_BITS;
        let mut b = public & mask(RIGHT_BITS);
        for round in (0..ROUNDS).rev() {
            let bits = if round % 2 == 0 {
                LEFT_BITS
            } else {
                RIGHT_BITS
            };
            let c = b;
            b = a;
            a = c.wrapping_sub(self.round(round, b)) & mask(bits);
        }
        (a << RIGHT_BITS) | b
    }
}

const fn mask(bits: u32) -> u64 {
    (1 << bits) - 1
}

/// SipHash-1-3 of one 8-byte message (the same function as Rust's `std` hasher, keyed).
#[inline(always)]
fn siphash13(k0: u64, k1: u64, message: u64) -> u64 {
    siphash::<1, 3>(k0, k1, message)
}

/// SipHash-c-d of one 8-byte little-endian message.
#[inline(always)]
fn siphash<const C: usize, const D: usize>(k0: u64, k1: u64, message: u64) -> u64 {
    let mut v = [
        k0 ^ 0x736f_6d65_7073_6575,
        k1 ^ 0x646f_7261_6e64_6f6d,
        k0 ^ 0x6c79_6765_6e65_7261,
        k1 ^ 0x7465_6462_7974_6573,
    ];
    // The message, then the final block: length 8 in the top byte, no tail bytes.
    for word in [message, 8 << 56] {
        v[3] ^= word;
        for _ in 0..C {
            sip_round(&mut v);
        }
        v[0] ^= word;
    }
    v[2] ^= 0xff;
    for _ in 0..D {
        sip_round(&mut v);
    }
    v[0] ^ v[1] ^ v[2] ^ v[3]
}

#[inline(always)]
fn sip_round(v: &mut [u64; 4]) {
    v[0] = v[0].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(13) ^ v[0];
    v[0] = v[0].rotate_left(32);
    v[2] = v[2].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(16) ^ v[2];
    v[0] = v[0].wrapping_add(v[3]);
    v[3] = v[3].rotate_left(21) ^ v[0];
    v[2] = v[2].wrapping_add(v[1]);
    v[1] = v[1].rotate_left(17) ^ v[2];
    v[2] = v[2].rotate_left(32);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn siphash_matches_std_implementations() {
        extern crate std;
        use std::hash::Hasher;
        for message in [
            0u64,
            1,
            0x0706_0504_0302_0100,
            u64::MAX,
            0xdead_beef_0000_0007,
        ] {
            // std's DefaultHasher is SipHash-1-3 with a zero key.
            let mut sip13 = std::collections::hash_map::DefaultHasher::new();
            sip13.write(&message.to_le_bytes());
            assert_eq!(siphash13(0, 0, message), sip13.finish());
            // std's deprecated SipHasher is SipHash-2-4, keyed: checks the key schedule.
            #[allow(deprecated)]
            let mut sip24 =
                std::hash::SipHasher::new_with_keys(0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908);
            sip24.write(&message.to_le_bytes());
            assert_eq!(
                siphash::<2, 4>(0x0706_0504_0302_0100, 0x0f0e_0d0c_0b0a_0908, message),
                sip24.finish()
            );
        }
    }

    /// The bit-at-a-time definition the table must reproduce.
    fn crc10_bitwise(symbols: &[u8]) -> u16 {
        let mut crc: u16 = 0;
        for &symbol in symbols {
            for bit in (0..5).rev() {
                let feedback = ((crc >> 9) & 1) ^ u16::from((symbol >> bit) & 1);
                crc = (crc << 1) & 0x3ff;
                if feedback == 1 {
                    crc ^= CRC10_POLY & 0x3ff;
                }
            }
        }
        crc
    }

    #[test]
    fn crc10_table_matches_the_bitwise_definition() {
        let mut symbols = [0u8; 14];
        let mut x: u32 = 0x1234_5678;
        // Miri runs this about 10,000 times slower: 200 random inputs there.
        let rounds = if cfg!(miri) { 200 } else { 20_000 };
        for _ in 0..rounds {
            for s in &mut symbols {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                *s = (x & 0x1f) as u8;
            }
            assert_eq!(crc10(&symbols), crc10_bitwise(&symbols));
        }
        for value in 0..32u8 {
            assert_eq!(crc10(&[value]), crc10_bitwise(&[value]));
        }
    }

    #[test]
    fn symbol_table_matches_the_alphabet_search() {
        for byte in 0..=255u8 {
            let upper = match byte.to_ascii_uppercase() {
                b'O' => b'0',
                b'I' | b'L' => b'1',
                other => other,
            };
            let searched = ALPHABET.iter().position(|&c| c == upper).map(|v| v as u8);
            assert_eq!(symbol_of(byte), searched, "byte {byte}");
        }
    }

    #[test]
    fn crc10_catches_every_single_symbol_change() {
        let symbols = [1u8, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14];
        let good = crc10(&symbols);
        for at in 0..symbols.len() {
            for value in 0..32 {
                let mut changed = symbols;
                if changed[at] == value {
                    continue;
                }
                changed[at] = value;
                assert_ne!(crc10(&changed), good);
            }
        }
    }
}
