#!/usr/bin/env bash
# Unmodified Debian redis-server + redis-benchmark: plain TCP vs the same binaries under
# conduit-run (issue 12, section 3).
#
#   bench/preload.sh [--build DIR] [--rounds N] [--scale F] [--no-pin] [--variants "tcp shm"] [--out FILE]
#                                      host: tcp vs shm
#   bench/preload.sh --guest [...]     in the Soft-RoCE guest: tcp vs conduit-run rdma vs rsocket
#   --programs-only                    skip the redis table: only sockperf (guest), iperf3 and
#                                      the ping-pong below
#
# Host variants (each its own redis-server, persistence off, on 127.0.0.1):
#   tcp        redis-server and redis-benchmark as they are
#   shm        both under `conduit-run --mode shm` (defaults: a blocking wait polls the rings
#              adaptively, up to poll_us=50 us, before it sleeps in the kernel)
#   shm-sleep  the same with --poll-us 0 (a wait sleeps at once; a message wakes it)
#   shm-spin   the same with --shm-options busy_poll_us=100 (both ends spin up to 100 us on
#              the rings before sleeping)
#   shm-poll   the same with --spin-us 100 (a blocking epoll_wait/poll/read polls the rings
#              100 us every time, a fixed window, before it sleeps in the kernel)
# Guest variants (on the rxe address 192.0.2.1): tcp, rdma (`conduit-run --mode rdma`),
# rdma-sleep (the same with --poll-us 0: waits sleep at once), rdma-spin (--spin-us 1000: every
# wait polls 1 ms before it sleeps) and
# rsocket (LD_PRELOAD=librspreload.so from Debian's librdmacm1, both ends); then a sockperf
# ping-pong through each.  A variant that
# fails or hangs (each redis-benchmark run is killed after 60 s, or 120 s in the guest) is
# recorded as such, not retried.
#
# Cells: redis-benchmark -t set,get -d 3 at -c 1 / -c 50 and -P 1 / -P 16.  Every cell runs
# every variant in alternating order, --rounds times; the table shows the median rps and
# min..max.  Servers are pinned to CPU 0 and the load generators to CPU 1 (taskset) on the
# host, identically for every variant.  Targets (issue 12): shm >= 2x tcp at -c 1 -P 1 and
# >= 1.0x elsewhere; in the guest rdma >= 1.2x rsocket in every cell.
# Exit status 0 whether or not targets are met (it is a measurement); 1 if nothing ran.
set -euo pipefail

REPO=$(cd "$(dirname "$0")/.." && pwd)
here=$REPO
build=""
rounds=3
scale=1
pin=1
out=""
guest=0
programs_only=0
only=""
args=("$@")
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --scale) scale=$2; shift 2 ;;
    --no-pin) pin=0; shift ;;
    --out) out=$2; shift 2 ;;
    --guest) guest=1; shift ;;
    --variants) only=$2; shift 2 ;;
    --programs-only) programs_only=1; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
[[ -n $build ]] || build=$here/build
build=$(realpath -m "$build")
RUN=$build/tools/run/conduit-run
LIB=$build/src/preload/libconduit-preload.so
[[ -x $RUN && -f $LIB ]] || { echo "conduit-run / libconduit-preload.so not built in $build; build first" >&2; exit 1; }
for t in redis-server redis-benchmark redis-cli python3; do
  command -v $t >/dev/null || { echo "$t not found (scripts/install-deps.sh installs it)" >&2; exit 1; }
done
RSOCKET=/usr/lib/x86_64-linux-gnu/rsocket/librspreload.so

if ((guest)) && [[ -z ${CONDUIT_IN_TESTBED:-} ]]; then
  # Into the guest; the results come back through the repository share.
  results_root=$REPO/build/bench-results
  mkdir -p "$results_root"
  source "$REPO/bench/lib.sh"
  if [[ -n $out ]]; then
    out=$(realpath -m "$out")
  fi
  bench_enter_testbed preload 1500 "$0" "${args[@]}"
fi

