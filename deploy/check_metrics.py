#!/usr/bin/env python3
"""make test-deploy-metrics: the alert rules and the Grafana dashboard name only metrics the
server exports. The exported names are read from server/src/telemetry.rs (every name passed
to the `metrics` macros, and a histogram's _bucket/_sum/_count series) and, when a server URL
is given, from a live /metrics scrape too. The dashboard must parse as JSON, every panel must
have a query, and panel ids must be unique."""
import json
import re
import sys
import urllib.request
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
NAME = re.compile(r"\bclockflake_[a-z_]+\b")


def exported():
    source = (ROOT / "server/src/telemetry.rs").read_text()
    names = set(re.findall(r'"(clockflake_[a-z_]+)"', source))
    histograms = set(re.findall(r'histogram!\(\s*([A-Z_]+|"clockflake_[a-z_]+")', source))
    consts = dict(re.findall(r'const ([A-Z_]+): &str = "(clockflake_[a-z_]+)";', source))
    for h in histograms:
        base = consts.get(h, h.strip('"'))
        names |= {base + suffix for suffix in ("_bucket", "_sum", "_count")}
    return names


def scraped(url):
    text = urllib.request.urlopen(url, timeout=5).read().decode()
    return {line.split("{")[0].split(" ")[0] for line in text.splitlines()
            if line.startswith("clockflake_")}


def main():
    names = exported()
    failures = []
    if len(sys.argv) > 1:
        live = scraped(sys.argv[1])
        missing = live - names
        if missing:
            failures.append(f"exported but not found in telemetry.rs: {sorted(missing)}")
        names |= live
    rules = yaml.safe_load((ROOT / "deploy/prometheus/clockflake-rules.yml").read_text())
    used_rules = set()
    for group in rules["groups"]:
        for rule in group["rules"]:
            used_rules |= set(NAME.findall(rule["expr"]))
    dashboard = json.loads((ROOT / "deploy/grafana/clockflake-dashboard.json").read_text())
    used_dash = set()
    ids = [panel["id"] for panel in dashboard["panels"]]
    if len(ids) != len(set(ids)):
        failures.append("dashboard: duplicate panel ids")
    for panel in dashboard["panels"]:
        if not panel.get("targets"):
            failures.append(f"dashboard: panel {panel['title']!r} has no query")
        for target in panel.get("targets", []):
            used_dash |= set(NAME.findall(target["expr"]))
    passed = 0
    for where, used in (("alert rules", used_rules), ("dashboard", used_dash)):
        unknown = used - names
        if unknown:
            failures.append(f"{where}: metrics the server does not export: {sorted(unknown)}")
        else:
            print(f"ok   {where}: {len(used)} metric names, all exported")
            passed += 1
    for failure in failures:
        print("FAIL", failure)
    print(f"{passed} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
