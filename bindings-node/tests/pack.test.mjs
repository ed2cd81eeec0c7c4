// Installs the package as a user would: `npm pack`, then `npm install <tarball>` into a fresh
// temporary project with an empty npm cache, then require() and import() it from there.
// The main tarball carries no native binary: everything but Generator.open runs on the inlined
// wasm engine (the smoke tests in smoke/ also install the per-platform native package).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const packageDir = join(dirname(fileURLToPath(import.meta.url)), '..');

test('npm pack, install the tarball in a fresh project, require and import it', { timeout: 180_000 }, () => {
  const work = mkdtempSync(join(tmpdir(), 'clockflake-pack-'));
  try {
    const env = { ...process.env, npm_config_cache: join(work, 'npm-cache'), npm_config_update_notifier: 'false' };
    const npm = (args, cwd) => execFileSync('npm', args, { cwd, env, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    npm(['pack', '--pack-destination', work], packageDir);
    const tarball = readdirSync(work).find((f) => f.endsWith('.tgz'));
    assert.ok(tarball, 'npm pack made a tarball');
    const project = join(work, 'project');
    execFileSync('mkdir', [project]);
    writeFileSync(join(project, 'package.json'), JSON.stringify({ name: 'user-project', version: '1.0.0', private: true }));
    npm(['install', '--no-audit', '--no-fund', '--offline', join(work, tarball)], project);
    const files = readdirSync(join(project, 'node_modules', 'clockflake')).sort();
    assert.ok(files.includes('index.d.ts') && files.includes('lib') && !files.some((f) => f.endsWith('.node')), files.join(' '));

    writeFileSync(join(project, 'use.cjs'), `
      const { Generator, decode } = require('clockflake');
      const id = new Generator({ workerId: 5 }).nextId();
      const parts = decode(id);
      if (typeof id !== 'bigint' || parts.workerId !== 5) throw new Error('bad id ' + id);
      console.log('require', id, parts.workerId);
    `);
    writeFileSync(join(project, 'use.mjs'), `
      import { Generator, decode, layouts } from 'clockflake';
      import clockflake from 'clockflake';
      const id = new Generator({ workerId: 6, layout: 'twitter' }).nextId();
      const parts = decode(String(id), layouts.twitter);
      if (parts.workerId !== 6 || clockflake.Generator !== Generator) throw new Error('bad id ' + id);
      console.log('import', id, parts.workerId);
    `);
    const run = (file) => execFileSync(process.execPath, [file], { cwd: project, encoding: 'utf8' });
    assert.match(run('use.cjs'), /^require \d+n 5\n$/);
    assert.match(run('use.mjs'), /^import \d+n 6\n$/);
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
});
