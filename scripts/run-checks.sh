#!/usr/bin/env bash
# make test's checks, two at a time: scripts/run-checks.sh MAKE DIR TARGET...
# Each TARGET is one make of its own, started in the order given as soon as one of the two
# slots is free (so the first two start first: the artifacts the last suites run). Its output
# goes to DIR/TARGET.log while it runs, and is printed whole when it ends (so two checks' lines
# never mix). Fails if any failed, naming them. Two, not one: a check that keeps only one core
# busy (Miri, the fuzz replay) leaves the other idle, and the checks left when the suites end
# then share both cores.
set -uo pipefail
MAKE=${1:?usage: run-checks.sh MAKE DIR TARGET...}
DIR=${2:?usage: run-checks.sh MAKE DIR TARGET...}
shift 2
rm -rf "$DIR"
mkdir -p "$DIR"

# shellcheck disable=SC2016 # expanded by the inner bash
printf '%s\n' "$@" | xargs -P 2 -I '{}' bash -c '
  make=$0 dir=$1 target=$2 started=$SECONDS
  if "$make" --no-print-directory "$target" >"$dir/$target.log" 2>&1; then result=passed
  else result=FAILED; touch "$dir/$target.failed"; fi
  { flock 9; echo "==== make $target: $result ($((SECONDS - started)) s)"; cat "$dir/$target.log"
  } 9>"$dir/.print"' "$MAKE" "$DIR" '{}'

failed=()
for target in "$@"; do
  [ -e "$DIR/$target.failed" ] && failed+=("$target")
done
if [ ${#failed[@]} -gt 0 ]; then
  echo "make test-checks: failed: ${failed[*]}"
  exit 1
fi
