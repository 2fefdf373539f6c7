#!/usr/bin/env bash
# bench/rpc_vs_grpc.sh [OPTIONS]
#
# conduit::rpc against gRPC C++ (Debian's libgrpc++ 1.51), same echo.proto, same payloads,
# same closed-loop client logic and output (tools/rpc/bench_report.h), on loopback only:
#   tools      conduit over tcp://, conduit over shm://, gRPC over TCP
#   cells      payload --sizes x concurrency --conc, one connection
#   modes      default: each server with its default threading, nothing pinned
#              pinned:  both servers with one serving thread, pinned to CPU 0, every
#                       client pinned to CPU 1 (the issue's "pinned to one server thread")
# The tools alternate within each repetition so drift hits all alike; each cell is the
# median over --reps runs, with min..max.  The host load (uptime) is recorded with every
# run: these machines are shared.
#
# Targets, PASS/MISS per cell (a MISS never fails the script):
#   conduit tcp QPS >= 3 x gRPC QPS          every cell up to 4 KiB
#   conduit tcp p50 <= 0.5 x gRPC p50         concurrency 1
#   conduit shm QPS >= 2 x conduit tcp QPS    concurrency 1
# With --rdma, the guest part: conduit rdma:// vs tcp:// at the same cells inside the
# Soft-RoCE testbed (reported, no target: Soft-RoCE says nothing about real NICs).
#
# Options (environment variables in brackets):
#   --reps N         repetitions [CONDUIT_BENCH_REPS, 3]
#   --seconds S      measured seconds per cell [CONDUIT_BENCH_SECONDS, 1.5]
#   --sizes LIST     payload sizes [CONDUIT_BENCH_SIZES, 64,4K,64K,1M]
#   --conc LIST      concurrency [CONDUIT_BENCH_CONC, 1,16,64]
#   --modes LIST     default,pinned [CONDUIT_BENCH_MODES, default,pinned]
#   --rdma           also run the guest part (boots the testbed)
#   --results DIR    raw output under DIR/rpc_vs_grpc-<date>/ [CONDUIT_BENCH_RESULTS, bench/results]
#   -h, --help       this text
# Binaries come from $BUILD (default build/), built with cmake when missing.  gnuplot
# (optional) draws rpc_vs_grpc_qps.png into the results directory.  Runtime about 7
# minutes with the defaults.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() {
	echo "rpc_vs_grpc: $*" >&2
	exit 2
}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
reps=${CONDUIT_BENCH_REPS:-3}
seconds=${CONDUIT_BENCH_SECONDS:-1.5}
sizes=${CONDUIT_BENCH_SIZES:-64,4K,64K,1M}
conc=${CONDUIT_BENCH_CONC:-1,16,64}
modes=${CONDUIT_BENCH_MODES:-default,pinned}
rdma=0
results_root=${CONDUIT_BENCH_RESULTS:-$REPO/bench/results}
args=("$@")
while (($#)); do
	case $1 in
	--reps) reps=$2; shift 2 ;;
	--seconds) seconds=$2; shift 2 ;;
	--sizes) sizes=$2; shift 2 ;;
	--conc) conc=$2; shift 2 ;;
	--modes) modes=$2; shift 2 ;;
	--rdma) rdma=1; shift ;;
	--results) results_root=$2; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done

BUILD=${BUILD:-$REPO/build}
bench=$BUILD/tools/rpc/conduit-rpc-bench
grpc=$BUILD/tools/rpc/conduit-rpc-grpc-bench

if [[ -n ${CONDUIT_IN_TESTBED:-} ]]; then
	# --- guest part: rdma:// vs tcp:// on the rxe device's address ------------------------------
	out=$CONDUIT_BENCH_RESULTS
	addr=${CONDUIT_RDMA_ADDR:?the testbed sets CONDUIT_RDMA_ADDR}
	for ((r = 1; r <= reps; r++)); do
		for t in tcp rdma; do
			port=$((7400 + r))
			[[ $t == rdma ]] && port=$((7500 + r))
			"$bench" server --listen "$t://$addr:$port" >"$out/guest-server-$t-$r.log" 2>&1 &
			spid=$!
			sleep 2
			"$bench" client --url "$t://$addr:$port" -s "$sizes" -c "$conc" -D "$seconds" --json \
				>>"$out/guest-$t.jsonl" 2>"$out/guest-client-$t-$r.log" || echo "rpc_vs_grpc: guest $t run $r failed" >&2
			kill "$spid" 2>/dev/null || true
			wait "$spid" 2>/dev/null || true
		done
	done
	exit 0
