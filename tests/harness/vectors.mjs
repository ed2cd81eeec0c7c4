// The shared-vector runner for every JavaScript binding (Node native, wasm in Node, wasm in the
// browser). Pure ES module with no Node imports: callers load the JSON files themselves.
//
// `api` is a binding's module: { Generator, decode, encode, idRange, describeLayout }.
// runCase(api, fileLayout, testCase) throws an Error naming the case and step on any mismatch.

/** A vector's layout (preset name or snake_case object) in the shape the JS API takes. */
export function toLayoutOption(spec) {
  if (spec === null || typeof spec === 'string') return spec ?? undefined;
  return {
    fields: spec.fields.map((f) => ({ name: f.name, bits: f.bits })),
    unitMs: spec.unit_ms,
    epochMs: Number(spec.epoch_ms),
  };
}

function fail(name, expected, found) {
  throw new Error(`${name}: expected ${JSON.stringify(expected)}, found ${found}`);
}

function show(value) {
  if (value instanceof Error) return `${value.code ?? 'NO_CODE'}: ${value.message}`;
  return JSON.stringify(value, (_, v) => (typeof v === 'bigint' ? `${v}n` : v));
}

/** Runs `produce`; returns {out} or {error: code}, checking thrown errors are coded Errors. */
function outcome(name, produce) {
  try {
    return { out: produce() };
  } catch (error) {
    if (!(error instanceof Error) || typeof error.code !== 'string') {
      throw new Error(`${name}: threw something that is not an Error with a .code: ${String(error)}`);
    }
    return { error };
  }
}

function expectOutcome(name, expected, got, render) {
  if ('error' in expected) {
    if (!got.error) fail(name, { error: expected.error }, show(got.out));
    if (got.error.code !== expected.error) fail(name, { error: expected.error }, show(got.error));
    return;
  }
  if (got.error) fail(name, expected.out, show(got.error));
  const rendered = render(got.out);
  if (JSON.stringify(rendered) !== JSON.stringify(expected.out)) fail(name, expected.out, JSON.stringify(rendered));
}

const partsToVector = (p) => ({
  timestamp_ms: String(p.timestampMs),
  clock_seq: p.clockSeq,
  worker_id: p.workerId,
  sequence: p.sequence,
});

const layoutToVector = (info) => ({
  fields: info.fields.map((f) => ({ name: f.name, bits: f.bits })),
  unit_ms: info.unitMs,
  epoch_ms: String(info.epochMs),
  max_id: String(info.maxId),
  fingerprint: String(info.fingerprint),
});

export function runCase(api, fileLayout, testCase) {
  const name = testCase.id;
  const layout = toLayoutOption(fileLayout);
  const input = testCase.in;
  switch (testCase.op) {
    case 'layout':
      return expectOutcome(name, testCase, outcome(name, () => api.describeLayout(toLayoutOption(input))), layoutToVector);
    case 'decode': {
      expectOutcome(name, testCase, outcome(name, () => api.decode(input, layout)), partsToVector);
      if ('out' in testCase) {
        // The same id as a bigint decodes the same.
        expectOutcome(`${name} (bigint)`, testCase, outcome(name, () => api.decode(BigInt(input), layout)), partsToVector);
      }
      return;
    }
    case 'encode': {
      const parts = {
        timestampMs: Number(input.timestamp_ms),
        clockSeq: input.clock_seq,
        workerId: input.worker_id,
        sequence: input.sequence,
      };
      return expectOutcome(name, testCase, outcome(name, () => api.encode(parts, layout)), String);
    }
    case 'id_range':
      return expectOutcome(
        name,
        testCase,
        outcome(name, () => api.idRange(Number(input.from_ms), Number(input.to_ms), layout)),
        (pair) => pair.map(String),
      );
    case 'generate':
      return runGenerate(api, layout, testCase);
    default:
      throw new Error(`${name}: unknown op ${JSON.stringify(testCase.op)}`);
  }
}

