// Ids: decoding (plain JavaScript on the layout's shifts), encoding and time ranges (the core,
// on the wasm engine), choosing and checking layouts (core's suggest.rs, on the wasm engine),
// and JSON with bigints.
import * as engine from './engine.js';
import { DEFAULT, PRESETS, PRESET_NAMES, describeLayout, layoutRecord } from './layouts.js';
import { Parts } from './parts.js';
import { integer, onlyKnownKeys, plainObject, typeError } from './errors.js';

/**
 * The layout argument as given, or the `layout` of an options object (`decode(id, { layout })`,
 * the way Python takes `layout=`). A layout object has `fields`; an options object has not.
 */
function layoutOption(layout) {
  if (layout !== null && typeof layout === 'object' && !Array.isArray(layout) && Object.hasOwn(layout, 'layout') && !Object.hasOwn(layout, 'fields')) {
    onlyKnownKeys(layout, ['layout'], 'options');
    return layout.layout;
  }
  return layout;
}

/** Splits an id (bigint, or decimal string) into `{ timestampMs, date, clockSeq, workerId, sequence }`. */
export function decode(id, layoutOrOptions) {
  const layout = layoutOption(layoutOrOptions);
  const record = layout === undefined ? DEFAULT : layoutRecord(layout);
  if (typeof id === 'bigint') {
    if (id >= 0n && id <= record.maxId) return record.decode(id);
    engine.refuseId(record.handle, id); // throws the core's INVALID_ID
  } else if (typeof id === 'string') {
    const [timestampMs, clockSeq, workerId, sequence] = engine.decodeDecimal(record.handle, id);
    return new Parts(timestampMs, clockSeq, workerId, sequence);
  }
  throw typeError('id', 'a bigint or a decimal string (a number loses precision above 2^53)', id);
}

/** Joins `{ timestampMs, clockSeq?, workerId, sequence? }` into an id. */
export function encode(parts, layoutOrOptions) {
  const record = layoutRecord(layoutOption(layoutOrOptions));
  plainObject(parts, 'parts');
  onlyKnownKeys(parts, ['timestampMs', 'clockSeq', 'workerId', 'sequence'], 'parts');
  const timestampMs = integer(parts.timestampMs, 'timestampMs', 'TIMESTAMP_OUT_OF_RANGE');
  const clockSeq = parts.clockSeq === undefined ? 0 : integer(parts.clockSeq, 'clockSeq', 'CLOCK_SEQ_OUT_OF_RANGE');
  const workerId = integer(parts.workerId, 'workerId', 'WORKER_ID_OUT_OF_RANGE');
  const sequence = parts.sequence === undefined ? 0 : integer(parts.sequence, 'sequence', 'SEQUENCE_OUT_OF_RANGE');
  return engine.encode(record.handle, timestampMs, clockSeq, workerId, sequence);
}

/** The smallest and largest id a time window (Unix ms, inclusive) can hold: `[low, high]`. */
export function idRange(fromMs, toMs, layoutOrOptions) {
  const record = layoutRecord(layoutOption(layoutOrOptions));
  const from = integer(fromMs, 'fromMs', 'TIMESTAMP_OUT_OF_RANGE');
  const to = integer(toMs, 'toMs', 'TIMESTAMP_OUT_OF_RANGE');
  return engine.idRange(record.handle, from, to);
}

// Choosing a layout, and checking one (core's suggest.rs)

/** How far past now a plausible id's time may be by default: a day of clock differences. */
const DEFAULT_MARGIN_MS = 86_400_000;

