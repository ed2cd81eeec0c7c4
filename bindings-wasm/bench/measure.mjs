// The measurements of `make bench-wasm`, shared by the Node run and the Chromium run (in a
// worker). Pure ES module: callers hand in clockflake's API and the peer's `Snowflake` class.
//
//   decode      ns per decode() of a bigint id, over a ring of 1024 ids (median of runs);
//               also of the same ids as decimal strings
//   raw         ns per nextId() in bursts of 1000 started right after the clock ticks over
//               (median of bursts: the cost of an id when the sequence is not the limit)
//   sustained   ids per second from nextId() in a tight loop for 1 s (median of runs)
//   public*     ns per PublicIds call over a ring of 1024 ids / texts (median of runs), next to
//               the peer hashids (encode/decode of the same bigint ids), when it is given

const clock = () => performance.now();

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/** Median ns per call of `run(i)` over `runs` runs of `perRun` calls. */
function perCall(run, perRun, runs) {
  const samples = [];
  let sink = 0;
  for (let r = 0; r < runs + 2; r++) {
    const t0 = clock();
    for (let i = 0; i < perRun; i++) sink += run(i);
    const ns = ((clock() - t0) * 1e6) / perRun;
    if (r >= 2) samples.push(ns); // the first two warm up the JIT
  }
  if (sink === -1) console.log('');
  return median(samples);
}

/** Median ns per id of bursts of `size` calls, each started just after Date.now() ticks. */
function bursts(next, size, count) {
  const samples = [];
  let sink = 0n;
  for (let b = 0; b < count + 20; b++) {
    const start = Date.now();
    while (Date.now() === start);
    const t0 = clock();
    for (let i = 0; i < size; i++) sink ^= next();
    const ns = ((clock() - t0) * 1e6) / size;
    if (b >= 20) samples.push(ns);
  }
  if (sink === -1n) console.log('');
  return median(samples);
}

/** Median ids/s of `next()` called flat out for `seconds`, `runs` times. */
function sustained(next, seconds, runs) {
  const rates = [];
  let sink = 0n;
  for (let r = 0; r < runs; r++) {
    let n = 0;
    const t0 = clock();
    const end = t0 + seconds * 1000;
    let now = t0;
    while (now < end) {
      for (let i = 0; i < 256; i++) sink ^= next();
      n += 256;
      now = clock();
    }
    rates.push(n / ((now - t0) / 1000));
  }
  if (sink === -1n) console.log('');
  return median(rates);
}

export function measureAll({ api, Snowflake, Hashids, quick = false }) {
  const runs = quick ? 5 : 15;
  const results = {};

  // decode: a ring of real ids from each library.
  const gen = new api.Generator({ workerId: 7 });
  const ours = Array.from(gen.nextIds(1024));
  results.decode = perCall((i) => api.decode(ours[i & 1023]).sequence, 1_000_000, runs);
  const texts = ours.map(String);
  results.decodeString = perCall((i) => api.decode(texts[i & 1023]).sequence, 1_000_000, runs);
  const peer = new Snowflake({ instance_id: 7, custom_epoch: 1_704_067_200_000 });
  const theirs = Array.from({ length: 1024 }, () => peer.getUniqueID());
  results.peerDecode = perCall(
    (i) => Snowflake.timestampFromID(theirs[i & 1023], 1_704_067_200_000) + Snowflake.instanceIDFromID(theirs[i & 1023]),
    1_000_000,
    runs,
  );

  // nextId raw: fresh generators so that no burst starts in an exhausted tick.
  const burstGen = new api.Generator({ workerId: 8 });
  results.raw = bursts(() => burstGen.nextId(), 1000, quick ? 100 : 400);
  const burstPeer = new Snowflake({ instance_id: 8, custom_epoch: 1_704_067_200_000 });
  results.peerRaw = bursts(() => burstPeer.getUniqueID(), 1000, quick ? 100 : 400);

  // sustained: the layout caps clockseq at 4096 ids/ms; the peer caps itself at 1024/ms.
  const seconds = quick ? 0.5 : 1;
  const flatOut = new api.Generator({ workerId: 9 });
  results.sustained = sustained(() => flatOut.nextId(), seconds, quick ? 3 : 5);
  const flatPeer = new Snowflake({ instance_id: 9, custom_epoch: 1_704_067_200_000 });
  results.peerSustained = sustained(() => flatPeer.getUniqueID(), seconds, quick ? 3 : 5);

  // Public ids: numbers and text forms of the same real ids, and the peer hashids on them.
  const codec = new api.PublicIds(1, new TextEncoder().encode('clockflake-key-1'));
  const publicNumbers = ours.map((id) => codec.encode(id));
  const publicTexts = ours.map((id) => codec.encodeText(id));
  const calls = 200_000;
  results.publicEncode = perCall((i) => (codec.encode(ours[i & 1023]) === 0n ? 1 : 0), calls, runs);
  results.publicDecode = perCall((i) => (codec.decode(publicNumbers[i & 1023]) === 0n ? 1 : 0), calls, runs);
  results.publicEncodeText = perCall((i) => codec.encodeText(ours[i & 1023]).length, calls, runs);
  results.publicDecodeText = perCall((i) => (codec.decodeText(publicTexts[i & 1023]) === 0n ? 1 : 0), calls, runs);
  if (Hashids !== undefined) {
    const hashids = new Hashids('clockflake-key-1');
    const hashes = ours.map((id) => hashids.encode(id));
    if (hashids.decode(hashes[5])[0] !== ours[5]) throw new Error('hashids does not round-trip bigints');
    results.peerEncodeText = perCall((i) => hashids.encode(ours[i & 1023]).length, calls / 4, runs);
    results.peerDecodeText = perCall((i) => (hashids.decode(hashes[i & 1023])[0] === 0n ? 1 : 0), calls / 4, runs);
  }

  // For reference: the cost of the clock read every nextId() makes.
  results.dateNow = perCall(() => Date.now() & 1, 1_000_000, runs);
  return results;
}
