#!/usr/bin/env bash
# The clockflake-server container image: a scratch image of the static musl binary.
#
#   scripts/server-image.sh build ARCH BINARY TAG  build the image for ARCH (amd64, arm64) from
#                                                  BINARY (static, musl) and tag it TAG
#   scripts/server-image.sh save TAG FILE          write the image to FILE as an OCI archive
#   scripts/server-image.sh test TAG               run it and check it: the containerised server
#                                                  leases a worker id (file:// on a mounted
#                                                  volume), answers /v1/id, turns ready, passes
#                                                  its HEALTHCHECK, runs as its non-root user,
#                                                  and stops cleanly (exit 0, lease released) on
#                                                  SIGTERM
#
# Debian's podman with Debian's runc (installed here if missing), with
# deploy/container/containers.conf (see its comments), host networking, and no registry: a
# scratch image pulls nothing. The image is built in docker format, since the OCI image format
# has no HEALTHCHECK.
set -euo pipefail
# shellcheck source=scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export CONTAINERS_CONF=$ROOT/deploy/container/containers.conf
PODMAN=(podman --runtime runc)

install() {
  command -v podman >/dev/null && command -v runc >/dev/null \
    && [ -r /etc/ssl/certs/ca-certificates.crt ] && return
  apt_install "Debian's podman, runc and ca-certificates" --no-install-recommends \
    podman runc ca-certificates
}

build() {
  local arch=$1 binary=$2 tag=$3 context
  install
  context=$(mktemp -d /tmp/clockflake-image.XXXXXX)
  trap 'rm -rf "$context"' RETURN
  cp "$binary" "$context/clockflake-server"
  chmod 0755 "$context/clockflake-server"
  cp /etc/ssl/certs/ca-certificates.crt "$context/"
  cp "$ROOT/deploy/container/passwd" "$ROOT/deploy/container/group" "$context/"
  mkdir "$context/data"
  "${PODMAN[@]}" build -q --format docker --arch "$arch" \
    --build-arg VERSION="$(version)" -f "$ROOT/deploy/container/Containerfile" -t "$tag" "$context"
}

version() {
  sed -n 's/^version = "\(.*\)"/\1/p' "$ROOT/Cargo.toml" | head -1
}

save() {
  local tag=$1 file=$2
  rm -f "$file"
  "${PODMAN[@]}" save -q --format oci-archive -o "$file" "$tag"
}

check() {
  local what=$1
  shift
  if "$@"; then
    echo "ok   $what"
    passed=$((passed + 1))
  else
    echo "FAIL $what"
    failed=$((failed + 1))
  fi
}

test_image() {
  local tag=$1 dir name port base body
  install
  dir=$(mktemp -d /tmp/clockflake-image-test.XXXXXX)
  name=clockflake-image-test-$$
  port=$(free_port)
  base=http://127.0.0.1:$port
  # The volume belongs to the image's user, as a PersistentVolume with fsGroup would.
  chown 65532:65532 "$dir"
  # shellcheck disable=SC2064 # expanded now: the locals are gone when the trap runs
  trap "podman --runtime runc rm -f -t 0 '$name' >/dev/null 2>&1 || true; rm -rf '$dir' '$dir.podman-run.log'" EXIT
  passed=0 failed=0
  # The health check is run by hand below (no systemd here to time it).
  "${PODMAN[@]}" run -d --name "$name" --network host -v "$dir:/data" --health-interval disable \
    -e CLOCKFLAKE_LEASE="file:///data/leases?app=image" -e CLOCKFLAKE_LISTEN="127.0.0.1:$port" \
    -e RUST_LOG=info "$tag" >/dev/null 2>"$dir.podman-run.log" \
    || { cat "$dir.podman-run.log" >&2; exit 1; }
  ready() { curl -fsS "$base/readyz" >/dev/null 2>&1; }
  for _ in $(seq 150); do ready && break; sleep 0.1; done
  check "turns ready (/readyz 200)" ready
  body=$(curl -fsS "$base/v1/id" || true)
  check "answers GET /v1/id ($body)" grep -Eq '^\{"id":"[0-9]+"\}$' <<<"$body"
  check "leased worker id 0 from file:// on the volume" \
    test -e "$dir/leases/image/worker-0.lock"
  check "runs as 65532 (the image's user), not root" \
    test "$(stat -c %u "$dir/leases/image/worker-0.lock")" = 65532
  check "HEALTHCHECK passes (podman healthcheck run)" \
    "${PODMAN[@]}" healthcheck run "$name"
  check "the image is FROM scratch: one binary, certificates, passwd, group" \
    test "$("${PODMAN[@]}" image inspect --format '{{len .RootFS.Layers}}' "$tag")" -le 5
  "${PODMAN[@]}" stop -t 20 "$name" >/dev/null 2>&1
  check "stops on SIGTERM with exit code 0" \
    test "$("${PODMAN[@]}" inspect --format '{{.State.ExitCode}}' "$name")" = 0
  check "released its lease on the way out (log: lease closed)" \
    sh -c "'${PODMAN[0]}' --runtime runc logs '$name' 2>&1 | grep -q 'lease closed'"
  echo "$passed passed, $failed failed"
  [ "$failed" = 0 ]
}

case ${1:-} in
  build) build "$2" "$3" "$4" ;;
  save) save "$2" "$3" ;;
  test) test_image "$2" ;;
  *) echo "usage: $0 build ARCH BINARY TAG | save TAG FILE | test TAG" >&2; exit 2 ;;
esac
