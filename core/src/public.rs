//! Public ids that reveal nothing: a keyed, reversible permutation of the 63-bit id space.
//!
//! A raw id tells anyone who sees it when it was made, by which worker, and how many ids that
//! worker made that millisecond. [`PublicIds`] maps ids to public numbers and back with a
//! secret key, so the outside sees values that look random and cannot be walked.
//!
//! # Construction
//! NIST SP 800-38G FF1 (format-preserving encryption) with AES-128, from the `fpe` and `aes`
//! crates: the id's 63 bits, most significant first, are a numeral string of radix 2 and length
//! 63, encrypted with the 16-byte key and the empty tweak ([`FF1_TWEAK`]). FF1 permutes the
//! numeral strings of its radix and length, and radix 2 over 63 numerals is exactly the ids
//! `0..2^63`: every id has one public number below 2^63 and back, with no cycle-walking. (A
//! decimal or base32 numeral string would cover 10^19 or 2^65 values, not 2^63, and need it.)
//! Anyone holding the key can check a public number with another FF1 implementation.
//!
//! Keys whose public ids were issued before FF1 keep the construction they were made with
//! ([`PublicIds::legacy`], [`PublicIds::with_legacy_key`]): an FF1-style alternating Feistel
//! network of this crate's own, 31/32-bit halves, 6 rounds, each adding SipHash-1-3 of
//! `round << 32 | half` under the 128-bit key to the other half modulo its size.
//!
//! # Bounds
//! FF1's security rests on AES and on FF1's ten-round Feistel structure, which NIST approved in
//! SP 800-38G. Its published attacks need small domains (SP 800-38G Rev. 1 asks for at least a
//! million values for that reason); this one has 2^63. It hides; it does not authenticate:
//! anyone can submit a public id and get *some* raw id back (the check characters catch typos,
//! not forgeries), so never use it for authorisation. The legacy Feistel network rests on
//! SipHash and a bound for 6-round Feistel networks (Patarin, 2004): about 2^31 known
//! (id, public) pairs under one key.
//!
//! # Text form
//! 16 characters of Crockford base32 (`0-9 A-Z` without `I L O U`), case-insensitive on input
//! (with `O` read as 0 and `I`, `L` as 1): 1 key-version character, 13 payload characters
//! (65 bits: the top one always 0, then the construction bit, then the 63-bit public number),
//! 2 check characters: a CRC-10 over the 70 bits before it, which catches every single
//! mistyped character and every swap of two adjacent characters. The version character picks
//! the key; the construction bit (1 for FF1, 0 for the legacy construction, whose texts always
//! had 0 there) says how the text was made. So a text made before FF1 decodes to its id under
//! the same key bytes whatever construction the codec's key was registered with, and old links
//! keep working after a key rotation and across the move to FF1 with no migration.

use core::fmt;

use aes::Aes128Enc as Aes128;
use fpe::ff1::{NumeralString, Operations, FF1};

use crate::error::{Error, InvalidId, PublicIdProblem};

/// Key versions are 0..=31: one base32 character.
pub const MAX_KEY_VERSION: u8 = 31;

/// The FF1 tweak of every public id: empty. A tweak would have to be known again to decode, and
/// the text form carries nothing but the key version and the number.
const FF1_TWEAK: &[u8] = &[];

/// FF1 over the id space: radix 2, one numeral per bit of a 63-bit id.
const ID_RADIX: u32 = 2;
const ID_BITS: u32 = 63;

const ROUNDS: u64 = 6;
const LEFT_BITS: u32 = 31;
const RIGHT_BITS: u32 = 32;
const TEXT_LEN: usize = 16;
const PAYLOAD_CHARS: usize = 13;
/// The text form's construction bit, just above the 63-bit public number in its payload: set
/// for FF1; texts of the legacy construction were always made with it clear.
const FF1_TEXT_BIT: u64 = 1 << 63;
const ALPHABET: &[u8; 32] = b"0123456789ABCDEFGHJKMNPQRSTVWXYZ";
/// CRC-10/ATM: x^10 + x^9 + x^5 + x^4 + x + 1.
const CRC10_POLY: u16 = 0x233;

