#!/usr/bin/env bash
# bench/rma.sh [REPS]
#
# conduit-rma-perf against perftest on the same Soft-RoCE device, one guest boot, runs
# alternating (conduit first on odd reps, perftest first on even ones).  Cells:
#   latency   read 64 B, write 64 B (ping-pong, as ib_write_lat), atomic (fetch-and-add) 8 B:
#             t_typical, conduit (event-driven: completion channel in epoll) against perftest
#             -e where perftest supports events for that test, else plain perftest (polling;
#             marked) -- target <= 1.1x;
#             the *_poll cells: conduit with --busy-poll-us against plain perftest (both poll)
#   bandwidth read and write at 64 KiB, 128 in flight: BW average MB/s (2^20) -- target
#             >= 0.95x; event-driven and (*_poll) polling conduit against perftest
# Prints each cell's medians, min..max and the ratio; raw output in
# bench/results/rma-<date>/.  REPS default 3 [CONDUIT_BENCH_REPS].  Run on the host: it
# re-runs itself in the testbed.  Every run is bounded by timeout(1).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
results_root=${CONDUIT_BENCH_RESULTS:-$REPO/bench/results}
reps=${1:-${CONDUIT_BENCH_REPS:-3}}
bench_enter_testbed rma 1800 "${BASH_SOURCE[0]}" "$reps"

dev=${CONDUIT_RDMA_DEVICE:-rxe0}
addr=${CONDUIT_RDMA_ADDR:-192.0.2.1}
perf=$REPO/build/tools/rma/conduit-rma-perf
[[ -x $perf ]] || { echo "rma.sh: build conduit-rma-perf first" >&2; exit 2; }
out=$results_root/rma-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out/raw"
{
	echo "date: $(date -Is)  kernel: $(uname -r)  cpus: $(nproc)"
	echo "perftest: $(dpkg-query -W -f '${Version}' perftest 2>/dev/null || echo unknown); reps $reps"
	echo "host load at the start (1/5/15 min): ${CONDUIT_BENCH_HOST_LOAD:-unknown}"
} | tee "$out/setup.txt"
port=21000