/** A layout sized for `workers` processes, `peakIdsPerSec` each and `lifetimeYears` (core's `Layout::suggest`). */
export function suggestLayout(workers, peakIdsPerSec, lifetimeYears) {
  const handle = engine.suggestLayout(
    integer(workers, 'workers', 'INVALID_ARG_VALUE'),
    integer(peakIdsPerSec, 'peakIdsPerSec', 'INVALID_ARG_VALUE'),
    integer(lifetimeYears, 'lifetimeYears', 'INVALID_ARG_VALUE'),
  );
  const info = engine.layoutInfo(handle, PRESET_NAMES);
  if (info.name !== null) return PRESETS.get(info.name).info;
  return describeLayout({ fields: info.fields, unitMs: info.unitMs, epochMs: info.epochMs });
}

/**
 * The id as a bigint in 0..2^64 for core's rules, which take any u64 (one too wide for a layout
 * is not plausible under it). Refuses what is no id at all (a number, junk text, a negative, a
 * bigint of more than 64 bits) with decode's errors; text is read by core's text rules.
 */
function plainId(id) {
  if (typeof id === 'bigint' && id >= 0n && id < 1n << 64n) return id;
  decode(id); // core's INVALID_ID, or the TypeError of a number (the default layout takes every id below 2^63)
  return BigInt(id);
}

function checkOptions(options, allowed) {
  if (options === undefined) return {};
  plainObject(options, 'options');
  onlyKnownKeys(options, allowed, 'options');
  return options;
}

/** [nowMs, marginMs] of the options: now by `Date.now()` (core reads no clock), a day of margin by default. */
function plausibleWindow(options) {
  const nowMs = options.nowMs === undefined ? Date.now() : integer(options.nowMs, 'nowMs', 'INVALID_ARG_VALUE');
  const marginMs = options.marginMs === undefined ? DEFAULT_MARGIN_MS : integer(options.marginMs, 'marginMs', 'INVALID_ARG_VALUE');
  return [nowMs, marginMs];
}

/**
 * Whether `id` could have been issued under a layout by now: it decodes and its time is not after
 * now + `marginMs` (default a day). `isPlausible(id)`, `isPlausible(id, 'twitter')` or
 * `isPlausible(id, { layout, nowMs, marginMs })`. Core's `Layout::is_plausible`, on the wasm engine.
 */
export function isPlausible(id, layoutOrOptions) {
  const options =
    typeof layoutOrOptions === 'string' || (layoutOrOptions !== null && typeof layoutOrOptions === 'object' && Object.hasOwn(layoutOrOptions, 'fields'))
      ? { layout: layoutOrOptions }
      : checkOptions(layoutOrOptions, ['layout', 'nowMs', 'marginMs']);
  const record = options.layout === undefined ? DEFAULT : layoutRecord(options.layout);
  const [nowMs, marginMs] = plausibleWindow(options);
  return engine.isPlausible(record.handle, plainId(id), nowMs, marginMs);
}

/**
 * The preset under which `id` has a plausible time (the latest such time when several do), as
 * `{ name, parts }`, or `null`: core's `Layout::guess_preset`, on the wasm engine.
 */
export function guessLayout(id, options) {
  const [nowMs, marginMs] = plausibleWindow(checkOptions(options, ['nowMs', 'marginMs']));
  const guess = engine.guessPreset(plainId(id), nowMs, marginMs);
  if (guess === null) return null;
  const [index, timestampMs, clockSeq, workerId, sequence] = guess;
  return { name: PRESET_NAMES[index], parts: new Parts(timestampMs, clockSeq, workerId, sequence) };
}

// ---------------------------------------------------------------------------------------------
// JSON

/**
 * A `JSON.stringify` replacer that writes bigints (ids) as decimal strings: JSON numbers above
 * 2^53 are rounded by `JSON.parse`, and `JSON.stringify` throws on a bigint. For Express:
 * `app.set('json replacer', jsonReplacer)`.
 */
export function jsonReplacer(_key, value) {
  return typeof value === 'bigint' ? value.toString() : value;
}

/** `JSON.stringify` with {@link jsonReplacer}: bigints become decimal strings. */
export function stringify(value, space) {
  return JSON.stringify(value, jsonReplacer, space);
}
