#!/usr/bin/env bash
# bench/memory_micro.sh [OPTIONS]
#
# Micro-benchmarks of the memory layer (conduit-memory-bench, Google Benchmark), in two parts:
#   host   conduit::memory::BlockPool allocate/free against glibc malloc/free and mimalloc
#          (mi_malloc/mi_free, not a global override) at 64 B, 4 KiB, 64 KiB and 1 MiB: one
#          thread, 2 and 4 threads each allocating and freeing, batches of 32, and
#          allocate-on-one-thread/free-on-another; Slice copy, Chain append+consume,
#          to_iovec/to_sg, memcpy for scale
#   guest  in the Soft-RoCE testbed (testbed/run): ibv_reg_mr+ibv_dereg_mr against a
#          RegistrationCache hit of the same range, 4 KiB .. 16 MiB; fork+exec and
#          posix_spawn of /bin/true with 0/16/256 MiB registered (and fork+exec with the same
#          memory not registered, the control)
# Every case runs --reps times with Google Benchmark's random interleaving, so the
# allocators' repetitions alternate and drift hits all alike; each table cell is the median
# of the repetitions with their min..max.  The host load (uptime) is printed before and after
# each part.  A PNG plot of pool vs malloc vs mimalloc is drawn when gnuplot is installed.
# Runtime about 7 minutes on a loaded 2-CPU machine (host ~4, guest ~2-3 with the boot).
#
# Options (environment variables in brackets):
#   --reps N          repetitions per case [CONDUIT_BENCH_REPS, 5]
#   --min-time S      Google Benchmark's minimum seconds per repetition [CONDUIT_BENCH_MIN_TIME, 0.2]
#   --host-only       skip the guest part
#   --guest-only      skip the host part
#   --results DIR     raw output goes to DIR/memory_micro-<date>/ (inside the repository: the
#                     guest writes there) [CONDUIT_BENCH_RESULTS, bench/results]
#   -h, --help        this text
# The binary is $CONDUIT_MEMORY_BENCH (default build/bench/micro/conduit-memory-bench, built
# with cmake if missing; needs libbenchmark-dev and libmimalloc-dev, see
# scripts/install-deps.sh).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() {
	echo "memory_micro: $*" >&2
	exit 2
}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
reps=${CONDUIT_BENCH_REPS:-5}
min_time=${CONDUIT_BENCH_MIN_TIME:-0.2}
results_root=${CONDUIT_BENCH_RESULTS:-$REPO/bench/results}
bench=${CONDUIT_MEMORY_BENCH:-$REPO/build/bench/micro/conduit-memory-bench}
do_host=1
do_guest=1
guest_part=""  # internal: the directory the guest part writes to

while [[ $# -gt 0 ]]; do
	case $1 in
	--reps) reps=${2:?--reps needs a value}; shift 2 ;;
	--min-time) min_time=${2:?--min-time needs a value}; shift 2 ;;
	--host-only) do_guest=0; shift ;;
	--guest-only) do_host=0; shift ;;
	--results) results_root=${2:?--results needs a value}; shift 2 ;;
	--guest-part) guest_part=${2:?}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) die "unknown option $1 (see --help)" ;;
	esac
done
[[ $reps =~ ^[1-9][0-9]*$ ]] || die "--reps must be a positive integer"
[[ $min_time =~ ^[0-9]*\.?[0-9]+$ ]] || die "--min-time must be a number of seconds"

bench_args=(--benchmark_repetitions="$reps" --benchmark_enable_random_interleaving=true
	--benchmark_min_time="$min_time" --benchmark_out_format=json)

# ---- guest part (inside the testbed) ---------------------------------------------------------
if [[ -n $guest_part ]]; then
	[[ -n ${CONDUIT_IN_TESTBED:-} ]] || die "--guest-part runs inside the testbed only"
	echo "guest: $(uname -r), rxe device ${CONDUIT_RDMA_DEVICE:-?}, load $(cut -d' ' -f1-3 /proc/loadavg)"
	"$bench" --benchmark_filter='^BM_Reg_' "${bench_args[@]}" --benchmark_out="$guest_part/guest.json" \
		>"$guest_part/guest.txt" 2>&1 || {
		tail -20 "$guest_part/guest.txt" >&2
		exit 1
	}
	exit 0