fi

if [[ ! -x $bench || ! -x $grpc ]]; then
	echo "rpc_vs_grpc: building conduit-rpc-bench and conduit-rpc-grpc-bench in $BUILD" >&2
	cmake -S "$REPO" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build "$BUILD" --target conduit-rpc-bench conduit-rpc-grpc-bench >/dev/null
fi
[[ -x $grpc ]] || die "conduit-rpc-grpc-bench was not built (install libgrpc++-dev protobuf-compiler-grpc)"

out=$results_root/rpc_vs_grpc-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
echo "rpc_vs_grpc: results in $out" >&2
{
	echo "date: $(date -Is)"
	echo "host: $(uname -srm), $(nproc) CPUs"
	echo "command: bench/rpc_vs_grpc.sh ${args[*]}"
	echo "reps=$reps seconds=$seconds sizes=$sizes conc=$conc modes=$modes"
} >"$out/run.txt"

port=7300
wait_listening() { # wait_listening LOG
	for _ in $(seq 100); do
		grep -q '^listening' "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	die "server did not start: $(cat "$1")"
}
run_tool() { # run_tool MODE TOOL REP
	local mode=$1 tool=$2 rep=$3 srv_pin=() cli_pin=() threads=() log url
	port=$((port + 1))
	if [[ $mode == pinned ]]; then
		srv_pin=(taskset -c 0)
		cli_pin=(taskset -c 1)
		threads=(--threads 1)
	fi
	log=$out/server-$mode-$tool-$rep.log
	case $tool in
	grpc)
		"${srv_pin[@]}" "$grpc" server --listen "127.0.0.1:$port" "${threads[@]}" >"$log" 2>&1 &
		url=127.0.0.1:$port
		;;
	tcp)
		"${srv_pin[@]}" "$bench" server --listen "tcp://127.0.0.1:$port" "${threads[@]}" >"$log" 2>&1 &
		url=tcp://127.0.0.1:$port
		;;
	shm)
		"${srv_pin[@]}" "$bench" server --listen "shm://rpc-vs-grpc-$$-$port" "${threads[@]}" >"$log" 2>&1 &
		url=shm://rpc-vs-grpc-$$-$port
		;;
	esac
	local spid=$!
	wait_listening "$log"
	echo "load $(cut -d' ' -f1-3 /proc/loadavg) mode=$mode tool=$tool rep=$rep" >>"$out/run.txt"
	local client=$bench
	[[ $tool == grpc ]] && client=$grpc
	if ! "${cli_pin[@]}" "$client" client --url "$url" -s "$sizes" -c "$conc" -D "$seconds" --json \
		2>>"$out/client-errors.log" | sed "s/^{/{\"mode\":\"$mode\",\"transport\":\"$tool\",\"rep\":$rep,/" >>"$out/raw.jsonl"; then
		echo "rpc_vs_grpc: $tool ($mode, run $rep) failed; see $out/client-errors.log" >&2
	fi
	kill "$spid" 2>/dev/null || true
	wait "$spid" 2>/dev/null || true
}

IFS=, read -r -a mode_list <<<"$modes"
for mode in "${mode_list[@]}"; do
	for ((r = 1; r <= reps; r++)); do
		for tool in tcp grpc shm; do
			echo "rpc_vs_grpc: $mode run $r/$reps: $tool" >&2
			run_tool "$mode" "$tool" "$r"
		done
	done
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/run.txt"

if ((rdma)); then
	mkdir -p "$out/guest"
	CONDUIT_BENCH_RESULTS=$out/guest CONDUIT_BENCH_REPS=$reps CONDUIT_BENCH_SECONDS=$seconds \
		results_root=$out/guest bash -c "source '$REPO/bench/lib.sh'; REPO='$REPO'; results_root='$out/guest'; \
		bench_enter_testbed rpc_vs_grpc 1500 '$REPO/bench/rpc_vs_grpc.sh' --reps $reps --seconds $seconds --sizes $sizes --conc $conc" ||
		echo "rpc_vs_grpc: the guest part failed" >&2
fi

python3 "$REPO/bench/rpc_vs_grpc_report.py" "$out"
if command -v gnuplot >/dev/null; then
	gnuplot "$out/plot.gp" && echo "rpc_vs_grpc: plot $out/rpc_vs_grpc_qps.png" >&2
fi
