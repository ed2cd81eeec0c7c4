// Packs the npm packages into a directory (default: the repository's dist/), as `npm pack`
// names them:
//   clockflake-<version>.tgz                  the package: lib/ (JavaScript with the wasm engine
//                                             inlined), types, napi's loader; no native binary
//   clockflake-<platform>-<version>.tgz       the native addon (Generator.open) for each platform
//                                             built here (napi-rs: os/cpu/libc, optional)
// The main package lists every platform package as an optional dependency. LICENSE files come
// from the repository root when they are there. Needs `make build-node` first. The native
// binaries are taken from CLOCKFLAKE_NATIVE_DIR when set (make dist-js: a glibc 2.17 build),
// else from this folder (the local build).
//   node dist.mjs [outDir]
import { execFileSync } from 'node:child_process';
import { copyFileSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
// napi-rs's platform names and the npm fields that select them (os, cpu, libc).
import { NATIVE_PLATFORMS } from './js/native-package.mjs';

const here = dirname(fileURLToPath(import.meta.url));
const root = join(here, '..');
const out = resolve(process.argv[2] ?? join(root, 'dist'));
const pkg = JSON.parse(readFileSync(join(here, 'package.json'), 'utf8'));
// One version: the workspace's (Cargo.toml), which package.json and napi's loader must repeat.
const cargoVersion = /\[workspace\.package\][^[]*?\nversion\s*=\s*"([^"]+)"/.exec(readFileSync(join(root, 'Cargo.toml'), 'utf8'))?.[1];
if (cargoVersion !== pkg.version) throw new Error(`package.json version ${pkg.version} differs from the workspace's ${cargoVersion} (Cargo.toml)`);
if (!readFileSync(join(here, 'binding.js'), 'utf8').includes(`expected ${pkg.version} but got`)) throw new Error('binding.js expects another version: rebuild');
const LICENSES = ['LICENSE-MIT', 'LICENSE-APACHE'].filter((name) => existsSync(join(root, name)));

const nativeDir = process.env.CLOCKFLAKE_NATIVE_DIR || here;
const built = readdirSync(nativeDir)
  .map((file) => /^clockflake\.(.+)\.node$/.exec(file)?.[1])
  .filter((platform) => platform in NATIVE_PLATFORMS);
if (!existsSync(join(here, 'lib', 'index.cjs')) || built.length === 0) throw new Error('run `make build-node` first');

mkdirSync(out, { recursive: true });
const staging = mkdtempSync(join(tmpdir(), 'clockflake-dist-'));
const npmPack = (dir) => execFileSync('npm', ['pack', '--pack-destination', out], { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'] }).trim().split('\n').at(-1);
const packed = [];
try {
  const common = { version: pkg.version, license: pkg.license, engines: { node: '>= 18' } };
  for (const platform of built) {
    const dir = join(staging, platform);
    mkdirSync(dir);
    const binary = `clockflake.${platform}.node`;
    copyFileSync(join(nativeDir, binary), join(dir, binary));
    for (const name of LICENSES) copyFileSync(join(root, name), join(dir, name));
    writeFileSync(
      join(dir, 'README.md'),
      `# clockflake-${platform}\n\nThe native addon of [clockflake](https://www.npmjs.com/package/clockflake) for ${platform}: \`Generator.open\` (leased worker ids) needs it; npm installs it with \`clockflake\` as an optional dependency. Do not depend on it directly.\n`,
    );
    writeFileSync(
      join(dir, 'package.json'),
      `${JSON.stringify({ name: `clockflake-${platform}`, ...common, description: `The ${platform} native addon of clockflake (Generator.open)`, main: binary, files: [binary, ...LICENSES], ...NATIVE_PLATFORMS[platform] }, null, 2)}\n`,
    );
    packed.push(npmPack(dir));
  }
  const dir = join(staging, 'clockflake');
  mkdirSync(dir);
  for (const file of pkg.files) {
    if (existsSync(join(here, file))) cpSync(join(here, file), join(dir, file), { recursive: true });
  }
  for (const name of LICENSES) copyFileSync(join(root, name), join(dir, name));
  const { devDependencies, overrides, scripts, ...published } = pkg;
  published.optionalDependencies = Object.fromEntries(Object.keys(NATIVE_PLATFORMS).filter((p) => built.includes(p)).map((p) => [`clockflake-${p}`, pkg.version]));
  writeFileSync(join(dir, 'package.json'), `${JSON.stringify(published, null, 2)}\n`);
  packed.push(npmPack(dir));
} finally {
  rmSync(staging, { recursive: true, force: true });
}
for (const file of packed) console.log(join(out, file));
