#!/usr/bin/env python3
"""The id service's latency as users compare it: p50, p99 and p99.9 of GET /v1/id at 1, 10 and
100 connections at a fixed request rate below saturation, beside Redis INCR through the same
load generator in the same run, in turns. A benchmark, not a test; prints a Markdown table for
BENCHMARKS.md ("## Latency at a fixed rate").

  scripts/bench-latency.py SERVER_BINARY LOADGEN_BINARY

Per number of connections: first the saturated throughput of each (closed loop, BENCH_TURNS
turns of BENCH_SATURATION_SECONDS), then each at half of its own median saturated throughput
(open loop: sends at fixed times, latency from each send's intended time, so a stall counts
against every request it delays), BENCH_TURNS turns of BENCH_SECONDS, the id service and Redis
alternating. Medians over the turns. (Redis at the id service's rate would be past half of its
own saturation where it saturates lower, and the other way round.) The server leases from file:// (no I/O per id); Redis
is scripts/redis.sh's (a throwaway server on loopback) with `appendfsync everysec`, Redis's
default, rather than that script's `always` (an fsync per INCR).

Environment: BENCH_SECONDS (10), BENCH_SATURATION_SECONDS (5), BENCH_TURNS (3),
BENCH_CONNECTIONS (1,10,100).
"""

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECONDS = float(os.environ.get("BENCH_SECONDS", "10"))
SATURATION_SECONDS = float(os.environ.get("BENCH_SATURATION_SECONDS", "5"))
TURNS = int(os.environ.get("BENCH_TURNS", "3"))
CONNECTIONS = [int(c) for c in os.environ.get("BENCH_CONNECTIONS", "1,10,100").split(",")]
GOAL_P99_US = 1000.0  # p99 under 1 ms at 10 connections at half of saturation


def loadgen(binary, target, connections, rate, seconds):
    out = subprocess.run(
        [
            binary,
            "--target",
            target,
            "--connections",
            str(connections),
            "--rate",
            str(rate),
            "--seconds",
            str(seconds),
            "--warmup",
            "1",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result = json.loads(out)
    print(f"  {json.dumps(result)}", file=sys.stderr, flush=True)
    return result


def median(runs, key):
    return statistics.median(run[key] for run in runs)


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    server_binary, loadgen_binary = sys.argv[1], sys.argv[2]
    work = Path(tempfile.mkdtemp(prefix="clockflake-bench-latency."))
    redis_env = dict(os.environ, CLOCKFLAKE_REDIS_DIR=str(work / "redis"))
    server = None
    try:
        redis_url = (
            subprocess.run(
                [ROOT / "scripts/redis.sh", "start"],
                env=redis_env,
                check=True,
                capture_output=True,
                text=True,
            )
            .stdout.strip()
            .splitlines()[-1]
        )
        password, port = (
            redis_url.split(":")[2].split("@")[0],
            redis_url.rsplit(":", 1)[1].split("/")[0],
        )
        subprocess.run(
            [
                "redis-cli",
                "-p",
                port,
                "-a",
                password,
                "--no-auth-warning",
                "CONFIG",
                "SET",
                "appendfsync",
                "everysec",
            ],
            check=True,
            capture_output=True,
        )
        server = subprocess.Popen(
            [
                server_binary,
                "--lease",
                f"file://{work}/leases?app=bench",
                "--listen",
                "127.0.0.1:0",
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            env=dict(os.environ, RUST_LOG="warn"),
        )
        line = server.stdout.readline()
        if "listening on " not in line:
            sys.exit(f"the server did not start: {line!r}")
        id_url = line.split("listening on ", 1)[1].strip() + "/v1/id"
        load_before = os.getloadavg()
        started = time.time()
        rows = []
        for connections in CONNECTIONS:
            print(f"{connections} connections: saturation", file=sys.stderr, flush=True)
            saturated = {"id": [], "redis": []}
            for _ in range(TURNS):
                saturated["id"].append(
                    loadgen(loadgen_binary, id_url, connections, 0, SATURATION_SECONDS)
                )
                saturated["redis"].append(
                    loadgen(loadgen_binary, redis_url, connections, 0, SATURATION_SECONDS)
                )
            id_saturation = median(saturated["id"], "throughput")
            redis_saturation = median(saturated["redis"], "throughput")
            rates = {
                name: max(100, round(saturation / 2 / 100) * 100)
                for name, saturation in (("id", id_saturation), ("redis", redis_saturation))
            }
            print(f"{connections} connections: {rates}", file=sys.stderr, flush=True)
            fixed = {"id": [], "redis": []}
            for _ in range(TURNS):
                fixed["id"].append(
                    loadgen(loadgen_binary, id_url, connections, rates["id"], SECONDS)
                )
                fixed["redis"].append(
                    loadgen(loadgen_binary, redis_url, connections, rates["redis"], SECONDS)
                )
            rows.append((connections, id_saturation, redis_saturation, rates, fixed))
        load_after = os.getloadavg()
    finally:
        if server is not None:
            server.terminate()
            server.wait(timeout=30)
        subprocess.run(
            [ROOT / "scripts/redis.sh", "stop"], env=redis_env, check=False, capture_output=True
        )
        subprocess.run(["rm", "-rf", str(work)], check=False)

    def ms(us):
        return f"{us / 1000:.2f}"

    print(
        f"\n{os.cpu_count()} cores; load average {load_before[0]:.1f} at the start, "
        f"{load_after[0]:.1f} at the end; {time.time() - started:.0f} s; "
        f"{TURNS} turns of {SECONDS:.0f} s at the rate, medians over the turns.\n"
    )
    print("| connections | what | saturated | rate (half) | p50 | p99 | p99.9 |")
    print("|---|---|---|---|---|---|---|")
    verdict = None
    for connections, id_saturation, redis_saturation, rates, fixed in rows:
        for name, label, saturation in (
            ("id", "`GET /v1/id`", id_saturation),
            ("redis", "Redis `INCR`", redis_saturation),
        ):
            cells = " | ".join(
                f"{ms(median(fixed[name], k))} ms" for k in ("p50_us", "p99_us", "p999_us")
            )
            print(
                f"| {connections} | {label} | {saturation:,.0f}/s | {rates[name]:,}/s | {cells} |"
            )
        if connections == 10:
            verdict = median(fixed["id"], "p99_us")
    if verdict is not None:
        met = "met" if verdict < GOAL_P99_US else "not met"
        print(
            f"\nGoal (p99 under 1 ms at 10 connections at half of saturation): {met} "
            f"(p99 {ms(verdict)} ms, the median over {TURNS} turns)."
        )


if __name__ == "__main__":
    main()
