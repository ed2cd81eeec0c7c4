#!/usr/bin/env bash
# The release artifacts installed as users install them, from registries: make dist's npm
# tarballs published to a local npm registry (verdaccio 5) and its wheels and sdist served by a
# local package index (pypiserver); then, in fresh projects outside the tree:
#   npm install clockflake           npm picks this platform's addon from optionalDependencies
#   pip install clockflake           pip picks the wheel by its tags
#   pip install --no-binary ...      pip builds the sdist, as where no wheel fits
# and each runs a leased generator (file://) and decodes its ids.
#
#   scripts/dist-registries.sh DIST_DIR
#
# Idempotent installs into target/tools (verdaccio, pypiserver); the registries listen on free
# loopback ports and stop with the script. Needs node, npm and python3.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
DIST=$(cd "${1:?usage: dist-registries.sh DIST_DIR}" && pwd)
PYTHON=${PYTHON:-python3}
TOOLS=$ROOT/target/tools
VERDACCIO_DIR=$TOOLS/verdaccio-5
PYPISERVER_VENV=$TOOLS/pypiserver
VERSION=$(sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1)

WORK=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

free_port() { "$PYTHON" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_for() { # URL WHAT LOG
  for _ in $(seq 300); do curl -fsS -o /dev/null "$1" 2>/dev/null && return 0; sleep 0.1; done
  echo "dist-registries: $2 did not answer at $1" >&2; cat "$3" >&2; exit 1
}

# verdaccio 5, pinned; node-fetch held at 2.7.0 (verdaccio 5's own range pulls a release that
# fails on Node 20 here).
if [ ! -x "$VERDACCIO_DIR/node_modules/.bin/verdaccio" ]; then
  mkdir -p "$VERDACCIO_DIR"
  cat >"$VERDACCIO_DIR/package.json" <<'JSON'
{ "private": true, "dependencies": { "verdaccio": "5.33.0" }, "overrides": { "node-fetch": "2.7.0" } }
JSON
  (cd "$VERDACCIO_DIR" && npm install -q --no-audit --no-fund >/dev/null)
fi
if [ ! -x "$PYPISERVER_VENV/bin/pypi-server" ]; then
  "$PYTHON" -m venv "$PYPISERVER_VENV"
  "$PYPISERVER_VENV/bin/pip" install -q --disable-pip-version-check "pypiserver==2.4.2"
fi

echo "dist-registries: npm, through a local registry"
npm_port=$(free_port)
cat >"$WORK/verdaccio.yaml" <<YAML
storage: $WORK/verdaccio-storage
auth:
  htpasswd:
    file: $WORK/htpasswd
    max_users: 10
packages:
  '**':
    access: \$all
    publish: \$authenticated
log: { type: stdout, format: pretty, level: warn }
YAML
"$VERDACCIO_DIR/node_modules/.bin/verdaccio" --config "$WORK/verdaccio.yaml" \
  --listen "127.0.0.1:$npm_port" >"$WORK/verdaccio.log" 2>&1 &
pids+=($!)
registry=http://127.0.0.1:$npm_port/
wait_for "${registry}-/ping" verdaccio "$WORK/verdaccio.log"
token=$(curl -fsS -X PUT -H 'content-type: application/json' \
  -d '{"name":"release","password":"release-check"}' "${registry}-/user/org.couchdb.user:release" |
  node -e 'let s = ""; process.stdin.on("data", (d) => (s += d)).on("end", () => console.log(JSON.parse(s).token))')
export NPM_CONFIG_USERCONFIG=$WORK/npmrc
printf 'registry=%s\n//127.0.0.1:%s/:_authToken=%s\n' "$registry" "$npm_port" "$token" >"$NPM_CONFIG_USERCONFIG"
export NPM_CONFIG_CACHE=$WORK/npm-cache
# The platform packages first: the main one names them as optional dependencies. (dist/ also
# holds the Helm chart, clockflake-server-VERSION.tgz: not an npm package.)
for tarball in "$DIST"/clockflake-{linux,win32,darwin}-*-"$VERSION".tgz "$DIST/clockflake-$VERSION.tgz"; do
  [ -e "$tarball" ] || continue
  npm publish -q "$tarball" >/dev/null
done
mkdir "$WORK/node-app"
(cd "$WORK/node-app" && npm init -y >/dev/null && npm install -q --no-audit --no-fund clockflake >/dev/null)
addons=$(cd "$WORK/node-app" && ls -d node_modules/clockflake-* 2>/dev/null | xargs -n1 basename)
echo "dist-registries: npm installed clockflake $VERSION with the addon: $addons"
[ "$(wc -w <<<"$addons")" = 1 ] || { echo "dist-registries: expected one addon, found: $addons" >&2; exit 1; }
cat >"$WORK/node-app/check.mjs" <<'JS'
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { Generator, decode } from 'clockflake';

const dir = mkdtempSync(join(tmpdir(), 'clockflake-ids-'));
const gen = await Generator.open(`${pathToFileURL(dir)}?app=registry`);
const ids = Array.from({ length: 10_000 }, () => gen.nextId());
if (new Set(ids).size !== ids.length) throw new Error('a repeated id');
if (decode(ids[0]).workerId !== gen.workerId) throw new Error('decode disagrees');
await gen.close();
rmSync(dir, { recursive: true });
console.log(`dist-registries: node: 10000 leased ids from worker ${gen.workerId}, e.g. ${ids[0]}`);
JS
(cd "$WORK/node-app" && node check.mjs)

echo "dist-registries: pip, through a local package index"
mkdir "$WORK/index"
cp "$DIST"/clockflake-"$VERSION"-*.whl "$DIST/clockflake-$VERSION.tar.gz" "$WORK/index/"
pip_port=$(free_port)
"$PYPISERVER_VENV/bin/pypi-server" run -i 127.0.0.1 -p "$pip_port" -a . -P . "$WORK/index" \
  >"$WORK/pypiserver.log" 2>&1 &
pids+=($!)
index=http://127.0.0.1:$pip_port/simple/
wait_for "$index" pypiserver "$WORK/pypiserver.log"
cp "$ROOT/bindings-python/scripts/smoke_check.py" "$WORK/"
for how in wheel sdist; do
  "$PYTHON" -m venv "$WORK/py-$how"
  flags=(--index-url "$index")
  [ "$how" = sdist ] && flags+=(--no-binary clockflake)
  PIP_CACHE_DIR=$WORK/pip-cache "$WORK/py-$how/bin/pip" install -q --disable-pip-version-check \
    "${flags[@]}" "clockflake==$VERSION"
  installed=$("$WORK/py-$how/bin/python" -c 'import importlib.metadata as m; print(m.distribution("clockflake").read_text("WHEEL").split("Tag: ")[1].split()[0])')
  echo "dist-registries: pip ($how) installed clockflake $VERSION, tag $installed"
  (cd "$WORK" && "$WORK/py-$how/bin/python" smoke_check.py "$VERSION")
done
echo "dist-registries: every package installed from a registry and ran"
