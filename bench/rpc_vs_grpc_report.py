#!/usr/bin/env python3
"""Summarises bench/rpc_vs_grpc.sh's raw.jsonl (and guest/*.jsonl): medians with min..max
per cell, the PASS/MISS target lines, a markdown table (summary.md) and a gnuplot script
(plot.gp -> rpc_vs_grpc_qps.png)."""
import collections, json, os, statistics, sys

out = sys.argv[1]
rows = [json.loads(l) for l in open(os.path.join(out, "raw.jsonl")) if l.strip()]
cells = collections.defaultdict(list)
for r in rows:
    cells[(r["mode"], r["transport"], r["size"], r["concurrency"])].append(r)

def med(key, k):
    v = [x[k] for x in cells.get(key, [])]
    return (statistics.median(v), min(v), max(v)) if v else None

def fmt(m, d=0):
    if m is None:
        return "-"
    return f"{m[0]:.{d}f} ({m[1]:.{d}f}..{m[2]:.{d}f})"

def size_name(s):
    return f"{s >> 20} MiB" if s >= 1 << 20 else f"{s >> 10} KiB" if s >= 1024 else f"{s} B"

lines = []
modes = sorted({k[0] for k in cells}, key=lambda m: (m != "default", m))
sizes = sorted({k[2] for k in cells})
concs = sorted({k[3] for k in cells})
verdicts = []
for mode in modes:
    lines.append(f"\n### {mode}\n")
    lines.append("| size | conc | conduit tcp QPS | gRPC QPS | ratio | conduit shm QPS | conduit tcp p50 µs | gRPC p50 µs | shm p50 µs |")
    lines.append("|---|---|---|---|---|---|---|---|---|")
    for s in sizes:
        for c in concs:
            t, g, sh = (med((mode, x, s, c), "qps") for x in ("tcp", "grpc", "shm"))
            tp, gp, sp = (med((mode, x, s, c), "p50_us") for x in ("tcp", "grpc", "shm"))
            ratio = f"{t[0] / g[0]:.2f}x" if t and g and g[0] > 0 else "-"
            lines.append(f"| {size_name(s)} | {c} | {fmt(t)} | {fmt(g)} | {ratio} | {fmt(sh)} | {fmt(tp, 1)} | {fmt(gp, 1)} | {fmt(sp, 1)} |")
            if t and g and s <= 4096:
                r = t[0] / g[0]
                verdicts.append(f"{'PASS' if r >= 3 else 'MISS'} {mode} {size_name(s)} c={c}: conduit tcp QPS {r:.2f}x gRPC (target >= 3x)")
            if tp and gp and c == 1:
                r = tp[0] / gp[0]
                verdicts.append(f"{'PASS' if r <= 0.5 else 'MISS'} {mode} {size_name(s)} c=1: conduit tcp p50 {r:.2f}x gRPC (target <= 0.5x)")
            if sh and t and c == 1:
                r = sh[0] / t[0]
                verdicts.append(f"{'PASS' if r >= 2 else 'MISS'} {mode} {size_name(s)} c=1: conduit shm QPS {r:.2f}x conduit tcp (target >= 2x)")

guest = os.path.join(out, "guest")
if os.path.isdir(guest):
    g = collections.defaultdict(list)
    for t in ("tcp", "rdma"):
        p = os.path.join(guest, f"guest-{t}.jsonl")
        if os.path.exists(p):
            for l in open(p):
                if l.strip():
                    r = json.loads(l)
                    g[(t, r["size"], r["concurrency"])].append(r)
    if g:
        lines.append("\n### Soft-RoCE guest: rdma:// vs tcp://\n")
        lines.append("| size | conc | tcp QPS | rdma QPS | rdma/tcp | tcp p50 µs | rdma p50 µs |")
        lines.append("|---|---|---|---|---|---|---|")
        for s in sorted({k[1] for k in g}):
            for c in sorted({k[2] for k in g}):
                def gm(t, k):
                    v = [x[k] for x in g.get((t, s, c), [])]
                    return (statistics.median(v), min(v), max(v)) if v else None
                tq, rq = gm("tcp", "qps"), gm("rdma", "qps")
                ratio = f"{rq[0] / tq[0]:.2f}x" if tq and rq and tq[0] > 0 else "-"
                lines.append(f"| {size_name(s)} | {c} | {fmt(tq)} | {fmt(rq)} | {ratio} | {fmt(gm('tcp', 'p50_us'), 1)} | {fmt(gm('rdma', 'p50_us'), 1)} |")

text = "\n".join(lines) + "\n\n```\n" + "\n".join(verdicts) + "\n```\n"
open(os.path.join(out, "summary.md"), "w").write(text)
print(text)

# gnuplot: QPS by payload size at concurrency 1 and the highest concurrency, default mode.
mode = modes[0] if modes else "default"
with open(os.path.join(out, "qps.dat"), "w") as f:
    f.write("# size tcp_c1 grpc_c1 shm_c1 tcp_cmax grpc_cmax shm_cmax\n")
    for s in sizes:
        vals = []
        for c in (concs[0], concs[-1]):
            for t in ("tcp", "grpc", "shm"):
                m = med((mode, t, s, c), "qps")
                vals.append(f"{m[0]:.0f}" if m else "NaN")
        f.write(f"{s} " + " ".join(vals[0:3]) + " " + " ".join(vals[3:6]) + "\n")
with open(os.path.join(out, "plot.gp"), "w") as f:
    f.write(f"""set terminal pngcairo size 900,520
set output '{out}/rpc_vs_grpc_qps.png'
set title 'echo RPC, loopback, {mode} threading: median QPS (higher is better)'
set logscale xy
set xlabel 'payload bytes'
set ylabel 'calls per second'
set key outside right
set grid
plot '{out}/qps.dat' u 1:2 w lp t 'conduit tcp c={concs[0]}', '' u 1:3 w lp t 'gRPC c={concs[0]}', '' u 1:4 w lp t 'conduit shm c={concs[0]}', \\
     '' u 1:5 w lp dt 2 t 'conduit tcp c={concs[-1]}', '' u 1:6 w lp dt 2 t 'gRPC c={concs[-1]}', '' u 1:7 w lp dt 2 t 'conduit shm c={concs[-1]}'
""")
