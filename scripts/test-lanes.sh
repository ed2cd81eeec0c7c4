#!/usr/bin/env bash
# make test's lanes, side by side (the top Makefile says what goes in each):
#   scripts/test-lanes.sh MAKE LOG_DIR CHECK_LANE...
# Each CHECK_LANE (a make target) runs in a process group of its own at the lowest CPU priority
# (nice 19), its output into LOG_DIR/CHECK_LANE.log; the suites (make test-suites) run here, in
# the foreground, and take the CPU first: the checks use what the suites leave idle (a suite
# mostly waits on its servers). Two lanes of checks keep both cores busy while one of them runs
# something single-threaded (Miri) or waits for a build lock, and after the suites end.
# Process groups, not sessions (setsid): Linux schedules each session as a group of its own
# (autogroup) and gives groups equal shares whatever their nice values, so a setsid'd lane would
# take its share of the machine from the suites. When the suites end, the checks are waited for
# and their logs printed. Fails when any lane fails; a failed suite stops the checks at once; an
# interrupt stops every lane.
set -uo pipefail
MAKE=${1:?usage: test-lanes.sh MAKE LOG_DIR CHECK_LANE...}
DIR=${2:?usage: test-lanes.sh MAKE LOG_DIR CHECK_LANE...}
shift 2
LANES=("$@")
mkdir -p "$DIR"

# set -m: each lane a process group of its own, stopped as a whole (cargo and rustc too).
pids=()
set -m
for lane in "${LANES[@]}"; do
  nice -n 19 $MAKE --no-print-directory "$lane" </dev/null >"$DIR/$lane.log" 2>&1 &
  pids+=($!)
done
set +m
stop_checks() {
  for pid in "${pids[@]}"; do kill -TERM -- "-$pid" 2>/dev/null || true; done
}
trap 'stop_checks; exit 130' INT TERM
for lane in "${LANES[@]}"; do
  echo "make test: the checks of make $lane run beside the suites at low priority; their output: $DIR/$lane.log"
done

$MAKE --no-print-directory test-suites
suites=$?
if [ $suites -ne 0 ]; then
  stop_checks
  wait "${pids[@]}" 2>/dev/null
  echo "make test: a suite failed (the checks were stopped; their output so far is in $DIR)"
  exit $suites
fi

status=0
failed=()
for i in "${!LANES[@]}"; do
  lane=${LANES[$i]}
  wait "${pids[$i]}"
  code=$?
  echo "---- the checks of make $lane, as they ran beside the suites ----"
  cat "$DIR/$lane.log"
  echo "---- end of make $lane ----"
  if [ $code -ne 0 ]; then status=$code; failed+=("$lane"); fi
done
if [ $status -ne 0 ]; then
  echo "make test: checks failed in make ${failed[*]} (above)"
fi
exit $status
