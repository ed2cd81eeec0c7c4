// Core's error messages (core/src/error.rs, `Display`) from the numbers the wasm engine hands
// over (bindings-wasm/src/error_numbers.rs), so the .wasm needs no core::fmt. The templates are
// core's own, made from its `Display` at build time (wasm/core.js, written by make build-js with
// bindings-wasm/examples/core_tables.rs); this file only fills them in. The tests compare every
// kind with core's own output (bindings-wasm/examples/messages.rs), so a change in core that
// the templates cannot follow shows up there.
import { FIELD_NAMES, INVALID_ID_MESSAGES, MESSAGES, UNKNOWN_LAYOUT_MESSAGES } from '../wasm/core.js';

/** The wasm engine's handle tables, by the kind of its own refusals (`Table` in bindings-wasm/src/lib.rs). */
const TABLES = ['generator', 'public-id codec', 'layout'];
const NONE = (1n << 64n) - 1n;
/** A template's placeholders: `{0}`, `{0:char}`, `{0:field}`, `{0-1}` (core_tables.rs says what each means). */
const PLACEHOLDER = /\{(\d)(?::(char|field)|-(\d))?\}/g;

/** Rust's `{:?}` of a char. */
function debugChar(codePoint) {
  const escapes = { 0: '\\0', 9: '\\t', 10: '\\n', 13: '\\r', 39: "\\'", 92: '\\\\' };
  if (escapes[codePoint] !== undefined) return `'${escapes[codePoint]}'`;
  const c = String.fromCodePoint(codePoint);
  const hidden = /[\p{Mn}\p{Me}\p{Cc}\p{Cf}\p{Cs}\p{Co}\p{Cn}\p{Zl}\p{Zp}]/u.test(c) || (/\p{Zs}/u.test(c) && c !== ' ');
  return hidden ? `'\\u{${codePoint.toString(16)}}'` : `'${c}'`;
}

/** A template filled in with the fields (bigints, as u64). */
function fill(template, fields) {
  return template.replace(PLACEHOLDER, (_, i, how, j) => {
    const value = fields[i];
    if (how === 'char') return debugChar(Number(value));
    if (how === 'field') return FIELD_NAMES[Number(value)];
    if (j !== undefined) return String(value > fields[j] ? value - fields[j] : 0n);
    return String(value);
  });
}

/** Core's message of `code` and `kind` for these fields, or null for a kind core's tables lack. */
function coreMessage(templates, kind, fields) {
  const entry = templates[kind];
  if (entry === undefined) return null;
  if (typeof entry === 'string') return fill(entry, fields);
  return fill(fields[entry.field] === NONE ? entry.none : entry.some, fields);
}

/** Core's message of an `INVALID_ID` of this sub-kind (exported for the decode-only entry). */
export function invalidIdMessage(kind, fields) {
  return coreMessage(INVALID_ID_MESSAGES, kind, fields) ?? 'invalid id';
}

/** Core's message of `UNKNOWN_LAYOUT`. */
export const UNKNOWN_LAYOUT_MESSAGE = UNKNOWN_LAYOUT_MESSAGES[0];

/**
 * Core's message for an error.
 * @param {string} code  Error::code()
 * @param {number} kind  sub-kind (error_numbers.rs); 255 for a variant the wasm build does not know
 * @param {bigint[]} f   the four fields, as u64
 */
export function formatMessage(code, kind, f) {
  if (kind !== 255 && Object.hasOwn(MESSAGES, code)) {
    const message = coreMessage(MESSAGES[code], kind, f);
    if (message !== null) return message;
  }
  switch (code) {
    // The engine's own refusals (bindings-wasm/src/lib.rs, `Refusal`), which the package's calls never provoke.
    case 'ENGINE_BUSY':
      return `engine busy: the wasm engine's ${TABLES[kind]} table is in use by a call in progress (a call made from inside another)`;
    case 'UNKNOWN_HANDLE': return `unknown handle: no ${TABLES[kind]} of the wasm engine has handle ${f[0]}`;
    default: return code.toLowerCase().replaceAll('_', ' ');
  }
}
