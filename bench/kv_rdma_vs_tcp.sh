#!/usr/bin/env bash
# bench/kv_rdma_vs_tcp.sh [OPTIONS]
#
# The guest half of bench/kv_vs_redis.sh (issue 5, section 8; the seeds' experiment):
# conduit-kv over RDMA against conduit-kv over TCP, same server process, same client tool
# (conduit-kv-bench --transport rdma|tcp), in one Soft-RoCE guest boot.  Cells: -c 1 and
# -c 8, -P 1, -d 3, tests set,get.  Every cell runs both transports, alternating which goes
# first, --rounds times; the table shows medians of rps and p50 and the rdma/tcp ratio.
#
# Run on the host, it re-runs itself in the testbed (testbed/run); in the guest
# (CONDUIT_IN_TESTBED set) the server binds CONDUIT_RDMA_ADDR (192.0.2.1, rxe0's veth) for
# both listeners, so TCP goes through the guest kernel's stack to a local address and RDMA
# through rdma_rxe on the same address.  Protected mode is off (the client's address is not
# loopback); nothing leaves the guest (qemu runs with -nic none).
#
# Options (environment variables in brackets):
#   --rounds N     repetitions of every cell and transport [CONDUIT_BENCH_ROUNDS, 3]
#   --requests N   requests per run at -c 1; -c 8 runs 4x as many [CONDUIT_BENCH_REQUESTS, 5000]
#   --build DIR    build tree with tools/kv/conduit-kv{,-bench} [CONDUIT_BENCH_BUILD, build]
#   --results DIR  where the table (table.md) and every run (runs.csv) go; must be inside
#                  the repository, the guest's writable share [CONDUIT_BENCH_RESULTS,
#                  bench/results]; each invocation writes DIR/kv_rdma_vs_tcp-<date>/
#   -h, --help     this text
# On the host the guest is killed after $CONDUIT_BENCH_GUEST_TIMEOUT seconds (default
# 1800); in the guest every benchmark run is bounded by timeout(1) (120 s).  Exit status 0
# when every run produced a number (it is a measurement, not a target check), 1 otherwise.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() {
  echo "kv_rdma_vs_tcp: $*" >&2
  exit 1
}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
rounds=${CONDUIT_BENCH_ROUNDS:-3}
requests=${CONDUIT_BENCH_REQUESTS:-5000}
build=${CONDUIT_BENCH_BUILD:-$REPO/build}
results_root=${CONDUIT_BENCH_RESULTS:-$REPO/bench/results}
while [[ $# -gt 0 ]]; do
  case $1 in
    --rounds) rounds=${2:?--rounds needs a value}; shift 2 ;;
    --requests) requests=${2:?--requests needs a value}; shift 2 ;;
    --build) build=${2:?--build needs a value}; shift 2 ;;
    --results) results_root=${2:?--results needs a value}; shift 2 ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown option $1" ;;
  esac
