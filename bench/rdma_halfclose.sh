#!/usr/bin/env bash
# bench/rdma_halfclose.sh [OPTIONS]
#
# What the half-close extension (rdma:// feature bit 3, docs/PROTOCOL.md) costs on the data
# path: the same conduit-bench runs with the extension negotiated (`features=all`) and with
# everything but it (`features=3`: ring + solicited), alternating in one guest boot:
#   pingpong   64-byte ping-pong, one-way latency p50 (rtt/2), default options
#   stream     64 KiB writes one way, MiB/s
# Medians of the repetitions with min..max.  The two variants differ only in the bit, so a
# difference beyond the spread would be the extension's cost.  Exits non-zero only when runs
# failed (no number), never for a difference.
#
# Run on the host, it re-runs itself in the testbed (testbed/run); in the guest
# (CONDUIT_IN_TESTBED set) it uses 192.0.2.1 (CONDUIT_RDMA_ADDR).
#
# Options (environment variables in brackets):
#   --reps N       repetitions per cell [CONDUIT_BENCH_REPS, 5]
#   --iters N      round trips per ping-pong run [CONDUIT_BENCH_LAT_ITERS, 3000]
#   --seconds S    duration of a stream run [CONDUIT_BENCH_STREAM_S, 3]
#   --results DIR  where raw output goes [CONDUIT_BENCH_RESULTS, bench/results]; each
#                  invocation writes DIR/rdma_halfclose-<date>/
#   -h, --help     this text
# The conduit-bench binary is $CONDUIT_BENCH (default build/tools/bench/conduit-bench).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() {
	echo "rdma_halfclose: $*" >&2
	exit 2
}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
reps=${CONDUIT_BENCH_REPS:-5}
iters=${CONDUIT_BENCH_LAT_ITERS:-3000}
seconds=${CONDUIT_BENCH_STREAM_S:-3}
results_root=${CONDUIT_BENCH_RESULTS:-$REPO/bench/results}
orig_args=("$@")
while [[ $# -gt 0 ]]; do
	case $1 in
	--reps) reps=${2:?--reps needs a value}; shift 2 ;;
	--iters) iters=${2:?--iters needs a value}; shift 2 ;;
	--seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
	--results) results_root=${2:?--results needs a value}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option $1" ;;
	esac
done
for v in reps iters seconds; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done

# --- on the host: go into the testbed ----------------------------------------------------
bench_enter_testbed rdma_halfclose 900 "$REPO/bench/rdma_halfclose.sh" "${orig_args[@]}"

