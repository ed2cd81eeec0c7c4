#!/usr/bin/env bash
# The example application's image, and its shutdown path run for real in podman.
#
#   deploy/app/image.sh build TAG   assemble the image from this machine's files (no registry):
#                                   the .venv's interpreter, its standard library, the shared
#                                   libraries every binary in it loads, Django, Gunicorn,
#                                   clockflake, the Django recipe, /bin/sleep (the preStop hook)
#   deploy/app/image.sh test TAG    run it as a pod runs it, and stop it as the kubelet does:
#       Deployment (redis://, ttl=10s): ready on /readyz with a worker id; `podman stop` (SIGTERM)
#         exits 0, the log says the worker id was released, and a newcomer opened within a second
#         of the exit gets that worker id; after `podman kill` (SIGKILL) a newcomer gets another
#         one (the dead one is held until its TTL runs out)
#       StatefulSet (k8s://, ordinal 3, a volume): ready with worker id 3; after `podman stop` it
#         exits 0, and its replacement (the same image, ordinal 3, the volume) opens at once
#
# Needs the .venv with clockflake built into it (make build-python), Django and Gunicorn
# (make setup-recipes), Debian's podman and runc (installed here if missing) and redis-server
# (scripts/redis.sh). Containers use host networking, as deploy/container's test does.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=scripts/lib.sh
. "$ROOT/scripts/lib.sh"
export CONTAINERS_CONF=$ROOT/deploy/container/containers.conf
PODMAN=(podman --runtime runc)
PY=$ROOT/.venv/bin/python
PACKAGES=(django asgiref sqlparse gunicorn packaging)

install() {
  command -v podman >/dev/null && command -v runc >/dev/null && return
  apt_install "Debian's podman and runc" --no-install-recommends podman runc
}

# Copies FILE into the root file system at the same path, with the shared libraries it loads.
copy_elf_deps() {
  local rootfs=$1 file=$2 lib
  for lib in $(ldd "$file" 2>/dev/null | grep -o '/[^ ]*' || true); do
    [ -e "$rootfs$lib" ] || { mkdir -p "$rootfs$(dirname "$lib")" && cp -L "$lib" "$rootfs$lib"; }
  done
}