poll_us=${CONDUIT_RMA_POLL_US:-1000} # the *_poll cells' --busy-poll-us
conduit_run() { # op mode size file busy_poll_us
	local n=2000
	[[ $2 == bw ]] && n=$((64 * 1048576 / $3))
	timeout -k 5 120 "$perf" --url "rdma://$addr:$((port += 1))" --op "$1" --mode "$2" --size "$3" --iters "$n" \
		--depth 128 --busy-poll-us "$5" >"$4" 2>"$4.err" || true
	awk -v col="$([[ $2 == bw ]] && echo 3 || echo 5)" '/^ *#bytes/ { if (getline > 0) { print $col; exit } }' "$4"
}
perftest_run() { # test size events file
	local args=(-d "$dev" -F -p $((port += 1))) kind=${1##*_}
	[[ $1 == atomic_lat ]] || args+=(-s "$2")
	[[ $kind == lat ]] && args+=(-n 2000)
	[[ $kind == bw ]] && args+=(-n $((64 * 1048576 / $2)))
	[[ $3 == 1 ]] && args+=(-e)
	timeout -k 5 120 "ib_$1" "${args[@]}" >"$4.server" 2>&1 &
	local srv=$! i
	for ((i = 0; i < 200; i++)); do [[ -n $(ss -Hltn "sport = :$port" 2>/dev/null) ]] && break; sleep 0.1; done
	timeout -k 5 120 "ib_$1" "${args[@]}" "$addr" >"$4" 2>&1 || kill "$srv" 2>/dev/null || true
	wait "$srv" 2>/dev/null || true
	awk -v col="$([[ $kind == bw ]] && echo 4 || echo 5)" '/^ *#bytes/ { if (getline > 0) { print $col; exit } }' "$4"
}
stats() { tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '{v[NR]=$1} END { if (NR==0) {print "nan nan nan"; exit}; printf "%s %s %s\n", v[int((NR+1)/2)], v[1], v[NR] }'; }

printf '%-18s %-22s %-22s %-8s %-7s %s\n' cell conduit "perftest" ratio target result | tee "$out/summary.txt"
cell() { # name op mode size ptest [busy_poll_us]
	local name=$1 op=$2 mode=$3 size=$4 ptest=$5 bp=${6:-0} c=() p=() rep ev=1 label
	# Does perftest support events for this test?  (ib_write_lat does not.)
	if [[ $mode != bw && $bp == 0 ]]; then
		ev=1
		perftest_run "$ptest" "$size" 1 "$out/raw/$name-probe" >/dev/null
		grep -q '^ *#bytes' "$out/raw/$name-probe" || ev=0
	else
		ev=0
	fi
	for ((rep = 1; rep <= reps; rep++)); do
		if ((rep % 2)); then
			c+=("$(conduit_run "$op" "$mode" "$size" "$out/raw/$name-conduit-$rep" "$bp")")
			p+=("$(perftest_run "$ptest" "$size" "$ev" "$out/raw/$name-perftest-$rep")")
		else
			p+=("$(perftest_run "$ptest" "$size" "$ev" "$out/raw/$name-perftest-$rep")")
			c+=("$(conduit_run "$op" "$mode" "$size" "$out/raw/$name-conduit-$rep" "$bp")")
		fi
	done
	read -r cm cmin cmax <<<"$(echo "${c[*]}" | stats)"
	read -r pm pmin pmax <<<"$(echo "${p[*]}" | stats)"
	label=$([[ $ev == 1 ]] && echo "-e" || echo "polling")
	[[ $mode == bw ]] && label=bw
	local ratio target ok
	ratio=$(awk -v a="$cm" -v b="$pm" 'BEGIN { if (a == "nan" || b == "nan" || b == 0) print "nan"; else printf "%.2f", a / b }')
	if [[ $mode == bw ]]; then target=">=0.95"; ok=$(awk -v r="$ratio" 'BEGIN { print (r != "nan" && r >= 0.95) ? "PASS" : "MISS" }')
	else target="<=1.10"; ok=$(awk -v r="$ratio" 'BEGIN { print (r != "nan" && r <= 1.10) ? "PASS" : "MISS" }'); fi
	printf '%-18s %-22s %-22s %-8s %-7s %s\n' "$name" "$cm ($cmin..$cmax)" "$pm ($pmin..$pmax) $label" "$ratio" "$target" "$ok" |
		tee -a "$out/summary.txt"
	[[ $mode == bw ]] || runs+=("$(printf '%-18s conduit %s\n%-18s perftest %s' "$name" "$(per_run "$name-conduit")" "" "$(per_run "$name-perftest")")")
}
# Each latency run's t_min/t_typical, in rep order: the guest has a slow mode (the whole vCPU
# runs ~1.8x slower, conduit's own code included; docs/BENCHMARKS.md) that comes and goes, so
# a run whose t_typical is far above its t_min spent most of its ops in it.
per_run() { # raw file prefix
	local f rep line=""
	for ((rep = 1; rep <= reps; rep++)); do
		f=$out/raw/$1-$rep
		line+="$(awk '/^ *#bytes/ { if (getline > 0) { printf "%s/%s", $3, $5; exit } }' "$f" 2>/dev/null || true) "
	done
	echo "$line"
}
runs=()
cell read_lat_64 read lat 64 read_lat
cell write_lat_64 write pingpong 64 write_lat
cell atomic_lat_8 atomic lat 8 atomic_lat
cell read_bw_64K read bw 65536 read_bw
cell write_bw_64K write bw 65536 write_bw
cell read_lat_64_poll read lat 64 read_lat "$poll_us"
cell write_lat_64_poll write pingpong 64 write_lat "$poll_us"
cell atomic_lat_8_poll atomic lat 8 atomic_lat "$poll_us"
cell read_bw_64K_poll read bw 65536 read_bw "$poll_us"
cell write_bw_64K_poll write bw 65536 write_bw "$poll_us"
echo "units: latency t_typical usec, bandwidth MB/s (2^20); conduit is event-driven, *_poll cells" \
	"--busy-poll-us $poll_us; write latency is a ping-pong on both sides (conduit-rma-perf --mode" \
	"pingpong, as ib_write_lat: half a round trip, each side polling its buffer)" | tee -a "$out/summary.txt"
{
	echo "latency runs, t_min/t_typical usec in rep order:"
	printf '%s\n' "${runs[@]}"
} | tee -a "$out/summary.txt"
echo "results: $out"