fi

if [[ ! -x $bench ]]; then
	echo "memory_micro: building conduit-memory-bench" >&2
	[[ -f $REPO/build/CMakeCache.txt ]] || cmake -S "$REPO" -B "$REPO/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build "$REPO/build" --target conduit-memory-bench >/dev/null
fi
[[ -x $bench ]] || die "$bench is missing (is libbenchmark-dev / libmimalloc-dev installed? see scripts/install-deps.sh)"

out=$(realpath -m -- "$results_root")/memory_micro-$(date -u +%Y%m%d-%H%M%S)
mkdir -p "$out"
summary=$out/summary.txt
failures=0

{
	echo "memory_micro: $(date -u '+%Y-%m-%d %H:%M UTC'), reps $reps, min_time ${min_time}s, commit $(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?')"
	echo "command: bash bench/memory_micro.sh --reps $reps --min-time $min_time$([[ $do_guest -eq 1 ]] || echo ' --host-only')$([[ $do_host -eq 1 ]] || echo ' --guest-only')"
	echo
	if [[ $do_host -eq 1 ]]; then
		echo "== host =="
		echo "uptime before: $(uptime)"
		if "$bench" --benchmark_filter='^BM_(Alloc|Slice|Chain|Memcpy)' "${bench_args[@]}" \
			--benchmark_out="$out/host.json" >"$out/host.txt" 2>&1; then
			echo "uptime after:  $(uptime)"
			python3 "$REPO/bench/micro/report.py" host "$out/host.json" --dat "$out"
		else
			echo "host part failed; see $out/host.txt"
		fi
		echo
	fi
	if [[ $do_guest -eq 1 ]]; then
		echo "== guest (Soft-RoCE, testbed/run) =="
		echo "host uptime before: $(uptime)"
		if CONDUIT_MEMORY_BENCH=$bench "$REPO/testbed/run" --timeout "${CONDUIT_BENCH_GUEST_TIMEOUT:-900}" -- \
			bash "$REPO/bench/memory_micro.sh" --reps "$reps" --min-time "$min_time" --guest-part "$out"; then
			echo "host uptime after:  $(uptime)"
			python3 "$REPO/bench/micro/report.py" guest "$out/guest.json"
		else
			echo "guest part failed (see $out/guest.txt if it exists)"
		fi
		echo
	fi
	echo "raw results: $out"
} 2>&1 | tee "$summary"
grep -q '^host part failed\|^guest part failed' "$summary" && failures=1

# ---- optional plot -----------------------------------------------------------------------------
if [[ -f $out/alloc.dat ]]; then
	if command -v gnuplot >/dev/null; then
		if gnuplot 2>"$out/plot.log" <<EOF; then
set terminal pngcairo size 1200,420 noenhanced
set output "$out/alloc.png"
set multiplot layout 1,3 title "Allocate + touch + free: conduit pool vs glibc malloc vs mimalloc (median of $reps, lower is better)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set logscale y
set grid ytics
set key top left
set title "one thread, pairs (cpu ns/pair)"
plot "$out/alloc.dat" using 3:xtic(2) title "pool", "" using 4 title "malloc", "" using 5 title "mimalloc"
set title "one thread, batches of 32 (cpu ns/pair)"
plot "$out/alloc.dat" using 6:xtic(2) title "pool", "" using 7 title "malloc", "" using 8 title "mimalloc"
set title "free on another thread (alloc+free ns)"
plot "$out/alloc.dat" using 9:xtic(2) title "pool", "" using 10 title "malloc", "" using 11 title "mimalloc"
unset multiplot
EOF
			echo "plot: $out/alloc.png"
		else
			echo "plot: gnuplot failed (see $out/plot.log)"
		fi
	else
		echo "plot: gnuplot is not installed; skipped (apt-get install gnuplot-nox for a PNG)"
	fi
fi
exit $((failures > 0 ? 1 : 0))
