#!/usr/bin/env bash
# bench/rdma_srq.sh [OPTIONS]
#
# Many connections to one rdma:// listener, with and without srq=1 (shared receive queue),
# on the Soft-RoCE device in one guest boot.  For each connection count, conduit-fanin
# (tools/fanin: listener and clients on one event loop in one process) reports
#   setup      first connect() until every client is connected and accepted
#   recv B/conn registered receive-slot memory per server connection, computed from the
#              options: (recv_depth + 16 send slots) x 32 B, or with srq 16 x 32 B plus
#              srq_depth x 32 B shared by all connections
#   stream     aggregate MB/s (2^20) with every client writing 64 KiB messages at once
# Each cell runs --reps times, alternating srq=0 / srq=1 first; raw lines go to the results
# directory, the summary (medians) to stdout.
#
# Run on the host, it re-runs itself in the testbed (testbed/run); in the guest
# (CONDUIT_IN_TESTBED set) it listens on $CONDUIT_RDMA_ADDR (192.0.2.1).
#
# Options:
#   --conns "N ..."  connection counts [16 64 128]
#   --reps N         repetitions per cell [3]
#   --seconds S      measured streaming time per run [3]
#   --options Q      extra listener options for both variants, e.g. rx_buffer=262144 [none]
#   --results DIR    raw output under DIR/rdma_srq-<date>/ (inside the repository) [bench/results]
#   -h, --help       this text
# conduit-fanin is $CONDUIT_FANIN (default build/tools/fanin/conduit-fanin).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() {
	echo "rdma_srq: $*" >&2
	exit 2
}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
conns_list=${CONDUIT_BENCH_CONNS:-"16 64 128"}
reps=${CONDUIT_BENCH_REPS:-3}
seconds=${CONDUIT_BENCH_SECONDS:-3}
extra=${CONDUIT_BENCH_URL_OPTIONS:-}
results_root=${CONDUIT_BENCH_RESULTS:-$REPO/bench/results}
orig_args=("$@")
while [[ $# -gt 0 ]]; do
	case $1 in
	--conns) conns_list=${2:?--conns needs a value}; shift 2 ;;
	--reps) reps=${2:?--reps needs a value}; shift 2 ;;
	--seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
	--options) extra=${2?--options needs a value}; shift 2 ;;
	--results) results_root=${2:?--results needs a value}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option $1" ;;
	esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || die "--reps must be a positive integer"
for n in $conns_list; do [[ $n =~ ^[1-9][0-9]*$ ]] || die "bad connection count $n"; done

bench_enter_testbed rdma_srq 1800 "$REPO/bench/rdma_srq.sh" "${orig_args[@]}"

fanin=${CONDUIT_FANIN:-$REPO/build/tools/fanin/conduit-fanin}
[[ -x $fanin ]] || die "$fanin is not built (ninja -C build conduit-fanin)"
addr=${CONDUIT_RDMA_ADDR:-192.0.2.1}
out=$results_root/rdma_srq-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
echo "rdma_srq: raw results in $out; guest load: $(cat /proc/loadavg)" >&2

median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else print a[int((NR + 1) / 2)]}'; }
run_one() { # conns srq rep
	local q="srq=$2"
	[[ -n $extra ]] && q="$q&$extra"
	timeout 600 "$fanin" --url "rdma://$addr:0?$q" -c "$1" -D "$seconds" -w 0.5 --json \
		>>"$out/c$1-srq$2.jsonl" 2>>"$out/stderr.log" || echo "rdma_srq: run c=$1 srq=$2 rep=$3 failed" >&2
}
field() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" "$2"; }

for n in $conns_list; do
	for ((r = 1; r <= reps; r++)); do
		if ((r % 2)); then order="0 1"; else order="1 0"; fi
		for s in $order; do run_one "$n" "$s" "$r"; done
	done
done

printf '| conns | srq | setup ms (median) | ms/conn | recv-slot B/conn | stream MB/s (median of %s) |\n' "$reps"
printf '|---|---|---|---|---|---|\n'
for n in $conns_list; do
	for s in 0 1; do
		f=$out/c$n-srq$s.jsonl
		[[ -s $f ]] || { printf '| %s | %s | failed | | | |\n' "$n" "$s"; continue; }
		printf '| %s | %s | %s | %s | %s | %s |\n' "$n" "$s" \
			"$(field setup_ms "$f" | median)" "$(field setup_ms_per_conn "$f" | median)" \
			"$(field recv_slot_bytes_per_conn "$f" | median)" "$(field mb_per_s "$f" | median)"
	done
done
echo "guest load after: $(cat /proc/loadavg)"
