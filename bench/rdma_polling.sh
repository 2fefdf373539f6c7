#!/usr/bin/env bash
# bench/rdma_polling.sh [OPTIONS]
#
# rdma:// 64-byte ping-pong latency, polling against event-driven, each against its perftest
# twin on the same Soft-RoCE device in one guest boot (DESIGN.md, Testbed: compare like
# with like):
#   conduit-poll   conduit-bench stream over rdma:// with default options (adaptive
#                  polling, poll_us=100)            vs  perftest-poll   ib_send_lat
#   conduit-event  the same with poll_us=0 (arm the CQ and sleep at once)
#                                                   vs  perftest-event  ib_send_lat -e
#   conduit-wide   poll_us=2000: the adaptive window's bound above a TCG round trip (the
#                  default's 100 us is below one, so under TCG it mostly sleeps; on a
#                  hardware NIC a round trip is a few us)  vs  perftest-poll
# Figures: one-way latency p50 (conduit-bench: rtt/2; ib_send_lat: t_typical, also rtt/2)
# in microseconds, median of the repetitions with min..max; for conduit also the CPU time
# per round trip of both processes together (user+sys, setup included).  The four cells
# run in an order that rotates every repetition, so drift hits all alike.  Exits non-zero
# only when runs failed (no number), never for a missed target.
#
# Run on the host, it re-runs itself in the testbed (testbed/run); in the guest
# (CONDUIT_IN_TESTBED set) it uses rxe0 at 192.0.2.1 (CONDUIT_RDMA_DEVICE/_ADDR).
#
# Options (environment variables in brackets):
#   --reps N       repetitions per cell [CONDUIT_BENCH_REPS, 5]
#   --iters N      round trips per run [CONDUIT_BENCH_LAT_ITERS, 5000]
#   --results DIR  where raw output goes [CONDUIT_BENCH_RESULTS, bench/results]; each
#                  invocation writes DIR/rdma_polling-<date>/
#   -h, --help     this text
# The conduit-bench binary is $CONDUIT_BENCH (default build/tools/bench/conduit-bench).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() {
	echo "rdma_polling: $*" >&2
	exit 2
}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
reps=${CONDUIT_BENCH_REPS:-5}
iters=${CONDUIT_BENCH_LAT_ITERS:-5000}
results_root=${CONDUIT_BENCH_RESULTS:-$REPO/bench/results}
orig_args=("$@")
while [[ $# -gt 0 ]]; do
	case $1 in
	--reps) reps=${2:?--reps needs a value}; shift 2 ;;
	--iters) iters=${2:?--iters needs a value}; shift 2 ;;
	--results) results_root=${2:?--results needs a value}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option $1" ;;
	esac
done
for v in reps iters; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done
[[ $iters -ge 5 ]] || die "--iters must be at least 5 (perftest's minimum)"

# --- on the host: go into the testbed ----------------------------------------------------
bench_enter_testbed rdma_polling 1800 "$REPO/bench/rdma_polling.sh" "${orig_args[@]}"

