"""A frozen coordinator never hangs a caller (issue 12, item 4).

Three holders, one per language (Rust, Python, Node), call next_id() in a tight loop on one
coordinator; the coordinator is frozen with SIGSTOP (the kernel still acknowledges packets, so
no socket timeout fires) and thawed later. Every call must return within 100 ms; ids go on
until the lease deadline and LEASE_LOST comes at it, never anything else and never an id after
it; once thawed, a new generator gets a lease and issues ids above every old one.

    python tests/chaos/freeze.py postgres URL FREEZE_S TTL_S
    python tests/chaos/freeze.py zookeeper URL FREEZE_S TTL_S

The scripts/postgres.sh or scripts/zookeeper.sh server named by the environment (as the make
target sets it up) is the one frozen.
"""
import json
import os
import subprocess
import sys
import time

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
MAX_CALL_MS = 100


def main():
    kind, url, freeze_s, ttl_s = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    app = f"freeze{os.getpid()}"
    if kind == "postgres":
        uri = f"{url}?app={app}&ttl={int(ttl_s * 1000)}ms"
        script = os.path.join(ROOT, "scripts", "postgres.sh")
    else:
        uri = f"{url}/snowflake/{app}?ttl={int(ttl_s * 1000)}ms"
        script = os.path.join(ROOT, "scripts", "zookeeper.sh")
    run_ms = int((1 + freeze_s + 1.5) * 1000)
    children = {
        "rust": [os.path.join(ROOT, "target", "debug", "examples", "chaos_child"), uri, str(run_ms)],
        "python": [os.path.join(ROOT, ".venv", "bin", "python"), os.path.join(ROOT, "tests", "chaos", "child.py"), uri, str(run_ms)],
        "node": ["node", os.path.join(ROOT, "tests", "chaos", "child.mjs"), uri, str(run_ms)],
    }
    only = os.environ.get("CHAOS_LANGUAGES")  # e.g. "rust" to run one side against old code
    if only:
        children = {name: argv for name, argv in children.items() if name in only.split(",")}
    chaos_child = os.environ.get("CHAOS_RUST_CHILD")
    if chaos_child:
        children["rust"][0] = chaos_child
    procs = {}
    for name, argv in children.items():
        procs[name] = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for name, proc in procs.items():
        line = proc.stdout.readline().strip()
        if line != "ready":
            proc.kill()
            sys.exit(f"{name} child did not start: {line!r} {proc.stderr.read()}")
    time.sleep(1)
    frozen_ms = int(time.time() * 1000)
    subprocess.run([script, "freeze"], check=True)
    try:
        time.sleep(freeze_s)
    finally:
        subprocess.run([script, "thaw"], check=True)
    thawed_ms = int(time.time() * 1000)
    print(f"{kind}: frozen for {thawed_ms - frozen_ms} ms (ttl {ttl_s} s)")

    failures = []
    ttl_ms = ttl_s * 1000
    margin_ms = max(ttl_ms / 10, 20)
    renew_interval_ms = ttl_ms / 4
    for name, proc in procs.items():
        out, err = proc.communicate(timeout=120)
        if proc.returncode != 0:
            failures.append(f"{name}: exit {proc.returncode}: {err[-2000:]}")
            continue
        report = json.loads(out.strip().splitlines()[-1])
        print(json.dumps(report))
        lost = report["first_lost_wall_ms"] - frozen_ms
        checks = [
            (report["max_call_ms"] < MAX_CALL_MS, f"a call took {report['max_call_ms']} ms"),
            (report["error_before_lost"] is None, f"refused before the deadline: {report['error_before_lost']}"),
            (report["first_lost_wall_ms"] > 0, "never LEASE_LOST"),
            (set(report["errors"]) <= {"LEASE_LOST"}, f"other refusals: {report['errors']}"),
            # The deadline: the last renewal sent before the freeze, plus the TTL less its margin.
            (ttl_ms - margin_ms - renew_interval_ms - 300 <= lost <= ttl_ms,
             f"LEASE_LOST {lost} ms into the freeze, expected at the deadline"),
            (report["last_ok_wall_ms"] < frozen_ms + ttl_ms, "an id after the lease could have expired"),
            (report["ok_after_lost"] == 0, f"{report['ok_after_lost']} ids after LEASE_LOST"),
            (report["ok"] > 0, "no id at all"),
            (report["new_ids_below_old"] == 0, f"{report['new_ids_below_old']} new ids not above the old ones"),
        ]
        failures += [f"{name}: {why}" for good, why in checks if not good]
    if failures:
        sys.exit("\n".join(failures))
    print(f"{kind}: every call returned within {MAX_CALL_MS} ms; LEASE_LOST at the deadline; new leases above the old marks")


main()