done
for v in rounds requests; do
  [[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done
build=$(realpath -m -- "$build")
KV=$build/tools/kv/conduit-kv
BENCH=$build/tools/kv/conduit-kv-bench
[[ -x $KV && -x $BENCH ]] || die "conduit-kv not built in $build (ninja -C $build conduit-kv conduit-kv-bench)"

# --- on the host: go into the testbed -------------------------------------------------------
if [[ -z ${CONDUIT_IN_TESTBED:-} ]]; then
  [[ -x $REPO/testbed/run ]] || die "not inside the testbed, and $REPO/testbed/run is missing"
  results_root=$(realpath -m -- "$results_root")
  case $results_root/ in "$REPO"/*) ;; *) die "--results must be inside $REPO (the guest's writable share)" ;; esac
  args=(--rounds "$rounds" --requests "$requests" --build "$build" --results "$results_root")
  echo "kv_rdma_vs_tcp: starting the testbed guest" >&2
  exec "$REPO/testbed/run" --timeout "${CONDUIT_BENCH_GUEST_TIMEOUT:-1800}" -- "$REPO/bench/kv_rdma_vs_tcp.sh" "${args[@]}"
fi

# --- in the guest ---------------------------------------------------------------------------
addr=${CONDUIT_RDMA_ADDR:-192.0.2.1}
work=$(mktemp -d /tmp/kv-rdma-vs-tcp-XXXXXX)
outdir=$results_root/kv_rdma_vs_tcp-$(date +%Y%m%d-%H%M%S)
mkdir -p "$outdir"
kpid=""
cleanup() {
  [[ -n $kpid ]] && kill "$kpid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

SRV_CPU=""; CLI_CPU=""; pinning=off
if command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then
  SRV_CPU="taskset -c 0"; CLI_CPU="taskset -c 1"; pinning="server cpu0, bench cpu1"
fi
$SRV_CPU "$KV" --bind "$addr" --port 0 --rdma-port 0 --protected-mode no --appendonly no --loglevel warning \
  2>"$work/kv.log" &
kpid=$!
tport=""; rport=""
for _ in $(seq 300); do
  if grep -q "ready to accept connections" "$work/kv.log"; then
    line=$(grep "ready to accept connections" "$work/kv.log" | head -1)
    tport=$(grep -o 'tcp://[^ ]*' <<<"$line" | head -1 | sed 's/.*://')
    rport=$(grep -o 'rdma://[^ ]*' <<<"$line" | head -1 | sed 's/.*://')
  fi
  [[ -n $tport && -n $rport ]] && break
  kill -0 "$kpid" 2>/dev/null || break
  sleep 0.1
done
[[ -n $tport && -n $rport ]] || { cat "$work/kv.log" >&2; die "conduit-kv did not start with tcp and rdma listeners"; }
echo "kv_rdma_vs_tcp: conduit-kv on tcp://$addr:$tport and rdma://$addr:$rport (${CONDUIT_RDMA_DEVICE:-rxe0})"
echo "  guest: $(nproc) vCPUs (qemu TCG), kernel $(uname -r), pinning: $pinning, rounds $rounds, -n $requests (-c 1) / $((requests * 4)) (-c 8)"

results=$outdir/runs.csv
echo "round,transport,clients,test,rps,p50" >"$results"
failed=0
run_one() {  # round transport clients
  local port=$tport n=$requests
  [[ $2 == rdma ]] && port=$rport
  [[ $3 -gt 1 ]] && n=$((requests * 4))
  local csv
  if ! csv=$(timeout 120 $CLI_CPU "$BENCH" -h "$addr" -p "$port" --transport "$2" -t set,get -c "$3" -P 1 -d 3 \
    -n "$n" --csv 2>"$work/bench.err"); then
    echo "  run failed: $2 -c $3: $(tail -2 "$work/bench.err")" >&2
    failed=1
    return
  fi
  echo "  $2 -c $3: $(echo "$csv" | awk -F'","' 'NR>1 { gsub(/"/,"",$1); gsub(/"/,"",$2); printf "%s %s rps p50 %s  ", $1, $2, $5 }')"
  echo "$csv" | awk -F'","' -v r="$1" -v t="$2" -v c="$3" \
    'NR>1 && NF>=5 { gsub(/"/,"",$1); gsub(/"/,"",$2); print r","t","c","$1","$2","$5 }' >>"$results"
}

t0=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
  for c in 1 8; do
    if (((r + c) % 2)); then order="rdma tcp"; else order="tcp rdma"; fi
    for t in $order; do run_one "$r" "$t" "$c"; done
  done
  echo "  round $r done ($(($(date +%s) - t0)) s)"
done

python3 - "$results" <<'PY' >"$outdir/table.md" || failed=1
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def med(t, c, test, key):
    v = [float(r[key]) for r in rows if r["transport"] == t and r["clients"] == str(c) and r["test"] == test]
    return (statistics.median(v), len(v)) if v else (None, 0)
print()
print("| cell (-P 1 -d 3) | test | tcp rps | rdma rps | rdma/tcp | tcp p50 ms | rdma p50 ms | runs |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
for c in (1, 8):
    for test in ("SET", "GET"):
        (tr, n1), (rr, n2) = med("tcp", c, test, "rps"), med("rdma", c, test, "rps")
        (tp, _), (rp, _) = med("tcp", c, test, "p50"), med("rdma", c, test, "p50")
        if None in (tr, rr, tp, rp):
            print(f"| -c {c} | {test} | - | - | - | - | - | MISSING |"); continue
        print(f"| -c {c} | {test} | {tr:,.0f} | {rr:,.0f} | {rr/tr:.2f}x | {tp:.3f} | {rp:.3f} | {min(n1, n2)} |")
PY
cat "$outdir/table.md"
echo "  table in $outdir/table.md, every run in $outdir/runs.csv"
echo "  total $(($(date +%s) - t0)) s"
exit $failed
