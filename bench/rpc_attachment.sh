#!/usr/bin/env bash
# bench/rpc_attachment.sh [OPTIONS]
#
# Big raw bytes beside an RPC, on loopback: the echo call carries SIZE bytes each way.
#   conduit-tcp-att   conduit over tcp://, the bytes as an attachment (64 B body)
#   conduit-shm-att   conduit over shm://, the bytes as an attachment (64 B body)
#   conduit-tcp-body  conduit over tcp://, the bytes inside the protobuf body
#   grpc-body         gRPC C++ (Debian's 1.51), the bytes inside the protobuf body (gRPC
#                     has no attachments)
# The four alternate within each repetition; each cell is the median over --reps runs with
# min..max, and the host load (uptime) is recorded before every run.  One connection.
#
# Options (environment variables in brackets):
#   --reps N         repetitions [CONDUIT_BENCH_REPS, 3]
#   --seconds S      measured seconds per cell [CONDUIT_BENCH_SECONDS, 1.5]
#   --size SIZE      bytes each way [CONDUIT_BENCH_ATT, 1M]
#   --conc LIST      concurrency [CONDUIT_BENCH_CONC, 1,16]
#   --results DIR    raw output under DIR/rpc_attachment-<date>/ [CONDUIT_BENCH_RESULTS, bench/results]
#   -h, --help       this text
# Binaries come from $BUILD (default build/).  Runtime about 1 minute with the defaults.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() {
	echo "rpc_attachment: $*" >&2
	exit 2
}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
reps=${CONDUIT_BENCH_REPS:-3}
seconds=${CONDUIT_BENCH_SECONDS:-1.5}
size=${CONDUIT_BENCH_ATT:-1M}
conc=${CONDUIT_BENCH_CONC:-1,16}
results_root=${CONDUIT_BENCH_RESULTS:-$REPO/bench/results}
args=("$@")
while (($#)); do
	case $1 in
	--reps) reps=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--size) size=$2; shift 2 ;;
	--conc) conc=$2; shift 2 ;;
	--results) results_root=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done

BUILD=${BUILD:-$REPO/build}
bench=$BUILD/tools/rpc/conduit-rpc-bench
grpc=$BUILD/tools/rpc/conduit-rpc-grpc-bench
[[ -x $bench ]] || die "$bench missing (cmake --build build --target conduit-rpc-bench)"
tools="conduit-tcp-att conduit-shm-att conduit-tcp-body"
if [[ -x $grpc ]]; then tools="$tools grpc-body"; else echo "rpc_attachment: no $grpc: gRPC row skipped" >&2; fi

out=$results_root/rpc_attachment-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
{
	echo "date: $(date -Is)"
	echo "host: $(uname -srm), $(nproc) CPUs"
	echo "command: bench/rpc_attachment.sh ${args[*]}"
	echo "reps=$reps seconds=$seconds size=$size conc=$conc"
} >"$out/run.txt"

port=7600
wait_listening() {
	for _ in $(seq 100); do
		grep -q '^listening' "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	die "server did not start: $(cat "$1")"
}
run_tool() { # run_tool TOOL REP
	local tool=$1 rep=$2 log url client=$bench shape
	port=$((port + 1))
	log=$out/server-$tool-$rep.log
	case $tool in
	conduit-tcp-*) "$bench" server --listen "tcp://127.0.0.1:$port" >"$log" 2>&1 & url=tcp://127.0.0.1:$port ;;
	conduit-shm-*) "$bench" server --listen "shm://rpc-att-$$-$port" >"$log" 2>&1 & url=shm://rpc-att-$$-$port ;;
	grpc-*) "$grpc" server --listen "127.0.0.1:$port" >"$log" 2>&1 & url=127.0.0.1:$port client=$grpc ;;
	esac
	local spid=$!
	wait_listening "$log"
	if [[ $tool == *-att ]]; then shape=(-s 64 -a "$size"); else shape=(-s "$size"); fi
	echo "load $(cut -d' ' -f1-3 /proc/loadavg) tool=$tool rep=$rep" >>"$out/run.txt"
	"$client" client --url "$url" "${shape[@]}" -c "$conc" -D "$seconds" --json 2>>"$out/client-errors.log" |
		sed "s/^{/{\"case\":\"$tool\",\"rep\":$rep,/" >>"$out/raw.jsonl" ||
		echo "rpc_attachment: $tool run $rep failed; see $out/client-errors.log" >&2
	kill "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
}

for ((r = 1; r <= reps; r++)); do
	for tool in $tools; do
		echo "rpc_attachment: run $r/$reps: $tool" >&2
		run_tool "$tool" "$r"
	done
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/run.txt"

python3 - "$out" <<'EOF'
import json, statistics, sys
out = sys.argv[1]
rows = {}
for line in open(f"{out}/raw.jsonl"):
    r = json.loads(line)
    rows.setdefault((r["case"], r["concurrency"]), []).append(r)
def cell(rs, key):
    v = sorted(x[key] for x in rs)
    return f"{statistics.median(v):.1f} ({v[0]:.1f}..{v[-1]:.1f})"
lines = ["| case | conc | QPS | p50 µs | p99 µs | CPU µs/call | errors |", "|---|---|---|---|---|---|---|"]
for (case, c), rs in sorted(rows.items(), key=lambda kv: (kv[0][1], kv[0][0])):
    lines.append(f"| {case} | {c} | {cell(rs, 'qps')} | {cell(rs, 'p50_us')} | {cell(rs, 'p99_us')} | "
                 f"{cell(rs, 'cpu_us_per_call')} | {sum(x['errors'] for x in rs)} |")
open(f"{out}/table.md", "w").write("\n".join(lines) + "\n")
print("\n".join(lines))
EOF
echo "rpc_attachment: $out/table.md" >&2
