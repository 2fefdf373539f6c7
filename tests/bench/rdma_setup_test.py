#!/usr/bin/env python3
"""The two tools behind bench/rdma_setup.sh at a few connections (ctest bench_rdma_setup).

conduit-cm-baseline (bare rdma_cm) sequentially and --concurrent, and conduit-fanin
--sequential over rdma://: each must bring up exactly the connections asked for and report
positive, ordered figures (min <= p50 <= max), so the benchmark cannot rot silently.
Without an RDMA device it skips (exit 77), unless CONDUIT_REQUIRE_RDMA=1 (the testbed).
"""
import glob
import json
import os
import subprocess
import sys

BARE, FANIN = sys.argv[1], sys.argv[2]
N = 4
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


def run(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    check(p.returncode == 0, f"{cmd}: exit {p.returncode}; stderr: {p.stderr.strip()}")
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    check(len(rows) == 1, f"{cmd}: {len(rows)} JSON lines, expected 1")
    return rows[0] if rows else {}


def check_stat(row, key, tag):
    st = row.get(key, {})
    check(0 < st.get("min", 0) <= st.get("p50", 0) <= st.get("max", 0),
          f"{tag}: {key} = {st} (expected 0 < min <= p50 <= max)")


# Bad input is refused before any device is touched.
for bad in (["-n", "0", "--addr", "1.2.3.4"], ["--send-depth", "8", "--addr", "1.2.3.4"], []):
    p = subprocess.run([BARE] + bad, capture_output=True, text=True, timeout=30)
    check(p.returncode != 0, f"{bad}: exit 0, expected a refusal")

if not glob.glob("/sys/class/infiniband/*") or not os.environ.get("CONDUIT_RDMA_ADDR"):
    if os.environ.get("CONDUIT_REQUIRE_RDMA") == "1":
        print("CONDUIT_REQUIRE_RDMA=1 but no RDMA device or CONDUIT_RDMA_ADDR", file=sys.stderr)
        sys.exit(1)
    print("no RDMA device; run in the testbed: testbed/run ctest -L rdma")
    sys.exit(77)
addr = os.environ["CONDUIT_RDMA_ADDR"]

for extra in ([], ["--concurrent"]):
    tag = "bare " + (" ".join(extra) or "sequential")
    r = run([BARE, "--addr", addr, "-n", str(N), "--timeout", "120", "--json"] + extra)
    check(r.get("conns") == N and r.get("send_depth") == 256 and r.get("recv_depth") == 256,
          f"{tag}: conns/depths {r}")
    for key in ("connect_accept_us", "resolve_addr_us", "resolve_route_us", "to_established_us"):
        check_stat(r, key, tag)
    check(r.get("wall_ms", 0) * 1000 >= r.get("connect_accept_us", {}).get("max", 1e18),
          f"{tag}: wall {r.get('wall_ms')} ms below the slowest connection")

r = run([FANIN, "--url", f"rdma://{addr}:0", "--sequential", "-c", str(N), "--timeout", "120", "--json"])
check(r.get("conns") == N and r.get("sequential") is True, f"fanin --sequential: {r}")
check_stat(r, "connect_accept_us", "fanin --sequential")

for f in failures:
    print("FAIL:", f, file=sys.stderr)
print(f"{'FAILED' if failures else 'ok'}: {len(failures)} failures")
sys.exit(1 if failures else 0)
