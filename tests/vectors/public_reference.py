#!/usr/bin/env python3
"""Independent reference for the public-id codec vectors (tests/vectors/public/codec.json).

From the construction documented in core/src/public.rs, with plain Python integers:
SipHash-1-3 round function, FF1-style alternating Feistel (31/32-bit halves, 6 rounds),
16-character Crockford base32 text: version, 13 payload characters, CRC-10/ATM check.

    python3 tests/vectors/public_reference.py [--check]
"""

import json
import pathlib
import sys

OUT = pathlib.Path(__file__).resolve().parent / "public" / "codec.json"
M64 = 2**64 - 1
ALPHABET = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


class Refusal(Exception):
    def __init__(self, code):
        super().__init__(code)
        self.code = code


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


def permute(key, x):
    a, b = x >> 32, x & (2**32 - 1)
    for rnd in range(6):
        bits = 31 if rnd % 2 == 0 else 32
        a, b = b, (a + F(key, rnd, b)) % 2**bits
    return (a << 32) | b


def unpermute(key, y):
    a, b = y >> 32, y & (2**32 - 1)
    for rnd in reversed(range(6)):
        bits = 31 if rnd % 2 == 0 else 32
        a, b = (b - F(key, rnd, a)) % 2**bits, a
    return (a << 32) | b


def crc10(symbols):
    crc = 0
    for s in symbols:
        for bit in range(4, -1, -1):
            feedback = ((crc >> 9) & 1) ^ ((s >> bit) & 1)
            crc = (crc << 1) & 0x3FF
            if feedback:
                crc ^= 0x233
    return crc


def to_text(version, public):
    symbols = [version] + [(public >> (5 * (12 - i))) & 31 for i in range(13)]
    check = crc10(symbols)
    return "".join(ALPHABET[s] for s in [*symbols, check >> 5, check & 31])


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
    if public >= 2**63:
        raise Refusal("INVALID_PUBLIC_ID")
    if symbols[0] not in keys:
        raise Refusal("UNKNOWN_KEY_VERSION")
    return unpermute(keys[symbols[0]], public)


def keyring(spec):
    keys = {}
    for entry in spec:
        if entry["version"] > 31 or entry["version"] in keys:
            raise Refusal("INVALID_KEY_VERSION")
        keys[entry["version"]] = bytes.fromhex(entry["key_hex"])
    return keys


def run(fn):
    try:
        return {"out": fn()}
    except Refusal as refusal:
        return {"error": refusal.code}


def build():
    k1 = {"version": 1, "key_hex": b"clockflake-key-1".hex()}
    k2 = {"version": 2, "key_hex": bytes(range(16)).hex()}
    k0 = {"version": 0, "key_hex": "00" * 16}
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
    for ring in ([k1], [k2], [k0]):
        keys = keyring(ring)
        v = ring[0]["version"]
        for i, x in enumerate(ids):
            public = permute(keys[v], x)
            assert unpermute(keys[v], public) == x
            cases.append(
                {
                    "id": f"public-encode-v{v}-{i}",
                    "op": "public_encode",
                    "in": {"keys": ring, "id": str(x)},
                    "out": {"number": str(public), "text": to_text(v, public)},
                }
            )
    rotated = [k2, k1]  # current key first, then old ones
    keys = keyring(rotated)
    old_text = to_text(1, permute(keys[1], 383188013854781440))
    good = to_text(2, permute(keys[2], 123456789))
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
    for label, number in [("ok", str(permute(keys[2], 5))), ("sign-bit", str(2**63))]:

        def decode_number(n=number):
            if int(n) >= 2**63:
                raise Refusal("INVALID_PUBLIC_ID")
            return str(unpermute(keys[2], int(n)))

        cases.append(
            {
                "id": f"public-decode-number-{label}",
                "op": "public_decode",
                "in": {"keys": rotated, "number": number},
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
        ("version-32", [{"version": 32, "key_hex": "00" * 16}]),
        ("duplicate", [k1, k1]),
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
        "description": "public-id codec: keys[0] is the current key, the rest are old keys for decoding",
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
