// A small raw-DEFLATE decoder (RFC 1951, after zlib's puff.c): the inlined wasm engine ships
// deflated (build.mjs, zlib level 9) and is inflated synchronously once at load, which saves a
// page about 3 kB gzipped over inlining the base64 of the plain .wasm (base64 compresses badly).

const LENGTH_BASE = [3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258];
const LENGTH_EXTRA = [0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0];
const DIST_BASE = [
  1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577,
];
const DIST_EXTRA = [0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13];
const CODE_LENGTH_ORDER = [16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15];

/** A canonical Huffman code from code lengths: [count per length, symbols in code order]. */
function huffman(lengths) {
  const counts = new Uint16Array(16);
  for (const length of lengths) counts[length]++;
  counts[0] = 0;
  const offsets = new Uint16Array(16);
  for (let length = 1; length < 15; length++) offsets[length + 1] = offsets[length] + counts[length];
  const symbols = new Uint16Array(lengths.length);
  lengths.forEach((length, symbol) => {
    if (length !== 0) symbols[offsets[length]++] = symbol;
  });
  return [counts, symbols];
}

/** Inflates raw DEFLATE data `input` into a new array of exactly `size` bytes. */
export function inflateRaw(input, size) {
  const out = new Uint8Array(size);
  let at = 0;
  let written = 0;
  let bitBuffer = 0;
  let bitCount = 0;

  const bits = (count) => {
    let value = bitBuffer;
    while (bitCount < count) {
      if (at >= input.length) throw new Error('inflate: input ends early');
      value |= input[at++] << bitCount;
      bitCount += 8;
    }
    bitBuffer = value >>> count;
    bitCount -= count;
    return value & ((1 << count) - 1);
  };

  const decode = ([counts, symbols]) => {
    let code = 0;
    let first = 0;
    let index = 0;
    for (let length = 1; length < 16; length++) {
      code |= bits(1);
      const count = counts[length];
      if (code - count < first) return symbols[index + (code - first)];
      index += count;
      first = (first + count) << 1;
      code <<= 1;
    }
    throw new Error('inflate: bad code');
  };

  let last;
  do {
    last = bits(1);
    const type = bits(2);
    if (type === 0) {
      bitBuffer = 0;
      bitCount = 0;
      const length = input[at] | (input[at + 1] << 8);
      at += 4;
      out.set(input.subarray(at, at + length), written);
      at += length;
      written += length;
      continue;
    }
    let literals;
    let distances;
    if (type === 1) {
      const lengths = new Uint8Array(288).fill(8, 0, 144).fill(9, 144, 256).fill(7, 256, 280).fill(8, 280);
      literals = huffman(lengths);
      distances = huffman(new Uint8Array(30).fill(5));
    } else if (type === 2) {
      const literalCount = bits(5) + 257;
      const distanceCount = bits(5) + 1;
      const codeLengthCount = bits(4) + 4;
      const codeLengths = new Uint8Array(19);
      for (let i = 0; i < codeLengthCount; i++) codeLengths[CODE_LENGTH_ORDER[i]] = bits(3);
      const codeLengthCode = huffman(codeLengths);
      const lengths = new Uint8Array(literalCount + distanceCount);
      for (let i = 0; i < lengths.length; ) {
        const symbol = decode(codeLengthCode);
        if (symbol < 16) {
          lengths[i++] = symbol;
        } else {
          const repeat = symbol === 16 ? 3 + bits(2) : symbol === 17 ? 3 + bits(3) : 11 + bits(7);
          const value = symbol === 16 ? lengths[i - 1] : 0;
          lengths.fill(value, i, i + repeat);
          i += repeat;
        }
      }
      literals = huffman(lengths.subarray(0, literalCount));
      distances = huffman(lengths.subarray(literalCount));
    } else {
      throw new Error('inflate: bad block type');
    }
    for (;;) {
      let symbol = decode(literals);
      if (symbol < 256) {
        out[written++] = symbol;
      } else if (symbol === 256) {
        break;
      } else {
        symbol -= 257;
        const length = LENGTH_BASE[symbol] + bits(LENGTH_EXTRA[symbol]);
        const code = decode(distances);
        const distance = DIST_BASE[code] + bits(DIST_EXTRA[code]);
        for (let i = 0; i < length; i++, written++) out[written] = out[written - distance];
      }
    }
  } while (!last);
  if (written !== size) throw new Error(`inflate: expected ${size} bytes, found ${written}`);
  return out;
}
