// `clockflake/decode`: decoding only, in plain JavaScript (no wasm, no native addon), for pages
// that read ids and make none. The same `decode` as the full package, with the same codes and
// messages (core's, rebuilt by messages.js); the preset layouts are core's, written at build
// time (wasm/core.js). A custom layout is given as a `describeLayout()` result of the full package.
import { DEFAULT_PRESET, FIELD_NAMES, PRESETS } from '../wasm/core.js';
import { UNKNOWN_LAYOUT_MESSAGE, invalidIdMessage } from './messages.js';
import { ClockflakeError, coded, typeError } from './errors.js';
import { HALVES, HI, LO, Parts, SCRATCH, extractor } from './parts.js';

export { ClockflakeError };

const TWO_63 = 1n << 63n;
const TWO_64 = 1n << 64n;

/** Every preset layout by name, as the full package's `layouts` describes it. */
export const layouts = Object.freeze(
  Object.fromEntries(
    PRESETS.map((info) => [info.name, Object.freeze({ ...info, fields: Object.freeze(info.fields.map((f) => Object.freeze({ ...f }))) })]),
  ),
);

const decoders = new WeakMap();

function decoderOf(info) {
  let decoder = decoders.get(info);
  if (decoder === undefined) {
    const shifts = [0, 0, 0, 0];
    const widths = [0, 0, 0, 0];
    let shift = 0;
    for (let i = info.fields.length - 1; i >= 0; i--) {
      const at = FIELD_NAMES.indexOf(info.fields[i].name);
      shifts[at] = shift;
      widths[at] = info.fields[i].bits;
      shift += info.fields[i].bits;
    }
    decoder = { info, parts: shifts.map((s, i) => extractor(s, widths[i])) };
    decoders.set(info, decoder);
  }
  return decoder;
}

function invalidId(kind, a = 0n, b = 0n) {
  return new ClockflakeError('INVALID_ID', invalidIdMessage(kind, [a, b]));
}

/** Core's `parse_id`: the same refusals in the same order. */
function parseId(text) {
  if (text.length === 0) throw invalidId(0);
  if (text[0] === '-') throw invalidId(1);
  let end = 0;
  while (end < text.length && text.charCodeAt(end) >= 48 && text.charCodeAt(end) <= 57) end++;
  if (end > 0 && BigInt(text.slice(0, end)) >= TWO_64) throw invalidId(3);
  if (end < text.length) throw invalidId(2, BigInt(text.codePointAt(end)), BigInt(end));
  return BigInt(text);
}

/** Splits an id (bigint, or decimal string) into `{ timestampMs, date, clockSeq, workerId, sequence }`. */
export function decode(id, layoutOrOptions) {
  let layout = layoutOrOptions === undefined ? DEFAULT_PRESET : layoutOrOptions;
  // `decode(id, { layout })`, as the full package takes it: a layout object has `fields`.
  if (layout !== null && typeof layout === 'object' && !Array.isArray(layout) && Object.hasOwn(layout, 'layout') && !Array.isArray(layout.fields)) {
    const extra = Object.keys(layout).find((key) => key !== 'layout');
    if (extra !== undefined) throw coded(TypeError, 'UNKNOWN_OPTION', `unknown option: options has no option ${JSON.stringify(extra)}: expected one of layout`);
    layout = layout.layout === undefined ? DEFAULT_PRESET : layout.layout;
  }
  let info;
  if (typeof layout === 'string') {
    info = layouts[layout];
    if (info === undefined) throw new ClockflakeError('UNKNOWN_LAYOUT', UNKNOWN_LAYOUT_MESSAGE);
  } else if (layout !== null && typeof layout === 'object' && Array.isArray(layout.fields) && typeof layout.maxId === 'bigint') {
    info = layout;
  } else {
    throw typeError('layout', "a preset name or a describeLayout() result (custom layouts are checked by 'clockflake')", layout);
  }
  let value = id;
  if (typeof id === 'string') value = parseId(id);
  else if (typeof id !== 'bigint') throw typeError('id', 'a bigint or a decimal string (a number loses precision above 2^53)', id);
  if (value < 0n) parseId(String(value));
  if (value >= TWO_64) throw invalidId(3);
  if (value >= TWO_63) throw invalidId(4, value);
  if (value > info.maxId) throw invalidId(5, value, info.maxId);
  const { parts } = decoderOf(info);
  SCRATCH[0] = value;
  const lo = HALVES[LO];
  const hi = HALVES[HI];
  const [t, c, w, s] = parts.map((x) => ((hi >>> x.hs) & x.hm) * x.hmul + (((lo >>> x.ls) & x.lm) >>> 0));
  return new Parts(info.epochMs + t * info.unitMs, c, w, s);
}
