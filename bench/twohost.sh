#!/usr/bin/env bash
# bench/twohost.sh [OPTIONS]
#
# conduit-bench over rdma:// and tcp:// between the two guests of the two-host testbed
# (testbed/run --hosts 2; client on a, server on b), against perftest between the same two
# guests in the same boot, on a clean link and with 1% loss each way (netem on both).
# Tools alternate per repetition; each cell is the median, with min..max.
#
#   cell     conduit-bench                                   peer                 target
#   bw_64K   stream -s 64K (event-driven), MB/s             ib_write_bw -s 65536 >= 0.9x
#   lat_64   pingpong -s 64, one-way p50, polling (the loop  ib_send_lat -s 64    <= 1.1x
#            and the CQ: --busy-poll-us, busy_poll_us=)      t_typical (polling)
#   tcp_*    the same over tcp:// (kernel TCP on the same link), for reference
#
# Both tools use the same QP timing: timeout 14 (4.096 us x 2^14 = 67 ms per try, perftest's
# default, its -u) and retry count 7 (perftest's fixed value; conduit's retry_cnt=), which
# matters at 1% loss: a lost packet at the tail of a burst waits one timeout.
#
# Options (environment variables in brackets):
#   --reps N       repetitions per tool and cell [CONDUIT_BENCH_REPS, 3]
#   --seconds S    duration of each bandwidth run (-D) [CONDUIT_BENCH_SECONDS, 3]
#   --lat-iters N  round trips per latency run [CONDUIT_BENCH_LAT_ITERS, 1000]
#   --results DIR  raw output goes to DIR/twohost-<date>/ [CONDUIT_BENCH_RESULTS, bench/results]
# Prints a markdown table per condition (for docs/BENCHMARKS.md) and writes raw outputs and
# samples.csv.  Exits non-zero only when a cell got no number, never for a missed target.
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() {
	echo "twohost bench: $*" >&2
	exit 2
}
REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
reps=${CONDUIT_BENCH_REPS:-3}
seconds=${CONDUIT_BENCH_SECONDS:-3}
lat_iters=${CONDUIT_BENCH_LAT_ITERS:-1000}
results_root=${CONDUIT_BENCH_RESULTS:-$REPO/bench/results}
orig_args=("$@")
while [[ $# -gt 0 ]]; do
	case $1 in
	--reps) reps=${2:?}; shift 2 ;;
	--seconds) seconds=${2:?}; shift 2 ;;
	--lat-iters) lat_iters=${2:?}; shift 2 ;;
	--results) results_root=${2:?}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option $1" ;;
	esac
done
for v in reps seconds lat_iters; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done

# --- on the host, outside a two-host run: start one -------------------------------------
if [[ -z ${CONDUIT_TESTBED_DIR:-} ]]; then
	export CONDUIT_BENCH_RESULTS
	CONDUIT_BENCH_RESULTS=$(realpath -m -- "$results_root")
	echo "twohost bench: booting the two guests (host load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
	exec "$REPO/testbed/run" --hosts 2 --timeout "${CONDUIT_BENCH_GUEST_TIMEOUT:-3600}" -- \
		bash "${BASH_SOURCE[0]}" "${orig_args[@]}"
fi

# --- the scenario (on the host, driving the guests) --------------------------------------
G=$CONDUIT_TESTBED_GUEST
B=$CONDUIT_TESTBED_ADDR_B
BENCH=${CONDUIT_BENCH_BIN:-$REPO/build/tools/bench/conduit-bench}
[[ -x $BENCH ]] || die "conduit-bench not found at $BENCH (build it, or set CONDUIT_BENCH_BIN)"
QP="timeout=14&retry_cnt=7"
POLL_US=100000
out=$results_root/twohost-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out/raw"
samples=$out/samples.csv
echo "condition,cell,tool,rep,value" >"$samples"
{
	echo "date: $(date -Is)  host load: $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "guests: 2 x (1 vCPU, 2 GiB, TCG), link MTU 9000 (rxe MTU 4096)"
	echo "perftest: $(dpkg-query -W -f '${Version}' perftest 2>/dev/null || echo unknown) (TCP bootstrap, -F -u 14)"
	echo "conduit-bench: $BENCH; rdma options $QP; polling: busy_poll_us=$POLL_US --busy-poll-us $POLL_US"
	echo "reps $reps, bw -D $seconds s, lat -n $lat_iters"
} | tee "$out/setup.txt"
port=21000
failed=0

