#!/usr/bin/env bash
# conduit-kv vs Debian's redis-server under Debian's redis-benchmark (issue 5, section 8,
# host part), plus conduit-kv-bench over shared memory.  The guest part (conduit-kv over
# rdma vs over tcp in the Soft-RoCE testbed) is bench/kv_rdma_vs_tcp.sh.
#
#   bench/kv_vs_redis.sh [--build DIR] [--rounds N] [--scale F] [--no-pin] [--out FILE]
#
# Both servers run with persistence off, bound to 127.0.0.1.  Every cell (-c 1/50, -P 1/16,
# -d 3/1024, tests set,get) runs against both servers in alternating order, --rounds times;
# the table shows medians.  This machine is shared and noisy: only ratios measured in the
# same run mean anything.  By default the servers are pinned to CPU 0 and the load
# generators to CPU 1 (taskset), identically for both.  Targets:
#   TCP: conduit-kv rps >= 1.0x redis-server's (>= 1.1x at -c 50 -P 16) and p50 <= redis-server's,
#        in every cell; the collection cells (LPUSH LPOP SADD ZADD HSET MSET-10 at -c 1 -P 1
#        and -c 50 -P 16, -d 3): rps >= 1.0x
#   shm: conduit-kv-bench over shm >= 2x conduit-kv-bench over tcp at -c 1
# Each row also carries the server's CPU per request and how busy redis-benchmark was (one
# redis-benchmark per test): a load generator near 100% means the cell measured it, not the server.
# Runtime: about 5 minutes with the defaults (bounded by --scale and --rounds; each
# redis-benchmark run is also killed after 60 s).  Exit status 0 whether or not targets
# are met (it is a measurement); 1 if something failed to run.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=""
rounds=3
scale=1
pin=1
out=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --scale) scale=$2; shift 2 ;;
    --no-pin) pin=0; shift ;;
    --out) out=$2; shift 2 ;;
    -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
done
if [[ -z $build ]]; then
  for d in build; do
    [[ -x $here/$d/tools/kv/conduit-kv ]] && build=$here/$d && break
  done
fi
KV=$build/tools/kv/conduit-kv
BENCH=$build/tools/kv/conduit-kv-bench
[[ -x $KV && -x $BENCH ]] || { echo "conduit-kv not built (looked in ${build:-build}); build first" >&2; exit 1; }
for t in redis-server redis-benchmark redis-cli python3; do
  command -v $t >/dev/null || { echo "$t not found: apt-get install redis-server redis-tools python3" >&2; exit 1; }
done

SRV_CPU=""; CLI_CPU=""
if [[ $pin == 1 ]] && command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then
  SRV_CPU="taskset -c 0"; CLI_CPU="taskset -c 1"
fi

work=$(mktemp -d /tmp/kv-vs-redis-XXXXXX)
shm="kv-bench-$$"
rpid=""; kpid=""
cleanup() {
  [[ -n $rpid ]] && kill "$rpid" 2>/dev/null || true
  [[ -n $kpid ]] && kill "$kpid" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
rport=$(free_port)
$SRV_CPU redis-server --port "$rport" --bind 127.0.0.1 --save '' --appendonly no --dir "$work" \
  --logfile "$work/redis.log" >/dev/null &
rpid=$!
# Two shm listeners: plain (sleep in epoll between requests) and busy-polling (both sides
# spin up to 100 us on the rings before sleeping: what shared memory is for, given a core).
$SRV_CPU "$KV" --port 0 --shm-name "$shm" --listen "shm://$shm-spin?busy_poll_us=100" --appendonly no \
  --loglevel warning 2>"$work/kv.log" &
kpid=$!
kport=""
for _ in $(seq 100); do
  kport=$(sed -n 's/.*connections on tcp:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/kv.log")
  [[ -n $kport ]] && redis-cli -p "$rport" ping >/dev/null 2>&1 && break
  sleep 0.1
done
[[ -n $kport ]] || { echo "conduit-kv did not start:"; cat "$work/kv.log"; exit 1; }
redis-cli -p "$rport" ping >/dev/null || { echo "redis-server did not start"; exit 1; }

rver=$(redis-server --version | awk '{print $3}' | cut -d= -f2)
echo "kv_vs_redis: redis-server $rver on :$rport, conduit-kv on :$kport and shm://$shm"
pinning="off"; [[ -n $SRV_CPU ]] && pinning="servers on cpu0, load generators on cpu1"
echo "  host: $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), pinning: $pinning, rounds $rounds"

results=$work/results.csv
echo "round,server,clients,pipeline,size,test,rps,p50,server_cpu_s,client_cpu_s,wall_s" > "$results"

# requests per run, sized for ~1-2 s each on this class of machine
requests() {  # clients pipeline
  local n
  case "$1/$2" in
    1/1) n=20000 ;; 1/16) n=150000 ;; 50/1) n=60000 ;; *) n=600000 ;;
  esac
  python3 -c "print(max(1000, int($n * $scale)))"
}

cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }  # utime + stime of a process, in clock ticks
TICK=$(getconf CLK_TCK)
# One redis-benchmark per test, so that each row carries the CPU it cost: the server's
# (utime+stime of its process over the run) and the load generator's (bash's `time`).  A
# load generator busy ~100% of the run's wall time means the cell measured redis-benchmark,
# not the server; the server's CPU per request says which server does less work.
run_rb() {  # round server port c P d [tests]
  local n t spid c0 c1 w0 w1 line cpu TIMEFORMAT='%U %S'
  n=$(requests "$4" "$5")
  if [[ $2 == redis ]]; then spid=$rpid; else spid=$kpid; fi
  for t in ${7//,/ }; do
    c0=$(cpu_ticks "$spid"); w0=$(date +%s.%N)
    { time line=$(timeout 60 $CLI_CPU redis-benchmark -p "$3" -t "$t" -c "$4" -P "$5" -d "$6" -n "$n" --csv 2>/dev/null |
        tr -d '\r' | awk -F'","' 'NR>1 && NF>=5 { gsub(/"/,"",$1); gsub(/"/,"",$2); print $1","$2","$5 }'); } 2>"$work/time"
    c1=$(cpu_ticks "$spid"); w1=$(date +%s.%N)
    cpu=$(awk '{print $1 + $2}' "$work/time")
    if [[ -z $line ]]; then
      echo "  redis-benchmark against $2 (-c $4 -P $5 -d $6 -t $t) did not finish in 60 s: its cell of round $1 is missing" >&2
      continue
    fi
    echo "$1,$2,$4,$5,$6,$line,$(python3 -c "print(($c1 - $c0) / $TICK, $cpu, round($w1 - $w0, 3), sep=',')")" >> "$results"
  done
}

t0=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
  for c in 1 50; do
    for P in 1 16; do
      for d in 3 1024; do
        if (((r + c + P + d) % 2)); then order="redis kv"; else order="kv redis"; fi
        for s in $order; do
          if [[ $s == redis ]]; then run_rb "$r" redis "$rport" $c $P $d set,get; else run_rb "$r" conduit-kv "$kport" $c $P $d set,get; fi
        done
      done
    done
  done
  # The collection cell set: redis-benchmark's own LPUSH LPOP SADD ZADD HSET MSET (10 keys).
  for c in 1 50; do
    for P in 1 16; do
      [[ $c == 1 && $P == 16 ]] && continue
      [[ $c == 50 && $P == 1 ]] && continue
      if (((r + c + P) % 2)); then order="redis kv"; else order="kv redis"; fi
      for s in $order; do
        if [[ $s == redis ]]; then port=$rport; else port=$kport; s=conduit-kv; fi
        run_rb "$r" "$s" "$port" $c $P 3 lpush,lpop,sadd,zadd,hset,mset
      done
    done
  done
  # shm vs tcp, same tool (conduit-kv-bench), one client, no pipelining.
  n=$(requests 1 1)
  for tr in tcp shm shm-spin; do
    case $tr in
      tcp) args=(-p "$kport") ;;
      shm) args=(--transport shm --shm-name "$shm") ;;
      shm-spin) args=(--transport shm --shm-name "$shm-spin" --busy-poll-us 100) ;;
    esac
    timeout 60 $CLI_CPU "$BENCH" "${args[@]}" -t set,get -c 1 -P 1 -d 3 -n "$n" --csv 2>/dev/null |
      awk -F'","' -v r="$r" -v s="kv-bench-$tr" \
        'NR>1 { gsub(/"/,"",$1); gsub(/"/,"",$2); print r","s",1,1,3,"$1","$2","$5 }' >> "$results"
  done
  echo "  round $r done ($(($(date +%s) - t0)) s)"
done

python3 - "$results" "$rver" <<'EOF' | tee "${out:-/dev/null}"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
def runs(server, c, p, d, test, key):
    return [float(r[key]) for r in rows if r["server"] == server and r["clients"] == str(c) and r["pipeline"] == str(p)
            and r["size"] == str(d) and r["test"] == test]
def med(server, c, p, d, test, key):
    v = runs(server, c, p, d, test, key)
    return statistics.median(v) if v else None
def cpu(server, c, p, d, test):
    """server CPU per request (us) and the load generator's busy share, medians over rounds"""
    rs = [r for r in rows if r["server"] == server and r["clients"] == str(c) and r["pipeline"] == str(p)
          and r["size"] == str(d) and r["test"] == test and r.get("wall_s")]
    if not rs:
        return "-", "-"
    us = statistics.median(float(r["server_cpu_s"]) * 1e6 / (float(r["rps"]) * float(r["wall_s"])) for r in rs)
    busy = statistics.median(float(r["client_cpu_s"]) / float(r["wall_s"]) for r in rs)
    return f"{us:.2f}", f"{busy:.0%}"
def cpu_cols(c, p, d, test):
    (ru, rb), (ku, kb) = cpu("redis", c, p, d, test), cpu("conduit-kv", c, p, d, test)
    return f"{ru} / {ku} | {rb} / {kb}"