if ((guest)); then
  addr=192.0.2.1
  variants="tcp rdma rsocket"
  limit=120
  export CONDUIT_PRELOAD_RDMA=${CONDUIT_PRELOAD_RDMA:-connect_timeout_ms=60000}
  export CONDUIT_PRELOAD_TIMEOUT_MS=${CONDUIT_PRELOAD_TIMEOUT_MS:-30000}
  scale=$(python3 -c "print($scale * 0.05)")  # TCG: ~20x slower than the host
  load=${CONDUIT_BENCH_HOST_LOAD:-unknown}
else
  addr=127.0.0.1
  variants="tcp shm shm-sleep"
  limit=60
  load="$(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%SZ)"
fi

[[ -n $only ]] && variants=$only

SRV_CPU=(); CLI_CPU=()
if [[ $pin == 1 ]] && command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then
  SRV_CPU=(taskset -c 0); CLI_CPU=(taskset -c 1)
fi

work=$(mktemp -d /tmp/preload-bench-XXXXXX)
export TMPDIR=$work  # the preload's status files of this run only
unset XDG_RUNTIME_DIR
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
bench_cleanup_on_exit

wrap() {  # wrap VARIANT: the command prefix that runs a program as that variant
  case $1 in
    tcp) echo "" ;;
    shm) echo "$RUN --mode shm --log warn --" ;;
    shm-sleep) echo "$RUN --mode shm --poll-us 0 --log warn --" ;;
    shm-spin) echo "$RUN --mode shm --shm-options busy_poll_us=100 --log warn --" ;;
    shm-poll) echo "$RUN --mode shm --spin-us 100 --log warn --" ;;
    rdma) echo "$RUN --mode rdma --log warn --" ;;
    rdma-sleep) echo "$RUN --mode rdma --poll-us 0 --log warn --" ;;
    rdma-spin) echo "$RUN --mode rdma --spin-us 1000 --log warn --" ;;
    rsocket) echo "env LD_PRELOAD=$RSOCKET" ;;
  esac
}

declare -A port
started=""
for v in $variants; do
  p=$(free_port)
  # shellcheck disable=SC2046
  "${SRV_CPU[@]}" $(wrap "$v") redis-server --port "$p" --bind "$addr" --protected-mode no --save '' --appendonly no --dir "$work" \
    --logfile "$work/redis-$v.log" >/dev/null 2>"$work/redis-$v.err" &
  pids+=($!)
  ok=0
  for _ in $(seq 100); do
    # shellcheck disable=SC2046
    if [[ $(timeout 10 $(wrap "$v") redis-cli -h "$addr" -p "$p" ping 2>/dev/null) == PONG ]]; then ok=1; break; fi
    sleep 0.2
  done
  if ((ok)); then
    port[$v]=$p
    started+=" $v"
  else
    echo "  $v: redis-server did not answer a ping: $(tail -3 "$work/redis-$v.err" "$work/redis-$v.log" 2>/dev/null | tr '\n' ' ')"
  fi
done
[[ -n $started ]] || { echo "no server started"; exit 1; }

rver=$(redis-server --version | awk '{print $3}' | cut -d= -f2)
pinning="off"; ((${#SRV_CPU[@]})) && pinning="servers on cpu0, load generators on cpu1"
echo "preload bench: redis-server $rver, variants:$started; $(nproc) CPUs, load $load, pinning: $pinning, rounds $rounds"

# Every run goes to the CSV as it finishes (next to --out if given: a killed run keeps them).
results=$work/results.csv
[[ -n $out ]] && results=${out%.*}.csv
echo "round,variant,clients,pipeline,test,rps,p50" >"$results"
requests() {  # clients pipeline
  local n
  case "$1/$2" in
    1/1) n=20000 ;; 1/16) n=150000 ;; 50/1) n=60000 ;; *) n=600000 ;;
  esac
  python3 -c "print(max(500, int($n * $scale)))"
}
run_rb() {  # round variant c P
  local n rc=0
  n=$(requests "$3" "$4")
  # shellcheck disable=SC2046
  timeout "$limit" "${CLI_CPU[@]}" $(wrap "$2") redis-benchmark -h "$addr" -p "${port[$2]}" -t set,get -c "$3" -P "$4" -d 3 \
    -n "$n" --csv >"$work/rb.out" 2>"$work/rb.err" || rc=$?
  if ((rc != 0)); then
    echo "  round $1 $2 -c $3 -P $4: redis-benchmark exit $rc ($( ((rc == 124)) && echo "hung, killed after $limit s" || tail -c 200 "$work/rb.err" | tr '\n' ' '))"
    echo "$1,$2,$3,$4,FAILED,0,0" >>"$results"
    return
  fi
  tr -d '\r' <"$work/rb.out" | awk -F'","' -v r="$1" -v s="$2" -v c="$3" -v p="$4" \
    'NR>1 && NF>=5 { gsub(/"/,"",$1); gsub(/"/,"",$2); print r","s","c","p","$1","$2","$5 }' >>"$results"
}

