#!/usr/bin/env bash
# bench/shm_polling.sh [--build DIR] [--rounds N] [--requests N] [--no-pin] [--out FILE]
#
# What shm://'s adaptive polling buys and costs (issue 10, section 3): conduit-kv served
# over tcp:// and over shm:// with its polling modes, driven by conduit-kv-bench (GET, one
# client, no pipelining, 3-byte values), the same server process for every variant:
#   tcp          tcp://127.0.0.1 (both sides sleep in epoll between requests)
#   shm          shm://NAME with default options: adaptive polling (poll_us=50)
#   shm-event    shm://NAME?poll_us=0: pure event mode (announce sleep, block at once)
#   shm-busy     shm://NAME?busy_poll_us=100: fixed 100 us polling window
# and the same at -c 50 (50 connections on one server loop: one spin for all of them).
# Beside every rps figure: CPU time per request (server + client, user + system, from
# /proc/PID/stat and getrusage; the client's includes its start-up), the cores that kept
# busy (CPU seconds / wall seconds: polling trades idle time for latency), and the server's
# CPU while idle for 2 s after the last run (adaptive polling must turn itself off).
#
# Variants alternate within each round; the table shows medians over --rounds (min..max
# for the ratio).  Target: shm (default options) >= 2x tcp rps at -c 1.  The machine is
# shared: the load average is printed with the results; only same-run ratios mean anything.
# By default the server runs on CPU 0 and the client on CPU 1 (taskset).  Runtime: about
# rounds x 8 runs x (1-3 s).  Exit status 0 whether or not the target is met; 1 if a run
# failed.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
build=$here/build
rounds=5
requests=100000
pin=1
out=""
while [[ $# -gt 0 ]]; do
  case $1 in
    --build) build=$2; shift 2 ;;
    --rounds) rounds=$2; shift 2 ;;
    --requests) requests=$2; shift 2 ;;
    --no-pin) pin=0; shift ;;
    --out) out=$2; shift 2 ;;
    -h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "shm_polling: unknown option $1" >&2; exit 2 ;;
  esac
done
[[ $rounds =~ ^[1-9][0-9]*$ && $requests =~ ^[1-9][0-9]*$ ]] || { echo "shm_polling: --rounds/--requests must be positive integers" >&2; exit 2; }
KV=$build/tools/kv/conduit-kv
BENCH=$build/tools/kv/conduit-kv-bench
[[ -x $KV && -x $BENCH ]] || { echo "shm_polling: conduit-kv not built in $build (cmake --build $build)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "shm_polling: python3 is needed" >&2; exit 1; }

SRV_CPU=() CLI_CPU=()
if [[ $pin == 1 ]] && command -v taskset >/dev/null && [[ $(nproc) -ge 2 ]]; then
  SRV_CPU=(taskset -c 0) CLI_CPU=(taskset -c 1)
fi

work=$(mktemp -d /tmp/shm-polling-XXXXXX)
name="shm-polling-$$"
kpid=""
cleanup() {
  if [[ -n $kpid ]]; then kill "$kpid" 2>/dev/null || true; wait "$kpid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

"${SRV_CPU[@]}" "$KV" --port 0 --shm-name "$name" --listen "shm://$name-event?poll_us=0" \
  --listen "shm://$name-busy?busy_poll_us=100" --appendonly no --loglevel notice 2>"$work/kv.log" &
kpid=$!
port=""
for _ in $(seq 100); do
  port=$(sed -n 's/.*listening on tcp:\/\/127\.0\.0\.1:\([0-9]*\).*/\1/p' "$work/kv.log" | head -1)
  [[ -n $port ]] && grep -q "$name-busy" "$work/kv.log" && break
  kill -0 "$kpid" 2>/dev/null || break
  sleep 0.1
done
[[ -n $port ]] || { echo "shm_polling: conduit-kv did not start:" >&2; cat "$work/kv.log" >&2; exit 1; }
tck=$(getconf CLK_TCK)
server_cpu() { awk -v t="$tck" '{print ($14 + $15) / t}' "/proc/$kpid/stat"; }

# run VARIANT CLIENTS ROUND: one conduit-kv-bench run; appends a CSV row to results.
results=$work/results.csv
echo "round,variant,clients,rps,p50_ms,server_cpu_s,client_cpu_s,requests" >"$results"
run() {
  local v=$1 c=$2 r=$3 url
  case $v in
    tcp) url="tcp://127.0.0.1:$port" ;;
    shm) url="shm://$name" ;;
    shm-event) url="shm://$name-event?poll_us=0" ;;
    shm-busy) url="shm://$name-busy?busy_poll_us=100" ;;
  esac
  local n=$requests
  [[ $c -gt 1 ]] && n=$((requests * 3))
  local s0 s1
  s0=$(server_cpu)
  if ! timeout 120 python3 - "$work/run.out" "${CLI_CPU[@]}" "$BENCH" --url "$url" -t get -c "$c" -n "$n" -d 3 --csv <<'EOF'; then
