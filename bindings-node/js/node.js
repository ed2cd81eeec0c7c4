// The Node entry (also Bun's and Deno's through the `node` condition): the API, plus the
// native addon for `Generator.open`, loaded on first use from the per-platform optional package
// (`clockflake-<platform>`, napi-rs's loader `binding.js`).
import { createRequire } from 'node:module';
import { ClockflakeError } from './errors.js';
import { Leased } from './leased.js';
import { setLeased, setNativeLoader } from './native.js';

export * from './api.js';

setLeased(Leased.open);

/** The npm package of the native addon for this platform, named as napi-rs names it. */
function platformPackage() {
  const { platform, arch } = process;
  let abi = '';
  if (platform === 'linux') {
    const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null;
    abi = report?.header?.glibcVersionRuntime ? '-gnu' : '-musl';
  } else if (platform === 'win32') {
    abi = '-msvc';
  }
  return `clockflake-${platform}-${arch}${abi}`;
}

/** The innermost cause of a load failure: napi's loader wraps the real one several levels deep. */
function rootCause(error) {
  let cause = error;
  while (cause?.cause !== undefined && cause.cause !== null) cause = cause.cause;
  return cause;
}

setNativeLoader(() => {
  try {
    return createRequire(import.meta.url)('../binding.js');
  } catch (error) {
    const name = platformPackage();
    const cause = rootCause(error);
    const unavailable = new ClockflakeError(
      'NATIVE_UNAVAILABLE',
      `native addon unavailable: Generator.open (leased worker ids) needs the package ${name} for ${process.platform} ${process.arch}, ` +
        `which is not installed or does not load (${String(cause?.message ?? cause).split('\n')[0]}); ` +
        `install ${name} beside clockflake (from the registry it is an optional dependency of clockflake, skipped when optional ` +
        'dependencies are omitted; an installed tarball of clockflake brings no addon: install the addon\'s tarball too). ' +
        'Everything else works without it: new Generator({ workerId }), decode, encode, idRange, layouts, PublicIds',
    );
    unavailable.cause = error;
    throw unavailable;
  }
});