build() {
  local tag=$1 context rootfs base version exe site clockflake_dir package
  install
  context=$(mktemp -d /tmp/clockflake-app-image.XXXXXX)
  # shellcheck disable=SC2064 # expanded now
  trap "rm -rf '$context'" RETURN
  rootfs=$context/rootfs
  base=$("$PY" -c 'import sys; print(sys.base_prefix)')
  version=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  exe=$(readlink -f "$PY")
  site=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  clockflake_dir=$("$PY" -c 'import clockflake, os; print(os.path.dirname(clockflake.__file__))')
  mkdir -p "$rootfs/usr/local/bin" "$rootfs/usr/local/lib" "$rootfs/app/site-packages" \
    "$rootfs/bin" "$rootfs/etc" "$rootfs/tmp"
  chmod 1777 "$rootfs/tmp"
  cp "$exe" "$rootfs/usr/local/bin/python3"
  # The standard library without its tests, GUI and packaging tools.
  tar -C "$base/lib" -cf - --exclude=site-packages --exclude=dist-packages --exclude=test \
    --exclude=tests --exclude=idlelib --exclude=tkinter --exclude=turtledemo \
    --exclude=ensurepip --exclude=lib2to3 --exclude='config-*' --exclude=__pycache__ \
    "python$version" | tar -C "$rootfs/usr/local/lib" -xf -
  for package in "${PACKAGES[@]}"; do
    cp -r "$site/$package" "$site/$package"-*.dist-info "$rootfs/app/site-packages/"
  done
  cp -r "$clockflake_dir" "$rootfs/app/site-packages/clockflake"
  find "$rootfs/app/site-packages" -name __pycache__ -prune -exec rm -rf {} +
  tar -C "$ROOT/examples/python/django_orders" -cf - --exclude=__pycache__ \
    --exclude='*.sqlite3' . | tar -C "$rootfs/app" -xf -
  cp /bin/sleep "$rootfs/bin/sleep"
  cp "$ROOT/deploy/container/passwd" "$ROOT/deploy/container/group" "$rootfs/etc/"
  while IFS= read -r -d '' elf; do
    copy_elf_deps "$rootfs" "$elf"
  done < <(find "$rootfs/usr/local/bin" "$rootfs/bin" "$rootfs/usr/local/lib" \
    "$rootfs/app/site-packages" -type f \( -name '*.so' -o -perm -u+x \) -print0)
  "${PODMAN[@]}" build -q --format docker -f "$ROOT/deploy/app/Containerfile" -t "$tag" "$context"
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

# Prints the /readyz body once it answers 200 (up to 30 s), else fails.
wait_ready() {
  local port=$1 body
  for _ in $(seq 300); do
    if body=$(curl -fsS "http://127.0.0.1:$port/readyz" 2>/dev/null); then
      echo "$body"
      return 0
    fi
    sleep 0.1
  done
  return 1
}

worker_of() { "$PY" -c 'import json, sys; print(json.loads(sys.argv[1])["worker_id"])' "$1"; }

# Opens a newcomer on URI (heal off), prints its worker id and the seconds since STOPPED (an
# epoch time from `date +%s.%N`).
newcomer() {
  "$PY" - "$1" "$2" <<'PYTHON'
import sys, time
from clockflake import Generator
uri, stopped = sys.argv[1], float(sys.argv[2])
with Generator.open(uri, heal=False) as gen:
    print(gen.worker_id, round(time.time() - stopped, 3))
PYTHON
}

REPLACEMENT='
import time
from clockflake import Generator
started = time.monotonic()
with Generator.open("k8s:///var/lib/ids?app=orders", heal=False) as gen:
    print(gen.worker_id, round(time.monotonic() - started, 3))
'

test_image() {
  local tag=$1 dir name port uri body held got redis_url
  install
  dir=$(mktemp -d /tmp/clockflake-app-image-test.XXXXXX)
  name=clockflake-app-test-$$
  export CLOCKFLAKE_REDIS_DIR=$dir/redis
  # shellcheck disable=SC2064 # expanded now: the locals are gone when the trap runs
  trap "podman --runtime runc rm -f -t 0 '$name-a' '$name-b' '$name-c' '$name-d' >/dev/null 2>&1 || true; \
    '$ROOT/scripts/redis.sh' stop >/dev/null 2>&1 || true; rm -rf '$dir'" EXIT
  passed=0 failed=0
  redis_url=$("$ROOT/scripts/redis.sh" start | tail -1)
  uri="$redis_url?app=orders-$$&ttl=10s"

  # A Deployment's pod: redis:// lease, SIGTERM.
  port=$(free_port)
  "${PODMAN[@]}" run -d --name "$name-a" --network host -e CLOCKFLAKE_URI="$uri" \
    -e BIND="127.0.0.1:$port" -e WEB_CONCURRENCY=1 "$tag" >/dev/null
  body=$(wait_ready "$port" || true)
  check "Deployment pod (redis://): ready on /readyz ($body)" grep -q '"state": "active"' <<<"$body"
  held=$(worker_of "$body" 2>/dev/null || echo none)
  "${PODMAN[@]}" stop -t 30 "$name-a" >/dev/null
  got=$(newcomer "$uri" "$(date +%s.%N)")
  check "podman stop (SIGTERM) exits 0" \
    test "$("${PODMAN[@]}" inspect --format '{{.State.ExitCode}}' "$name-a")" = 0
  check "the log says the worker id was released" \
    sh -c "podman --runtime runc logs '$name-a' 2>&1 | grep -q 'worker id released'"
  check "a newcomer gets worker id $held at once (worker id, seconds after exit: $got)" \
    "$PY" -c 'import sys; w, s = sys.argv[2].split(); sys.exit(not (w == sys.argv[1] and float(s) < 1))' \
    "$held" "$got"

  # The same pod killed (SIGKILL): its worker id stays held until the TTL runs out.
  port=$(free_port)
  "${PODMAN[@]}" run -d --name "$name-b" --network host -e CLOCKFLAKE_URI="$uri" \
    -e BIND="127.0.0.1:$port" -e WEB_CONCURRENCY=1 "$tag" >/dev/null
  body=$(wait_ready "$port" || true)
  held=$(worker_of "$body" 2>/dev/null || echo none)
  "${PODMAN[@]}" kill -s KILL "$name-b" >/dev/null
  "${PODMAN[@]}" wait "$name-b" >/dev/null 2>&1 || true
  got=$(newcomer "$uri" "$(date +%s.%N)")
  check "after podman kill (SIGKILL) worker id $held is still held: a newcomer gets another ($got)" \
    test "${got%% *}" != "$held"

  # A StatefulSet's pod: k8s:// with ordinal 3 on its volume, owned by the image's user.
  port=$(free_port)
  mkdir "$dir/marks" && chown 65532:65532 "$dir/marks"
  "${PODMAN[@]}" run -d --name "$name-c" --network host -v "$dir/marks:/var/lib/ids" \
    -e CLOCKFLAKE_URI="k8s:///var/lib/ids?app=orders" -e CLOCKFLAKE_POD_INDEX=3 \
    -e BIND="127.0.0.1:$port" -e WEB_CONCURRENCY=1 "$tag" >/dev/null
  body=$(wait_ready "$port" || true)
  check "StatefulSet pod (k8s://, ordinal 3): ready with worker id 3 ($body)" \
    grep -q '"worker_id": 3' <<<"$body"
  "${PODMAN[@]}" stop -t 30 "$name-c" >/dev/null
  check "podman stop (SIGTERM) exits 0" \
    test "$("${PODMAN[@]}" inspect --format '{{.State.ExitCode}}' "$name-c")" = 0
  # The replacement pod: the same image, user, volume and ordinal (k8s:// refuses a directory
  # another user owns, so it runs as the image's user, in a container).
  got=$("${PODMAN[@]}" run --rm --name "$name-d" --network none -v "$dir/marks:/var/lib/ids" \
    -e CLOCKFLAKE_POD_INDEX=3 --entrypoint /usr/local/bin/python3 "$tag" -c "$REPLACEMENT" \
    2>&1 || true)
  check "its replacement (ordinal 3, same volume) opens at once (worker id, seconds: $got)" \
    "$PY" -c 'import sys; w, s = sys.argv[1].split(); sys.exit(not (w == "3" and float(s) < 1))' "$got"
  check "the marks are on the volume (worker-3.state)" test -s "$dir/marks/orders/worker-3.state"
  echo "$passed passed, $failed failed"
  [ "$failed" = 0 ]
}

case ${1:-} in
  build) build "$2" ;;
  test) test_image "$2" ;;
  *) echo "usage: $0 build TAG | test TAG" >&2; exit 2 ;;
esac
