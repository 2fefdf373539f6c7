#!/usr/bin/env bash
# Draws bench/rdma_setup.sh runs as a PNG, one point per run, grouped by a label you give
# each run (e.g. the build it ran; no '=' in a label), with the group medians and the targets:
#   left   part 1: conduit rdma:// / bare rdma_cm, the median of each run's p50s (<= 1.5x)
#   right  part 2, for runs that have it (--old): pre-arena / conduit setup of N at once,
#          the medians of the run (>= 5x)
#   bench/rdma_setup_plot.sh OUT.png LABEL=RESULT_DIR [LABEL=RESULT_DIR ...]
# RESULT_DIR is one bench/results/rdma_setup-<date>/ (conduit.txt and bare.txt: a p50 per
# rep; fanin-old.txt and fanin-new.txt: a setup time per rep).
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
png=$1
shift
d1=$(mktemp) d2=$(mktemp)
trap 'rm -f "$d1" "$d2"' EXIT
n=$(python3 - "$d1" "$d2" "$@" <<'PY'
import os, statistics, sys
out1, out2, runs = sys.argv[1], sys.argv[2], sys.argv[3:]
def med(d, f):
    p = f"{d}/{f}"
    if not os.path.exists(p): return None
    xs = [float(x) for x in open(p) if x.strip()]
    return statistics.median(xs) if xs else None
parts = ({}, {})
order = []
for arg in runs:
    label, d = arg.split("=", 1)
    if label not in order: order.append(label)
    c, b = med(d, "conduit.txt"), med(d, "bare.txt")
    if c and b: parts[0].setdefault(label, []).append(c / b)
    o, n = med(d, "fanin-old.txt"), med(d, "fanin-new.txt")
    if o and n: parts[1].setdefault(label, []).append(o / n)
for groups, path in zip(parts, (out1, out2)):
    with open(path, "w") as f:
        for i, label in enumerate(order):
            for r in groups.get(label, []):
                print(i, f'"{label}"', f"{r:.3f}", f"{statistics.median(groups[label]):.3f}", file=f)
print(len(order))  # groups: the x axis
PY
)
has2=$([[ -s $d2 ]] && echo 1 || echo 0)
gnuplot <<GP
set terminal pngcairo size $((has2 ? 1200 : 760)),420 font ",10" noenhanced
set output "$png"
set multiplot layout 1,$((has2 ? 2 : 1))
set xrange [-0.5:$n - 0.5]
set grid ytics
set key bottom right
set title "part 1: connect+accept p50, conduit / bare rdma_cm (30 sequential)"
set ylabel "conduit / bare (lower is better)"
set yrange [0.4:2]
set arrow 1 from -0.5,1.5 to $n - 0.5,1.5 nohead dt 2 lw 2 lc rgb "red"
set label 1 "target <= 1.5x" at -0.45,1.55 tc rgb "red"
plot "$d1" using 1:3:xtic(2) with points pt 7 ps 1.2 lc rgb "#1f77b4" title "run", \
     "$d1" using 1:4 with points pt 5 ps 2.2 lc rgb "black" title "median"
if ($has2) {
  set title "part 2: setup of 300 at once, pre-arena conduit / conduit"
  set ylabel "old / new (higher is better)"
  set yrange [0:*]
  set arrow 1 from -0.5,5 to $n - 0.5,5 nohead dt 2 lw 2 lc rgb "red"
  set label 1 "target >= 5x" at -0.45,5.2 tc rgb "red"
  plot "$d2" using 1:3:xtic(2) with points pt 7 ps 1.2 lc rgb "#2ca02c" title "run", \
       "$d2" using 1:4 with points pt 5 ps 2.2 lc rgb "black" title "median"
}
unset multiplot
GP
echo "wrote $png"
