// The Node entry (also Bun's and Deno's through the `node` condition): the API, plus the
// native addon for `Generator.open`, loaded on first use from the per-platform optional package
// (`clockflake-<platform>`, napi-rs's loader `binding.js`).
import { createRequire } from 'node:module';
import { ClockflakeError } from './errors.js';
import { Leased } from './leased.js';
import { setLeased, setNativeLoader } from './native.js';
import { nativeInstallAdvice } from './native-package.mjs';

export * from './api.js';

setLeased(Leased);

/** This process's platform, as `nativeInstallAdvice` takes it. */
function thisPlatform() {
  const { platform, arch } = process;
  let glibc = true;
  if (platform === 'linux') {
    const report = typeof process.report?.getReport === 'function' ? process.report.getReport() : null;
    glibc = Boolean(report?.header?.glibcVersionRuntime);
  }
  return { platform, arch, glibc };
}

/** The innermost cause of a load failure: napi's loader wraps the real one several levels deep. */
function rootCause(error) {
  let cause = error;
  while (cause?.cause !== undefined && cause.cause !== null) cause = cause.cause;
  return cause;
}

setNativeLoader(() => {
  const load = createRequire(import.meta.url);
  try {
    return load('../binding.js');
  } catch (error) {
    // The package's own version, which the addon's must equal (read only on this path; none when
    // lib/ was bundled away from its package.json).
    let version = null;
    try {
      version = load('../package.json').version;
    } catch {}
    const advice = nativeInstallAdvice(thisPlatform(), version);
    const cause = rootCause(error);
    const unavailable = new ClockflakeError(
      'NATIVE_UNAVAILABLE',
      'native addon unavailable: Generator.open (leased worker ids) needs the native addon, which is not installed or does not load ' +
        `(${String(cause?.message ?? cause).split('\n')[0]}); ${advice}. ` +
        'Everything else works without it: new Generator({ workerId }), decode, encode, idRange, layouts, PublicIds',
    );
    unavailable.cause = error;
    throw unavailable;
  }
});
