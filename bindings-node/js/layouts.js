// Layouts: each one validated and described by the core (the wasm engine), kept as a record
// with its decoder's constants (decoding is plain JavaScript on the layout's shifts) and, once a
// lease needs it, the native addon's handle of the same layout (leased.js).
import { DEFAULT_PRESET } from '../wasm/core.js';
import * as engine from './engine.js';
import { HALVES, HI, LO, Parts, SCRATCH, extractor } from './parts.js';
import { coded, integer, onlyKnownKeys, plainObject, typeError } from './errors.js';

/** Everything about one layout: the native handle, the public description, the decoder constants. */
class LayoutRecord {
  constructor(handle, spec) {
    const info = engine.layoutInfo(handle, PRESET_NAMES);
    this.handle = handle;
    /** What the native addon needs to build the same layout: a preset name or [names, bits, unitMs, epochMs]. */
    this.spec = spec;
    this.nativeHandle = null;
    this.maxId = info.maxId;
    this.unitMs = info.unitMs;
    this.epochMs = info.epochMs;
    this.maxWorkerId = info.maxWorkerId;
    const [t, c, w, s] = [0, 1, 2, 3].map((i) => extractor(info.shifts[i], info.widths[i]));
    // Flat fields, so that the decoder reads each with one monomorphic property load.
    this.tHs = t.hs; this.tHm = t.hm; this.tHmul = t.hmul; this.tLs = t.ls; this.tLm = t.lm;
    this.cHs = c.hs; this.cHm = c.hm; this.cHmul = c.hmul; this.cLs = c.ls; this.cLm = c.lm;
    this.wHs = w.hs; this.wHm = w.hm; this.wHmul = w.hmul; this.wLs = w.ls; this.wLm = w.lm;
    this.sHs = s.hs; this.sHm = s.hm; this.sHmul = s.hmul; this.sLs = s.ls; this.sLm = s.lm;
    this.info = Object.freeze({
      name: info.name ?? null,
      fields: Object.freeze(info.fields.map((f) => Object.freeze({ name: f.name, bits: f.bits }))),
      unitMs: info.unitMs,
      epochMs: info.epochMs,
      clockSeqs: info.clockSeqs,
      maxWorkerId: info.maxWorkerId,
      maxId: info.maxId,
      fingerprint: info.fingerprint,
    });
    RECORD_OF.set(this.info, this);
  }

  /** Decodes an id known to be in 0..=maxId. */
  decode(id) {
    SCRATCH[0] = id;
    const lo = HALVES[LO];
    const hi = HALVES[HI];
    const tick = ((hi >>> this.tHs) & this.tHm) * this.tHmul + (((lo >>> this.tLs) & this.tLm) >>> 0);
    return new Parts(
      this.epochMs + tick * this.unitMs,
      ((hi >>> this.cHs) & this.cHm) * this.cHmul + (((lo >>> this.cLs) & this.cLm) >>> 0),
      ((hi >>> this.wHs) & this.wHm) * this.wHmul + (((lo >>> this.wLs) & this.wLm) >>> 0),
      ((hi >>> this.sHs) & this.sHm) * this.sHmul + (((lo >>> this.sLs) & this.sLm) >>> 0),
    );
  }
}

/** Public description object -> record, so `layouts.twitter` or a `describeLayout` result is found at once. */
const RECORD_OF = new WeakMap();
export const PRESETS = new Map();
export const PRESET_NAMES = engine.presetNames();
for (const name of PRESET_NAMES) PRESETS.set(name, new LayoutRecord(engine.presetLayout(name), name));
export const DEFAULT = PRESETS.get(DEFAULT_PRESET);

/** Custom layouts already validated by the core, by a key of their fields, unit and epoch. */
const CUSTOM = new Map();
const CUSTOM_CACHE_LIMIT = 256;

function customRecord(spec) {
  onlyKnownKeys(spec, ['fields', 'unitMs', 'epochMs'], 'layout');
  const { fields } = spec;
  if (!Array.isArray(fields)) throw typeError('layout.fields', 'an array of { name, bits }', fields);
  const names = [];
  const bits = [];
  fields.forEach((field, i) => {
    plainObject(field, `layout.fields[${i}]`);
    onlyKnownKeys(field, ['name', 'bits'], `layout.fields[${i}]`);
    if (typeof field.name !== 'string') throw typeError(`layout.fields[${i}].name`, 'a string', field.name);
    names.push(field.name);
    const width = integer(field.bits, `layout.fields[${i}].bits`, 'INVALID_LAYOUT');
    if (width > 0xffffffff) {
      throw coded(RangeError, 'INVALID_LAYOUT', `layout.fields[${i}].bits out of range: expected an integer 0..=4294967295, found ${width}`);
    }
    bits.push(width);
  });
  const unitMs = spec.unitMs === undefined ? 1 : integer(spec.unitMs, 'layout.unitMs', 'INVALID_LAYOUT');
  const epochMs = integer(spec.epochMs, 'layout.epochMs', 'INVALID_LAYOUT');
  const key = `${names.join(',')}|${bits.join(',')}|${unitMs}|${epochMs}`;
  let record = CUSTOM.get(key);
  if (record === undefined) {
    record = new LayoutRecord(engine.customLayout(names, bits, unitMs, epochMs), [names, bits, unitMs, epochMs]);
    if (CUSTOM.size >= CUSTOM_CACHE_LIMIT) CUSTOM.clear();
    CUSTOM.set(key, record);
  }
  return record;
}

export function layoutRecord(layout) {
  if (layout === undefined) return DEFAULT;
  if (typeof layout === 'string') {
    const record = PRESETS.get(layout);
    if (record !== undefined) return record;
    engine.presetLayout(layout); // throws UNKNOWN_LAYOUT
  }
  if (layout !== null && typeof layout === 'object' && !Array.isArray(layout)) {
    return RECORD_OF.get(layout) ?? customRecord(layout);
  }
  throw typeError('layout', 'a preset name or { fields, unitMs, epochMs }', layout);
}

/** The layout's description: `{ name, fields, unitMs, epochMs, clockSeqs, maxWorkerId, maxId, fingerprint }`. */
export function describeLayout(layout) {
  return layoutRecord(layout).info;
}

export const layouts = Object.freeze(Object.fromEntries([...PRESETS].map(([name, record]) => [name, record.info])));
