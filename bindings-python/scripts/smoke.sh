#!/usr/bin/env bash
# Installs the package as a user would, into fresh virtualenvs outside the source tree, and runs
# scripts/smoke_check.py from each (import, an id, decode, an error's code, __version__, a file:// lease):
#   1. the release wheel for linux x86_64 (manylinux2014), built by scripts/dist-python.sh (which
#      checks it with auditwheel and against the size budget) into WHEEL_DIR (make
#      build-python-wheel; a temp dir when unset), into Python 3.10, 3.11, 3.12 and 3.13;
#   2. that wheel installed by `pip install --target` for another interpreter and run with it, as
#      make dist runs the aarch64 wheel under qemu (scripts/smoke-wheel-target.sh);
#   3. the sdist, built from source by pip (maturin through the PEP 517 backend) into one virtualenv.
# VENV: the virtualenv of `make setup-python`; CARGO_TARGET_DIR, HOST_TARGET and BINDINGS_PROFILE
# (a Cargo profile; release when unset) let the sdist build reuse the dependencies make
# build-python compiled (the wheel has its own, target/dist).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
VENV=${VENV:-$ROOT/.venv}
PYTHON=${PYTHON:-python3}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
VERSION=$("$VENV/bin/python" -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb"))["workspace"]["package"]["version"])' "$ROOT/Cargo.toml")
PY_VERSIONS=(3.10 3.11 3.12 3.13)

check() {
  cp "$ROOT/bindings-python/scripts/smoke_check.py" "$WORK/"
  (cd "$WORK" && "$1/bin/python" smoke_check.py "$VERSION")
}

# An interpreter for version $1: pyenv's, else one on PATH.
interpreter() {
  local root found
  root=$(pyenv root 2>/dev/null || echo "$HOME/.pyenv")
  found=$(ls -d "$root"/versions/"$1".*/bin/python"$1" 2>/dev/null | sort -V | tail -1 || true)
  if [ -z "$found" ] && command -v "python$1" >/dev/null && "python$1" -c '' 2>/dev/null; then
    found=$(command -v "python$1")
  fi
  echo "$found"
}

echo "smoke: the release wheel (linux x86_64, manylinux2014)"
if [ -z "${WHEEL_DIR:-}" ]; then
  WHEEL_DIR=$WORK/wheels
  VENV=$VENV CARGO_TARGET_DIR="$ROOT/target/dist" bash "$ROOT/scripts/dist-python.sh" "$WHEEL_DIR" x86_64-unknown-linux-gnu
fi
wheel=$(ls "$WHEEL_DIR"/clockflake-"$VERSION"-cp310-abi3-manylinux*_x86_64.whl)
listing=$(unzip -l "$wheel")
for file in LICENSE-MIT LICENSE-APACHE; do
  grep -q "dist-info/licenses/$file\$" <<<"$listing" || { echo "smoke: no $file in $wheel" >&2; exit 1; }
done
for v in "${PY_VERSIONS[@]}"; do
  python=$(interpreter "$v")
  if [ -z "$python" ]; then
    echo "smoke: SKIPPED Python $v: no interpreter here (neither under $(pyenv root 2>/dev/null || echo ~/.pyenv)/versions nor python$v on PATH)"
    continue
  fi
  "$python" -m venv "$WORK/py$v"
  "$WORK/py$v/bin/python" -m pip install -q --disable-pip-version-check --no-index "$wheel"
  check "$WORK/py$v"
done

# make dist runs the aarch64 wheel this way, under qemu (scripts/dist-python-arm64.sh): the same
# path here, with this host's interpreter, so that a break in it shows in make test.
echo "smoke: the release wheel installed by pip --target for another interpreter, as for aarch64"
PIP=$PYTHON bash "$ROOT/scripts/smoke-wheel-target.sh" "$wheel" "$VERSION" manylinux2014_x86_64 "$PYTHON"

echo "smoke: the sdist, built from source by pip into a fresh virtualenv"
"$VENV/bin/maturin" sdist -m "$ROOT/bindings-python/Cargo.toml" -o "$WORK/sdist"
sdist=$(ls "$WORK"/sdist/clockflake-"$VERSION".tar.gz)
listing=$(tar -tzf "$sdist")
for file in LICENSE-MIT LICENSE-APACHE README.md pyproject.toml; do
  grep -qx "clockflake-$VERSION/$file" <<<"$listing" || { echo "smoke: no $file in $sdist" >&2; exit 1; }
done
"$PYTHON" -m venv "$WORK/from-sdist"
# For the host's triple explicitly (maturin reads CARGO_BUILD_TARGET) and in make build-python's
# profile (MATURIN_PEP517_ARGS: maturin's arguments under pip): the same dependencies, already
# compiled in CARGO_TARGET_DIR.
CARGO_BUILD_TARGET=${HOST_TARGET:-} MATURIN_PEP517_ARGS=${BINDINGS_PROFILE:+--profile $BINDINGS_PROFILE} \
  "$WORK/from-sdist/bin/python" -m pip install -q \
  --disable-pip-version-check "$sdist"
check "$WORK/from-sdist"
