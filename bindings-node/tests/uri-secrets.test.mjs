// Secrets in coordinator URIs never reach JavaScript: every URI of tests/uris/secrets.json is
// refused with its code, and no form of its secrets (as written, percent-decoded,
// percent-encoded) shows in the error's message, stack, String(err) or own properties. With
// CLOCKFLAKE_PG_URL (a trust-auth server), a generator opened with a password shows none of it
// in gen.coordinator either.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { inspect } from 'node:util';
import { Generator } from '../lib/index.mjs';

const table = JSON.parse(readFileSync(new URL('../../tests/uris/secrets.json', import.meta.url), 'utf8'));
const CODES = new Set(['INVALID_URI', 'COORDINATOR_UNAVAILABLE']);

function forms(secret) {
  const encoded = encodeURIComponent(secret).replace(/[!'()*]/g, (c) => `%${c.charCodeAt(0).toString(16).toUpperCase()}`);
  let decoded = secret;
  try {
    decoded = decodeURIComponent(secret);
  } catch {
    decoded = secret.replace(/%([0-9a-fA-F]{2})/g, (_, hex) => String.fromCharCode(parseInt(hex, 16)));
  }
  return new Set([secret, decoded, encoded, encoded.toLowerCase()]);
}

function assertClean(what, text, secrets) {
  const shown = secrets.flatMap((secret) => [...forms(secret)]).filter((form) => text.includes(form));
  assert.deepEqual(shown, [], `${what} shows ${JSON.stringify(shown)}: ${text}`);
}

test('the table has enough cases', () => {
  assert.ok(table.cases.length >= 20);
});

for (const { id, uri, secrets, code } of table.cases) {
  test(`no secret in the error: ${id}`, () => {
    let caught;
    try {
      Generator.openSync(uri);
    } catch (error) {
      caught = error;
    }
    assert.ok(caught instanceof Error, `${id}: expected an Error`);
    assert.ok(CODES.has(caught.code), caught.message);
    assert.equal(caught.code, code, caught.message);
    const own = Object.fromEntries(Object.getOwnPropertyNames(caught).map((name) => [name, caught[name]]));
    for (const [what, text] of [
      ['message', caught.message],
      ['stack', String(caught.stack)],
      ['String(err)', String(caught)],
      ['own properties', JSON.stringify(own)],
      ['inspect', inspect(caught)],
    ]) {
      assertClean(what, text, secrets);
    }
  });
}

const url = process.env.CLOCKFLAKE_PG_URL;
test('no secret in an open generator', { skip: url ? false : 'CLOCKFLAKE_PG_URL not set' }, () => {
  const base = url.split('?')[0];
  const [scheme, rest] = base.split('://');
  const at = rest.indexOf('@');
  const app = `secrets-node-${process.pid}`;
  const secrets = ['Tr0ub@d/or?#x', 'Qu3ryS3cret'];
  const withPassword = `${scheme}://${rest.slice(0, at)}:${encodeURIComponent(secrets[0])}@${rest.slice(at + 1)}`;
  for (const uri of [`${withPassword}?app=${app}&ttl=2s`, `${base}?app=${app}&ttl=2s&password=${secrets[1]}`]) {
    const gen = Generator.openSync(uri);
    try {
      assert.ok(gen.coordinator.includes(app), gen.coordinator);
      assertClean('gen.coordinator', gen.coordinator, secrets);
      assertClean('inspect(gen)', inspect(gen, { showHidden: true }), secrets);
      gen.nextId();
    } finally {
      gen.closeSync();
    }
  }
});
