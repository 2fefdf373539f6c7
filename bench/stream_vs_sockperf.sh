#!/usr/bin/env bash
# bench/stream_vs_sockperf.sh [OPTIONS]
#
# Conduit's stream transports against the baselines a user would compare them with, all
# measured in one run on this machine, on loopback only (127.0.0.1, shm:// names):
#   ping-pong at 64 B, 1 KiB, 16 KiB   sockperf TCP  vs  conduit tcp, conduit shm with its
#                                      default options (adaptive polling), in pure event mode
#                                      (poll_us=0: sleeping wake-ups) and with busy_poll_us;
#                                      sockperf also with -F epoll (the reactor's syscall pattern)
#   streaming at 64 KiB and 1 MiB      conduit tcp and shm (write/read: copies)  vs  single-core
#                                      memcpy of the same block size; and conduit shm --inplace
#                                      (the writer fills each message in the ring with
#                                      reserve/commit, the reader checksums it in place with
#                                      peek/consume)  vs  memcpy --touch (fill, copy, checksum on
#                                      one core: the same work, as issue 10 asks)
# Latency is one-way = RTT/2 for every tool: sockperf's ping-pong default (it prints
# RTT/2 unless --full-rtt) and conduit-bench's "one_way" column.  Each cell is the median
# over --reps runs; the tools alternate within each repetition so drift hits all alike.
# Processes are not pinned by default: on a shared 2-CPU machine a pinned process waits for
# whatever else runs on its CPU, which inflates every tool's latency tenfold; --pin puts
# every tool's server on CPU 0 and client on CPU 1 (use it on an idle machine).
#
# Targets, PASS/MISS per cell (a MISS never fails the script):
#   conduit tcp one-way p50  <= 1.1 x sockperf TCP one-way p50          (each size)
#   conduit shm 64 B one-way p50  <= 1 us with busy polling, <= 5 us sleeping (poll_us=0)
#   conduit shm --inplace streaming  >= 50% of memcpy --touch at the same size  (each size)
# Exits non-zero only when a run failed to produce a number.  Runtime about 4-6 minutes
# with the defaults.
#
# Options (environment variables in brackets):
#   --reps N            repetitions per cell [CONDUIT_BENCH_REPS, 3]
#   --seconds S         measured seconds per ping-pong size and run [CONDUIT_BENCH_SECONDS, 3]
#   --stream-seconds S  measured seconds per streaming size and run [CONDUIT_BENCH_STREAM_SECONDS, 2]
#   --shm-busy-us N     busy_poll_us= for the busy-polling shm variant [CONDUIT_BENCH_SHM_BUSY_US, 100]
#   --pin               pin every server to CPU 0 and every client to CPU 1 [CONDUIT_BENCH_PIN=1]
#   --results DIR       raw output goes to DIR/stream_vs_sockperf-<date>/
#                       [CONDUIT_BENCH_RESULTS, bench/results]
#   -h, --help          this text
# conduit-bench is $CONDUIT_BENCH (default build/tools/bench/conduit-bench, built with
# cmake if missing).  sockperf and jq are installed with apt-get if missing; gnuplot is
# optional (a PNG plot is drawn when it is installed).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() {
	echo "stream_vs_sockperf: $*" >&2
	exit 2
}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
reps=${CONDUIT_BENCH_REPS:-3}
seconds=${CONDUIT_BENCH_SECONDS:-3}
stream_seconds=${CONDUIT_BENCH_STREAM_SECONDS:-2}
shm_busy_us=${CONDUIT_BENCH_SHM_BUSY_US:-100}
pin=${CONDUIT_BENCH_PIN:-0}
results_root=${CONDUIT_BENCH_RESULTS:-$REPO/bench/results}
bench=${CONDUIT_BENCH:-$REPO/build/tools/bench/conduit-bench}

while [[ $# -gt 0 ]]; do
	case $1 in
	--reps) reps=${2:?--reps needs a value}; shift 2 ;;
	--seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
	--stream-seconds) stream_seconds=${2:?--stream-seconds needs a value}; shift 2 ;;
	--shm-busy-us) shm_busy_us=${2:?--shm-busy-us needs a value}; shift 2 ;;
	--pin) pin=1; shift ;;
	--results) results_root=${2:?--results needs a value}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option $1" ;;
	esac
