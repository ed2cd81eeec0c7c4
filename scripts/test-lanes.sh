#!/usr/bin/env bash
# make test's two lanes, side by side (the top Makefile says what goes in each):
#   scripts/test-lanes.sh MAKE LOG
# The checks (make test-checks) run in a process group of their own at the lowest CPU priority
# (nice 19), their output into LOG; the suites (make test-suites) run here, in the foreground, and
# take the CPU first: the checks use what the suites leave idle (a suite mostly waits on its
# servers). A process group, not a session (setsid): Linux schedules each session as a group of
# its own (autogroup) and gives groups equal shares whatever their nice values, so a setsid'd
# lane would take half the machine from the suites. When the suites end, the checks are waited for
# and LOG is printed. Fails when either lane fails; a failed suite stops the checks at once; an
# interrupt stops both.
set -uo pipefail
MAKE=${1:?usage: test-lanes.sh MAKE LOG}
LOG=${2:?usage: test-lanes.sh MAKE LOG}
mkdir -p "$(dirname "$LOG")"

# set -m: a process group of its own, stopped as a whole (cargo and rustc too).
set -m
nice -n 19 $MAKE --no-print-directory test-checks </dev/null >"$LOG" 2>&1 &
checks=$!
set +m
stop_checks() { kill -TERM -- "-$checks" 2>/dev/null || true; }
trap 'stop_checks; exit 130' INT TERM
echo "make test: the checks run beside the suites at low priority; their output: $LOG"

$MAKE --no-print-directory test-suites
suites=$?
if [ $suites -ne 0 ]; then
  stop_checks
  wait $checks 2>/dev/null
  echo "make test: a suite failed (the checks were stopped; their output so far: $LOG)"
  exit $suites
fi

wait $checks
status=$?
echo "---- the checks (make test-checks), as they ran beside the suites ----"
cat "$LOG"
echo "---- end of the checks ----"
if [ $status -ne 0 ]; then
  echo "make test: a check failed (above)"
fi
exit $status
