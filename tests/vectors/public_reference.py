#!/usr/bin/env python3
"""Independent reference for the public-id codec vectors (tests/vectors/public/codec.json).

From the constructions documented in core/src/public.rs, with plain Python integers and no
package beyond the standard library:
- FF1 (NIST SP 800-38G) with AES-128, radix 2 over the id's 63 bits, empty tweak: AES from
  FIPS 197 below, FF1 from the standard's algorithm 7 for any radix, both checked first against
  the published examples (FIPS 197 appendix C.1; FF1 samples 1 to 3 for AES-128);
- the legacy construction, for keys whose public ids were issued before FF1: SipHash-1-3 round
  function, FF1-style alternating Feistel (31/32-bit halves, 6 rounds);
- 16-character Crockford base32 text: version, 13 payload characters, CRC-10/ATM check.

    python3 tests/vectors/public_reference.py [--check]
"""

import json
import math
import pathlib
import sys

OUT = pathlib.Path(__file__).resolve().parent / "public" / "codec.json"
M64 = 2**64 - 1
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class Refusal(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


# --- the legacy construction (keys whose public ids were issued before FF1) -------------------


def rotl(x, b):
    return ((x << b) | (x >> (64 - b))) & M64


def sipround(v0, v1, v2, v3):
    v0 = (v0 + v1) & M64
    v1 = rotl(v1, 13) ^ v0
    v0 = rotl(v0, 32)
    v2 = (v2 + v3) & M64
    v3 = rotl(v3, 16) ^ v2
    v0 = (v0 + v3) & M64
    v3 = rotl(v3, 21) ^ v0
    v2 = (v2 + v1) & M64
    v1 = rotl(v1, 17) ^ v2
    v2 = rotl(v2, 32)
    return v0, v1, v2, v3


def siphash(key: bytes, message: bytes, c=1, d=3):
    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    v = [
        k0 ^ 0x736F6D6570736575,
        k1 ^ 0x646F72616E646F6D,
        k0 ^ 0x6C7967656E657261,
        k1 ^ 0x7465646279746573,
    ]
    tail_len = len(message) % 8
    words = [
        int.from_bytes(message[i : i + 8], "little") for i in range(0, len(message) - tail_len, 8)
    ]
    words.append(
        ((len(message) & 0xFF) << 56) | int.from_bytes(message[len(message) - tail_len :], "little")
    )
    for m in words:
        v[3] ^= m
        for _ in range(c):
            v = list(sipround(*v))
        v[0] ^= m
    v[2] ^= 0xFF
    for _ in range(d):
        v = list(sipround(*v))
    return v[0] ^ v[1] ^ v[2] ^ v[3]


# SipHash-2-4 test vector from the SipHash paper (Aumasson & Bernstein, appendix A):
# key 00..0f, message 00..0e (15 bytes) -> a129ca6149be45e5.
assert siphash(bytes(range(16)), bytes(range(15)), 2, 4) == 0xA129CA6149BE45E5


def F(key, rnd, half):
    return siphash(key, ((rnd << 32) | half).to_bytes(8, "little"))


def legacy_permute(key, x):
    a, b = x >> 32, x & (2**32 - 1)
    for rnd in range(6):
        bits = 31 if rnd % 2 == 0 else 32
        a, b = b, (a + F(key, rnd, b)) % 2**bits
    return (a << 32) | b


def legacy_unpermute(key, y):
    a, b = y >> 32, y & (2**32 - 1)
    for rnd in reversed(range(6)):
        bits = 31 if rnd % 2 == 0 else 32
        a, b = (b - F(key, rnd, a)) % 2**bits, a
    return (a << 32) | b


# --- AES-128 (FIPS 197), encryption only -------------------------------------------------


def _xtime(a):
    a <<= 1
    return (a ^ 0x11B) if a & 0x100 else a


def _mul(a, b):
    out = 0
    while b:
        if b & 1:
            out ^= a
        a, b = _xtime(a), b >> 1
    return out


def _sbox():
    box = []
    for x in range(256):
        # The multiplicative inverse in GF(2^8) (0 for 0), then the affine map.
        inv = next((y for y in range(1, 256) if _mul(x, y) == 1), 0)
        s = inv
        for shift in range(1, 5):
            s ^= ((inv << shift) | (inv >> (8 - shift))) & 0xFF
        box.append(s ^ 0x63)
    return box


SBOX = _sbox()


def aes128_round_keys(key: bytes):
    words = [list(key[i : i + 4]) for i in range(0, 16, 4)]
    rcon = 1
    for i in range(4, 44):
        word = list(words[i - 1])
        if i % 4 == 0:
            word = [SBOX[b] for b in word[1:] + word[:1]]
            word[0] ^= rcon
            rcon = _xtime(rcon)
        words.append([a ^ b for a, b in zip(words[i - 4], word, strict=True)])
    return [[b for word in words[4 * r : 4 * r + 4] for b in word] for r in range(11)]


def aes128_encrypt(round_keys, block: bytes) -> bytes:
    state = [b ^ k for b, k in zip(block, round_keys[0], strict=True)]
    for rnd in range(1, 11):
        state = [SBOX[b] for b in state]
        # ShiftRows: the state is column-major, byte 4 * column + row.
        state = [state[(4 * (c + r) + r) % 16] for c in range(4) for r in range(4)]
        if rnd < 10:
            mixed = []
            for c in range(4):
                a = state[4 * c : 4 * c + 4]
                for r in range(4):
                    mixed.append(
                        _mul(a[r], 2) ^ _mul(a[(r + 1) % 4], 3) ^ a[(r + 2) % 4] ^ a[(r + 3) % 4]
                    )
            state = mixed
        state = [b ^ k for b, k in zip(state, round_keys[rnd], strict=True)]
    return bytes(state)


# FIPS 197, appendix C.1.
assert aes128_encrypt(
    aes128_round_keys(bytes(range(16))), bytes.fromhex("00112233445566778899aabbccddeeff")
) == bytes.fromhex("69c4e0d86a7b0430d8cdb78070b4c55a")


# --- FF1 (NIST SP 800-38G, algorithms 7 and 8) ------------------------------------------------


def _num(numerals, radix):
    value = 0
    for x in numerals:
        value = value * radix + x
    return value


def _str(value, radix, m):
    out = []
    for _ in range(m):
        value, digit = divmod(value, radix)
        out.append(digit)
    return out[::-1]


def _ff1(key: bytes, tweak: bytes, radix: int, numerals, decrypt: bool):
    round_keys = aes128_round_keys(key)

    def prf(data: bytes) -> bytes:  # CBC-MAC with a zero IV
        y = bytes(16)
        for i in range(0, len(data), 16):
            y = aes128_encrypt(
                round_keys, bytes(a ^ b for a, b in zip(y, data[i : i + 16], strict=True))
            )
        return y

    n, t = len(numerals), len(tweak)
    u = n // 2
    v = n - u
    a, b = list(numerals[:u]), list(numerals[u:])
    bb = -(-math.ceil(v * math.log2(radix)) // 8)
    d = 4 * -(-bb // 4) + 4
    p = bytes([1, 2, 1]) + radix.to_bytes(3, "big") + bytes([10, u % 256]) + n.to_bytes(4, "big")
    p += t.to_bytes(4, "big")
    rounds = range(9, -1, -1) if decrypt else range(10)
    for i in rounds:
        other = a if decrypt else b
        q = tweak + bytes((-t - bb - 1) % 16) + bytes([i]) + _num(other, radix).to_bytes(bb, "big")
        r = prf(p + q)
        s = r
        for j in range(1, -(-d // 16)):
            s += aes128_encrypt(
                round_keys, bytes(x ^ y for x, y in zip(r, j.to_bytes(16, "big"), strict=True))
            )
        y = int.from_bytes(s[:d], "big")
        m = u if i % 2 == 0 else v
        if decrypt:
            c = (_num(b, radix) - y) % radix**m
            a, b = _str(c, radix, m), a
        else:
            c = (_num(a, radix) + y) % radix**m
            a, b = b, _str(c, radix, m)
    return a + b


def ff1_encrypt(key, tweak, radix, numerals):
    return _ff1(key, tweak, radix, numerals, False)


def ff1_decrypt(key, tweak, radix, numerals):
    return _ff1(key, tweak, radix, numerals, True)


# NIST's FF1 samples 1 to 3 (AES-128): radix 10 without and with a tweak, radix 36.
_NIST_KEY = bytes.fromhex("2b7e151628aed2a6abf7158809cf4f3c")
for _radix, _tweak, _plain, _cipher in [
    (10, "", "0123456789", "2433477484"),
    (10, "39383736353433323130", "0123456789", "6124200773"),
    (36, "3737373770717273373737", "0123456789abcdefghi", "a9tv40mll9kdu509eum"),
]:
    _x = [int(c, 36) for c in _plain]
    _y = ff1_encrypt(_NIST_KEY, bytes.fromhex(_tweak), _radix, _x)
    assert "".join("0123456789abcdefghijklmnopqrstuvwxyz"[c] for c in _y) == _cipher, _plain
    assert ff1_decrypt(_NIST_KEY, bytes.fromhex(_tweak), _radix, _y) == _x


def ff1_permute(key, x):
    """The codec: FF1-AES-128, radix 2, the id's 63 bits most significant first, empty tweak."""
    return _num(ff1_encrypt(key, b"", 2, _str(x, 2, 63)), 2)


def ff1_unpermute(key, y):
    return _num(ff1_decrypt(key, b"", 2, _str(y, 2, 63)), 2)


# --- the text form ---------------------------------------------------------------------------


def crc10(symbols):
    crc = 0
    for s in symbols:
        for bit in range(4, -1, -1):
            feedback = ((crc >> 9) & 1) ^ ((s >> bit) & 1)
            crc = (crc << 1) & 0x3FF
            if feedback:
                crc ^= 0x233
    return crc


# The text form's construction bit, above the 63-bit public number: 1 for FF1, 0 for legacy.
FF1_TEXT_BIT = 2**63


def to_text(version, public, construction="legacy"):
    if construction == "ff1":
        public |= FF1_TEXT_BIT
    symbols = [version] + [(public >> (5 * (12 - i))) & 31 for i in range(13)]
    check = crc10(symbols)
    return "".join(ALPHABET[s] for s in [*symbols, check >> 5, check & 31])


def permute(entry, x):
    construction, key = entry
    return ff1_permute(key, x) if construction == "ff1" else legacy_permute(key, x)


def unpermute(entry, y):
    construction, key = entry
    return ff1_unpermute(key, y) if construction == "ff1" else legacy_unpermute(key, y)


def from_text(keys, text):
    if len(text) != 16:
        raise Refusal("INVALID_PUBLIC_ID")
    folded = text.upper().replace("O", "0").replace("I", "1").replace("L", "1")
    if any(c not in ALPHABET for c in folded):
        raise Refusal("INVALID_PUBLIC_ID")
    symbols = [ALPHABET.index(c) for c in folded]
    if crc10(symbols[:14]) != (symbols[14] << 5) | symbols[15]:
        raise Refusal("INVALID_PUBLIC_ID")
    public = 0
    for s in symbols[1:14]:
        public = (public << 5) | s
    if public >= 2**64:
        raise Refusal("INVALID_PUBLIC_ID")
    if symbols[0] not in keys:
        raise Refusal("UNKNOWN_KEY_VERSION")
    # The text says how it was made; the version names the key bytes.
    construction = "ff1" if public & FF1_TEXT_BIT else "legacy"
    _, key_bytes = keys[symbols[0]]
    return unpermute((construction, key_bytes), public & ~FF1_TEXT_BIT)


def keyring(spec):
    """version -> (construction, key); the first entry is the current key."""
    keys = {}
    for entry in spec:
        if entry["version"] > 31 or entry["version"] in keys:
            raise Refusal("INVALID_KEY_VERSION")
        keys[entry["version"]] = (entry["construction"], bytes.fromhex(entry["key_hex"]))
    return keys


def run(fn):
    try:
        return {"out": fn()}
    except Refusal as refusal:
        return {"error": refusal.code}


def key(version, key_bytes, construction="ff1"):
    return {"version": version, "key_hex": key_bytes.hex(), "construction": construction}


def build():
    k1 = key(1, b"clockflake-key-1")
    k2 = key(2, bytes(range(16)))
    k0 = key(0, bytes(16))
    legacy = {k["version"]: {**k, "construction": "legacy"} for k in (k0, k1, k2)}
    cases = []
    ids = [
        0,
        1,
        2,
        42,
        4095,
        2**32 - 1,
        2**32,
        383188013854781440,
        383188013854781441,
        2**62,
        2**63 - 1,
    ]
    # FF1 keys, then the same keys as legacy keys: the vectors of the codec before FF1.
    for prefix, ring_keys in [
        ("public", [k1, k2, k0]),
        ("public-legacy", [legacy[1], legacy[2], legacy[0]]),
    ]:
        for current in ring_keys:
            ring = [current]
            keys = keyring(ring)
            v = current["version"]
            for i, x in enumerate(ids):
                public = permute(keys[v], x)
                assert 0 <= public < 2**63 and unpermute(keys[v], public) == x
                cases.append(
                    {
                        "id": f"{prefix}-encode-v{v}-{i}",
                        "op": "public_encode",
                        "in": {"keys": ring, "id": str(x)},
                        "out": {
                            "number": str(public),
                            "text": to_text(v, public, current["construction"]),
                        },
                    }
                )
    # After the move to FF1: a new FF1 key is current, the old key is kept as legacy.
    rotated = [k2, legacy[1]]
    keys = keyring(rotated)
    old_text = to_text(1, legacy_permute(b"clockflake-key-1", 383188013854781440))
    good = to_text(2, permute(keys[2], 123456789), "ff1")
    typo = good[:5] + ("A" if good[5] != "A" else "B") + good[6:]
    swap = good[:7] + good[8] + good[7] + good[9:]
    over = [2] + [31] * 13
    check = crc10(over)
    over_text = "".join(ALPHABET[s] for s in [*over, check >> 5, check & 31])
    for label, text in [
        ("old-key-after-rotation", old_text),
        ("current", good),
        ("lowercase", good.lower()),
        ("typo", typo),
        ("swap", swap),
        ("short", good[:15]),
        ("long", good + "0"),
        ("bad-character-u", good[:3] + "U" + good[4:]),
        ("empty", ""),
        ("unknown-version", to_text(5, 77)),
        ("payload-above-2^63", over_text),
    ]:
        cases.append(
            {
                "id": f"public-decode-text-{label}",
                "op": "public_decode_text",
                "in": {"keys": rotated, "text": text},
                **run(lambda t=text: str(from_text(keys, t))),
            }
        )
    # Other rings: an FF1 rotation, a legacy current key, and a text under the same key bytes
    # registered with the other construction: the text's construction bit decodes it all the
    # same (only public numbers need an old key registered as legacy).
    ff1_text = to_text(1, ff1_permute(b"clockflake-key-1", 383188013854781440), "ff1")
    for label, ring, text in [
        ("old-ff1-key-after-rotation", [k2, k1], ff1_text),
        ("legacy-current-key", [legacy[1]], old_text),
        ("legacy-text-under-the-same-key-as-ff1", [k1], old_text),
        ("ff1-text-under-the-same-key-as-legacy", [legacy[1]], ff1_text),
    ]:
        ring_keys = keyring(ring)
        cases.append(
            {
                "id": f"public-decode-text-{label}",
                "op": "public_decode_text",
                "in": {"keys": ring, "text": text},
                **run(lambda t=text, r=ring_keys: str(from_text(r, t))),
            }
        )
    for label, ring, number in [
        ("ok", rotated, str(permute(keys[2], 5))),
        ("sign-bit", rotated, str(2**63)),
        ("legacy-current-key", [legacy[1]], str(legacy_permute(b"clockflake-key-1", 5))),
    ]:
        ring_keys = keyring(ring)
        current = ring_keys[ring[0]["version"]]

        def decode_number(n=number, entry=current):
            if int(n) >= 2**63:
                raise Refusal("INVALID_PUBLIC_ID")
            return str(unpermute(entry, int(n)))

        cases.append(
            {
                "id": f"public-decode-number-{label}",
                "op": "public_decode",
                "in": {"keys": ring, "number": number},
                **run(decode_number),
            }
        )
    cases.append(
        {
            "id": "public-encode-sign-bit",
            "op": "public_encode",
            "in": {"keys": [k1], "id": str(2**63)},
            "error": "INVALID_ID",
        }
    )
    for label, ring in [
        ("version-32", [key(32, bytes(16))]),
        ("duplicate", [k1, k1]),
        ("duplicate-legacy", [k1, legacy[1]]),
    ]:
        cases.append(
            {
                "id": f"public-keyring-{label}",
                "op": "public_encode",
                "in": {"keys": ring, "id": "1"},
                **run(lambda r=ring: keyring(r)),
            }
        )
    body = {
        "description": "public-id codec: keys[0] is the current key, the rest are old keys for "
        "decoding; each key's construction is ff1 (NIST FF1-AES-128, the default) or legacy "
        "(the Feistel network of public ids issued before FF1)",
        "layout": None,
        "cases": cases,
    }
    return json.dumps(body, indent=1) + "\n"


if __name__ == "__main__":
    text = build()
    if "--check" in sys.argv:
        if not OUT.exists() or OUT.read_text() != text:
            sys.exit("public vectors out of date: run tests/vectors/public_reference.py")
        print(f"public vectors up to date: {len(json.loads(text)['cases'])} cases")
    else:
        OUT.parent.mkdir(exist_ok=True)
        OUT.write_text(text)
        print(f"wrote {OUT}")
