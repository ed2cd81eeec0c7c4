// The ID inspector: decodes pasted ids and generates new ones, all in the page (WebAssembly).
import * as clockflake from '/clockflake/browser.mjs';

const started = performance.now();
const $ = (id) => document.getElementById(id);
const MAX_ROWS = 5000;

const pad = (n, width = 2) => String(n).padStart(width, '0');

/** `YYYY-MM-DD HH:MM:SS.mmm` of a Date in UTC or in the page's time zone, with the offset for local. */
export function formatTime(date, utc) {
  if (utc) return date.toISOString().replace('T', ' ').replace('Z', ' UTC');
  const offset = -date.getTimezoneOffset();
  const sign = offset >= 0 ? '+' : '-';
  const zone = `UTC${sign}${pad(Math.floor(Math.abs(offset) / 60))}:${pad(Math.abs(offset) % 60)}`;
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}.${pad(date.getMilliseconds(), 3)} ${zone}`;
}

/** How long ago (or how far ahead) a time is, to the two largest units. */
export function formatAge(ms) {
  const future = ms < 0;
  let rest = Math.abs(ms);
  if (rest < 1000) return future ? `in ${rest} ms` : `${rest} ms`;
  const units = [['y', 365 * 86_400_000], ['d', 86_400_000], ['h', 3_600_000], ['min', 60_000], ['s', 1000]];
  const parts = [];
  for (const [name, size] of units) {
    if (rest >= size && parts.length < 2) {
      parts.push(`${Math.floor(rest / size)} ${name}`);
      rest %= size;
    } else if (parts.length > 0) {
      break;
    }
  }
  return future ? `in ${parts.join(' ')}` : `${parts.join(' ')}`;
}

/** The layout chosen in the form: a preset name, or a custom {fields, unitMs, epochMs}. */
function chosenLayout() {
  const preset = $('layout').value;
  if (preset !== 'custom') return preset;
  const fields = $('custom-fields').value.split(',').map((part) => {
    const [name, bits] = part.split(':').map((s) => s.trim());
    return { name, bits: Number(bits) };
  });
  const epochText = $('custom-epoch').value.trim();
  const epochMs = /^\d+$/.test(epochText) ? Number(epochText) : Date.parse(epochText);
  return { fields, unitMs: Number($('custom-unit').value), epochMs };
}

/** A public-id codec from the key fields, or null when no key is given; throws on a bad key. */
export function chosenCodec(keyText, versionText) {
  const hex = keyText.trim();
  if (hex === '') return null;
  if (!/^[0-9a-fA-F]{32}$/.test(hex)) {
    const error = new Error(`expected 32 hex digits (16 bytes), found ${hex.length} characters`);
    error.code = 'INVALID_ARG_TYPE';
    throw error;
  }
  const key = Uint8Array.from({ length: 16 }, (_, i) => parseInt(hex.slice(2 * i, 2 * i + 2), 16));
  return new clockflake.PublicIds(Number(versionText), key);
}

/** A line is a public id when a key is set and it has 16 characters, not all digits. */
const isPublicText = (line) => line.length === 16 && !/^[0-9]+$/.test(line);

let codecCache = { key: null, codec: null };

/** The codec for the current key fields (made once per key); sets #public-error. */
function currentCodec() {
  const keyText = $('public-key').value;
  const versionText = $('public-version').value;
  const cacheKey = `${versionText}|${keyText}`;
  if (codecCache.key !== cacheKey) {
    let codec = null;
    $('public-error').textContent = '';
    try {
      codec = chosenCodec(keyText, versionText);
    } catch (error) {
      $('public-error').textContent = `${error.code ?? 'ERROR'}: ${error.message}`;
    }
    codecCache = { key: cacheKey, codec };
  }
  return codecCache.codec;
}

function cell(row, col, text, className) {
  const td = document.createElement('td');
  td.dataset.col = col;
  td.textContent = text;
  if (className) td.className = className;
  row.appendChild(td);
  return td;
}

/**
 * '' when the id's time is plausible for the layout (not after now + a day); else a warning
 * naming the preset that gives a plausible time (an old Twitter id read as clockseq says 2040).
 */
export function plausibilityNote(id, layout, nowMs) {
  if (clockflake.isPlausible(id, { layout, nowMs })) return '';
  const guess = clockflake.guessLayout(id, { nowMs });
  if (guess === null) return 'after now for this layout, and for every preset';
  return `after now for this layout; as ${guess.name}: ${formatTime(new Date(guess.parts.timestampMs), true)}`;
}

/** The layout's bits, most significant first, as a bar of fields with their bit positions. */
function drawBits(info) {
  const spans = [];
  const total = info.fields.reduce((sum, f) => sum + f.bits, 0);
  const sign = document.createElement('span');
  sign.textContent = '0';
  sign.title = `bit 63: 0 (ids are positive)${total < 63 ? `; bits 62–${total} unused` : ''}`;
  sign.style.flex = '1';
  spans.push(sign);
  let high = total - 1;
  for (const field of info.fields) {
    const span = document.createElement('span');
    const low = high - field.bits + 1;
    span.dataset.field = field.name;
    span.textContent = `${field.name} ${field.bits} (${high}–${low})`;
    span.style.flex = String(Math.max(field.bits, 6));
    spans.push(span);
    high = low - 1;
  }
  $('bits').replaceChildren(...spans);
}

/** The smallest and largest id of the time range in the form, for `WHERE id BETWEEN`. */
function showRange(layout) {
  const from = Date.parse($('range-from').value);
  const to = Date.parse($('range-to').value);
  if (Number.isNaN(from) || Number.isNaN(to)) {
    $('range').textContent = 'dates as 2026-01-01 or 2026-01-01T12:00:00Z';
    return;
  }
  try {
    const [low, high] = clockflake.idRange(from, to, layout);
    $('range').textContent = `${low} … ${high}`;
  } catch (error) {
    $('range').textContent = `${error.code ?? 'ERROR'}: ${error.message}`;
  }
}

function render() {
  const tbody = $('rows');
  const lines = $('ids').value.split('\n').map((line) => line.trim()).filter((line) => line !== '');
  let layout;
  $('layout-error').textContent = '';
  try {
    layout = chosenLayout();
    const info = clockflake.describeLayout(layout);
    $('layout-note').textContent = `${info.fields.map((f) => `${f.name} ${f.bits}`).join(' · ')} · unit ${info.unitMs} ms · epoch ${new Date(info.epochMs).toISOString()}`;
    drawBits(info);
    showRange(layout);
  } catch (error) {
    $('layout-error').textContent = `${error.code}: ${error.message}`;
    $('layout-note').textContent = '';
    $('bits').replaceChildren();
    $('range').textContent = '';
    tbody.replaceChildren();
    $('status').textContent = 'fix the layout to decode';
    return;
  }
  const codec = currentCodec();
  const now = Date.now();
  const rows = [];
  let invalid = 0;
  lines.slice(0, MAX_ROWS).forEach((line, i) => {
    const row = document.createElement('tr');
    row.dataset.line = String(i);
    cell(row, 'n', String(i + 1), 'num');
    cell(row, 'id', line);
    try {
      const raw = codec !== null && isPublicText(line) ? codec.decodeText(line) : null;
      const parts = clockflake.decode(raw ?? line, layout);
      cell(row, 'raw-id', raw === null ? '' : String(raw), 'mono');
      const date = new Date(parts.timestampMs);
      cell(row, 'utc', formatTime(date, true), 'mono');
      cell(row, 'local', formatTime(date, false), 'mono');
      cell(row, 'clock-seq', String(parts.clockSeq), 'num');
      cell(row, 'worker', String(parts.workerId), 'num');
      cell(row, 'sequence', String(parts.sequence), 'num');
      cell(row, 'age', formatAge(now - parts.timestampMs), 'num').dataset.ms = String(parts.timestampMs);
      cell(row, 'note', plausibilityNote(raw ?? line, layout, now), 'warn');
    } catch (error) {
      invalid++;
      row.className = 'invalid';
      const td = cell(row, 'error', '', 'error');
      td.colSpan = 8;
      const code = document.createElement('code');
      code.textContent = error.code ?? 'ERROR';
      td.append(code, error.message);
    }
    rows.push(row);
  });
  tbody.replaceChildren(...rows);
  const more = lines.length > MAX_ROWS ? ` (showing the first ${MAX_ROWS})` : '';
  $('status').textContent = `${lines.length} id${lines.length === 1 ? '' : 's'}, ${invalid} invalid${more}`;
}

// One generator per (layout, worker id), kept across clicks: a new one per click could
// repeat ids within the same millisecond.
const generators = new Map();

function generate() {
  $('layout-error').textContent = '';
  try {
    const layout = chosenLayout();
    const workerId = Number($('worker').value);
    const count = Math.min(Math.max(Number($('count').value) || 1, 1), 10_000);
    const key = `${JSON.stringify(layout)}|${workerId}`;
    let generator = generators.get(key);
    if (generator === undefined) {
      generator = new clockflake.Generator({ workerId, layout });
      generators.set(key, generator);
    }
    const ids = Array.from(generator.nextIds(count), String);
    const text = $('ids').value.replace(/\s+$/, '');
    $('ids').value = (text === '' ? '' : `${text}\n`) + ids.join('\n');
    render();
  } catch (error) {
    $('layout-error').textContent = `${error.code ?? 'ERROR'}: ${error.message}`;
  }
}

for (const name of Object.keys(clockflake.layouts)) $('layout').add(new Option(name, name));
$('layout').add(new Option('custom…', 'custom'));
$('layout').addEventListener('change', () => {
  $('custom').classList.toggle('hidden', $('layout').value !== 'custom');
  render();
});
for (const id of ['ids', 'custom-fields', 'custom-unit', 'custom-epoch', 'public-key', 'public-version', 'range-from', 'range-to']) {
  $(id).addEventListener('input', render);
}
$('generate').addEventListener('click', generate);
$('clear').addEventListener('click', () => {
  $('ids').value = '';
  render();
});
render();
// Ages move on: refresh them (only them) every second.
setInterval(() => {
  const now = Date.now();
  for (const td of document.querySelectorAll('td[data-col="age"]')) td.textContent = formatAge(now - Number(td.dataset.ms));
}, 1000);
$('status').textContent += ` · ready in ${Math.round(performance.now() - started)} ms`;
// For the browser tests and the curious: the API, and a flag once the page is ready.
window.clockflake = clockflake;
document.body.dataset.ready = 'true';