/// How a key maps ids to public numbers.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Construction {
    /// NIST FF1 with AES-128, the default since FF1 came in.
    Ff1,
    /// The 6-round SipHash Feistel network that public ids used before, for their old keys.
    LegacyFeistel,
}

/// A key of the ring: its 16 bytes and the construction its public ids were made with.
#[derive(Clone, Copy)]
struct KeyEntry {
    bytes: [u8; 16],
    construction: Construction,
}

/// A key ready to use: FF1's AES key schedule is done once, when the key becomes current.
enum Cipher {
    Ff1(FF1<Aes128>),
    LegacyFeistel(LegacyKey),
}

impl Cipher {
    fn of(entry: &KeyEntry) -> Option<Cipher> {
        Some(match entry.construction {
            // FF1::new refuses only a radix outside 2..=2^16, never ID_RADIX, and panics only on
            // a key length other than AES-128's 16 bytes, which the type rules out.
            Construction::Ff1 => Cipher::Ff1(FF1::new(&entry.bytes, ID_RADIX).ok()?),
            Construction::LegacyFeistel => {
                Cipher::LegacyFeistel(LegacyKey::from_bytes(entry.bytes))
            }
        })
    }

    #[inline]
    fn permute(&self, id: u64) -> Option<u64> {
        match self {
            Cipher::Ff1(ff1) => {
                ff1_encrypt(ff1, FF1_TWEAK, Numerals::id_bits(id)).map(|out| out.id())
            }
            Cipher::LegacyFeistel(key) => Some(key.permute(id)),
        }
    }

    #[inline]
    fn unpermute(&self, public: u64) -> Option<u64> {
        match self {
            Cipher::Ff1(ff1) => {
                ff1_decrypt(ff1, FF1_TWEAK, Numerals::id_bits(public)).map(|out| out.id())
            }
            Cipher::LegacyFeistel(key) => Some(key.unpermute(public)),
        }
    }
}

/// FF1-AES-128 encryption of a numeral string: the codec's path, which NIST's sample vectors
/// also take (tests below). `None` for a string FF1 refuses (not of the radix, too short).
#[inline]
fn ff1_encrypt(ff1: &FF1<Aes128>, tweak: &[u8], x: Numerals) -> Option<Numerals> {
    ff1.encrypt(tweak, &x).ok()
}

/// FF1-AES-128 decryption of a numeral string, the inverse of [`ff1_encrypt`].
#[inline]
fn ff1_decrypt(ff1: &FF1<Aes128>, tweak: &[u8], x: Numerals) -> Option<Numerals> {
    ff1.decrypt(tweak, &x).ok()
}

/// Keyed encoder/decoder for public ids, holding the current key and older ones for decoding.
///
/// Each key knows its construction: [`PublicIds::new`] and [`PublicIds::with_old_key`] take FF1
/// keys, [`PublicIds::legacy`] and [`PublicIds::with_legacy_key`] keys whose public ids were
/// issued by the Feistel network of earlier versions.
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
/// // Text made before FF1 under key version 1 still decodes, once that key is registered as
/// // legacy; new ids are encoded with the FF1 key of version 2.
/// let rotated = PublicIds::new(2, *b"a-newer-16b-key!")?.with_legacy_key(1, *b"clockflake-key-1")?;
/// assert_eq!(rotated.decode_text("17T3G30P67GKXXA6")?, 383_188_013_854_781_440);
/// assert!(rotated.encode_text(id)?.as_str().starts_with('2'));
/// # Ok::<(), clockflake::Error>(())
/// ```
pub struct PublicIds {
    keys: [Option<KeyEntry>; MAX_KEY_VERSION as usize + 1],
    current: u8,
    /// The current key, keyed; `None` only if FF1 refused it, which it never does (see
    /// [`Cipher::of`]): encoding then refuses rather than panics.
    cipher: Option<Cipher>,
}

impl Clone for PublicIds {
    fn clone(&self) -> PublicIds {
        // FF1's state is not `Clone`: key the copy again.
        PublicIds {
            keys: self.keys,
            current: self.current,
            cipher: self.entry(self.current).as_ref().and_then(Cipher::of),
        }
    }
}

