#!/usr/bin/env bash
# What keyspace notifications cost conduit-kv's command path (issue 13): redis-benchmark SET
# at -c 50 -P 16 against two conduit-kv binaries in the same run, alternating -- one built
# before notifications existed (--before) and this build's (notify-keyspace-events off,
# the default) -- and, for information, this build with `KEA` on and nobody subscribed
# (every SET then formats its two channel names and finds no subscriber).
#
#   bench/kv_notify_cost.sh --before /path/to/old/conduit-kv [--build DIR] [--rounds N]
#                           [--requests N] [--no-pin] [--out FILE]
#
# Target: with notifications off, SET rps within noise of --before (the cost is one test of
# a word per event site).  Servers pinned to CPU 0, redis-benchmark to CPU 1 (--no-pin:
# not pinned, for a machine that other work keeps busy), persistence off; medians with
# min..max.  Each redis-benchmark run is killed after 60 s.  Exit 0
# whether or not the target is met (a measurement); 1 if something failed to run.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build
before=""
rounds=7
requests=1000000
out=""
pin=1
while [[ $# -gt 0 ]]; do
  case $1 in
    --before) before=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-pin) pin=0; shift ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
after=$build/tools/kv/conduit-kv
[[ -x $after ]] || { echo "conduit-kv not built in $build" >&2; exit 1; }
[[ -x $before ]] || { echo "--before must name an older conduit-kv binary" >&2; exit 1; }
for t in redis-benchmark redis-cli python3; do
  command -v $t >/dev/null || { echo "$t not found: apt-get install redis-tools python3" >&2; exit 1; }
done
SRV_CPU=""; CLI_CPU=""
if [[ $pin == 1 ]] && command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then SRV_CPU="taskset -c 0"; CLI_CPU="taskset -c 1"; fi

work=$(mktemp -d /tmp/kv-notify-cost-XXXXXX)
# shellcheck source=bench/lib.sh
source "$here/bench/lib.sh"
bench_cleanup_on_exit

started_port=""
start() {  # start NAME BINARY [ARGS...]: sets started_port (not in a subshell: the pid is kept)
  local name=$1 bin=$2 port=""
  shift 2
  $SRV_CPU "$bin" --port 0 --appendonly no --loglevel warning "$@" 2>"$work/$name.log" &
  pids+=($!)
  for _ in $(seq 100); do
    port=$(sed -n 's/.*connections on tcp:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/$name.log")
    [[ -n $port ]] && redis-cli -p "$port" ping >/dev/null 2>&1 && break
    sleep 0.1
  done
  [[ -n $port ]] || { echo "$name did not start:" >&2; cat "$work/$name.log" >&2; exit 1; }
  started_port=$port
}
start before "$before"; p_before=$started_port
start off "$after"; p_off=$started_port
start on "$after" --notify-keyspace-events KEA; p_on=$started_port
[[ $(redis-cli -p "$p_on" config get notify-keyspace-events | tail -1) == AKE ]] ||
  { echo "the KEA server does not report AKE" >&2; exit 1; }

echo "kv_notify_cost: before=$before after=$after (off, and KEA with no subscriber)"
echo "  host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%SZ), rounds $rounds, -n $requests, pinned: $pin"
results=$work/results.csv
: > "$results"
names=(before off on)
ports=("$p_before" "$p_off" "$p_on")
for ((r = 0; r < rounds; r++)); do
  for k in 0 1 2; do
    i=$(((r + k) % 3))  # rotate the order every round
    rps=$(timeout 60 $CLI_CPU redis-benchmark -p "${ports[$i]}" -t set -c 50 -P 16 -d 3 -n "$requests" --csv 2>/dev/null |
      tr -d '\r' | awk -F'","' 'NR>1 { gsub(/"/,"",$2); print $2 }') || true
    [[ -n $rps ]] && echo "${names[$i]},$rps" >> "$results" || echo "  ${names[$i]} round $r did not finish" >&2
  done
done
echo "  load at the end $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%SZ)"
python3 - "$results" <<'EOF' | tee "${out:-/dev/null}"
import csv, statistics, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
v = {n: [float(x) for k, x in rows if k == n] for n in ("before", "off", "on")}
b = statistics.median(v["before"])
print("| conduit-kv, SET -c 50 -P 16 -d 3 | median rps | min..max | vs before |")
print("|---|---:|---:|---:|")
for n, label in (("before", "before keyspace notifications"), ("off", "notify-keyspace-events '' (default)"),
                 ("on", "notify-keyspace-events KEA, no subscriber")):
    m = statistics.median(v[n])
    print(f"| {label} | {m:,.0f} | {min(v[n]):,.0f}..{max(v[n]):,.0f} | {m / b:.3f}x |")
EOF