def span(server, c, p, d, test):
    v = runs(server, c, p, d, test, "rps")
    return f"{min(v):,.0f}..{max(v):,.0f}" if v else "-"
print()
print(f"| cell | test | redis-server {sys.argv[2]} rps | conduit-kv rps | ratio | redis p50 ms | conduit-kv p50 ms | target | server CPU us/req (redis / kv) | redis-benchmark busy (redis / kv) |")
print("|---|---|---:|---:|---:|---:|---:|---|---:|---:|")
passes = misses = 0
for c in (1, 50):
    for p in (1, 16):
        for d in (3, 1024):
            for test in ("SET", "GET"):
                rr, kr = med("redis", c, p, d, test, "rps"), med("conduit-kv", c, p, d, test, "rps")
                rp, kp = med("redis", c, p, d, test, "p50"), med("conduit-kv", c, p, d, test, "p50")
                if None in (rr, kr, rp, kp):
                    print(f"| -c {c} -P {p} -d {d} | {test} | - | - | - | - | - | MISSING |"); misses += 1; continue
                # Issue 13: ahead, not at parity, where pipelining leaves the server the work.
                need = 1.1 if (c, p) == (50, 16) else 1.0
                ok = kr >= need * rr and kp <= rp
                passes += ok; misses += not ok
                print(f"| -c {c} -P {p} -d {d} | {test} | {rr:,.0f} ({span('redis', c, p, d, test)}) | {kr:,.0f} "
                      f"({span('conduit-kv', c, p, d, test)}) | {kr/rr:.2f}x | {rp:.3f} | {kp:.3f} | "
                      f"{'PASS' if ok else 'MISS'} (>= {need}x) | {cpu_cols(c, p, d, test)} |")
print()
print(f"| collections cell | test | redis-server {sys.argv[2]} rps (min..max) | conduit-kv rps (min..max) | ratio | redis p50 ms | conduit-kv p50 ms | target (>= 1.0x) | server CPU us/req (redis / kv) | redis-benchmark busy (redis / kv) |")
print("|---|---|---:|---:|---:|---:|---:|---|---:|---:|")
for c, p in ((1, 1), (50, 16)):
    for test in ("LPUSH", "LPOP", "SADD", "ZADD", "HSET", "MSET (10 keys)"):
        rr, kr = med("redis", c, p, 3, test, "rps"), med("conduit-kv", c, p, 3, test, "rps")
        rp, kp = med("redis", c, p, 3, test, "p50"), med("conduit-kv", c, p, 3, test, "p50")
        if None in (rr, kr, rp, kp):
            print(f"| -c {c} -P {p} -d 3 | {test} | - | - | - | - | - | MISSING |"); misses += 1; continue
        ok = kr >= rr
        passes += ok; misses += not ok
        print(f"| -c {c} -P {p} -d 3 | {test} | {rr:,.0f} ({span('redis', c, p, 3, test)}) | {kr:,.0f} "
              f"({span('conduit-kv', c, p, 3, test)}) | {kr/rr:.2f}x | {rp:.3f} | {kp:.3f} | {'PASS' if ok else 'MISS'} | {cpu_cols(c, p, 3, test)} |")
print()
print("| shm vs tcp (conduit-kv-bench, -c 1 -P 1 -d 3) | test | tcp rps | shm rps | ratio | tcp p50 ms | shm p50 ms | target (>= 2x) |")
print("|---|---|---:|---:|---:|---:|---:|---|")
for variant, label in (("kv-bench-shm", "shm (sleeping)"), ("kv-bench-shm-spin", "shm (busy poll 100 us)")):
    for test in ("SET", "GET"):
        t, s = med("kv-bench-tcp", 1, 1, 3, test, "rps"), med(variant, 1, 1, 3, test, "rps")
        tp, sp = med("kv-bench-tcp", 1, 1, 3, test, "p50"), med(variant, 1, 1, 3, test, "p50")
        if None in (t, s):
            print(f"| {label} | {test} | - | - | - | - | - | MISSING |"); misses += 1; continue
        ok = s >= 2 * t
        passes += ok; misses += not ok
        print(f"| {label} | {test} | {t:,.0f} | {s:,.0f} | {s/t:.2f}x | {tp:.3f} | {sp:.3f} | {'PASS' if ok else 'MISS'} |")
print()
print(f"kv_vs_redis: {passes} targets met, {misses} missed")
EOF
if [[ -n $out ]]; then cp "$results" "${out%.*}.csv"; echo "  table in $out, every run in ${out%.*}.csv"; fi
# A plot next to the table (gnuplot, when installed): per TCP cell, the rps ratio and the
# ratio of server CPU per request (redis-server's over conduit-kv's), so a cell where the
# load generator, not the server, set the pace shows as rps ~1.0 beside a CPU ratio > 1.
if [[ -n $out ]] && command -v gnuplot >/dev/null; then
  bash "$here/bench/kv_vs_redis_plot.sh" "${out%.*}.csv" "${out%.*}.png" && echo "  plot in ${out%.*}.png"
fi
echo "  total $(($(date +%s) - t0)) s"