impl PublicIds {
    /// A codec whose current key is `key` (FF1 with AES-128), tagged `version` (0..=31) in the
    /// text form.
    pub fn new(version: u8, key: [u8; 16]) -> Result<PublicIds, Error> {
        PublicIds::with_current(version, key, Construction::Ff1)
    }

    /// A codec whose current key is a key of the legacy construction (the SipHash Feistel
    /// network public ids used before FF1), tagged `version`: for a key whose public ids
    /// were issued before and must stay the same, numbers included. Prefer rotating to a new
    /// FF1 key ([`PublicIds::new`]) and keeping this one with [`PublicIds::with_legacy_key`].
    pub fn legacy(version: u8, key: [u8; 16]) -> Result<PublicIds, Error> {
        PublicIds::with_current(version, key, Construction::LegacyFeistel)
    }

    fn with_current(
        version: u8,
        key: [u8; 16],
        construction: Construction,
    ) -> Result<PublicIds, Error> {
        let entry = KeyEntry {
            bytes: key,
            construction,
        };
        let mut keys = [None; MAX_KEY_VERSION as usize + 1];
        *slot(&mut keys, version)? = Some(entry);
        Ok(PublicIds {
            keys,
            current: version,
            cipher: Cipher::of(&entry),
        })
    }

    /// Adds an older FF1 key, used only to decode text forms that carry its version.
    pub fn with_old_key(self, version: u8, key: [u8; 16]) -> Result<PublicIds, Error> {
        self.add_key(version, key, Construction::Ff1)
    }

    /// Adds an older key of the legacy construction (public ids issued before FF1), used only
    /// to decode text forms that carry its version.
    pub fn with_legacy_key(self, version: u8, key: [u8; 16]) -> Result<PublicIds, Error> {
        self.add_key(version, key, Construction::LegacyFeistel)
    }

    fn add_key(
        mut self,
        version: u8,
        key: [u8; 16],
        construction: Construction,
    ) -> Result<PublicIds, Error> {
        let entry = slot(&mut self.keys, version)?;
        if entry.is_some() {
            return Err(Error::InvalidKeyVersion { version });
        }
        *entry = Some(KeyEntry {
            bytes: key,
            construction,
        });
        Ok(self)
    }

    /// The version of the current key.
    pub fn current_version(&self) -> u8 {
        self.current
    }

    /// Whether the key of `version` is of the legacy construction; `None` when the codec does
    /// not hold that version.
    pub fn is_legacy(&self, version: u8) -> Option<bool> {
        self.entry(version)
            .map(|entry| entry.construction == Construction::LegacyFeistel)
    }

    fn entry(&self, version: u8) -> Option<KeyEntry> {
        self.keys.get(usize::from(version)).copied().flatten()
    }

    fn cipher_is_ff1(&self) -> bool {
        matches!(self.cipher, Some(Cipher::Ff1(_)))
    }

    fn current_cipher(&self) -> Result<&Cipher, Error> {
        self.cipher.as_ref().ok_or(Error::UnknownKeyVersion {
            version: self.current,
        })
    }

    /// The public number of an id, under the current key. The number carries neither the key
    /// version nor a check: prefer [`PublicIds::encode_text`] where ids may outlive a key.
    pub fn encode(&self, id: u64) -> Result<u64, Error> {
        if id >> 63 != 0 {
            return Err(Error::InvalidId(InvalidId::SignBitSet(id)));
        }
        self.current_cipher()?
            .permute(id)
            .ok_or(Error::InvalidId(InvalidId::SignBitSet(id)))
    }

    /// The id behind a public number, under the current key.
    pub fn decode(&self, public: u64) -> Result<u64, Error> {
        if public >> 63 != 0 {
            return Err(Error::InvalidPublicId(PublicIdProblem::OutOfRange));
        }
        self.current_cipher()?
            .unpermute(public)
            .ok_or(Error::InvalidPublicId(PublicIdProblem::OutOfRange))
    }

