#!/usr/bin/env bash
# bench/kv_io_threads.sh [--build DIR] [--rounds N] [--requests N] [--threads "1 2"]
#
# redis-benchmark -c 50 -P 16 -t set,get -d 3 against conduit-kv with --io-threads 1, 2 (...)
# and against Debian's redis-server 7, persistence off, all on 127.0.0.1.  Servers are
# started once each and run alternately (order rotated per round); the table shows the
# median rps of --rounds runs.  Nothing is pinned: with io threads the server needs more
# than one CPU, and on a 2-CPU machine it shares them with redis-benchmark, so this shows
# what the threads buy (or cost) here, not on a big machine.  Each run is bounded by
# timeout(1) (120 s).  Exit status 1 if a run failed.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build
rounds=3
requests=600000
threads="1 2"
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --threads) threads=$2; shift 2 ;;
    -h | --help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
KV=$build/tools/kv/conduit-kv
[[ -x $KV ]] || { echo "conduit-kv not built in $build" >&2; exit 1; }
for t in redis-server redis-benchmark redis-cli; do
  command -v $t >/dev/null || { echo "$t not found: apt-get install redis-server redis-tools" >&2; exit 1; }
done
work=$(mktemp -d /tmp/kv-io-threads-XXXXXX)
# shellcheck source=bench/lib.sh
source "$here/bench/lib.sh"
bench_cleanup_on_exit

declare -A port
port[redis]=$(free_port)
redis-server --port "${port[redis]}" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" --logfile "$work/redis.log" \
  >/dev/null &
pids+=($!)
servers="redis"
for n in $threads; do
  p=$(free_port)
  "$KV" --port "$p" --io-threads "$n" --appendonly no --loglevel warning 2>"$work/kv$n.log" &
  pids+=($!)
  port[kv$n]=$p
  servers="$servers kv$n"
done
for s in $servers; do
  for _ in $(seq 100); do redis-cli -p "${port[$s]}" ping >/dev/null 2>&1 && break; sleep 0.1; done
  redis-cli -p "${port[$s]}" ping >/dev/null || { echo "$s did not start" >&2; exit 1; }
done
echo "kv_io_threads: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $rounds rounds of -n $requests"
res=$work/res.csv
failed=0
for ((r = 1; r <= rounds; r++)); do
  set -- $servers
  order=("$@")
  for ((i = 0; i < ${#order[@]}; i++)); do
    s=${order[$(((i + r) % ${#order[@]}))]}
    if ! out=$(timeout 120 redis-benchmark -p "${port[$s]}" -t set,get -c 50 -P 16 -d 3 -n "$requests" --csv 2>/dev/null); then
      echo "  run failed: $s" >&2; failed=1; continue
    fi
    echo "$out" | tr -d '\r' | awk -F'","' -v s="$s" 'NR>1 && NF>=5 { gsub(/"/,"",$1); gsub(/"/,"",$2); print s","$1","$2","$5 }' >>"$res"
  done
done
echo
echo "| server (-c 50 -P 16 -d 3) | SET rps | GET rps | SET p50 ms | GET p50 ms |"
echo "|---|---:|---:|---:|---:|"
for s in $servers; do
  label=$s
  [[ $s == redis ]] && label="redis-server $(redis-server --version | awk '{print $3}' | cut -d= -f2)"
  [[ $s == kv* ]] && label="conduit-kv --io-threads ${s#kv}"
  med() {  # test field format
    grep "^$s,$1," "$res" | cut -d, -f"$2" | sort -g | awk -v f="$3" '{a[NR]=$1}
      END {if (NR) printf f, (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2); else printf "-"}'
  }
  printf "| %s | %s | %s | %s | %s |\n" "$label" "$(med SET 3 %.0f)" "$(med GET 3 %.0f)" "$(med SET 4 %.3f)" "$(med GET 4 %.3f)"
done
exit $failed