# figure TOOL KIND FILE: MB/s (bw) or one-way usec (lat) from one client's output, or nan
figure() {
	local v
	if [[ $1 == conduit ]]; then
		if [[ $2 == bw ]]; then
			v=$(grep -o '"mb_per_s": *[0-9.]*' "$3" | head -n 1 | grep -o '[0-9.]*$' || true)
		else
			v=$(grep -o '"one_way_us": *{[^}]*' "$3" | grep -o '"p50": *[0-9.]*' | grep -o '[0-9.]*$' || true)
		fi
	else
		v=$(awk -v col="$([[ $2 == bw ]] && echo 4 || echo 5)" '/^ *#bytes/ { if (getline > 0) { print $col; exit } }' "$3")
	fi
	if [[ $v =~ ^[0-9]+(\.[0-9]*)?$ && ! $v =~ ^0*(\.0*)?$ ]]; then echo "$v"; else echo nan; fi
}

# pair COND CELL TOOL REP SERVER_CMD... -- CLIENT_CMD...: server in b, client in a (retried:
# the client may come before the server listens)
pair() {
	local cond=$1 cell=$2 tool=$3 rep=$4 srv=() cli=() name attempt v=nan kind
	shift 4
	while [[ $1 != -- ]]; do srv+=("$1"); shift; done
	shift
	cli=("$@")
	kind=${cell%%_*}
	[[ $kind == tcp ]] && kind=$([[ $cell == tcp_bw* ]] && echo bw || echo lat)
	name=$cond-$cell-$tool-$rep
	for attempt in 1 2 3 4 5; do
		"$G" b start "srv-$name-$attempt" -- timeout -k 5 120 "${srv[@]}" || true
		sleep 1
		"$G" a run --timeout 150 -- timeout -k 5 120 "${cli[@]}" >"$out/raw/$name.client" 2>&1 || true
		"$G" b signal "srv-$name-$attempt" KILL >/dev/null 2>&1 || true
		v=$(figure "$tool" "$kind" "$out/raw/$name.client")
		[[ $v == nan ]] || break
		sleep 1
	done
	echo "$cond,$cell,$tool,$rep,$v" >>"$samples"
	[[ $v != nan ]] || failed=$((failed + 1))
}

conditions=("clean" "loss-1pct")
for cond in "${conditions[@]}"; do
	for h in a b; do
		if [[ $cond == clean ]]; then "$G" "$h" net clear; else "$G" "$h" net netem loss 1%; fi
	done
	for rep in $(seq "$reps"); do
		echo "== $cond rep $rep ($(cut -d' ' -f1-3 /proc/loadavg))" >&2
		port=$((port + 1))
		pair "$cond" bw_64K perftest "$rep" ib_write_bw -d rxe0 -s 65536 -D "$seconds" -F -u 14 -p "$port" -- \
			ib_write_bw -d rxe0 -s 65536 -D "$seconds" -F -u 14 -p "$port" "$B"
		port=$((port + 1))
		pair "$cond" bw_64K conduit "$rep" "$BENCH" stream --server "rdma://$B:$port?$QP" --timeout 60 -- \
			"$BENCH" stream --client "rdma://$B:$port?$QP" -t stream -s 64K -D "$seconds" --json --no-progress
		port=$((port + 1))
		pair "$cond" lat_64 perftest "$rep" ib_send_lat -d rxe0 -s 64 -n "$lat_iters" -F -u 14 -p "$port" -- \
			ib_send_lat -d rxe0 -s 64 -n "$lat_iters" -F -u 14 -p "$port" "$B"
		port=$((port + 1))
		pair "$cond" lat_64 conduit "$rep" "$BENCH" stream --server "rdma://$B:$port?$QP&busy_poll_us=$POLL_US" \
			--busy-poll-us "$POLL_US" --timeout 60 -- \
			"$BENCH" stream --client "rdma://$B:$port?$QP&busy_poll_us=$POLL_US" --busy-poll-us "$POLL_US" \
			-t pingpong -s 64 -n "$lat_iters" --json --no-progress
		port=$((port + 1))
		pair "$cond" tcp_bw_64K conduit "$rep" "$BENCH" stream --server "tcp://$B:$port" --timeout 60 -- \
			"$BENCH" stream --client "tcp://$B:$port" -t stream -s 64K -D "$seconds" --json --no-progress
		port=$((port + 1))
		pair "$cond" tcp_lat_64 conduit "$rep" "$BENCH" stream --server "tcp://$B:$port" --busy-poll-us "$POLL_US" \
			--timeout 60 -- "$BENCH" stream --client "tcp://$B:$port" --busy-poll-us "$POLL_US" -t pingpong -s 64 \
			-n "$lat_iters" --json --no-progress
	done