    /// The id behind a public number made by `construction` under the key bytes of `version`:
    /// the current key's cipher, or that key keyed for this call (its AES key schedule, about
    /// one block's work).
    fn decode_with(
        &self,
        version: u8,
        construction: Construction,
        public: u64,
    ) -> Result<u64, Error> {
        let entry = self
            .entry(version)
            .ok_or(Error::UnknownKeyVersion { version })?;
        let out_of_range = Error::InvalidPublicId(PublicIdProblem::OutOfRange);
        if version == self.current && construction == entry.construction {
            return self.current_cipher()?.unpermute(public).ok_or(out_of_range);
        }
        let entry = KeyEntry {
            construction,
            ..entry
        };
        Cipher::of(&entry)
            .ok_or(Error::UnknownKeyVersion { version })?
            .unpermute(public)
            .ok_or(out_of_range)
    }

    /// The text form of an id under the current key: 16 URL-safe characters.
    pub fn encode_text(&self, id: u64) -> Result<PublicText, Error> {
        let mut public = self.encode(id)?;
        if self.cipher_is_ff1() {
            public |= FF1_TEXT_BIT;
        }
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

    /// The id behind a text form; the version character picks the key, the construction bit
    /// the construction it was made with. A mistyped character, a wrong length or an unknown
    /// key version is an error, never a wrong id.
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
        // The payload's top bit (the 65th) is always 0.
        let Ok(public) = u64::try_from(public) else {
            return invalid(PublicIdProblem::OutOfRange);
        };
        let construction = if public & FF1_TEXT_BIT != 0 {
            Construction::Ff1
        } else {
            Construction::LegacyFeistel
        };
        self.decode_with(symbols[0], construction, public & !FF1_TEXT_BIT)
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

fn slot(keys: &mut [Option<KeyEntry>; 32], version: u8) -> Result<&mut Option<KeyEntry>, Error> {
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

/// An FF1 numeral string, kept as FF1's two halves: `A`, its first `u = floor(n / 2)` numerals,
/// and `B`, the other `v = n - u`. FF1 only ever works on the halves, so no round allocates,
/// splits or joins digits, and each half is the number it spells ([`Half`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Numerals {
    a: Half,
    b: Half,
}

/// Half of a numeral string: `len` numerals of base `radix` held as the number they spell
/// (`NUM_radix`, the first numeral the most significant). Halves of up to 2^56 values are
/// valid, so that a round's arithmetic stays in a `u64`: the 63-bit id space has halves of
/// 2^31 and 2^32 values, NIST's samples at most 36^10.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Half {
    value: u64,
    radix: u32,
    len: u32,
}

/// The largest `radix^len` a [`Half`] may have.
const MAX_HALF_MODULUS: u64 = 1 << 56;

impl Numerals {
    /// An id (or public number) as the codec's FF1 input: its 63 bits, most significant first,
    /// so `A` is the top 31 bits and `B` the low 32.
    #[inline]
    const fn id_bits(id: u64) -> Numerals {
        Numerals {
            a: Half {
                value: id >> RIGHT_BITS,
                radix: ID_RADIX,
                len: ID_BITS - RIGHT_BITS,
            },
            b: Half {
                value: id & mask(RIGHT_BITS),
                radix: ID_RADIX,
                len: RIGHT_BITS,
            },
        }
    }

    /// The id (or public number) the codec's numerals spell.
    #[inline]
    const fn id(&self) -> u64 {
        (self.a.value << RIGHT_BITS) | self.b.value
    }
}

impl Half {
    /// `radix^len`, `None` above [`MAX_HALF_MODULUS`].
    #[inline]
    fn modulus(radix: u32, len: u32) -> Option<u64> {
        let modulus = if radix == ID_RADIX {
            1u64.checked_shl(len)
        } else {
            u64::from(radix).checked_pow(len)
        };
        modulus.filter(|m| *m <= MAX_HALF_MODULUS)
    }

    /// `x mod modulus`, a mask for the codec's powers of two.
    #[inline]
    fn rem(x: u64, modulus: u64) -> u64 {
        if modulus.is_power_of_two() {
            x & (modulus - 1)
        } else {
            x % modulus
        }
    }

    fn is_valid(&self, radix: u32) -> bool {
        self.radix == radix && Half::modulus(radix, self.len).is_some_and(|m| self.value < m)
    }

