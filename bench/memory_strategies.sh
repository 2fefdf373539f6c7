#!/usr/bin/env bash
# bench/memory_strategies.sh [OPTIONS]
#
# The seeds' three RDMA memory strategies (the Redis article's list), measured against each
# other on the Soft-RoCE device in one guest boot (testbed/run) by conduit-memory-strategies
# (bench/strategies): client and server in one guest, RDMA WRITE_WITH_IMM into destinations
# the receiver advertises, every message filled by the sender and checksummed by the
# receiver, and only the memory strategy differs:
#   register  ibv_reg_mr of the application's buffer per message, post, completion, dereg
#             (the receiver registers each buffer it advertises and deregisters it on arrival)
#   staging   memcpy into a registered staging slot, post (the receiver copies out of its
#             registered slot into the application's buffer)
#   pool      the message is built in a registered conduit::memory::BlockPool block and the
#             NIC writes from it (the receiver reads it in place in a pool block): zero copy
# Reported per size: messages/s, and CPU time per message of each process (getrusage, user +
# system, over its timed section), median of the repetitions with min..max.  One run of the
# program does every repetition; within a repetition each size runs every strategy, the
# strategies' order rotated per repetition so none always goes first.  The host's load
# (uptime) is recorded at the start and the end; the guest's too.  Raw output (JSON lines),
# the table (summary.txt) and a plot (strategies.png, if gnuplot is installed) go to
# $results/memory_strategies-<date>/.  Runtime about 4 minutes with the defaults (boot
# included) on a loaded 2-CPU machine.
#
# Options (environment variables in brackets):
#   --reps N        repetitions [CONDUIT_BENCH_REPS, 5]
#   --sizes LIST    comma-separated message sizes [64,4K,64K,1M]
#   --count N       at most N messages per case [CONDUIT_BENCH_COUNT, 20000]
#   --seconds S     at most S seconds per case [CONDUIT_BENCH_SECONDS, 2]
#   --window W      messages in flight (destinations advertised) [8]
#   --poll MODE     event (sleep on the completion channel) or spin [event]
#   --results DIR   raw output under DIR/memory_strategies-<date>/ (inside the repository:
#                   the guest writes there) [CONDUIT_BENCH_RESULTS, bench/results]
#   -h, --help      this text
# The binary is $CONDUIT_MEMORY_STRATEGIES (default build/bench/strategies/conduit-memory-strategies).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() {
	echo "memory_strategies: $*" >&2
	exit 2
}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
reps=${CONDUIT_BENCH_REPS:-5}
sizes=64,4K,64K,1M
count=${CONDUIT_BENCH_COUNT:-20000}
seconds=${CONDUIT_BENCH_SECONDS:-2}
window=8
poll=event
results_root=${CONDUIT_BENCH_RESULTS:-$REPO/bench/results}
bin=${CONDUIT_MEMORY_STRATEGIES:-$REPO/build/bench/strategies/conduit-memory-strategies}
orig_args=("$@")
while [[ $# -gt 0 ]]; do
	case $1 in
	--reps) reps=${2:?--reps needs a value}; shift 2 ;;
	--sizes) sizes=${2:?--sizes needs a value}; shift 2 ;;
	--count) count=${2:?--count needs a value}; shift 2 ;;
	--seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
	--window) window=${2:?--window needs a value}; shift 2 ;;
	--poll) poll=${2:?--poll needs a value}; shift 2 ;;
	--results) results_root=${2:?--results needs a value}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option $1" ;;
	esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || die "--reps must be a positive integer"
[[ $count =~ ^[1-9][0-9]*$ ]] || die "--count must be a positive integer"
[[ $seconds =~ ^[0-9]*\.?[0-9]+$ ]] || die "--seconds must be a number of seconds"
[[ $poll == event || $poll == spin ]] || die "--poll is event or spin"
[[ -x $bin ]] || die "$bin is not built (cmake --build build --target conduit-memory-strategies)"

export CONDUIT_MEMORY_STRATEGIES=$bin
bench_enter_testbed memory_strategies 1800 "$REPO/bench/memory_strategies.sh" "${orig_args[@]}"

# ---- in the guest -------------------------------------------------------------------------------
out=$results_root/memory_strategies-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$out"
cmd="bash bench/memory_strategies.sh --reps $reps --sizes $sizes --count $count --seconds $seconds --window $window --poll $poll"
{
	echo "memory_strategies: $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')"
	echo "command: $cmd"
	echo "guest: $(uname -r), $(nproc) vCPUs, device ${CONDUIT_RDMA_DEVICE:-?}, guest load before $(cut -d' ' -f1-3 /proc/loadavg)"
	echo "host load (1/5/15 min) at the start: ${CONDUIT_BENCH_HOST_LOAD:-unknown}"
} >"$out/setup.txt"
cat "$out/setup.txt" >&2
rc=0
# The run is bounded by the program's own --timeout and, around it, by the guest's.
"$bin" --json --reps "$reps" --sizes "$sizes" -n "$count" -D "$seconds" -w "$window" --poll "$poll" \
	--timeout 1500 >"$out/raw.jsonl" 2>"$out/stderr.log" || rc=$?
echo "guest load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/setup.txt"
if [[ $rc -ne 0 ]]; then
	echo "memory_strategies: conduit-memory-strategies exited $rc:" >&2
	tail -20 "$out/stderr.log" >&2
fi
python3 "$REPO/bench/memory_strategies_report.py" "$out/raw.jsonl" --dat "$out" >"$out/table.md" || rc=1
{
	cat "$out/setup.txt"
	echo
	cat "$out/table.md"
	echo
	echo "raw results: $out"
} | tee "$out/summary.txt"

# The plot's script stays with the results (gnuplot DIR/plot.gp redraws it).
cat >"$out/plot.gp" <<EOF
set terminal pngcairo size 1500,420 noenhanced
set output "$out/strategies.png"
set multiplot layout 1,3 title "Memory strategies over Soft-RoCE (rxe, TCG guest): medians of $reps repetitions, window $window, poll $poll"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set grid ytics
set key top right
set title "messages/s (higher is better)"
plot "$out/strategies.dat" using 3:xtic(2) title "register per message", "" using 6 title "staging + copy", "" using 9 title "shared pool, zero copy"
set key top left
set title "CPU µs per message, client + server (lower is better)"
plot "$out/strategies.dat" using 4:xtic(2) title "register per message", "" using 7 title "staging + copy", "" using 10 title "shared pool, zero copy"
set title "µs per message in the memory operations, client + server"
plot "$out/strategies.dat" using 5:xtic(2) title "register + deregister", "" using 8 title "memcpy", "" using 11 title "pool block take + return"
unset multiplot
EOF
if [[ -f $out/strategies.dat ]] && command -v gnuplot >/dev/null; then
	if gnuplot "$out/plot.gp" 2>"$out/plot.log"; then
		echo "plot: $out/strategies.png"
	else
		echo "plot: gnuplot failed (see $out/plot.log)"
	fi
fi
exit "$rc"
