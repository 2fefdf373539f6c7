#!/usr/bin/env bash
# Draws bench/kv_vs_redis.sh's CSV (every run) as a PNG: per TCP cell, conduit-kv's rps over
# redis-server's and redis-server's server CPU per request over conduit-kv's (medians).
#   bench/kv_vs_redis_plot.sh RESULTS.csv OUT.png
set -euo pipefail
csv=$1 png=$2
dat=$(mktemp)
trap 'rm -f "$dat"' EXIT
python3 - "$csv" > "$dat" <<'PY'
import csv, statistics, sys
rows = [r for r in csv.DictReader(open(sys.argv[1])) if r.get("wall_s")]
def med(server, c, p, d, test, f):
    v = [f(r) for r in rows if r["server"] == server and (r["clients"], r["pipeline"], r["size"], r["test"]) == (c, p, d, test)]
    return statistics.median(v) if v else None
rps = lambda r: float(r["rps"])
cpu = lambda r: float(r["server_cpu_s"]) * 1e6 / (float(r["rps"]) * float(r["wall_s"]))
print('cell "rps: conduit-kv / redis-server" "server CPU per request: redis-server / conduit-kv"')
cells = [(c, p, d, t) for c in ("1", "50") for p in ("1", "16") for d in ("3", "1024") for t in ("SET", "GET")]
cells += [(c, p, "3", t) for c, p in (("1", "1"), ("50", "16")) for t in ("LPUSH", "LPOP", "SADD", "ZADD", "HSET", "MSET (10 keys)")]
for c, p, d, t in cells:
    rr, kr = med("redis", c, p, d, t, rps), med("conduit-kv", c, p, d, t, rps)
    rc, kc = med("redis", c, p, d, t, cpu), med("conduit-kv", c, p, d, t, cpu)
    if None in (rr, kr, rc, kc) or kc == 0:
        continue
    print(f'"-c{c} -P{p} -d{d} {t.split()[0]}" {kr / rr:.3f} {rc / kc:.3f}')
PY
gnuplot <<GP
set terminal pngcairo size 1200,520 noenhanced
set output "$png"
set title "conduit-kv vs redis-server under redis-benchmark (medians; > 1 = conduit-kv ahead)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key inside top left autotitle columnheader
set grid ytics
set yrange [0:2]
set arrow from graph 0, first 1 to graph 1, first 1 nohead dt 2 lw 1.5
set xtics rotate by -55 left scale 0 font ",9"
set bmargin 7
plot for [i=2:3] "$dat" using i:xtic(1)
GP