    /// `(NUM(A or B) ± NUM(S)) mod radix^m`, FF1 step 6.vi, for FF1's bytes `S` (big-endian),
    /// reduced one byte at a time: every intermediate is below `2^8 * 2^56`.
    #[inline]
    fn add_or_sub(self, bytes: impl Iterator<Item = u8>, radix: u32, m: usize, add: bool) -> Half {
        let len = u32::try_from(m).unwrap_or(u32::MAX);
        let Some(modulus) = Half::modulus(radix, len) else {
            // FF1 asks for `m` = the half's own length, which is_valid checked.
            return self;
        };
        let y = bytes.fold(0u64, |acc, byte| {
            Half::rem((acc << 8) | u64::from(byte), modulus)
        });
        let value = if add {
            self.value + y
        } else {
            self.value + modulus - y
        };
        Half {
            value: Half::rem(value, modulus),
            radix,
            len,
        }
    }
}

/// The big-endian bytes of a half's number, the last `b` of them (`STR^b_256(NUM(X))`).
struct BeBytes {
    bytes: [u8; 8],
    start: usize,
}

impl AsRef<[u8]> for BeBytes {
    fn as_ref(&self) -> &[u8] {
        self.bytes.get(self.start..).unwrap_or_default()
    }
}

impl NumeralString for Numerals {
    type Ops = Half;

    fn is_valid(&self, radix: u32) -> bool {
        self.a.len == (self.a.len + self.b.len) / 2
            && self.a.is_valid(radix)
            && self.b.is_valid(radix)
    }

    fn numeral_count(&self) -> usize {
        (self.a.len + self.b.len) as usize
    }

    fn split(&self) -> (Half, Half) {
        (self.a, self.b)
    }

    fn concat(a: Half, b: Half) -> Numerals {
        Numerals { a, b }
    }
}

impl Operations for Half {
    type Bytes = BeBytes;

    fn numeral_count(&self) -> usize {
        self.len as usize
    }

    fn to_be_bytes(&self, _radix: u32, b: usize) -> BeBytes {
        // A valid half's number fits in `b` bytes (at most 7), so nothing is cut.
        BeBytes {
            bytes: self.value.to_be_bytes(),
            start: 8usize.saturating_sub(b),
        }
    }

    fn add_mod_exp(self, other: impl Iterator<Item = u8>, radix: u32, m: usize) -> Half {
        self.add_or_sub(other, radix, m, true)
    }

