// What Generator.open's NATIVE_UNAVAILABLE tells a user to install, for this and other platforms
// (js/native-package.mjs takes the platform as a parameter): the exact addon package and the
// version, which must be clockflake's own; and, where no addon is published, that there is none.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { NATIVE_PLATFORMS, nativeInstallAdvice, nativePlatform } from '../js/native-package.mjs';

const { version } = JSON.parse(readFileSync(new URL('../package.json', import.meta.url), 'utf8'));

const CASES = [
  [{ platform: 'linux', arch: 'x64', glibc: true }, 'clockflake-linux-x64-gnu'],
  [{ platform: 'linux', arch: 'x64', glibc: false }, 'clockflake-linux-x64-musl'],
  [{ platform: 'linux', arch: 'arm64', glibc: true }, 'clockflake-linux-arm64-gnu'],
  [{ platform: 'linux', arch: 'arm64', glibc: false }, 'clockflake-linux-arm64-musl'],
  [{ platform: 'darwin', arch: 'arm64' }, 'clockflake-darwin-arm64'],
  [{ platform: 'darwin', arch: 'x64' }, 'clockflake-darwin-x64'],
  [{ platform: 'win32', arch: 'x64' }, 'clockflake-win32-x64-msvc'],
];

for (const [where, name] of CASES) {
  test(`${where.platform} ${where.arch}${where.glibc === false ? ' musl' : ''}: install ${name}@${version}`, () => {
    assert.equal(`clockflake-${nativePlatform(where)}`, name);
    const advice = nativeInstallAdvice(where, version);
    assert.ok(advice.includes(`npm install ${name}@${version}\``), advice);
    assert.ok(advice.includes(`beside clockflake@${version}`), advice);
    assert.ok(advice.includes(`${name}-${version}.tgz`), advice);
  });
}

test('every published platform has a case above', () => {
  assert.deepEqual(Object.keys(NATIVE_PLATFORMS).sort(), CASES.map(([, name]) => name.slice('clockflake-'.length)).sort());
});

for (const where of [
  { platform: 'win32', arch: 'arm64' },
  { platform: 'win32', arch: 'ia32' },
  { platform: 'freebsd', arch: 'x64' },
  { platform: 'linux', arch: 'riscv64', glibc: true },
]) {
  test(`${where.platform} ${where.arch}: no addon is published, and the message says so`, () => {
    const advice = nativeInstallAdvice(where, version);
    assert.match(advice, new RegExp(`^no native addon of clockflake is published for ${nativePlatform(where)} \\(there is one for `));
    assert.ok(!advice.includes('npm install'), advice);
  });
}

test('without a readable version (lib/ bundled away from package.json) the advice says it in words', () => {
  const advice = nativeInstallAdvice({ platform: 'win32', arch: 'x64' }, null);
  assert.ok(advice.includes("clockflake-win32-x64-msvc (of clockflake's version)"), advice);
  assert.ok(advice.includes('`npm install clockflake-win32-x64-msvc`'), advice);
  assert.ok(!advice.includes('null'), advice);
});
