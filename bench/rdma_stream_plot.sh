#!/usr/bin/env bash
# Draws one cell of bench/rdma_stream.sh runs as a PNG: per run, the median of conduit's
# repetitions over the median of the peer tool's (ib_write_bw, rstream, ...), one point per
# run, grouped by a label you give each run (e.g. the build or the options; no '=' in a
# label), with the group medians and the target as a dashed line.
#   bench/rdma_stream_plot.sh OUT.png CELL TARGET LABEL=RESULT_DIR [LABEL=RESULT_DIR ...]
# e.g. bench/rdma_stream_plot.sh docs/img/x.png zc_1M 0.95 before=bench/results/rdma_stream-A
# RESULT_DIR is one bench/results/rdma_stream-<date>/ (samples.csv: cell,tool,rep,value).
# A run may hold several conduit variants of the cell (tool names conduit-*): each is a
# point of its own, labelled LABEL/variant.
set -euo pipefail
[[ $# -ge 4 ]] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
png=$1 cell=$2 target=$3
shift 3
data=$(mktemp)
trap 'rm -f "$data"' EXIT
n=$(python3 - "$data" "$cell" "$@" <<'PY'
import csv, statistics, sys
out, cell, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
groups, order = {}, []
for arg in runs:
    label, d = arg.split("=", 1)
    by_tool = {}
    with open(f"{d}/samples.csv") as f:
        for row in csv.DictReader(f):
            if row["cell"] == cell and row["value"]:
                by_tool.setdefault(row["tool"], []).append(float(row["value"]))
    peers = [t for t in by_tool if not t.startswith("conduit")]
    if len(peers) != 1:
        sys.exit(f"{d}: cell {cell}: expected one peer tool, found {peers}")
    peer = statistics.median(by_tool[peers[0]])
    variants = sorted(t for t in by_tool if t.startswith("conduit"))
    for t in variants:
        g = label if len(variants) == 1 else f"{label}/{t.removeprefix('conduit-')}"
        if g not in order: order.append(g)
        groups.setdefault(g, []).append(statistics.median(by_tool[t]) / peer)
with open(out, "w") as f:
    for i, g in enumerate(order):
        for r in groups[g]:
            print(i, f'"{g}"', f"{r:.3f}", f"{statistics.median(groups[g]):.3f}", file=f)
print(len(order))
PY
)
gnuplot <<GP
set terminal pngcairo size $((300 + 160 * n)),420 font ",10" noenhanced
set output "$png"
set xrange [-0.5:$n - 0.5]
set grid ytics
set key bottom right
set title "$cell: conduit / peer tool, median of each run's repetitions"
set ylabel "conduit / peer (higher is better)"
set yrange [0.7:1.3]
set arrow 1 from -0.5,$target to $n - 0.5,$target nohead dt 2 lw 2 lc rgb "red"
set label 1 "target >= ${target}x" at -0.45,$target + 0.015 tc rgb "red"
plot "$data" using 1:3:xtic(2) with points pt 7 ps 1.2 lc rgb "#1f77b4" title "run", \
     "$data" using 1:4 with points pt 5 ps 2.2 lc rgb "black" title "median"
GP
echo "wrote $png"