    fn sub_mod_exp(self, other: impl Iterator<Item = u8>, radix: u32, m: usize) -> Half {
        self.add_or_sub(other, radix, m, false)
    }
}

/// A SipHash key of the legacy construction, split into its two little-endian words.
#[derive(Clone, Copy, PartialEq, Eq)]
struct LegacyKey {
    k0: u64,
    k1: u64,
}

impl LegacyKey {
    fn from_bytes(key: [u8; 16]) -> LegacyKey {
        let mut k0 = [0u8; 8];
        let mut k1 = [0u8; 8];
        k0.copy_from_slice(&key[..8]);
        k1.copy_from_slice(&key[8..]);
        LegacyKey {
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

    /// NIST SP 800-38G's FF1 samples for AES-128 (FF1samples.pdf, samples 1 to 3: radix 10
    /// without and with a tweak, radix 36 with a tweak), through the codec's own FF1 path.
    #[test]
    fn nist_ff1_aes128_samples() {
        const KEY: &str = "2b7e151628aed2a6abf7158809cf4f3c";
        let samples = [
            (10, "", "0123456789", "2433477484"),
            (10, "39383736353433323130", "0123456789", "6124200773"),
            (
                36,
                "3737373770717273373737",
                "0123456789abcdefghi",
                "a9tv40mll9kdu509eum",
            ),
        ];
        let hex = |text: &str| -> std::vec::Vec<u8> {
            (0..text.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&text[i..i + 2], 16).unwrap())
                .collect()
        };
        // FF1's halves of a digit string: the first floor(n / 2) digits, then the rest.
        let numerals = |text: &str, radix: u32| {
            let half = |digits: &str| Half {
                value: digits.chars().fold(0u64, |acc, c| {
                    acc * u64::from(radix) + u64::from(c.to_digit(radix).unwrap())
                }),
                radix,
                len: digits.len() as u32,
            };
            let (a, b) = text.split_at(text.len() / 2);
            Numerals {
                a: half(a),
                b: half(b),
            }
        };
        let text = |x: Numerals| -> std::string::String {
            let mut digits = std::string::String::new();
            for half in [x.a, x.b] {
                let mut value = half.value;
                let mut reversed = std::vec::Vec::new();
                for _ in 0..half.len {
                    let digit = (value % u64::from(half.radix)) as u32;
                    reversed.push(char::from_digit(digit, half.radix).unwrap());
                    value /= u64::from(half.radix);
                }
                digits.extend(reversed.iter().rev());
            }
            digits
        };
        for (radix, tweak, plain, cipher) in samples {
            let ff1 = FF1::<Aes128>::new(&hex(KEY), radix).unwrap();
            let tweak = hex(tweak);
            let encrypted = ff1_encrypt(&ff1, &tweak, numerals(plain, radix)).unwrap();
            assert_eq!(text(encrypted), cipher, "radix {radix}, {plain}");
            let decrypted = ff1_decrypt(&ff1, &tweak, encrypted).unwrap();
            assert_eq!(text(decrypted), plain);
        }
    }

    /// The codec's numeral strings (a 63-bit number, halves by shifts) give what `fpe`'s own
    /// digit-per-element strings give for radix 2 and 63 numerals, under the same FF1.
    #[test]
    fn id_numerals_match_fpe_flexible_numeral_strings() {
        use fpe::ff1::FlexibleNumeralString;
        let key = *b"clockflake-key-1";
        let ff1 = FF1::<Aes128>::new(&key, ID_RADIX).unwrap();
        let codec = PublicIds::new(0, key).unwrap();
        let mut x: u64 = 0x1234_5678_9abc_def0;
        // Miri runs FF1 about 10,000 times slower: 3 random ids there.
        for _ in 0..if cfg!(miri) { 3 } else { 200 } {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let id = x >> 1;
            let bits: std::vec::Vec<u16> = (0..63).rev().map(|i| ((id >> i) & 1) as u16).collect();
            let out: std::vec::Vec<u16> = ff1
                .encrypt(FF1_TWEAK, &FlexibleNumeralString::from(bits))
                .unwrap()
                .into();
            let expected = out
                .iter()
                .fold(0u64, |acc, &bit| (acc << 1) | u64::from(bit));
            assert_eq!(codec.encode(id).unwrap(), expected, "id {id}");
            assert_eq!(codec.decode(expected).unwrap(), id);
        }
        // The edges of the domain map inside it.
        for id in [0, 1, (1 << 63) - 1] {
            let public = codec.encode(id).unwrap();
            assert!(public >> 63 == 0);
            assert_eq!(codec.decode(public).unwrap(), id);
        }
    }

    #[test]
    fn each_key_decodes_with_its_own_construction() {
        let key = *b"clockflake-key-1";
        let legacy = PublicIds::legacy(1, key).unwrap();
        let ff1 = PublicIds::new(1, key).unwrap();
        let id = 383_188_013_854_781_440;
        // The legacy codec is the construction of earlier versions (codec.json's vectors).
        assert_eq!(legacy.encode(id).unwrap(), 9_011_143_226_781_355_965);
        assert_ne!(ff1.encode(id).unwrap(), legacy.encode(id).unwrap());
        let ring = PublicIds::new(2, *b"a-newer-16b-key!")
            .unwrap()
            .with_legacy_key(1, key)
            .unwrap()
            .with_old_key(3, key)
            .unwrap();
        assert_eq!(ring.is_legacy(1), Some(true));
        assert_eq!(ring.is_legacy(2), Some(false));
        assert_eq!(ring.is_legacy(3), Some(false));
        assert_eq!(ring.is_legacy(4), None);
        let old_text = legacy.encode_text(id).unwrap();
        assert_eq!(ring.decode_text(old_text.as_str()).unwrap(), id);
        let ff1_text = PublicIds::new(3, key).unwrap().encode_text(id).unwrap();
        assert_eq!(ring.decode_text(ff1_text.as_str()).unwrap(), id);
        // A clone keys its own cipher and encodes the same.
        let copy = ring.clone();
        assert_eq!(copy.encode(id).unwrap(), ring.encode(id).unwrap());
        assert_eq!(
            legacy.clone().encode(id).unwrap(),
            legacy.encode(id).unwrap()
        );
    }

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
