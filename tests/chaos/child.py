"""One side of the chaos tests: see lease/examples/chaos_child.rs (same protocol, in Python).

python child.py URI MS
"""
import json
import sys
import time

import clockflake


def open_retrying(uri):
    started = time.monotonic()
    while True:
        try:
            # The lease's own deadline is under test, as in chaos_child.rs: a generator that
            # heals would refuse with COORDINATOR_UNAVAILABLE instead and lease again.
            return clockflake.Generator.open(uri, heal=False)
        except clockflake.ClockflakeError:
            if time.monotonic() - started > 30:
                raise
            time.sleep(0.2)


def main():
    uri, run_ms = sys.argv[1], int(sys.argv[2])
    gen = open_retrying(uri)
    print("ready", flush=True)
    max_by_cs = {}
    calls = ok = ok_after_lost = 0
    max_call = 0.0
    last_ok_wall_ms = first_lost_wall_ms = 0
    errors = {}
    error_before_lost = None
    end = time.monotonic() + run_ms / 1000
    while time.monotonic() < end:
        call = time.perf_counter()
        try:
            id_ = gen.next_id()
        except clockflake.ClockflakeError as error:
            max_call = max(max_call, time.perf_counter() - call)
            calls += 1
            errors[error.code] = errors.get(error.code, 0) + 1
            if error.code == "LEASE_LOST":
                first_lost_wall_ms = first_lost_wall_ms or int(time.time() * 1000)
            elif not first_lost_wall_ms and error_before_lost is None:
                error_before_lost = str(error)
            time.sleep(0.0002)
            continue
        max_call = max(max_call, time.perf_counter() - call)
        calls += 1
        ok += 1
        last_ok_wall_ms = int(time.time() * 1000)
        if first_lost_wall_ms:
            ok_after_lost += 1
        cs = clockflake.decode(id_).clock_seq
        if id_ > max_by_cs.get(cs, 0):
            max_by_cs[cs] = id_
    worker = gen.worker_id
    try:
        gen.close()
    except clockflake.ClockflakeError:
        pass
    again = open_retrying(uri)
    below_old = 0
    for _ in range(1000):
        id_ = again.next_id()
        parts = clockflake.decode(id_)
        if parts.worker_id == worker and id_ <= max_by_cs.get(parts.clock_seq, -1):
            below_old += 1
    print(json.dumps({
        "language": "python", "worker": worker, "calls": calls, "ok": ok,
        "max_call_ms": round(max_call * 1000, 3), "last_ok_wall_ms": last_ok_wall_ms,
        "first_lost_wall_ms": first_lost_wall_ms, "ok_after_lost": ok_after_lost,
        "errors": errors, "error_before_lost": error_before_lost,
        "new_worker": again.worker_id, "new_ids_below_old": below_old,
    }), flush=True)
    again.close()


main()
