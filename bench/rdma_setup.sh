#!/usr/bin/env bash
# bench/rdma_setup.sh [OPTIONS]
#
# rdma:// connection setup against its peers, on the Soft-RoCE device in ONE guest boot
# (issue 10 §2).  Two parts, each cell alternating with its peer every repetition:
#
# 1. connect+accept, one connection after another (--conns of them, all kept open):
#      conduit   conduit-fanin --sequential over rdma:// (default options): from connect()
#                until both sides can write -- the client's connect callback (rdma:// calls
#                it when the peer's first RegisterXferMemory has arrived) and the accepted
#                connection's first write handler (the client's has arrived there)
#      bare      conduit-cm-baseline: bare rdma_cm connect/accept to ESTABLISHED on both
#                sides, the same QP and CQ sizes, registering nothing
#    Figure: p50 per connection (us) of each run; the table gives the median of the runs'
#    p50s with their min..max, and conduit / bare.  Target: <= 1.5x.
#
# 2. with --old BIN (a conduit-fanin built from the code before the arena, e.g. the parent
#    of 64101e5): --fanin-conns connections at once to one listener, setup time from the
#    first connect() until all are connected and accepted:
#      old       BIN -c N            new   build's conduit-fanin -c N
#      bare      conduit-cm-baseline --concurrent -n N (the rdma_cm + QP floor, with its
#                phases: address and route resolution, QP creation, the CM exchange)
#    connect_timeout_ms=300000 on both sides (N handshakes on one loop outlast the default).
#    Target: old / new >= 5x.
#
# Exits non-zero only when runs failed, never for a missed target.  Run on the host, it
# re-runs itself in the testbed (testbed/run); in the guest (CONDUIT_IN_TESTBED set) it
# uses $CONDUIT_RDMA_ADDR (192.0.2.1).
#
# Options:
#   --reps N         repetitions of part 1 [5]
#   --conns N        connections per part-1 run [30]
#   --old BIN        pre-arena conduit-fanin: run part 2 [part 2 off]
#   --fanin-reps N   repetitions of part 2 [3]
#   --fanin-conns N  connections per part-2 run [300]
#   --options OPTS   rdma:// options for conduit's part-1 cell, on the listener and the
#                    clients alike (e.g. rx_buffer=262144) [none: the defaults]
#   --results DIR    raw output under DIR/rdma_setup-<date>/ (inside the repository) [bench/results]
#   -h, --help       this text
# Binaries: $CONDUIT_FANIN (build/tools/fanin/conduit-fanin), $CONDUIT_CM_BASELINE
# (build/bench/cm_baseline/conduit-cm-baseline).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() {
	echo "rdma_setup: $*" >&2
	exit 2
}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
reps=5
conns=30
old=
opts=
fanin_reps=3
fanin_conns=300
results_root=${CONDUIT_BENCH_RESULTS:-$REPO/bench/results}
orig_args=("$@")
while [[ $# -gt 0 ]]; do
	case $1 in
	--reps) reps=${2:?--reps needs a value}; shift 2 ;;
	--conns) conns=${2:?--conns needs a value}; shift 2 ;;
	--old) old=${2:?--old needs a value}; shift 2 ;;
	--options) opts=${2:?--options needs a value}; shift 2 ;;
	--fanin-reps) fanin_reps=${2:?--fanin-reps needs a value}; shift 2 ;;
	--fanin-conns) fanin_conns=${2:?--fanin-conns needs a value}; shift 2 ;;
	--results) results_root=${2:?--results needs a value}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option $1" ;;
	esac
done
for v in reps conns fanin_reps fanin_conns; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done
if [[ -n $old ]]; then
	old=$(realpath -m -- "$old")
	[[ -x $old ]] || die "--old $old is not an executable"
fi

bench_enter_testbed rdma_setup 900 "$REPO/bench/rdma_setup.sh" "${orig_args[@]}"

fanin=${CONDUIT_FANIN:-$REPO/build/tools/fanin/conduit-fanin}
bare=${CONDUIT_CM_BASELINE:-$REPO/build/bench/cm_baseline/conduit-cm-baseline}
[[ -x $fanin ]] || die "$fanin is not built (cmake --build build --target conduit-fanin)"
[[ -x $bare ]] || die "$bare is not built (cmake --build build --target conduit-cm-baseline)"
addr=${CONDUIT_RDMA_ADDR:-192.0.2.1}
out=$results_root/rdma_setup-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"
{
	echo "date: $(date -Is)"
	echo "kernel: $(uname -r)  cpus: $(nproc)  guest load: $(cat /proc/loadavg)"
	echo "part 1: $reps reps x $conns sequential connections${opts:+ (conduit options: $opts)}; part 2: ${old:-off} ($fanin_reps reps x $fanin_conns)"
	echo "host load at the start (1/5/15 min): ${CONDUIT_BENCH_HOST_LOAD:-unknown (not started from the host)}"
} | tee "$out/setup.txt"