t0=$(date +%s)
if ((!programs_only)); then  # --programs-only: only the programs below
for ((r = 1; r <= rounds; r++)); do
  for c in 1 50; do
    for P in 1 16; do
      order=$started
      (((r + c + P) % 2)) && order=$(echo "$started" | tr ' ' '\n' | tac | tr '\n' ' ')
      for v in $order; do run_rb "$r" "$v" $c $P; done
    done
  done
  echo "  round $r done ($(($(date +%s) - t0)) s)"
done

# Did the preloaded variants really go fast?  (Their servers' decisions.)
"$RUN" --list --json >"$work/list.json" 2>/dev/null || true
python3 - "$work/list.json" <<'EOF'
import json, sys
try:
    procs = json.load(open(sys.argv[1]))
except Exception:
    procs = []
for p in procs:
    if p.get("name") == "redis-server":
        print(f"  preloaded redis-server pid {p['pid']}: {p['fast']} connections fast, {p['tcp']} tcp ({p['fallback']} fallbacks)")
EOF

python3 - "$results" "$rver" "$load" "$started" "$guest" <<'EOF' | tee "${out:-/dev/null}"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
variants = sys.argv[4].split()
guest = sys.argv[5] == "1"
base = "tcp"
def vals(v, c, p, test):
    return [float(r["rps"]) for r in rows if r["variant"] == v and r["clients"] == str(c) and r["pipeline"] == str(p) and r["test"] == test]
def failed(v, c, p):
    return sum(1 for r in rows if r["variant"] == v and r["clients"] == str(c) and r["pipeline"] == str(p) and r["test"] == "FAILED")
print()
print(f"redis-server {sys.argv[2]}, redis-benchmark -t set,get -d 3; rps median (min..max) over the rounds; load {sys.argv[3]}")
print()
hdr = "| cell | test | " + " | ".join(variants) + " | " + " | ".join(f"{v}/tcp" for v in variants if v != base)
if guest and "rdma" in variants and "rsocket" in variants:
    hdr += " | rdma/rsocket"
