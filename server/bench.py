#!/usr/bin/env python3
"""make bench-server: oha against clockflake-server on loopback (a benchmark, not a test).

Starts the given server binary on a temp file:// lease with the hidden constant route, then:
  1. GET /bench/constant at saturation (what the HTTP stack alone does: axum, hyper, tokio);
  2. GET /v1/id at saturation;
  3. GET /v1/id at half the saturated rate (latency with headroom);
  4. GET /v1/ids?count=4096 at saturation (ids per second against the layout's cap).
Prints a Markdown table for BENCHMARKS.md. The server and oha share the machine's cores.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

SECONDS = int(os.environ.get("BENCH_SECONDS", "10"))
CONNECTIONS = int(os.environ.get("BENCH_CONNECTIONS", "32"))
CAP_PER_SECOND = 4096 * 1000  # clockseq: 4096 ids per 1 ms tick per worker id


def oha(url, *extra):
    out = subprocess.run(
        ["oha", "-z", f"{SECONDS}s", "--no-tui", "--output-format", "json", *extra, url],
        check=True, capture_output=True, text=True,
    ).stdout
    report = json.loads(out)
    codes = report.get("statusCodeDistribution", {})
    if set(codes) - {"200"}:
        sys.exit(f"non-200 answers from {url}: {codes}")
    p = report["latencyPercentiles"]
    return {
        "rps": report["summary"]["requestsPerSec"],
        "p50": p["p50"] * 1e3, "p99": p["p99"] * 1e3, "p999": p["p99.9"] * 1e3,
    }


def main():
    binary = sys.argv[1]
    if not shutil.which("oha"):
        sys.exit("oha not found: make setup-oha")
    lease_dir = tempfile.mkdtemp(prefix="clockflake-bench-")
    server = subprocess.Popen(
        [binary, "--lease", f"file://{lease_dir}?app=bench", "--listen", "127.0.0.1:0",
         "--bench-constant-route"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        env={**os.environ, "RUST_LOG": "warn"},
    )
    try:
        base = server.stdout.readline().strip().rsplit(" ", 1)[-1]
        time.sleep(0.5)
        conns = ["-c", str(CONNECTIONS)]
        rows = []
        constant = oha(f"{base}/bench/constant", *conns)
        rows.append(("`GET /bench/constant` (axum, constant body), saturated", constant, None))
        single = oha(f"{base}/v1/id", *conns)
        rows.append(("`GET /v1/id`, saturated", single, None))
        half = int(single["rps"] / 2)
        rows.append((f"`GET /v1/id` at half that ({half}/s)",
                     oha(f"{base}/v1/id", *conns, "-q", str(half), "--latency-correction"), None))
        batch = oha(f"{base}/v1/ids?count=4096", "-c", "4")
        rows.append(("`GET /v1/ids?count=4096`, saturated (4 connections)", batch, batch["rps"] * 4096))
        print(f"{SECONDS} s per run, {CONNECTIONS} connections unless said, "
              f"server and oha on the same {os.cpu_count()} cores\n")
        print("| run | requests/s | p50 ms | p99 ms | p99.9 ms | ids/s |")
        print("|---|---:|---:|---:|---:|---:|")
        for name, r, ids in rows:
            ids_text = f"{ids:,.0f} ({100 * ids / CAP_PER_SECOND:.1f}% of the cap)" if ids else ""
            print(f"| {name} | {r['rps']:,.0f} | {r['p50']:.3f} | {r['p99']:.3f} | "
                  f"{r['p999']:.3f} | {ids_text} |")
        print(f"\n`/v1/id` reaches {100 * single['rps'] / constant['rps']:.0f}% of the constant "
              f"handler's requests/s.")
    finally:
        server.terminate()
        server.wait(timeout=20)
        shutil.rmtree(lease_dir, ignore_errors=True)


if __name__ == "__main__":
    main()