function runGenerate(api, layout, testCase) {
  const name = testCase.id;
  const input = testCase.in;
  const options = { workerId: input.worker_id };
  if (layout !== undefined) options.layout = layout;
  if ('on_rollback' in input) options.onRollback = input.on_rollback;
  if ('max_wait_ms' in input) options.maxWaitMs = input.max_wait_ms;
  if ('max_drift_ms' in input) options.maxDriftMs = input.max_drift_ms;
  const made = outcome(name, () => new api.Generator(options));
  if ('error' in testCase) return expectOutcome(name, testCase, made, () => 'a generator');
  if (made.error) fail(name, 'a generator', show(made.error));
  let gen = made.out;
  const resumeOptions = { ...options };
  delete resumeOptions.workerId;
  input.steps.forEach((step, i) => {
    const stepName = `${name} step ${i}`;
    if (step.restart) {
      const state = gen.state();
      if (step.reserve_ms !== undefined) {
        const cs = state.clockSeq;
        const reserve = Number(step.reserve_ms);
        state.highWaterMs[cs] = state.highWaterMs[cs] === null ? reserve : Math.max(state.highWaterMs[cs], reserve);
      }
      // The state must survive JSON, as it would in a file or a database row.
      gen = api.Generator.resume(JSON.parse(JSON.stringify(state)), resumeOptions);
      return;
    }
    const now = Number(step.now_ms);
    const repeat = step.repeat ?? 1;
    let got;
    for (let k = 0; k < repeat; k++) {
      got = outcome(stepName, () => gen.nextIdAt(now));
      if (repeat > 1 && got.error) fail(`${stepName} (repeat ${k})`, 'an id', show(got.error));
    }
    expectOutcome(stepName, step, got, String);
    if (got.error) {
      const retry = got.error.retryAtMs === null || got.error.retryAtMs === undefined ? null : String(got.error.retryAtMs);
      if (retry !== step.retry_at_ms) fail(`${stepName} retryAtMs`, step.retry_at_ms, String(got.error.retryAtMs));
    }
  });
}

/** Every case of every file, as [fileName, fileLayout, case]. Throws on an empty set. */
export function allCases(files) {
  const out = [];
  for (const [fileName, body] of files) {
    for (const testCase of body.cases) out.push([fileName, body.layout, testCase]);
  }
  if (out.length === 0) throw new Error('no vector cases loaded');
  return out;
}

// ---- public-id codec vectors (tests/vectors/public/*.json)
// api.PublicIds: new PublicIds(version, keyBytes: Uint8Array(16)) (an FF1 key) or
// PublicIds.legacy(version, keyBytes); .withOldKey / .withLegacyKey(version, keyBytes) return the
// codec (each key's `construction` in the vectors: ff1 or legacy); .encode(bigint) / .decode(bigint) -> bigint; .encodeText(bigint) -> string;
// .decodeText(string) -> bigint.

function hexToBytes(hex) {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i++) bytes[i] = parseInt(hex.slice(2 * i, 2 * i + 2), 16);
  return bytes;
}

export function runPublicCase(api, testCase) {
  const name = testCase.id;
  const input = testCase.in;
  const got = outcome(name, () => {
    const legacy = (entry) => {
      if (entry.construction !== 'ff1' && entry.construction !== 'legacy') throw new Error(`${name}: unknown construction ${JSON.stringify(entry.construction)}`);
      return entry.construction === 'legacy';
    };
    const [current, ...old] = input.keys;
    const currentKey = hexToBytes(current.key_hex);
    let codec = legacy(current) ? api.PublicIds.legacy(current.version, currentKey) : new api.PublicIds(current.version, currentKey);
    for (const entry of old) {
      const key = hexToBytes(entry.key_hex);
      codec = legacy(entry) ? codec.withLegacyKey(entry.version, key) : codec.withOldKey(entry.version, key);
    }
    switch (testCase.op) {
      case 'public_encode': {
        const id = BigInt(input.id);
        return { number: String(codec.encode(id)), text: codec.encodeText(id) };
      }
      case 'public_decode_text':
        return String(codec.decodeText(input.text));
      case 'public_decode':
        return String(codec.decode(BigInt(input.number)));
      default:
        throw new Error(`${name}: unknown op ${JSON.stringify(testCase.op)}`);
    }
  });
  if (got.error && /unknown (op|construction)/.test(got.error.message)) throw got.error;
  expectOutcome(name, testCase, got, (out) => out);
}
