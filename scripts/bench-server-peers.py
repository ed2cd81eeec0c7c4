#!/usr/bin/env python3
"""clockflake-server GET /v1/id against what users run instead, in one run on loopback:
Redis INCR (redis-benchmark) and PostgreSQL nextval (pgbench), each with the same number of
connections, in turns, unpinned and with the load generator pinned to another core than the
server (taskset). A benchmark, not a test; prints Markdown tables for BENCHMARKS.md.

  scripts/bench-server-peers.py [SERVER_BINARY]   (default: target/release/clockflake-server)

Environment: BENCH_SECONDS (10 per run), BENCH_CONNECTIONS (32), BENCH_ROUNDS (3). Starts a
throwaway redis-server (no persistence, as an id counter usually runs) and PostgreSQL
(scripts/postgres.sh), installed from Debian if missing, and Debian's wrk, redis-benchmark and
pgbench; stops them all at the end.
Medians over the rounds; each run's p50/p99 is the load generator's own.
"""
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SECONDS = int(os.environ.get("BENCH_SECONDS", "10"))
CONNECTIONS = int(os.environ.get("BENCH_CONNECTIONS", "32"))
ROUNDS = int(os.environ.get("BENCH_ROUNDS", "3"))
CORES = os.cpu_count() or 1


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout


def ensure_tools():
    if shutil.which("wrk") and shutil.which("pgbench") and shutil.which("redis-benchmark"):
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    subprocess.run(sudo + ["apt-get", "-o", "DPkg::Lock::Timeout=600", "update", "-qq"], check=True)
    subprocess.run(sudo + ["apt-get", "-o", "DPkg::Lock::Timeout=600", "install", "-y", "-qq",
                           "--no-install-recommends", "wrk", "postgresql-contrib-15",
                           "redis-server", "redis-tools"],
                   check=True, env={**os.environ, "DEBIAN_FRONTEND": "noninteractive"})


def seconds_of(text):
    value, unit = re.fullmatch(r"([\d.]+)(us|ms|s|m)", text).groups()
    return float(value) * {"us": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0}[unit]


def pin(pids, cpus):
    for pid in pids:
        subprocess.run(["taskset", "-a", "-p", "-c", cpus, str(pid)], check=True,
                       capture_output=True)


def load_prefix(pinned):
    # The load generator on the last core; the servers on the others.
    return ["taskset", "-c", str(CORES - 1)] if pinned else []


def run_wrk(url, pinned):
    out = sh(*load_prefix(pinned), "wrk", "-t", "2", "-c", str(CONNECTIONS), "-d", f"{SECONDS}s",
             "--latency", url)
    if "Non-2xx" in out or "Socket errors" in out:
        sys.exit(f"wrk saw errors:\n{out}")
    dist = dict(re.findall(r"^\s+(50|99)%\s+(\S+)$", out, re.M))
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    return {"rps": rps, "p50": seconds_of(dist["50"]) * 1e3, "p99": seconds_of(dist["99"]) * 1e3}


def run_redis(port, password, rps_hint, pinned):
    count = max(100_000, int(rps_hint * SECONDS))
    out = sh(*load_prefix(pinned), "redis-benchmark", "-h", "127.0.0.1", "-p", str(port),
             "-a", password, "-c", str(CONNECTIONS), "-n", str(count), "-t", "incr", "--csv")
    row = [line for line in out.splitlines() if line.startswith('"INCR"')][0]
    fields = [float(f.strip('"')) for f in row.split(",")[1:]]
    # rps, avg, min, p50, p95, p99, max (ms)
    return {"rps": fields[0], "p50": fields[3], "p99": fields[5]}


def run_pgbench(url, pinned, workdir):
    script = workdir / "nextval.sql"
    script.write_text("SELECT nextval('ids');\n")
    logdir = workdir / f"pglog-{time.monotonic_ns()}"
    logdir.mkdir()
    out = sh(*load_prefix(pinned), "pgbench", "-n", "-M", "prepared", "-c", str(CONNECTIONS),
             "-j", "2", "-T", str(SECONDS), "-f", str(script), "-l",
             "--log-prefix", str(logdir / "log"), url)
    tps = float(re.search(r"tps = ([\d.]+) \(without initial connection time\)", out).group(1))
    latencies = sorted(int(line.split()[2]) for log in logdir.iterdir()
                       for line in log.read_text().splitlines())
    shutil.rmtree(logdir)
    pick = lambda q: latencies[min(len(latencies) - 1, int(q * len(latencies)))] / 1e3
    return {"rps": tps, "p50": pick(0.50), "p99": pick(0.99)}


def median(runs, key):
    return statistics.median(run[key] for run in runs)


