#!/usr/bin/env bash
# make test's two lanes, side by side (the top Makefile says what goes in each):
#   scripts/test-lanes.sh MAKE LOG
# The checks (make test-checks, two at a time) run at the lowest CPU priority, their output into
# LOG; the suites (make test-suites) run here, in the foreground, and take the CPU first: the
# checks use what the suites and their servers leave idle (a suite mostly waits on its servers).
# When the suites end, the checks are waited for and LOG is printed. Fails when either lane fails; a failed suite stops
# the checks at once; an interrupt stops both.
#
# The lowest priority across sessions: Linux schedules each session as a group (autogroup) and
# shares the CPU between groups by the group's own nice value, whatever its processes' nice
# values. PostgreSQL's processes each start a session, so a nice 19 lane in the suites' session
# still had the weight of a whole group against them: a failover test beside it saw the servers
# runnable and not run for tens of seconds (connections taking 110 s, `pg_ctl promote` timing
# out). So the checks get a session of their own whose group is niced to 19 (its weight 15
# against 1024 for every other session); without autogroups, plain nice 19 does the same.
set -uo pipefail
MAKE=${1:?usage: test-lanes.sh MAKE LOG}
LOG=${2:?usage: test-lanes.sh MAKE LOG}
mkdir -p "$(dirname "$LOG")"

# A session (setsid) is a process group too: the lane is stopped as a whole (cargo and rustc too).
if [ "$(cat /proc/sys/kernel/sched_autogroup_enabled 2>/dev/null)" = 1 ]; then
  # Fails (and so does make test) if the group cannot be niced: never a lane at equal share.
  setsid bash -c 'echo 19 >/proc/self/autogroup && exec nice -n 19 "$@"' lane \
    $MAKE --no-print-directory test-checks </dev/null >"$LOG" 2>&1 &
else
  set -m
  nice -n 19 $MAKE --no-print-directory test-checks </dev/null >"$LOG" 2>&1 &
  set +m
fi
checks=$!
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