# --- in the guest --------------------------------------------------------------------------
dev=${CONDUIT_RDMA_DEVICE:-rxe0}
addr=${CONDUIT_RDMA_ADDR:-192.0.2.1}
bench=${CONDUIT_BENCH:-build/tools/bench/conduit-bench}
[[ $bench == /* ]] || bench=$REPO/$bench
[[ -x $bench ]] || die "conduit-bench not found at $bench (build it, or set CONDUIT_BENCH)"
command -v ib_send_lat >/dev/null || die "perftest's ib_send_lat is not installed"

out=$results_root/rdma_polling-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out/raw"
samples=$out/samples.csv
echo "cell,rep,one_way_p50_us,cpu_us_per_rtt,status" >"$samples"
{
	echo "date: $(date -Is)"
	echo "kernel: $(uname -r)  cpus: $(nproc)  cmdline: $(cat /proc/cmdline)"
	echo "conduit-bench: $bench; perftest $(dpkg-query -W -f '${Version}' perftest 2>/dev/null || echo unknown)"
	echo "reps $reps, $iters round trips of 64 B per run"
	echo "host load at the start (1/5/15 min): ${CONDUIT_BENCH_HOST_LOAD:-unknown (not started from the host)}"
} | tee "$out/setup.txt"

port=19500
failures=0
TIMEFORMAT='%U %S'

wait_tcp_listen() {
	local i
	for ((i = 0; i < 200; i++)); do
		[[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]] && return 0
		sleep 0.1
	done
	return 1
}

# Sums the "user sys" lines bash's `time` wrote into the given files: CPU seconds.
cpu_of() { cat "$@" 2>/dev/null | awk 'NF == 2 { s += $1 + $2 } END { printf "%.6f", s }'; }

run_cell() { # cell rep
	local cell=$1 rep=$2 name fig=nan cpu=nan attempt srv crc opts w
	name=$cell-$rep
	for attempt in 1 2 3; do
		port=$((port + 1))
		crc=0
		case $cell in
		perftest-poll | perftest-event)
			local e=()
			[[ $cell == perftest-event ]] && e=(-e)
			timeout -k 5 120 ib_send_lat -d "$dev" -s 64 -n "$iters" -F "${e[@]}" -p "$port" \
				>"$out/raw/$name.$attempt.server" 2>&1 &
			srv=$!
			wait_tcp_listen "$port" || true
			timeout -k 5 120 ib_send_lat -d "$dev" -s 64 -n "$iters" -F "${e[@]}" -p "$port" "$addr" \
				>"$out/raw/$name.$attempt.client" 2>&1 || crc=$?
			[[ $crc == 0 ]] || { sleep 1; kill "$srv" 2>/dev/null || true; }
			wait "$srv" 2>/dev/null || true
			fig=$(awk '/^ *#bytes/ { if (getline > 0) { print $5; exit } }' "$out/raw/$name.$attempt.client")
			;;
		conduit-poll | conduit-event | conduit-wide)
			opts=""
			[[ $cell == conduit-event ]] && opts="?poll_us=0"
			[[ $cell == conduit-wide ]] && opts="?poll_us=2000"
			{ time timeout -k 5 120 "$bench" stream --server "rdma://$addr:$port$opts" --timeout 60 \
				>"$out/raw/$name.$attempt.server" 2>&1; } 2>"$out/raw/$name.$attempt.server.cpu" &
			srv=$!
			for ((w = 0; w < 200; w++)); do # until it listens (a cold guest takes seconds)
				grep -q "listening on" "$out/raw/$name.$attempt.server" 2>/dev/null && break
				sleep 0.1
			done
			{ time timeout -k 5 120 "$bench" stream --client "rdma://$addr:$port$opts" -t pingpong -s 64 \
				-n "$iters" -w 0 --json --no-progress >"$out/raw/$name.$attempt.client" \
				2>"$out/raw/$name.$attempt.client.err"; } 2>"$out/raw/$name.$attempt.client.cpu" || crc=$?
			[[ $crc == 0 ]] || { sleep 1; kill "$srv" 2>/dev/null || true; }
			wait "$srv" 2>/dev/null || true
			fig=$(sed -n 's/.*"one_way_us":{[^}]*"p50":\([0-9.]*\).*/\1/p' "$out/raw/$name.$attempt.client")
			cpu=$(awk -v s="$(cpu_of "$out/raw/$name.$attempt.server.cpu" "$out/raw/$name.$attempt.client.cpu")" \
				-v n="$iters" 'BEGIN { printf "%.2f", s * 1e6 / n }')
			;;
		esac
		[[ $fig =~ ^[0-9]+(\.[0-9]*)?$ && ! $fig =~ ^0*(\.0*)?$ ]] || fig=nan
		[[ $crc != 0 || $fig == nan ]] || break
		echo "  $name: attempt $attempt failed (rc=$crc), see $out/raw/$name.$attempt.*" >&2
		fig=nan
	done
	[[ $fig == nan ]] && failures=$((failures + 1))
	echo "$cell,$rep,$fig,$cpu,$([[ $fig == nan ]] && echo failed || echo "ok-attempt-$attempt")" >>"$samples"
	printf '  %-20s %s us one-way p50, %s us CPU per round trip\n' "$name" "$fig" "$cpu"
}

cells=(conduit-poll perftest-poll conduit-event perftest-event conduit-wide)
for ((rep = 1; rep <= reps; rep++)); do
	echo "rep $rep (guest load $(cut -d' ' -f1-3 /proc/loadavg)):"
	for ((i = 0; i < ${#cells[@]}; i++)); do
		run_cell "${cells[$(((i + rep - 1) % ${#cells[@]}))]}" "$rep"
	done
done

# --- summary ---------------------------------------------------------------------------
stats() { # CELL COLUMN -> "median min max"
	awk -F, -v c="$1" -v k="$2" '$1 == c && $k != "nan" { print $k }' "$samples" | sort -g | awk '
		{ v[NR] = $1 } END { if (NR == 0) { print "nan nan nan"; exit }
		printf "%.2f %.2f %.2f\n", v[int((NR + 1) / 2)], v[1], v[NR] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || b == 0) print "nan"; else printf "%.2f", a / b }'; }
{
	echo
	echo "one-way latency p50, 64 B, us: median (min..max) of $reps runs of $iters round trips"
	echo
	echo "| mode | conduit rdma:// | ib_send_lat | conduit / perftest | conduit CPU per round trip (us, both sides) |"
	echo "| --- | --- | --- | --- | --- |"
	for m in poll event wide; do
		read -r cm cmin cmax <<<"$(stats "conduit-$m" 3)"
		read -r pm pmin pmax <<<"$(stats "perftest-$([[ $m == event ]] && echo event || echo poll)" 3)"
		read -r um umin umax <<<"$(stats "conduit-$m" 4)"
		case $m in
		poll) label="polling (conduit default poll_us=100; ib_send_lat)" ;;
		event) label="event (poll_us=0; ib_send_lat -e)" ;;
		wide) label="polling, poll_us=2000 (ib_send_lat)" ;;
		esac
		echo "| $label | $cm ($cmin..$cmax) | $pm ($pmin..$pmax) | $(ratio "$cm" "$pm") | $um ($umin..$umax) |"
	done
	echo
	echo "guest load at the end: $(cut -d' ' -f1-3 /proc/loadavg); failed runs: $failures"
} | tee "$out/summary.txt"
[[ $failures == 0 ]]
