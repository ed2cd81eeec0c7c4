// Which npm package carries the native addon (Generator.open) for a platform, named as napi-rs's
// loader (binding.js) looks for it, and what to tell a user who does not have it. Used by
// node.js's native loader (on this process's platform) and by dist.mjs (which packs one package
// per platform); a module of its own so that tests can ask about other platforms.

/**
 * The platforms whose addon package is published: dist.mjs packs one package for each addon built
 * (make dist-js cross-builds the Linux and Windows ones, .github/workflows/npm-release.yml builds
 * every one), with these npm fields, which make npm install only the matching one.
 *
 * win32-x64 is `-msvc`, as napi-rs names it, because binding.js asks for
 * `clockflake-win32-x64-msvc` in the official node.exe (and in Bun and Deno); it asks for `-gnu`
 * only in a Node built with mingw-w64 as a shared libnode.dll (MSYS2's). The addon in it is
 * cross-built with mingw-w64 (make dist-js), which node.exe cannot tell apart: an addon meets Node
 * only through N-API, C functions it looks up in the host process when it loads (napi's
 * dyn-symbols, as every MSVC build of napi-rs does), and shares no C or C++ runtime with it.
 */
export const NATIVE_PLATFORMS = {
  'linux-x64-gnu': { os: ['linux'], cpu: ['x64'], libc: ['glibc'] },
  'linux-x64-musl': { os: ['linux'], cpu: ['x64'], libc: ['musl'] },
  'linux-arm64-gnu': { os: ['linux'], cpu: ['arm64'], libc: ['glibc'] },
  'linux-arm64-musl': { os: ['linux'], cpu: ['arm64'], libc: ['musl'] },
  'darwin-x64': { os: ['darwin'], cpu: ['x64'] },
  'darwin-arm64': { os: ['darwin'], cpu: ['arm64'] },
  'win32-x64-msvc': { os: ['win32'], cpu: ['x64'] },
};

/**
 * napi-rs's name for a platform: `<os>-<cpu>`, with `-gnu` or `-musl` on Linux (by the C library
 * the process runs on) and `-msvc` on Windows.
 * @param {{ platform: string, arch: string, glibc?: boolean }} where
 */
export function nativePlatform({ platform, arch, glibc = true }) {
  let abi = '';
  if (platform === 'linux') abi = glibc ? '-gnu' : '-musl';
  else if (platform === 'win32') abi = '-msvc';
  return `${platform}-${arch}${abi}`;
}

/**
 * What to install for the native addon where `where` says, for clockflake `version`: the exact
 * package and version (the addon must be the same version as clockflake; it comes as an optional
 * dependency of clockflake from the registry, never with a tarball of clockflake), or that none is
 * published for this platform.
 * @param {{ platform: string, arch: string, glibc?: boolean }} where
 * @param {string | null} version  clockflake's, null where it cannot be read (the addon's must
 *   equal it, which the advice then says in words)
 */
export function nativeInstallAdvice(where, version) {
  const platform = nativePlatform(where);
  if (!(platform in NATIVE_PLATFORMS)) {
    return `no native addon of clockflake is published for ${platform} (there is one for ${Object.keys(NATIVE_PLATFORMS).join(', ')})`;
  }
  const name = `clockflake-${platform}`;
  const exact = version === null ? `${name} (of clockflake's version)` : `${name}@${version}`;
  return (
    `for ${where.platform} ${where.arch} it is the package ${exact}: install it beside clockflake${version === null ? '' : `@${version}`} ` +
    `(\`npm install ${version === null ? name : exact}\`; clockflake from the registry brings it as an optional dependency, ` +
    `unless optional dependencies are omitted; a tarball of clockflake brings no addon: install the addon's tarball, ` +
    `${name}-${version ?? '<version>'}.tgz, too)`
  );
}
