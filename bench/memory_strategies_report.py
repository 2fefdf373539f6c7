#!/usr/bin/env python3
"""Tables and plot data from conduit-memory-strategies --json output (one object per case).

  memory_strategies_report.py RAW.jsonl [--dat DIR]

Per size and strategy: the median over the repetitions with min..max of messages/s and of
CPU time per message (getrusage user+system over each side's timed section, divided by the
messages), client (sender) and server (receiver) apart; the time per message each side
spent in the strategy's own memory operations (register+deregister, the copy, or taking and
returning the pool block: cycle counter around those calls); the registrations each side made
per message in its timed section; whether every checksum matched.  Then, per size, whether
the expected order (pool >= staging >= register in messages/s; the reverse in CPU and in
memory-operation time per message) holds.  getrusage's user/system split is tick-sampled
(only the sum is exact), so the user part is left to the raw data.  With --dat, DIR/strategies.dat holds the
medians for gnuplot.
"""
import json
import statistics
import sys
from collections import defaultdict

ORDER = ["register", "staging", "pool"]


def size_name(n):
    if n >= 1 << 20 and n % (1 << 20) == 0:
        return f"{n >> 20} MiB"
    if n >= 1 << 10 and n % (1 << 10) == 0:
        return f"{n >> 10} KiB"
    return f"{n} B"


def fmt(v):
    if v >= 1000:
        return f"{v:.0f}"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def cell(values):
    if not values:
        return "n/a"
    return f"{fmt(statistics.median(values))} ({fmt(min(values))}..{fmt(max(values))})"


def per_msg_us(side, key):
    m = side["messages"]
    if m == 0:
        return 0.0
    if key == "cpu":
        return (side["user_ns"] + side["sys_ns"]) / 1e3 / m
    return side[key] / 1e3 / m


def main(argv):
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    dat_dir = None
    if "--dat" in argv:
        dat_dir = argv[argv.index("--dat") + 1]
    rows = []
    with open(argv[1]) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    if not rows:
        print("no results", file=sys.stderr)
        return 1
    cases = defaultdict(list)
    for r in rows:
        cases[(r["size"], r["strategy"])].append(r)
    sizes = sorted({r["size"] for r in rows})
    strategies = [s for s in ORDER if any(k[1] == s for k in cases)]
    reps = max(len(v) for v in cases.values())
    bad = [r for r in rows if not r["checksum_ok"]]

    print(f"{len(rows)} cases, {reps} repetitions, window {rows[0]['window']}, poll {rows[0]['poll']}; "
          f"checksums: {'all match' if not bad else f'{len(bad)} MISMATCHED'}")
    print()
    print("| size | strategy | msgs/s | client CPU µs/msg | server CPU µs/msg | client mem-op µs/msg "
          "| server mem-op µs/msg | reg/msg client, server | msgs/s vs staging |")
    print("|---|---|---|---|---|---|---|---|---|")
    med = {}
    for n in sizes:
        base = None
        if (n, "staging") in cases:
            base = statistics.median(r["msgs_per_s"] for r in cases[(n, "staging")])
        for s in strategies:
            rs = cases.get((n, s), [])
            if not rs:
                continue
            rate = [r["msgs_per_s"] for r in rs]
            c_cpu = [per_msg_us(r["client"], "cpu") for r in rs]
            c_usr = [per_msg_us(r["client"], "strategy_ns") for r in rs]
            s_cpu = [per_msg_us(r["server"], "cpu") for r in rs]
            s_usr = [per_msg_us(r["server"], "strategy_ns") for r in rs]
            msgs = sum(r["messages"] for r in rs)
            reg_c = sum(r["client"]["reg_calls"] for r in rs) / msgs
            reg_s = sum(r["server"]["reg_calls"] for r in rs) / msgs
            ratio = f"{statistics.median(rate) / base:.2f}×" if base else ""
            med[(n, s)] = (statistics.median(rate), statistics.median(c_cpu), statistics.median(s_cpu),
                           statistics.median(c_usr), statistics.median(s_usr))
            print(f"| {size_name(n)} | {s} | {cell(rate)} | {cell(c_cpu)} | {cell(s_cpu)} | {cell(c_usr)} "
                  f"| {cell(s_usr)} | {reg_c:.2f}, {reg_s:.2f} | {ratio} |")
    print()
    if all(s in strategies for s in ORDER):
        print("Expected order (pool >= staging >= register in msgs/s; pool <= staging <= register in CPU and "
              "mem-op µs/msg):")
        for n in sizes:
            if not all((n, s) in med for s in ORDER):
                continue
            r = {s: med[(n, s)] for s in ORDER}
            notes = []
            if not r["pool"][0] >= r["staging"][0] >= r["register"][0]:
                notes.append("msgs/s " + " ".join(f"{s} {fmt(r[s][0])}" for s in ORDER))
            for label, i in (("client CPU", 1), ("server CPU", 2), ("client mem-op", 3), ("server mem-op", 4)):
                if not r["pool"][i] <= r["staging"][i] <= r["register"][i]:
                    notes.append(f"{label} " + " ".join(f"{s} {fmt(r[s][i])}" for s in ORDER))
            print(f"- {size_name(n)}: " + ("holds" if not notes else "does NOT hold: " + "; ".join(notes)))
    if dat_dir:
        with open(f"{dat_dir}/strategies.dat", "w") as f:
            f.write("# size label " + " ".join(f"{s}_rate {s}_cpu {s}_memop" for s in ORDER)
                    + "  (cpu, memop: client+server µs/msg)\n")
            for n in sizes:
                vals = []
                for s in ORDER:
                    m = med.get((n, s))
                    vals += [f"{m[0]:.2f}", f"{m[1] + m[2]:.2f}", f"{m[3] + m[4]:.3f}"] if m else ["NaN"] * 3
                f.write(f"{n} \"{size_name(n)}\" " + " ".join(vals) + "\n")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