# --- in the guest --------------------------------------------------------------------------
addr=${CONDUIT_RDMA_ADDR:-192.0.2.1}
bench=${CONDUIT_BENCH:-build/tools/bench/conduit-bench}
[[ $bench == /* ]] || bench=$REPO/$bench
[[ -x $bench ]] || die "conduit-bench not found at $bench (build it, or set CONDUIT_BENCH)"

out=$results_root/rdma_halfclose-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out/raw"
samples=$out/samples.csv
echo "cell,rep,figure,status" >"$samples"
{
	echo "date: $(date -Is)"
	echo "kernel: $(uname -r)  cpus: $(nproc)  cmdline: $(cat /proc/cmdline)"
	echo "conduit-bench: $bench; reps $reps; ping-pong $iters x 64 B; stream ${seconds} s of 64 KiB writes"
	echo "host load at the start (1/5/15 min): ${CONDUIT_BENCH_HOST_LOAD:-unknown (not started from the host)}"
} | tee "$out/setup.txt"

port=19700
failures=0

run_cell() { # cell rep
	local cell=$1 rep=$2 name fig=nan attempt srv crc features w
	name=$cell-$rep
	case $cell in
	*-hc) features=all ;;
	*) features=3 ;;
	esac
	for attempt in 1 2 3; do
		port=$((port + 1))
		crc=0
		timeout -k 5 120 "$bench" stream --server "rdma://$addr:$port?features=$features" --timeout 60 \
			>"$out/raw/$name.$attempt.server" 2>&1 &
		srv=$!
		for ((w = 0; w < 200; w++)); do # until it listens (a cold guest takes seconds)
			grep -q "listening on" "$out/raw/$name.$attempt.server" 2>/dev/null && break
			sleep 0.1
		done
		if [[ $cell == pingpong-* ]]; then
			timeout -k 5 120 "$bench" stream --client "rdma://$addr:$port?features=$features" -t pingpong -s 64 \
				-n "$iters" -w 0 --json --no-progress >"$out/raw/$name.$attempt.client" \
				2>"$out/raw/$name.$attempt.client.err" || crc=$?
			fig=$(sed -n 's/.*"one_way_us":{[^}]*"p50":\([0-9.]*\).*/\1/p' "$out/raw/$name.$attempt.client")
		else
			timeout -k 5 120 "$bench" stream --client "rdma://$addr:$port?features=$features" -t stream -s 64K \
				-D "$seconds" -w 0 --json --no-progress >"$out/raw/$name.$attempt.client" \
				2>"$out/raw/$name.$attempt.client.err" || crc=$?
			fig=$(sed -n 's/.*"mb_per_s":\([0-9.]*\).*/\1/p' "$out/raw/$name.$attempt.client" | head -1)
		fi
		[[ $crc == 0 ]] || { sleep 1; kill "$srv" 2>/dev/null || true; }
		wait "$srv" 2>/dev/null || true
		[[ $fig =~ ^[0-9]+(\.[0-9]*)?$ && ! $fig =~ ^0*(\.0*)?$ ]] || fig=nan
		[[ $crc != 0 || $fig == nan ]] || break
		echo "  $name: attempt $attempt failed (rc=$crc), see $out/raw/$name.$attempt.*" >&2
		fig=nan
	done
	[[ $fig == nan ]] && failures=$((failures + 1))
	echo "$cell,$rep,$fig,$([[ $fig == nan ]] && echo failed || echo "ok-attempt-$attempt")" >>"$samples"
	printf '  %-16s %s\n' "$name" "$fig"
}

cells=(pingpong-hc pingpong-nohc stream-hc stream-nohc)
for ((rep = 1; rep <= reps; rep++)); do
	echo "rep $rep (guest load $(cut -d' ' -f1-3 /proc/loadavg)):"
	for ((i = 0; i < ${#cells[@]}; i++)); do
		# Within a rep the with/without pair swaps order every other rep, so drift hits both.
		c=${cells[$i]}
		if ((rep % 2 == 0)); then
			case $c in
			*-nohc) c=${c%-nohc}-hc ;;
			*-hc) c=${c%-hc}-nohc ;;
			esac
		fi
		run_cell "$c" "$rep"
	done
done

stats() { # CELL -> "median min max"
	awk -F, -v c="$1" '$1 == c && $3 != "nan" { print $3 }' "$samples" | sort -g | awk '
		{ v[NR] = $1 } END { if (NR == 0) { print "nan nan nan"; exit }
		m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; print m, v[1], v[NR] }'
}
{
	echo
	echo "| cell | features=all (half-close) | features=3 (without) | ratio |"
	echo "|---|---|---|---|"
	for what in pingpong stream; do
		read -r m1 lo1 hi1 <<<"$(stats "$what-hc")"
		read -r m0 lo0 hi0 <<<"$(stats "$what-nohc")"
		unit=$([[ $what == pingpong ]] && echo "us one-way p50" || echo "MiB/s")
		ratio=$(awk -v a="$m1" -v b="$m0" 'BEGIN { if (b + 0 == 0) print "nan"; else printf "%.2f", a / b }')
		echo "| $what ($unit) | $m1 ($lo1..$hi1) | $m0 ($lo0..$hi0) | $ratio |"
	done
} | tee "$out/summary.md"
[[ $failures == 0 ]] || { echo "rdma_halfclose: $failures runs failed" >&2; exit 1; }
