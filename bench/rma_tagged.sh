#!/usr/bin/env bash
# bench/rma_tagged.sh [REPS]
#
# Tagged send/recv bandwidth (rma::TaggedEndpoint over rdma://: the receiver's FIFO posts,
# data RDMA-written into the posted buffers, a completion record per message) against
# ib_write_bw on the same Soft-RoCE device, one guest boot, runs alternating (conduit first
# on odd reps, perftest first on even ones).  Cells: 64 KiB, 1 MiB and 4 MiB messages, 64 MiB
# per run; BW average MB/s (2^20) -- issue 14's target: >= 0.9x ib_write_bw at 64 KiB-4 MiB.
# Both tools have their buffers registered before they time (conduit-rma-perf: the receiver's
# ring before its hello, the sender's buffer by one untimed message).  Besides the ratio of
# the medians, `paired` is the median of each rep's conduit/perftest ratio (adjacent runs: the
# guest's speed is bimodal from run to run, and a pair more often shares the mode).
# Conduit is event-driven unless CONDUIT_RMA_POLL_US=N (both endpoints --busy-poll-us N).
# Prints each cell's median, min..max and the ratio; raw output in
# bench/results/rma_tagged-<date>/.  REPS default 3 [CONDUIT_BENCH_REPS].  Run on the host:
# it re-runs itself in the testbed.  Every run is bounded by timeout(1).
set -euo pipefail
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
results_root=${CONDUIT_BENCH_RESULTS:-$REPO/bench/results}
reps=${1:-${CONDUIT_BENCH_REPS:-3}}
bench_enter_testbed rma_tagged 1200 "${BASH_SOURCE[0]}" "$reps"

dev=${CONDUIT_RDMA_DEVICE:-rxe0}
addr=${CONDUIT_RDMA_ADDR:-192.0.2.1}
perf=$REPO/build/tools/rma/conduit-rma-perf
[[ -x $perf ]] || { echo "rma_tagged.sh: build conduit-rma-perf first" >&2; exit 2; }
out=$results_root/rma_tagged-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out/raw"
{
	echo "date: $(date -Is)  kernel: $(uname -r)  cpus: $(nproc)"
	echo "perftest: $(dpkg-query -W -f '${Version}' perftest 2>/dev/null || echo unknown); reps $reps"
	echo "host load at the start (1/5/15 min): ${CONDUIT_BENCH_HOST_LOAD:-unknown}"
	echo "conduit --busy-poll-us ${CONDUIT_RMA_POLL_US:-0}"
} | tee "$out/setup.txt"
port=22000

conduit_run() { # size file
	timeout -k 5 180 "$perf" --url "rdma://$addr:$((port += 1))" --op tagged --mode bw --size "$1" \
		--iters $((64 * 1048576 / $1)) --depth 128 --busy-poll-us "${CONDUIT_RMA_POLL_US:-0}" >"$2" 2>"$2.err" || true
	awk '/^ *#bytes/ { if (getline > 0) { print $3; exit } }' "$2"
}
perftest_run() { # size file
	local args=(-d "$dev" -F -p $((port += 1)) -s "$1" -n $((64 * 1048576 / $1)))
	timeout -k 5 180 ib_write_bw "${args[@]}" >"$2.server" 2>&1 &
	local srv=$! i
	for ((i = 0; i < 200; i++)); do [[ -n $(ss -Hltn "sport = :$port" 2>/dev/null) ]] && break; sleep 0.1; done
	timeout -k 5 180 ib_write_bw "${args[@]}" "$addr" >"$2" 2>&1 || kill "$srv" 2>/dev/null || true
	wait "$srv" 2>/dev/null || true
	awk '/^ *#bytes/ { if (getline > 0) { print $4; exit } }' "$2"
}
stats() { tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g | awk '{v[NR]=$1} END { if (NR==0) {print "nan nan nan"; exit}; printf "%s %s %s\n", v[int((NR+1)/2)], v[1], v[NR] }'; }

printf '%-16s %-22s %-22s %-7s %-7s %-7s %s\n' cell conduit ib_write_bw ratio paired target result | tee "$out/summary.txt"
cell() { # name size
	local name=$1 size=$2 c=() p=() rep cm cmin cmax pm pmin pmax ratio paired ok
	for ((rep = 1; rep <= reps; rep++)); do
		if ((rep % 2)); then
			c+=("$(conduit_run "$size" "$out/raw/$name-conduit-$rep")")
			p+=("$(perftest_run "$size" "$out/raw/$name-perftest-$rep")")
		else
			p+=("$(perftest_run "$size" "$out/raw/$name-perftest-$rep")")
			c+=("$(conduit_run "$size" "$out/raw/$name-conduit-$rep")")
		fi
	done
	read -r cm cmin cmax <<<"$(echo "${c[*]}" | stats)"
	read -r pm pmin pmax <<<"$(echo "${p[*]}" | stats)"
	ratio=$(awk -v a="$cm" -v b="$pm" 'BEGIN { if (a == "nan" || b == "nan" || b == 0) print "nan"; else printf "%.2f", a / b }')
	paired=$(for ((rep = 0; rep < reps; rep++)); do
		awk -v a="${c[rep]}" -v b="${p[rep]}" 'BEGIN { if (a ~ /^[0-9.]+$/ && b ~ /^[0-9.]+$/ && b > 0) printf "%.4f\n", a / b }'
	done | stats | awk '{ printf "%.2f", $1 }')
	ok=$(awk -v r="$ratio" 'BEGIN { print (r != "nan" && r >= 0.9) ? "PASS" : "MISS" }')
	printf '%-16s %-22s %-22s %-7s %-7s %-7s %s\n' "$name" "$cm ($cmin..$cmax)" "$pm ($pmin..$pmax)" "$ratio" "$paired" ">=0.90" "$ok" |
		tee -a "$out/summary.txt"
}
cell tagged_bw_64K 65536
cell tagged_bw_1M 1048576
cell tagged_bw_4M 4194304
echo "units: MB/s (2^20); conduit: tagged sends, busy_poll_us ${CONDUIT_RMA_POLL_US:-0} (0: event-driven), default slots 64 / max_requests 256, endpoint depth 128" |
	tee -a "$out/summary.txt"
echo "results: $out"