print(hdr + " |")
print("|---|---|" + "---:|" * (len(variants) + len([v for v in variants if v != base]) + (1 if guest and "rdma" in variants and "rsocket" in variants else 0)))
for c in (1, 50):
    for p in (1, 16):
        for test in ("SET", "GET"):
            cells, med = [], {}
            for v in variants:
                x = vals(v, c, p, test)
                f = failed(v, c, p)
                if x:
                    med[v] = statistics.median(x)
                    cells.append(f"{med[v]:,.0f} ({min(x):,.0f}..{max(x):,.0f})" + (f", {f} failed" if f else ""))
                else:
                    cells.append(f"failed ({f})" if f else "-")
            ratios = [f"{med[v]/med[base]:.2f}x" if v in med and base in med else "-" for v in variants if v != base]
            if guest and "rdma" in variants and "rsocket" in variants:
                ratios.append(f"{med['rdma']/med['rsocket']:.2f}x" if "rdma" in med and "rsocket" in med else "-")
            print(f"| -c {c} -P {p} | {test} | " + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
EOF
fi  # programs_only
# sockperf ping-pong through each variant (guest only): poll-based server (-F p), since
# rsocket's preload has no epoll; 64-byte messages, bounded in time.
if ((guest)) && command -v sockperf >/dev/null; then
  echo
  echo "sockperf ping-pong, 64 B, server -F p, client -t 10 (one run per variant):"
  for v in tcp rdma rsocket; do  # rsocket too: its redis may have failed, sockperf may not
    sp=$(free_port)
    # shellcheck disable=SC2046
    echo "T:$addr:$sp" >"$work/sp-$v.feed"  # -F (the multiplexer) needs a feed file
    timeout 120 $(wrap "$v") sockperf sr -f "$work/sp-$v.feed" -F p >"$work/sp-srv-$v.out" 2>&1 &
    spid=$!
    sleep 3
    # shellcheck disable=SC2046
    # sockperf exits 0 on a failed connect: success is its summary line.
    timeout 90 $(wrap "$v") sockperf pp --tcp -i "$addr" -p "$sp" -m 64 -t 10 >"$work/sp-$v.out" 2>&1 || true
    if grep -q "Summary: Latency" "$work/sp-$v.out"; then
      lat=$(grep -E "avg-latency|Summary: Latency" "$work/sp-$v.out" | tail -1 || true)
      p50=$(grep -E "percentile 50.000" "$work/sp-$v.out" | tail -1 || true)
      echo "  $v: ${lat:-no summary} ${p50:+| $p50}"
    else
      echo "  $v: sockperf failed or hung: $(tail -c 200 "$work/sp-$v.out" | tr '\n' ' ') / server: $(tail -c 200 "$work/sp-srv-$v.out" | tr '\n' ' ')"
    fi
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
  done | tee -a "${out:-/dev/null}"
fi
# Two more unmodified programs through each variant, chosen because rsocket's preload can
# run them (no epoll, no sendto on a connected socket): iperf3 (select-based; throughput,
# one stream, 128 KiB writes, 3 s) and a blocking-socket ping-pong in C++
# (conduit-plain-pingpong: socket(AF_INET, SOCK_STREAM, 0), connect, write, read; 64-byte
# messages).  Not bench/pingpong.py: Python adds SOCK_CLOEXEC to every socket's type and
# rsocket's preload leaves such a socket on TCP.  Host: every variant of the table; guest:
# tcp, rdma and rsocket.
extra_variants=$started
((guest)) && extra_variants="tcp rdma rsocket"
PINGPONG=$build/bench/plain_pingpong/conduit-plain-pingpong
if ! command -v iperf3 >/dev/null; then
  echo "iperf3 not installed: the program comparison is skipped"
elif [[ ! -x $PINGPONG ]]; then
  echo "$PINGPONG not built (ninja -C $build conduit-plain-pingpong): the program comparison is skipped"
else
  echo
  pp_n=$((guest ? 1000 : 20000))
  echo "iperf3 -t 3 (one stream) and conduit-plain-pingpong ($pp_n round trips of 64 B), through each variant; rounds $rounds:"
  for v in $extra_variants; do
    bw=(); pp=(); why=""
    for ((r = 1; r <= rounds; r++)); do
      ip=$(free_port)
      # shellcheck disable=SC2046
      timeout 60 "${SRV_CPU[@]}" $(wrap "$v") iperf3 -s -1 -B "$addr" -p "$ip" >"$work/ip-srv-$v.out" 2>&1 &
      ipid=$!
      sleep $((guest ? 3 : 1))
      # shellcheck disable=SC2046
      timeout 60 "${CLI_CPU[@]}" $(wrap "$v") iperf3 -c "$addr" -p "$ip" -t 3 -J >"$work/ip-$v.json" 2>"$work/ip-$v.err" || true
      kill "$ipid" 2>/dev/null || true
      wait "$ipid" 2>/dev/null || true
      # A run that moved nothing (or says "error") failed, whatever its exit status.
      g=$(python3 -c 'import json,sys
try:
    j = json.load(open(sys.argv[1]))
    b = j["end"]["sum_received"]["bytes"]
    print("%.3f" % (j["end"]["sum_received"]["bits_per_second"] / 8e9) if b > 0 and "error" not in j else "error: " + j.get("error", "0 bytes received"))
except Exception as e:
    print("error: no result (%s)" % type(e).__name__)' "$work/ip-$v.json")
      if [[ $g != error* ]]; then bw+=("$g"); else why="iperf3 $g $(tail -c 120 "$work/ip-$v.err" 2>/dev/null | tr '\n' ' ')"; fi
      pport=$(free_port)
      # shellcheck disable=SC2046
      timeout 120 "${SRV_CPU[@]}" $(wrap "$v") "$PINGPONG" serve "$addr" "$pport" >"$work/pp-srv-$v.out" 2>&1 &
      ppid=$!
      # Started before the client: one that connects while the server starts listening may
      # stay plain TCP (docs/PRELOAD.md, "Not supported").
      sleep $((guest ? 3 : 1))
      # shellcheck disable=SC2046
      line=$(timeout 120 "${CLI_CPU[@]}" $(wrap "$v") "$PINGPONG" ping "$addr" "$pport" "$pp_n" 64 2>"$work/pp-$v.err" | grep '^pingpong:' || true)
      kill "$ppid" 2>/dev/null || true
      wait "$ppid" 2>/dev/null || true
      if [[ -n $line ]]; then pp+=("$(echo "$line" | awk '{print $4}')"); else why="$why pingpong: $(tail -c 160 "$work/pp-$v.err" | tr '\n' ' ')"; fi
    done
    python3 - "$v" "${#bw[@]}" "${bw[@]}" "${pp[@]}" "$why" <<'PYEOF'
import statistics, sys
v, nb = sys.argv[1], int(sys.argv[2])
bw = [float(x) for x in sys.argv[3:3 + nb]]
pp = [float(x) for x in sys.argv[3 + nb:-1]]
why = sys.argv[-1].strip()
def show(xs, unit, fmt):
    return f"{fmt % statistics.median(xs)} {unit} ({fmt % min(xs)}..{fmt % max(xs)})" if xs else "failed"
print(f"  {v}: iperf3 {show(bw, 'GB/s', '%.3f')}; pingpong p50 {show(pp, 'us', '%.1f')}" + (f"; {why}" if why else ""))
PYEOF
  done | tee -a "${out:-/dev/null}"
fi
# A plot next to the table (gnuplot, when installed): median rps per cell, one bar per variant.
if ((!programs_only)) && [[ -n $out ]] && command -v gnuplot >/dev/null; then
  png=${out%.md}.png
  python3 - "$results" "$started" >"$work/plot.dat" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
variants = sys.argv[2].split()
print("cell " + " ".join(variants))
for c in (1, 50):
    for p in (1, 16):
        for test in ("SET", "GET"):
            meds = []
            for v in variants:
                x = [float(r["rps"]) for r in rows if r["variant"] == v and r["clients"] == str(c) and r["pipeline"] == str(p) and r["test"] == test]
                meds.append(f"{statistics.median(x):.0f}" if x else "NaN")
            print(f'"-c{c} -P{p} {test}" ' + " ".join(meds))
EOF
  ncol=$(echo "$started" | wc -w)
  if gnuplot 2>"$work/plot.log" <<EOF; then
set terminal pngcairo size 1000,480 noenhanced
set output "$png"
set title "redis-benchmark -t set,get -d 3 against redis-server: median rps over $rounds rounds (load $load)"
set ylabel "requests/s"
set logscale y
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key outside right top autotitle columnheader
set grid ytics
set xtics rotate by -30 scale 0
set bmargin 5
plot for [i=2:$((ncol + 1))] "$work/plot.dat" using i:xtic(1)
EOF
    echo "  plot in $png"
  else
    echo "  plot: gnuplot failed ($(tail -c 200 "$work/plot.log"))"
  fi
fi
if [[ -n $out ]]; then echo "  table in $out, every run in $results"; fi
echo "  total $(($(date +%s) - t0)) s"