def main():
    binary = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "target/release/clockflake-server")
    ensure_tools()
    work = Path(tempfile.mkdtemp(prefix="clockflake-peers-"))
    work.chmod(0o755)  # the postgres user reaches its cluster below it
    env = {**os.environ, "CLOCKFLAKE_PG_DIR": str(work / "pg")}
    started = []
    redis = None
    try:
        subprocess.run([ROOT / "scripts/postgres.sh", "start"], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        pg_url = sh(str(ROOT / "scripts/postgres.sh"), "url", env=env).strip()
        sh("psql", "-q", pg_url, "-c", "CREATE SEQUENCE IF NOT EXISTS ids")
        # Redis as an id counter is usually run without an fsync per write: no AOF, no RDB.
        redis_port = int(sh("python3", "-c", "import socket; s=socket.socket(); "
                            "s.bind(('127.0.0.1', 0)); print(s.getsockname()[1])"))
        redis_password = "clockflake-bench"
        redis = subprocess.Popen(
            ["redis-server", "--bind", "127.0.0.1", "--port", str(redis_port),
             "--requirepass", redis_password, "--save", "", "--appendonly", "no",
             "--dir", str(work)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if subprocess.run(["redis-cli", "-p", str(redis_port), "-a", redis_password,
                               "--no-auth-warning", "ping"], capture_output=True).returncode == 0:
                break
            time.sleep(0.1)
        all_cpus, server_cpus = f"0-{CORES - 1}", f"0-{max(0, CORES - 2)}"
        # Two servers (worker ids 0 and 1 of one file:// pool): one on every core with a
        # thread per core, one pinned from its start to the servers' cores with a thread per
        # core it has (a runtime with more threads than cores is its own tail).
        servers_http = {}
        for pinned in (False, True):
            prefix = ["taskset", "-c", server_cpus] if pinned else []
            threads = str(max(1, CORES - 1)) if pinned else "0"
            process = subprocess.Popen(
                [*prefix, binary, "--lease", f"file://{work}/leases?app=peers",
                 "--listen", "127.0.0.1:0", "--threads", threads],
                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                env={**os.environ, "RUST_LOG": "warn"})
            started.append(process)
            servers_http[pinned] = process.stdout.readline().strip().rsplit(" ", 1)[-1]
        time.sleep(0.5)
        postmaster = int((work / "pg/data/postmaster.pid").read_text().split()[0])
        redis_pid = redis.pid
        servers = [redis_pid, postmaster]

        names = ["clockflake-server `GET /v1/id` (wrk)", "Redis `INCR` (redis-benchmark)",
                 "PostgreSQL `nextval` (pgbench, prepared)"]
        results = {(name, pinned): [] for name in names for pinned in (False, True)}
        redis_hint = 50_000.0
        for round_no in range(ROUNDS):
            for pinned in (False, True):
                pin(servers, server_cpus if pinned else all_cpus)
                for name in names:
                    if name.startswith("clockflake"):
                        r = run_wrk(f"{servers_http[pinned]}/v1/id", pinned)
                    elif name.startswith("Redis"):
                        r = run_redis(redis_port, redis_password, redis_hint, pinned)
                        redis_hint = r["rps"]
                    else:
                        r = run_pgbench(pg_url, pinned, work)
                    results[(name, pinned)].append(r)
                    print(f"round {round_no + 1} {'pinned' if pinned else 'shared'}: {name}: "
                          f"{r['rps']:,.0f}/s p50 {r['p50']:.3f} ms p99 {r['p99']:.3f} ms",
                          file=sys.stderr)
        pin(servers, all_cpus)

        print(f"{ROUNDS} rounds of {SECONDS} s per run, {CONNECTIONS} connections, medians; "
              f"{CORES} cores. Load generators: wrk -t2, redis-benchmark, pgbench -j2.\n")
        for pinned in (False, True):
            title = (f"Load generator pinned to core {CORES - 1}, servers to the other cores "
                     f"(taskset)" if pinned else "Server and load generator share every core")
            print(f"**{title}**\n")
            print("| service | requests/s | p50 ms | p99 ms | requests/s vs Redis | p99 vs Redis |")
            print("|---|---:|---:|---:|---:|---:|")
            redis_runs = results[(names[1], pinned)]
            for name in names:
                runs = results[(name, pinned)]
                rps, p50, p99 = median(runs, "rps"), median(runs, "p50"), median(runs, "p99")
                print(f"| {name} | {rps:,.0f} | {p50:.3f} | {p99:.3f} | "
                      f"{rps / median(redis_runs, 'rps'):.2f}x | {p99 / median(redis_runs, 'p99'):.2f}x |")
            print()
    finally:
        for process in started:
            process.terminate()
            process.wait(timeout=20)
        if redis:
            redis.kill()  # nothing to keep
            redis.wait(timeout=20)
        subprocess.run([ROOT / "scripts/postgres.sh", "stop"], env=env)
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
