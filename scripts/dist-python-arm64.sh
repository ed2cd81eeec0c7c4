#!/usr/bin/env bash
# Runs the aarch64 manylinux wheel here, on x86_64: Debian's arm64 CPython 3.11 under qemu-user,
# from a sysroot of unpacked arm64 packages (apt-get download, never installed), then
# bindings-python/scripts/smoke_check.py against the wheel installed for it by pip
# (scripts/smoke-wheel-target.sh).
#
#   scripts/dist-python-arm64.sh WHEEL VERSION
#
# Idempotent: qemu-user, the arm64 architecture in dpkg and the sysroot (target/dist/arm64-sysroot)
# are set up only when missing. The sysroot's glibc is Debian's (2.36), so this shows that the
# code runs on aarch64; that the wheel needs no more than glibc 2.17 is auditwheel's finding.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
WHEEL=${1:?usage: dist-python-arm64.sh WHEEL VERSION}
VERSION=${2:?usage: dist-python-arm64.sh WHEEL VERSION}
SYSROOT=$ROOT/target/dist/arm64-sysroot
PACKAGES=(python3.11-minimal libpython3.11-minimal libpython3.11-stdlib libc6 libgcc-s1 zlib1g
  libexpat1 libffi8 libssl3 libbz2-1.0 liblzma5 libuuid1 libcrypt1 libtirpc3 libnsl2 libdb5.3
  libncursesw6 libtinfo6 libsqlite3-0 libreadline8)

if ! command -v qemu-aarch64 >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq qemu-user
fi
if [ ! -x "$SYSROOT/usr/bin/python3.11" ]; then
  if ! dpkg --print-foreign-architectures | grep -qx arm64; then
    dpkg --add-architecture arm64
  fi
  apt-get update -qq
  debs=$(mktemp -d)
  chmod 777 "$debs"
  (cd "$debs" && apt-get download -qq "${PACKAGES[@]/%/:arm64}")
  rm -rf "$SYSROOT.tmp" && mkdir -p "$SYSROOT.tmp"
  for deb in "$debs"/*.deb; do dpkg-deb -x "$deb" "$SYSROOT.tmp"; done
  rm -rf "$debs" "$SYSROOT" && mv "$SYSROOT.tmp" "$SYSROOT"
fi

bash "$ROOT/scripts/smoke-wheel-target.sh" "$WHEEL" "$VERSION" manylinux2014_aarch64 \
  qemu-aarch64 -L "$SYSROOT" "$SYSROOT/usr/bin/python3.11"
