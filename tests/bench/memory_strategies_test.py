#!/usr/bin/env python3
"""conduit-memory-strategies end to end at tiny counts (ctest bench_memory_strategies).

Without an RDMA device it skips (exit 77), unless CONDUIT_REQUIRE_RDMA=1 (the testbed), where
a missing device fails.  Checks: bad flags are refused; every (size, strategy) case completes
with exactly the messages asked for on both sides, positive rates and CPU times, matching
checksums; `register` registers once per message on the sender and once per advertised
buffer on the receiver (window + messages - 1), `staging` and `pool` register nothing in the
timed section; `staging` copies every byte once on each side, the others copy nothing.
"""
import glob
import json
import os
import subprocess
import sys

BIN = sys.argv[1]
SIZES = [64, 4096, 65536, 1 << 20]
COUNT = 12
WINDOW = 4
failures = []


def check(cond, what):
    if not cond:
        failures.append(what)


# Bad input is refused before any device is touched.
for bad in (["--sizes", "63"], ["--sizes", "8M"], ["--strategies", "mmap"], ["-w", "0"], ["-n", "-1"]):
    p = subprocess.run([BIN] + bad, capture_output=True, text=True, timeout=30)
    check(p.returncode == 2, f"{bad}: exit {p.returncode}, expected 2 (stderr: {p.stderr.strip()})")

if not glob.glob("/sys/class/infiniband/*"):
    if os.environ.get("CONDUIT_REQUIRE_RDMA") == "1":
        print("CONDUIT_REQUIRE_RDMA=1 but no RDMA device", file=sys.stderr)
        sys.exit(1)
    print("no RDMA device; run in the testbed: testbed/run ctest -L rdma")
    sys.exit(77)

cmd = [BIN, "--json", "--sizes", ",".join(map(str, SIZES)), "-n", str(COUNT), "-D", "60", "-w", str(WINDOW),
       "--timeout", "240"]
dev = os.environ.get("CONDUIT_RDMA_DEVICE")
if dev:
    cmd += ["-d", dev]
p = subprocess.run(cmd, capture_output=True, text=True, timeout=280)
check(p.returncode == 0, f"exit {p.returncode}; stderr: {p.stderr.strip()}")
rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
seen = {(r["size"], r["strategy"]) for r in rows}
for n in SIZES:
    for s in ("register", "staging", "pool"):
        check((n, s) in seen, f"no result for {s} at {n} B")
check(len(rows) == len(SIZES) * 3, f"{len(rows)} results, expected {len(SIZES) * 3}")

for r in rows:
    tag = f"{r['strategy']} {r['size']} B"
    c, s = r["client"], r["server"]
    check(r["checksum_ok"] is True, f"{tag}: checksum_ok is {r['checksum_ok']}")
    check(c["checksum"] == s["checksum"], f"{tag}: checksums {c['checksum']} != {s['checksum']}")
    check(r["messages"] == COUNT and c["messages"] == COUNT and s["messages"] == COUNT,
          f"{tag}: messages {r['messages']} / {c['messages']} / {s['messages']}, expected {COUNT}")
    check(c["bytes"] == COUNT * r["size"] and s["bytes"] == COUNT * r["size"], f"{tag}: byte counts")
    check(r["msgs_per_s"] > 0 and r["seconds"] > 0, f"{tag}: rate {r['msgs_per_s']} over {r['seconds']} s")
    check(r["mb_per_s"] > 0, f"{tag}: MB/s {r['mb_per_s']}")
    for side, name in ((c, "client"), (s, "server")):
        check(side["user_ns"] + side["sys_ns"] > 0, f"{tag}: {name} CPU time is zero")
        check(side["wall_ns"] > 0, f"{tag}: {name} wall time is zero")
    check(COUNT <= c["credits"] <= s["credits"] <= COUNT + WINDOW - 1,
          f"{tag}: credits received {c['credits']}, sent {s['credits']}")
    if r["strategy"] == "register":
        check(c["reg_calls"] == COUNT, f"{tag}: client registrations {c['reg_calls']}, expected {COUNT}")
        want = WINDOW + COUNT - 1  # every advertised buffer: the first window, then one per message but the last
        check(s["reg_calls"] == want, f"{tag}: server registrations {s['reg_calls']}, expected {want}")
    else:
        check(c["reg_calls"] == 0 and s["reg_calls"] == 0,
              f"{tag}: registrations in the timed section {c['reg_calls']} / {s['reg_calls']}, expected none")
    want_copies = COUNT * r["size"] if r["strategy"] == "staging" else 0
    check(c["copies"] == want_copies and s["copies"] == want_copies,
          f"{tag}: copied {c['copies']} / {s['copies']} bytes, expected {want_copies}")

# Spin mode, one size, and the text table's verdict column.
p = subprocess.run([BIN, "--sizes", "4K", "-n", str(COUNT), "-D", "60", "--poll", "spin", "--timeout", "120"]
                   + (["-d", dev] if dev else []), capture_output=True, text=True, timeout=150)
check(p.returncode == 0, f"spin: exit {p.returncode}; stderr: {p.stderr.strip()}")
check(p.stdout.count(" match") == 3 and "MISMATCH" not in p.stdout, f"spin: table\n{p.stdout}")

if failures:
    print("\n".join("FAIL: " + f for f in failures), file=sys.stderr)
    print(p.stdout, file=sys.stderr)
    sys.exit(1)
print(f"ok: {len(rows)} cases, checksums match")