done
for h in a b; do "$G" "$h" net clear; done

# --- summary ---------------------------------------------------------------------------
stats() { # COND CELL TOOL -> "median min max" (or "nan nan nan")
	local vals
	vals=$(awk -F, -v c="$1" -v k="$2" -v t="$3" '$1 == c && $2 == k && $3 == t && $5 != "nan" { print $5 }' "$samples" | sort -g)
	if [[ -z $vals ]]; then
		echo "nan nan nan"
		return
	fi
	local n
	n=$(wc -l <<<"$vals")
	printf '%.2f %.2f %.2f\n' "$(sed -n "$(((n + 1) / 2))p" <<<"$vals")" "$(head -n 1 <<<"$vals")" "$(tail -n 1 <<<"$vals")"
}
verdict() { awk -v r="$1" -v op="$2" -v t="$3" 'BEGIN { if (r == "nan") { print "-"; exit }
	ok = (op == ">=") ? (r >= t) : (r <= t); print ok ? "PASS" : "MISS" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || b == 0) print "nan"; else printf "%.2f", a / b }'; }
{
	echo
	echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
	for cond in "${conditions[@]}"; do
		echo
		echo "$cond:"
		echo
		echo "| cell | conduit-bench (median, min..max) | peer | peer (median, min..max) | ratio | target | |"
		echo "|---|---|---|---|---|---|---|"
		read -r cm cmin cmax <<<"$(stats "$cond" bw_64K conduit)"
		read -r pm pmin pmax <<<"$(stats "$cond" bw_64K perftest)"
		r=$(ratio "$cm" "$pm")
		echo "| bw_64K rdma:// | $cm MB/s ($cmin..$cmax) | ib_write_bw -s 65536 | $pm MB/s ($pmin..$pmax) | $r | ≥ 0.90 | $(verdict "$r" ">=" 0.9) |"
		read -r cm cmin cmax <<<"$(stats "$cond" lat_64 conduit)"
		read -r pm pmin pmax <<<"$(stats "$cond" lat_64 perftest)"
		r=$(ratio "$cm" "$pm")
		echo "| lat_64 rdma:// polling (one-way p50) | $cm µs ($cmin..$cmax) | ib_send_lat -s 64 | $pm µs ($pmin..$pmax) | $r | ≤ 1.10 | $(verdict "$r" "<=" 1.1) |"
		read -r cm cmin cmax <<<"$(stats "$cond" tcp_bw_64K conduit)"
		echo "| bw_64K tcp:// | $cm MB/s ($cmin..$cmax) | | | | | |"
		read -r cm cmin cmax <<<"$(stats "$cond" tcp_lat_64 conduit)"
		echo "| lat_64 tcp:// polling (one-way p50) | $cm µs ($cmin..$cmax) | | | | | |"
	done
} | tee "$out/summary.md"
echo "raw results: $out" >&2
((failed == 0)) || {
	echo "twohost bench: $failed run(s) gave no number (see $out/raw)" >&2
	exit 1
}