import resource, subprocess, sys
out = open(sys.argv[1], "w")
p = subprocess.run(sys.argv[2:], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
ru = resource.getrusage(resource.RUSAGE_CHILDREN)
out.write(p.stdout)
out.write("client_cpu_s=%f\n" % (ru.ru_utime + ru.ru_stime))
sys.exit(p.returncode)
EOF
    echo "shm_polling: conduit-kv-bench $v -c $c failed:" >&2
    cat "$work/run.out" >&2
    exit 1
  fi
  s1=$(server_cpu)
  python3 - "$work/run.out" "$r" "$v" "$c" "$s0" "$s1" "$n" >>"$results" <<'EOF'
import csv, sys
lines = open(sys.argv[1]).read().splitlines()
cpu = next(float(l.split("=")[1]) for l in lines if l.startswith("client_cpu_s="))
row = next(r for r in csv.reader(l for l in lines if l.startswith('"')) if r[0] == "GET")
rnd, v, c, s0, s1, n = sys.argv[2:]
print(f"{rnd},{v},{c},{row[1]},{row[4]},{float(s1) - float(s0):.3f},{cpu:.3f},{n}")
EOF
}

echo "shm_polling: conduit-kv on tcp 127.0.0.1:$port and shm://$name{,-event,-busy}; $(nproc) CPUs," \
  "pinning: ${SRV_CPU[*]:-off}/${CLI_CPU[*]:-off}, $rounds rounds, $requests requests per -c 1 run"
echo "  load before: $(cut -d' ' -f1-3 /proc/loadavg)"
variants=(tcp shm shm-event shm-busy)
t0=$(date +%s)
for ((r = 1; r <= rounds; r++)); do
  # rotate the order each round so that drift does not favour one variant
  for ((k = 0; k < ${#variants[@]}; k++)); do run "${variants[$(((k + r) % ${#variants[@]}))]}" 1 "$r"; done
  for v in tcp shm shm-event; do run "$v" 50 "$r"; done
  echo "  round $r/$rounds done ($(($(date +%s) - t0)) s, load $(cut -d' ' -f1 /proc/loadavg))"
done
idle0=$(server_cpu)
sleep 2
idle1=$(server_cpu)
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

python3 - "$results" "$idle0" "$idle1" "$load_after" <<'EOF' | tee "${out:-/dev/null}"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
idle = (float(sys.argv[3]) - float(sys.argv[2])) / 2.0
def cells(v, c):
    return [r for r in rows if r["variant"] == v and r["clients"] == str(c)]
def med(v, c, f):
    x = [f(r) for r in cells(v, c)]
    return statistics.median(x) if x else float("nan")
rps = lambda r: float(r["rps"])
def cpu_us(r):  # server + client CPU per request, microseconds
    return (float(r["server_cpu_s"]) + float(r["client_cpu_s"])) / int(r["requests"]) * 1e6
def srv_us(r): return float(r["server_cpu_s"]) / int(r["requests"]) * 1e6
print()
def cores(r):  # cores kept busy during the run: CPU seconds over wall seconds
    return (float(r["server_cpu_s"]) + float(r["client_cpu_s"])) / (int(r["requests"]) / float(r["rps"]))
print("| variant | -c | rps (median) | x tcp (min..max) | p50 ms | CPU us/request (server + client) | of which server | cores busy |")
print("|---|---:|---:|---|---:|---:|---:|---:|")
for c in (1, 50):
    base = {r["round"]: rps(r) for r in cells("tcp", c)}
    for v in ("tcp", "shm", "shm-event", "shm-busy"):
        if not cells(v, c): continue
        ratios = [rps(r) / base[r["round"]] for r in cells(v, c) if r["round"] in base]
        rr = f"{statistics.median(ratios):.2f}x ({min(ratios):.2f}..{max(ratios):.2f})" if ratios else "-"
        print(f"| {v} | {c} | {med(v, c, rps):,.0f} | {rr} | {med(v, c, lambda r: float(r['p50_ms'])):.3f} "
              f"| {med(v, c, cpu_us):.2f} | {med(v, c, srv_us):.2f} | {med(v, c, cores):.2f} |")
print()
shm = [rps(r) for r in cells("shm", 1)]
tcp = [rps(r) for r in cells("tcp", 1)]
ok = bool(shm and tcp) and statistics.median(shm) >= 2 * statistics.median(tcp)
print(f"target shm (default options) >= 2x tcp rps at -c 1: {'PASS' if ok else 'MISS'} "
      f"({statistics.median(shm) / statistics.median(tcp):.2f}x)")
print(f"server CPU while idle for 2 s after the runs: {idle * 100:.1f}% of a core (adaptive polling off when idle)")
print(f"load after: {sys.argv[4]}")
EOF
if [[ -n $out ]]; then cp "$results" "${out%.*}.csv"; echo "  table in $out, every run in ${out%.*}.csv"; fi