done
for v in reps seconds stream_seconds shm_busy_us; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done

PP_SIZES=(64 1024 16384)
ST_SIZES=(65536 1048576)

# ---- tools ------------------------------------------------------------------------------
as_root() {
	if [[ $(id -u) -eq 0 ]]; then "$@"; elif command -v sudo >/dev/null; then sudo "$@"; else
		die "need root (or sudo) to run: $*"
	fi
}
need_pkgs=()
command -v sockperf >/dev/null || need_pkgs+=(sockperf)
command -v jq >/dev/null || need_pkgs+=(jq)
if [[ ${#need_pkgs[@]} -gt 0 ]]; then
	echo "== installing ${need_pkgs[*]} (apt-get)"
	as_root env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi
command -v sockperf >/dev/null || die "sockperf is not installed and apt-get could not install it"
command -v jq >/dev/null || die "jq is not installed and apt-get could not install it"
if [[ ! -x $bench ]]; then
	echo "== building conduit-bench ($REPO/build, RelWithDebInfo)"
	cmake -S "$REPO" -B "$REPO/build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	cmake --build "$REPO/build" --target conduit-bench >/dev/null
	bench=$REPO/build/tools/bench/conduit-bench
fi
[[ -x $bench ]] || die "no conduit-bench at $bench"

have_shm=0
if "$bench" transports | grep -qx shm; then have_shm=1; fi

srv_pin=() cli_pin=()
if [[ $pin -eq 1 && $(nproc) -ge 2 ]] && command -v taskset >/dev/null; then
	srv_pin=(taskset -c 0) cli_pin=(taskset -c 1)
else
	pin=0
fi

out=$results_root/stream_vs_sockperf-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out"

# ---- process hygiene: we only ever stop the servers we started, by pid --------------------
servers=()
stop_server() {  # SIGTERM, then SIGKILL after 2 s (a sockperf server blocked in recv may linger)
	local _
	kill "$1" 2>/dev/null || true
	for _ in $(seq 40); do
		kill -0 "$1" 2>/dev/null || break
		sleep 0.05
	done
	kill -9 "$1" 2>/dev/null || true
	wait "$1" 2>/dev/null || true
}
cleanup() {
	local p
	for p in "${servers[@]}"; do stop_server "$p"; done
}
trap cleanup EXIT

free_port() {  # a TCP port nobody listens on, picked at random in 20000-39999
	local p _
	for _ in $(seq 50); do
		p=$((20000 + RANDOM % 20000))
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null; then
			echo "$p"
			return
		fi
	done
	die "no free TCP port found"
}

wait_for() {  # wait_for FILE PATTERN PID: until FILE has PATTERN, the process died, or 10 s
	local _
	for _ in $(seq 200); do
		grep -q "$2" "$1" 2>/dev/null && return 0
		kill -0 "$3" 2>/dev/null || return 1
		sleep 0.05
	done
	return 1
}

failures=0
note_failure() {
	echo "   FAILED: $*" >&2
	failures=$((failures + 1))
}

# ---- runners: each writes its raw output under $out and prints nothing on success --------
# Two sockperf servers: its default mode (one connection: blocking recvfrom/sendto on both
# sides, no epoll) is the baseline a user gets and the target refers to; the second runs
# both sides through epoll (-F e, which needs a feed file) — the same reactor round trip
# conduit makes (epoll_wait + recv + send), shown for information.
sockperf_port=
sockperf_epoll_feed=$out/sockperf-epoll.feed
start_sockperf() {  # a free port can be taken between probing and binding: retry
	local attempt p ok mine
	for attempt in 1 2 3 4 5; do
		mine=()
		sockperf_port=$(free_port)
		"${srv_pin[@]}" sockperf server --tcp -i 127.0.0.1 -p "$sockperf_port" >"$out/sockperf-server.log" 2>&1 &
		mine+=($!)
		echo "T:127.0.0.1:$(free_port)" >"$sockperf_epoll_feed"
		"${srv_pin[@]}" sockperf server -f "$sockperf_epoll_feed" -F e >"$out/sockperf-epoll-server.log" 2>&1 &
		mine+=($!)
		sleep 0.5
		ok=1
		for p in "${mine[@]}"; do kill -0 "$p" 2>/dev/null || ok=0; done
		if ((ok)); then
			servers+=("${mine[@]}")
			return 0
		fi
		for p in "${mine[@]}"; do kill "$p" 2>/dev/null || true; done
		wait "${mine[@]}" 2>/dev/null || true
		echo "   a sockperf server did not start (attempt $attempt); retrying on other ports" >&2
	done
	die "a sockperf server did not start (see $out/sockperf-*server.log)"
}

run_sockperf() {  # run_sockperf SIZE REP: default mode, then epoll mode
	local log=$out/sockperf-tcp-$1-rep$2.log elog=$out/sockperf-tcp-epoll-$1-rep$2.log
	if ! timeout $((seconds + 30)) "${cli_pin[@]}" sockperf ping-pong --tcp -i 127.0.0.1 -p "$sockperf_port" \
		-m "$1" -t "$seconds" >"$log" 2>&1; then
		note_failure "sockperf ping-pong -m $1 (see $log)"
	fi
	if ! timeout $((seconds + 30)) "${cli_pin[@]}" sockperf ping-pong -f "$sockperf_epoll_feed" -F e \
		-m "$1" -t "$seconds" >"$elog" 2>&1; then
		note_failure "sockperf ping-pong -F e -m $1 (see $elog)"
	fi
}

server_pid=
conduit_server() {  # conduit_server URL LOG: starts a one-session server; its pid in server_pid
	"${srv_pin[@]}" "$bench" stream --server "$1" --sessions 1 --timeout 30 >"$2" 2>&1 &
	server_pid=$!
	servers+=("$server_pid")
	if ! wait_for "$2" "listening on" "$server_pid"; then
		stop_server "$server_pid"
		return 1
	fi
}

run_conduit() {  # run_conduit NAME URL TEST SIZES SECONDS REP [CLIENT FLAGS...]
	local name=$1 url=$2 test=$3 sizes=$4 secs=$5 rep=$6
	shift 6
	local json=$out/conduit-$name-$test-rep$rep.json srvlog=$out/conduit-$name-$test-rep$rep.server.log
	if ! conduit_server "$url" "$srvlog"; then
		note_failure "conduit-bench server $url (see $srvlog)"
		return
	fi
	local n_sizes
	n_sizes=$(tr ',' '\n' <<<"$sizes" | wc -l)
	if ! timeout $(((secs + 2) * n_sizes + 30)) "${cli_pin[@]}" "$bench" stream --client "$url" -t "$test" \
		-s "$sizes" -D "$secs" -w 0.3 --json --no-progress "$@" >"$json" 2>"$json.stderr"; then
		note_failure "conduit-bench $name $test (see $json.stderr)"
	fi
	local _
	for _ in $(seq 40); do  # it exits by itself after the session: give it 2 s, then stop it
		kill -0 "$server_pid" 2>/dev/null || break
		sleep 0.05
	done
	stop_server "$server_pid"
}

run_memcpy() {  # run_memcpy SIZE REP: plain, then --touch
	local json=$out/memcpy-$1-rep$2.json tjson=$out/memcpy-touch-$1-rep$2.json
	"${cli_pin[@]}" "$bench" memcpy -s "$1" -D 1 --json >"$json" 2>&1 || note_failure "memcpy $1 (see $json)"
	"${cli_pin[@]}" "$bench" memcpy -s "$1" -D 1 --touch --json >"$tjson" 2>&1 ||
		note_failure "memcpy --touch $1 (see $tjson)"
}

# ---- extraction ----------------------------------------------------------------------------
sockperf_p50() {  # one-way usec (sockperf prints RTT/2 without --full-rtt)
	sed 's/\x1b\[[0-9;]*m//g' "$1" 2>/dev/null | awk '/percentile 50.000 =/ {print $NF}' | tail -1
}
sockperf_p99() {
	sed 's/\x1b\[[0-9;]*m//g' "$1" 2>/dev/null | awk '/percentile 99.000 =/ {print $NF}' | tail -1
}
conduit_lat() {  # conduit_lat FILE SIZE FIELD -> one-way usec
	jq -r --argjson s "$2" ".results[] | select(.size == \$s) | .one_way_us.$3" "$1" 2>/dev/null || true
}
conduit_bw() {  # MB/s
	jq -r --argjson s "$2" '.results[] | select(.size == $s) | .mb_per_s' "$1" 2>/dev/null || true
}
memcpy_bw() { jq -r '.mb_per_s' "$1" 2>/dev/null || true; }

median() {  # median of the numbers on stdin; "n/a" when there are none
	sort -g | awk '/^[0-9.eE+-]+$/ {v[n++] = $1} END {
		if (n == 0) print "n/a"; else if (n % 2) printf "%.3f\n", v[(n - 1) / 2];
		else printf "%.3f\n", (v[n / 2 - 1] + v[n / 2]) / 2 }'
}

# ---- the run -----------------------------------------------------------------------------
shm_name() { echo "shm://bench-$$-$1"; }
pp_csv=$(
	IFS=,
	echo "${PP_SIZES[*]}"
)
st_csv=$(
	IFS=,
	echo "${ST_SIZES[*]}"
)

{
	echo "stream_vs_sockperf $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname), $(nproc) CPUs, kernel $(uname -r)"
	echo "conduit-bench: $bench ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo '?'))"
	sockperf --version 2>&1 | head -1
	echo "reps=$reps seconds=$seconds stream_seconds=$stream_seconds shm_busy_us=$shm_busy_us pin=$pin shm=$have_shm"
	echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/environment.txt"
cat "$out/environment.txt"
if [[ $have_shm -eq 0 ]]; then
	echo "NOTE: this conduit-bench has no shm transport registered (src/transport/shm not built in yet);"
	echo "      shm cells are reported as n/a."
fi

start_sockperf
for rep in $(seq "$reps"); do
	echo "== repetition $rep/$reps"
	echo "   ping-pong: sockperf tcp (default, then -F epoll)"
	for s in "${PP_SIZES[@]}"; do run_sockperf "$s" "$rep"; done
	echo "   ping-pong: conduit tcp"
	run_conduit tcp "tcp://127.0.0.1:$(free_port)" pingpong "$pp_csv" "$seconds" "$rep"
	if [[ $have_shm -eq 1 ]]; then
		echo "   ping-pong: conduit shm (default options: adaptive polling)"
		run_conduit shm "$(shm_name "pp-$rep")" pingpong "$pp_csv" "$seconds" "$rep"
		echo "   ping-pong: conduit shm (poll_us=0: sleeping wake-ups)"
		run_conduit shm_event "$(shm_name "ppe-$rep")?poll_us=0" pingpong "$pp_csv" "$seconds" "$rep"
		echo "   ping-pong: conduit shm (busy_poll_us=$shm_busy_us)"
		run_conduit shm_busy "$(shm_name "ppb-$rep")?busy_poll_us=$shm_busy_us" pingpong "$pp_csv" "$seconds" "$rep"
	fi
	echo "   streaming: memcpy, conduit tcp$([[ $have_shm -eq 1 ]] && echo ', conduit shm')"
	for s in "${ST_SIZES[@]}"; do run_memcpy "$s" "$rep"; done
	run_conduit tcp "tcp://127.0.0.1:$(free_port)" stream "$st_csv" "$stream_seconds" "$rep"
	if [[ $have_shm -eq 1 ]]; then
		run_conduit shm "$(shm_name "st-$rep")" stream "$st_csv" "$stream_seconds" "$rep"
		run_conduit shm_inplace "$(shm_name "sti-$rep")" stream "$st_csv" "$stream_seconds" "$rep" --inplace
	fi
done
for p in "${servers[@]}"; do stop_server "$p"; done
servers=()

# ---- summary -------------------------------------------------------------------------------
verdict() {  # verdict VALUE OP LIMIT -> PASS / MISS / n/a
	if [[ $1 == n/a || $3 == n/a ]]; then echo "n/a"; return; fi
	awk -v v="$1" -v l="$3" -v op="$2" 'BEGIN { ok = (op == "<=") ? (v <= l) : (v >= l); print ok ? "PASS" : "MISS" }'
}
scale() { if [[ $1 == n/a ]]; then echo "n/a"; else awk -v v="$1" -v k="$2" 'BEGIN { printf "%.3f", v * k }'; fi; }
ratio() { if [[ $1 == n/a || $2 == n/a ]]; then echo "n/a"; else awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; fi; }

tsv=$out/summary.tsv
printf "kind\tsize\tsockperf_tcp_p50_us\tconduit_tcp_p50_us\tconduit_shm_p50_us\tconduit_shm_busy_p50_us\tsockperf_tcp_p99_us\tconduit_tcp_p99_us\tconduit_shm_p99_us\tconduit_shm_busy_p99_us\tsockperf_tcp_epoll_p50_us\tconduit_shm_event_p50_us\tconduit_shm_event_p99_us\n" >"$tsv"
summary=$out/summary.txt
{
	echo
	echo "Ping-pong latency, one-way = RTT/2 (sockperf's convention), usec, median of $reps runs"
	printf "%-7s | %9s %9s | %9s %7s %5s %7s | %9s | %9s %5s | %9s %5s\n" "" "sockperf" "sockperf" "conduit" "" "" \
		"ratio" "conduit" "conduit" "" "conduit" ""
	printf "%-7s | %9s %9s | %9s %7s %5s %7s | %9s | %9s %5s | %9s %5s\n" "size" "tcp p50" "epoll p50" "tcp p50" \
		"ratio" "<=1.1" "/epoll" "shm p50" "shm-event" "" "shm-busy" ""
	for s in "${PP_SIZES[@]}"; do
		sp=$(for r in $(seq "$reps"); do sockperf_p50 "$out/sockperf-tcp-$s-rep$r.log"; done | median)
		sp99=$(for r in $(seq "$reps"); do sockperf_p99 "$out/sockperf-tcp-$s-rep$r.log"; done | median)
		se=$(for r in $(seq "$reps"); do sockperf_p50 "$out/sockperf-tcp-epoll-$s-rep$r.log"; done | median)
		ct=$(for r in $(seq "$reps"); do conduit_lat "$out/conduit-tcp-pingpong-rep$r.json" "$s" p50; done | median)
		ct99=$(for r in $(seq "$reps"); do conduit_lat "$out/conduit-tcp-pingpong-rep$r.json" "$s" p99; done | median)
		cs=n/a cs99=n/a cb=n/a cb99=n/a ce=n/a ce99=n/a
		if [[ $have_shm -eq 1 ]]; then
			cs=$(for r in $(seq "$reps"); do conduit_lat "$out/conduit-shm-pingpong-rep$r.json" "$s" p50; done | median)
			cs99=$(for r in $(seq "$reps"); do conduit_lat "$out/conduit-shm-pingpong-rep$r.json" "$s" p99; done | median)
			cb=$(for r in $(seq "$reps"); do conduit_lat "$out/conduit-shm_busy-pingpong-rep$r.json" "$s" p50; done | median)
			cb99=$(for r in $(seq "$reps"); do conduit_lat "$out/conduit-shm_busy-pingpong-rep$r.json" "$s" p99; done | median)
			ce=$(for r in $(seq "$reps"); do conduit_lat "$out/conduit-shm_event-pingpong-rep$r.json" "$s" p50; done | median)
			ce99=$(for r in $(seq "$reps"); do conduit_lat "$out/conduit-shm_event-pingpong-rep$r.json" "$s" p99; done | median)
		fi
		sp_limit=$(scale "$sp" 1.1)
		shm_v="" busy_v=""
		if [[ $s -eq 64 ]]; then
			shm_v=$(verdict "$ce" "<=" 5)
			busy_v=$(verdict "$cb" "<=" 1)
		fi
		printf "%-7s | %9s %9s | %9s %7s %5s %7s | %9s | %9s %5s | %9s %5s\n" "$s" "$sp" "$se" "$ct" \
			"$(ratio "$ct" "$sp")" "$(verdict "$ct" "<=" "$sp_limit")" "$(ratio "$ct" "$se")" "$cs" "$ce" "$shm_v" "$cb" "$busy_v"
		printf "pingpong\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$s" "$sp" "$ct" "$cs" "$cb" "$sp99" \
			"$ct99" "$cs99" "$cb99" "$se" "$ce" "$ce99" >>"$tsv"
	done
	echo "  targets: tcp p50 <= 1.1 x sockperf (default mode); shm 64 B p50 <= 5 us (shm-event: poll_us=0,"
	echo "  sleeping), <= 1 us (busy_poll_us=$shm_busy_us).  'shm' = default options (adaptive polling) and"
	echo "  'epoll' = sockperf with both sides on epoll (-F e): information only."
	echo "  p99 (one-way, usec) is in summary.tsv; every run's raw output is beside it"
	echo
	echo "Streaming, MB/s = 2^20 bytes/s, median of $reps runs; ratio = x single-core memcpy of the same size"
	echo "(copying paths against plain memcpy; shm --inplace against memcpy --touch: fill, copy, checksum)"
	printf "%-8s | %9s | %9s %6s | %9s %6s | %9s | %9s %6s %5s\n" "size" "memcpy" "conduit" "" "conduit" "" \
		"memcpy" "conduit" "" ">=0.5"
	printf "%-8s | %9s | %9s %6s | %9s %6s | %9s | %9s %6s %5s\n" "" "1 core" "tcp" "ratio" "shm" "ratio" \
		"--touch" "inplace" "ratio" ""
	printf "kind\tsize\tmemcpy_mb_s\tconduit_tcp_mb_s\tconduit_shm_mb_s\tmemcpy_touch_mb_s\tconduit_shm_inplace_mb_s\n" >>"$tsv"
	for s in "${ST_SIZES[@]}"; do
		mc=$(for r in $(seq "$reps"); do memcpy_bw "$out/memcpy-$s-rep$r.json"; done | median)
		mt=$(for r in $(seq "$reps"); do memcpy_bw "$out/memcpy-touch-$s-rep$r.json"; done | median)
		bt=$(for r in $(seq "$reps"); do conduit_bw "$out/conduit-tcp-stream-rep$r.json" "$s"; done | median)
		bs=n/a bi=n/a
		if [[ $have_shm -eq 1 ]]; then
			bs=$(for r in $(seq "$reps"); do conduit_bw "$out/conduit-shm-stream-rep$r.json" "$s"; done | median)
			bi=$(for r in $(seq "$reps"); do conduit_bw "$out/conduit-shm_inplace-stream-rep$r.json" "$s"; done | median)
		fi
		half=$(scale "$mt" 0.5)
		printf "%-8s | %9s | %9s %6s | %9s %6s | %9s | %9s %6s %5s\n" "$s" "$mc" "$bt" "$(ratio "$bt" "$mc")" "$bs" \
			"$(ratio "$bs" "$mc")" "$mt" "$bi" "$(ratio "$bi" "$mt")" "$(verdict "$bi" ">=" "$half")"
		printf "stream\t%s\t%s\t%s\t%s\t%s\t%s\n" "$s" "$mc" "$bt" "$bs" "$mt" "$bi" >>"$tsv"
	done
	[[ $have_shm -eq 1 ]] || echo "  shm: not registered in this conduit-bench build; its cells are n/a"
	echo
	echo "raw results: $out"
} | tee "$summary"

# ---- optional plot -------------------------------------------------------------------------
if command -v gnuplot >/dev/null; then
	awk -F'\t' '$1 == "pingpong"' "$tsv" | sed 's/n\/a/NaN/g' >"$out/pingpong.dat"
	if gnuplot 2>"$out/plot.log" <<EOF; then
set terminal pngcairo size 900,500 noenhanced
set output "$out/pingpong_p50.png"
set title "Loopback ping-pong, one-way p50 (RTT/2), median of $reps runs"
set ylabel "usec"
set logscale y
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.8 border -1
set key outside right top
set grid ytics
set yrange [0.1:*]
plot "$out/pingpong.dat" using 3:xtic(2) title "sockperf tcp", \
     "" using 11 title "sockperf tcp (-F epoll)", \
     "" using 4 title "conduit tcp", \
     "" using 5 title "conduit shm (adaptive polling)", \
     "" using 12 title "conduit shm (poll_us=0)", \
     "" using 6 title "conduit shm busy-poll"
EOF
		echo "plot: $out/pingpong_p50.png"
	else
		echo "plot: gnuplot failed (see $out/plot.log)"
	fi
else
	echo "plot: gnuplot is not installed; skipped (apt-get install gnuplot-nox for a PNG)"
fi

if [[ $failures -gt 0 ]]; then
	echo "stream_vs_sockperf: $failures run(s) failed to produce a number" >&2
	exit 1
fi