failures=0
# p50 (or the field given) of a JSON line: "name":{"p50":X  or  "name":X
p50_of() { sed -n "s/.*\"$1\":{\"p50\":\([0-9.]*\).*/\1/p" "$2" | tail -1; }
num_of() { sed -n "s/.*\"$1\":\([0-9.]*\).*/\1/p" "$2" | tail -1; }
# median and min..max of the numbers in a file, one a line
summary() { sort -g "$1" | awk '{a[NR]=$1} END {if (NR == 0) print "failed"; else printf "%s (%s..%s)", a[int((NR + 1) / 2)], a[1], a[NR]}'; }
median() { sort -g "$1" | awk '{a[NR]=$1} END {if (NR == 0) print "nan"; else print a[int((NR + 1) / 2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a == "nan" || b == "nan" || b == 0) print "n/a"; else printf "%.2fx", a / b }'; }

run_cell() { # cell rep -> appends the figure to $out/<cell>.txt
	local cell=$1 rep=$2 f fig crc=0
	f=$out/$cell-$rep.json
	case $cell in
	conduit) timeout 300 "$fanin" --url "rdma://$addr:0${opts:+?$opts}" ${opts:+--client-options "$opts"} --sequential -c "$conns" --timeout 120 --json >"$f" 2>>"$out/stderr.log" || crc=$? ;;
	bare) timeout 300 "$bare" --addr "$addr" -n "$conns" --timeout 120 --json >"$f" 2>>"$out/stderr.log" || crc=$? ;;
	fanin-new | fanin-old)
		local bin=$fanin
		[[ $cell == fanin-old ]] && bin=$old
		timeout 600 "$bin" --url "rdma://$addr:0?connect_timeout_ms=300000" --client-options connect_timeout_ms=300000 \
			-c "$fanin_conns" -D 0.1 -w 0 --timeout 500 --json >"$f" 2>>"$out/stderr.log" || crc=$?
		;;
	fanin-bare) timeout 600 "$bare" --addr "$addr" -n "$fanin_conns" --concurrent --timeout 500 --json >"$f" 2>>"$out/stderr.log" || crc=$? ;;
	esac
	case $cell in
	conduit | bare) fig=$(p50_of connect_accept_us "$f") ;;
	fanin-new | fanin-old) fig=$(num_of setup_ms "$f") ;;
	fanin-bare) fig=$(num_of wall_ms "$f") ;;
	esac
	if [[ $crc != 0 || ! $fig =~ ^[0-9]+(\.[0-9]*)?$ ]]; then
		echo "  $cell rep $rep: failed (rc=$crc), see $f and $out/stderr.log" >&2
		failures=$((failures + 1))
		return
	fi
	echo "$fig" >>"$out/$cell.txt"
	printf '  %-10s rep %s: %s\n' "$cell" "$rep" "$fig"
	sleep 1 # let the CM's time-wait of the closed connections pass
}

echo "part 1: connect+accept, $conns connections one after another (p50 per run, us)"
for ((r = 1; r <= reps; r++)); do
	if ((r % 2)); then order="bare conduit"; else order="conduit bare"; fi
	for c in $order; do run_cell "$c" "$r"; done
done
if [[ -n $old ]]; then
	echo "part 2: $fanin_conns connections at once (setup ms)"
	cells=(fanin-old fanin-new fanin-bare)
	for ((r = 1; r <= fanin_reps; r++)); do
		for ((k = 0; k < 3; k++)); do run_cell "${cells[$(((k + r - 1) % 3))]}" "$r"; done
	done
fi

{
	echo
	echo "| part | cell | median (min..max) | ratio |"
	echo "|---|---|---|---|"
	echo "| connect+accept p50 us, $conns sequential | bare rdma_cm | $(summary "$out/bare.txt" 2>/dev/null || echo failed) | |"
	echo "| | conduit rdma:// | $(summary "$out/conduit.txt" 2>/dev/null || echo failed) | $(ratio "$(median "$out/conduit.txt" 2>/dev/null)" "$(median "$out/bare.txt" 2>/dev/null)") of bare (target <= 1.5x) |"
	if [[ -n $old ]]; then
		echo "| setup ms, $fanin_conns at once | pre-arena conduit | $(summary "$out/fanin-old.txt" 2>/dev/null || echo failed) | $(ratio "$(median "$out/fanin-old.txt" 2>/dev/null)" "$(median "$out/fanin-new.txt" 2>/dev/null)") old/new (target >= 5x) |"
		echo "| | conduit now | $(summary "$out/fanin-new.txt" 2>/dev/null || echo failed) | $(ratio "$(median "$out/fanin-new.txt" 2>/dev/null)" "$(median "$out/fanin-bare.txt" 2>/dev/null)") of bare |"
		echo "| | bare rdma_cm | $(summary "$out/fanin-bare.txt" 2>/dev/null || echo failed) | |"
		echo
		echo "bare rdma_cm phases at $fanin_conns at once (last run, per connection p50 us): $(sed -n 's/.*"wall_ms":[0-9.]*,//p' "$(ls "$out"/fanin-bare-*.json | tail -1)" 2>/dev/null)"
	fi
	echo "bare rdma_cm phases, sequential (last run, per connection us): $(sed -n 's/.*"wall_ms":[0-9.]*,//p' "$(ls "$out"/bare-*.json | tail -1)" 2>/dev/null)"
	echo "guest load after: $(cat /proc/loadavg)"
} | tee "$out/summary.txt"
[[ $failures == 0 ]] || { echo "rdma_setup: $failures runs failed" >&2; exit 1; }
