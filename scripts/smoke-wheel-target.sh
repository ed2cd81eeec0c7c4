#!/usr/bin/env bash
# Installs a wheel as pip does for another interpreter (`pip install --target`, with the wheel's
# platform named: pip checks the tags as it would choose the wheel there), then runs
# bindings-python/scripts/smoke_check.py with that interpreter against it.
#
#   scripts/smoke-wheel-target.sh WHEEL VERSION PLATFORM INTERPRETER [ARG...]
#
# PLATFORM is a pip platform tag (manylinux2014_aarch64); INTERPRETER [ARG...] runs Python
# (`qemu-aarch64 -L SYSROOT SYSROOT/usr/bin/python3.11` for the aarch64 wheel,
# scripts/dist-python-arm64.sh). make test runs it on the x86_64 wheel with this host's Python
# (make test-python-dist-target), so the release path cannot break unseen.
# PIP: the interpreter whose pip installs (default python3).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WHEEL=${1:?usage: smoke-wheel-target.sh WHEEL VERSION PLATFORM INTERPRETER [ARG...]}
VERSION=${2:?usage: smoke-wheel-target.sh WHEEL VERSION PLATFORM INTERPRETER [ARG...]}
PLATFORM=${3:?usage: smoke-wheel-target.sh WHEEL VERSION PLATFORM INTERPRETER [ARG...]}
shift 3
[ $# -gt 0 ] || { echo "usage: smoke-wheel-target.sh WHEEL VERSION PLATFORM INTERPRETER [ARG...]" >&2; exit 2; }
PIP=${PIP:-python3}

WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
# The interpreter's version, as pip must name it to choose among wheel tags.
py_version=$("$@" -c 'import sys; print(f"{sys.version_info[0]}.{sys.version_info[1]}")')
"$PIP" -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-index --no-deps --only-binary=:all: \
  --platform "$PLATFORM" --implementation cp --python-version "$py_version" \
  --target "$WORK/site-packages" "$WHEEL"
cp "$ROOT/bindings-python/scripts/smoke_check.py" "$WORK/"
# The console script runs through the same command (under qemu-user, the interpreter's own path
# is not executable by the interpreter itself).
(cd "$WORK" && PYTHONPATH="$WORK/site-packages" "$@" smoke_check.py "$VERSION" \
  --scripts "$WORK/site-packages/bin" --interpreter "$(printf '%q ' "$@")")
