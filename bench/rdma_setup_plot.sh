#!/usr/bin/env bash
# Draws bench/rdma_setup.sh runs (part 1) as a PNG: conduit rdma:// / bare rdma_cm, the
# median of each run's p50s, one point per run, grouped by a label you give each run
# (e.g. the rx_initial it ran with), with the group medians and the 1.5x target.
#   bench/rdma_setup_plot.sh OUT.png LABEL=RESULT_DIR [LABEL=RESULT_DIR ...]
# RESULT_DIR is one bench/results/rdma_setup-<date>/ (conduit.txt and bare.txt: a p50 per rep).
set -euo pipefail
[[ $# -ge 2 ]] || { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
png=$1
shift
dat=$(mktemp)
trap 'rm -f "$dat"' EXIT
python3 - "$@" > "$dat" <<'PY'
import statistics, sys
groups = {}
for arg in sys.argv[1:]:
    label, d = arg.split("=", 1)
    med = lambda f: statistics.median(float(x) for x in open(f"{d}/{f}") if x.strip())
    groups.setdefault(label, []).append(med("conduit.txt") / med("bare.txt"))
for i, (label, rs) in enumerate(groups.items()):
    for r in rs:
        print(i, f'"{label}"', f"{r:.3f}", f"{statistics.median(rs):.3f}")
PY
n=$(awk '{print $1}' "$dat" | sort -u | wc -l)
gnuplot <<GP
set terminal pngcairo size 760,420 font ",10" noenhanced
set output "$png"
set title "rdma:// connect+accept p50 / bare rdma_cm, one point per run (30 sequential connections)"
set ylabel "conduit / bare (lower is better)"
set yrange [0.8:*]
set xrange [-0.5:$n - 0.5]
set grid ytics
set key top right
set arrow from -0.5,1.5 to $n - 0.5,1.5 nohead dt 2 lw 2 lc rgb "red"
set label "target 1.5x" at -0.45,1.53 tc rgb "red"
plot "$dat" using 1:3:xtic(2) with points pt 7 ps 1.2 lc rgb "#1f77b4" title "run", \
     "$dat" using 1:4 with points pt 5 ps 2.2 lc rgb "black" title "median"
GP
echo "wrote $png"
