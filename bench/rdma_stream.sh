#!/usr/bin/env bash
# bench/rdma_stream.sh [OPTIONS]
#
# The RDMA stream transport (conduit-bench stream over rdma://) against the tools a user
# would measure RDMA with, on the same Soft-RoCE device in one guest boot:
#
#   cell        conduit-bench                         peer             figure, target
#   bw_64K      stream -s 64K        (MB/s)           ib_write_bw -s 64K   BW average (MB/s)   >= 0.9x
#   bw_1M       stream -s 1M         (MB/s)           ib_write_bw -s 1M    BW average (MB/s)   >= 0.9x
#   lat_64      pingpong -s 64, one-way p50 = RTT/2   ib_send_lat -s 64    t_typical (usec)    <= 1.3x
#   tput_64K    stream -s 64K        (MB/s)           rstream -S 64K       Gb/sec -> MB/s      >= 1.0x
#   owned_1M    stream -s 1M --owned (MB/s)           ib_read_bw -s 1M     BW average (MB/s)   reported
#               (pool blocks handed over with write_owned(), scope=shared; two conduit modes
#               instead of --modes: rv = the READ rendezvous, inband = rendezvous_min=0, the
#               same blocks RDMA-written into the peer's ring; medians with min..max)
#   zc_64K      stream -s 64K --owned (MB/s)          ib_write_bw -s 64K   BW average (MB/s)   >= 0.95x
#   zc_1M       stream -s 1M --owned (MB/s)           ib_write_bw -s 1M    BW average (MB/s)   >= 0.95x
#   zc_tput_64K stream -s 64K --owned (MB/s)          rstream -S 64K       Gb/sec -> MB/s      >= 1.0x
#               (issue 10's zero-copy streaming targets: pool blocks handed over with
#               write_owned() and RDMA-written from where the application built them, read in
#               place with peek()/consume() -- no payload copy on either side; default
#               options -- one conduit mode, "zc", instead of --modes)
#
# Conventions.  MB = 2^20 bytes for conduit-bench and perftest alike.  ib_send_lat reports
# half the round trip (its t_typical is the median of RTT/2); conduit-bench's pingpong
# measures the full round trip and reports one_way = RTT/2, so the two compare directly.
# rstream (rsockets, rdmacm-utils) counts bytes in both directions of its echo test (the
# client sends -C transfers, the server sends them back, -I times) over the whole run and
# prints Gb/sec with Gb = 10^9 bits; MB/s = Gb/sec * 10^9 / 8 / 2^20.  Its two directions
# take turns, so its rate is that of one direction at a time, like conduit-bench stream.
#
# conduit-bench runs once per protocol mode (--modes): the Valkey baseline (features=none)
# and each of Conduit's negotiated extensions -- ring (incremental credit returns, the
# writer wraps around the peer's buffer), solicited (the receiver wakes once per batch) --
# and both together (the default).  Each cell runs --reps times per tool and mode,
# alternating whether conduit or the peer goes first; the table shows medians, the ratio
# conduit/peer and PASS/MISS for every mode.  Exits non-zero only when runs failed (no
# number), never for a missed target.
#
# Run on the host, it re-runs itself in the testbed (testbed/run); in the guest
# (CONDUIT_IN_TESTBED set) it uses rxe0 at 192.0.2.1 (CONDUIT_RDMA_DEVICE/_ADDR).
#
# Options (environment variables in brackets; CONDUIT_* ones pass into the testbed):
#   --reps N        repetitions per tool and cell [CONDUIT_BENCH_REPS, 3]
#   --seconds S     measuring time of each bandwidth run [CONDUIT_BENCH_SECONDS, 2]
#   --lat-iters N   round trips per latency run [CONDUIT_BENCH_LAT_ITERS, 2000]
#   --cells "C ..." subset of bw_64K bw_1M lat_64 tput_64K owned_1M zc_64K zc_1M zc_tput_64K
#                   [CONDUIT_BENCH_CELLS, all]
#   --modes "M ..." conduit protocol modes, from none (baseline), ring, solicited, both
#                   [CONDUIT_BENCH_MODES, "none ring solicited both"]
#   --url-options Q extra rdma:// options for conduit-bench, e.g. "flush_bytes=262144"
#                   [CONDUIT_BENCH_URL_OPTIONS, none]
#   --results DIR   raw output goes to DIR/rdma_stream-<date>/ [CONDUIT_BENCH_RESULTS,
#                   bench/results]; must be inside the repository, the guest's only
#                   writable share (its /tmp is its own)
#   -h, --help      this text
# conduit-bench is $CONDUIT_BENCH (default build/tools/bench/conduit-bench).  Every run is
# bounded by timeout(1); on the host the guest is killed after $CONDUIT_BENCH_GUEST_TIMEOUT
# seconds (default 1800).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d; s/^# \{0,1\}//'; }
die() {
	echo "rdma_stream: $*" >&2
	exit 2
}

REPO=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
# shellcheck source=bench/lib.sh
source "$REPO/bench/lib.sh"
reps=${CONDUIT_BENCH_REPS:-3}
seconds=${CONDUIT_BENCH_SECONDS:-2}
lat_iters=${CONDUIT_BENCH_LAT_ITERS:-2000}
cells=${CONDUIT_BENCH_CELLS:-"bw_64K bw_1M lat_64 tput_64K owned_1M zc_64K zc_1M zc_tput_64K"}
url_options=${CONDUIT_BENCH_URL_OPTIONS:-}
modes=${CONDUIT_BENCH_MODES:-"none ring solicited both"}
results_root=${CONDUIT_BENCH_RESULTS:-$REPO/bench/results}
orig_args=("$@")

while [[ $# -gt 0 ]]; do
	case $1 in
	--reps) reps=${2:?--reps needs a value}; shift 2 ;;
	--seconds) seconds=${2:?--seconds needs a value}; shift 2 ;;
	--lat-iters) lat_iters=${2:?--lat-iters needs a value}; shift 2 ;;
	--cells) cells=${2:?--cells needs a value}; shift 2 ;;
	--url-options) url_options=${2?--url-options needs a value}; shift 2 ;;
	--modes) modes=${2:?--modes needs a value}; shift 2 ;;
	--results) results_root=${2:?--results needs a value}; shift 2 ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown option $1" ;;
	esac
done
for v in reps seconds lat_iters; do
	[[ ${!v} =~ ^[1-9][0-9]*$ ]] || die "$v must be a positive integer, not '${!v}'"
done
for c in $cells; do
	case $c in
	bw_64K | bw_1M | lat_64 | tput_64K | owned_1M | zc_64K | zc_1M | zc_tput_64K) ;;
	*) die "unknown cell $c" ;;
	esac
done
for m in $modes; do
	case $m in
	none | ring | solicited | both) ;;
	*) die "unknown mode $m (none, ring, solicited, both)" ;;
	esac
done
export CONDUIT_BENCH_MODES=$modes

# --- on the host: go into the testbed ----------------------------------------------------
bench_enter_testbed rdma_stream 1800 "$REPO/bench/rdma_stream.sh" "${orig_args[@]}"

# --- in the guest --------------------------------------------------------------------------
dev=${CONDUIT_RDMA_DEVICE:-rxe0}
addr=${CONDUIT_RDMA_ADDR:-192.0.2.1}
bench=${CONDUIT_BENCH:-build/tools/bench/conduit-bench}
[[ $bench == /* ]] || bench=$REPO/$bench
[[ -x $bench ]] || die "conduit-bench not found at $bench (build it, or set CONDUIT_BENCH)"
for t in ib_write_bw ib_read_bw ib_send_lat rstream; do command -v $t >/dev/null || die "$t is not installed"; done

out=$results_root/rdma_stream-$(date +%Y%m%d-%H%M%S)
mkdir -p "$out/raw"
samples=$out/samples.csv
echo "cell,tool,rep,value" >"$samples"
wakeup_samples=$out/wakeups.csv  # cell,mode,receiver wakeups per MiB (stream cells)
echo "cell,mode,wakeups_per_mib" >"$wakeup_samples"
url="rdma://$addr:0?${url_options:+$url_options&}"
{
	echo "date: $(date -Is)  kernel: $(uname -r)  cpus: $(nproc)"
	echo "conduit-bench: $bench  url: $url"
	echo "perftest: $(dpkg-query -W -f '${Version}' perftest 2>/dev/null || echo unknown)  rdmacm-utils: $(dpkg-query -W -f '${Version}' rdmacm-utils 2>/dev/null || echo unknown)"
	echo "reps $reps, bandwidth runs ${seconds} s, latency runs $lat_iters round trips, modes: $modes"
} >"$out/setup.txt"
cat "$out/setup.txt"

port=21000
failures=0

wait_tcp_listen() { # port: perftest's TCP bootstrap socket, up to 20 s
	local i
	for ((i = 0; i < 200; i++)); do
		[[ -n $(ss -Hltn "sport = :$1" 2>/dev/null) ]] && return 0
		sleep 0.1
	done
	return 1
}

number_or_nan() { if [[ $1 =~ ^[0-9]+(\.[0-9]*)?$ && ! $1 =~ ^0*(\.0*)?$ ]]; then echo "$1"; else echo nan; fi; }

features_of() { case $1 in none) echo none ;; ring) echo 1 ;; solicited) echo 2 ;; both) echo 3 ;; esac; }

# conduit-bench in loopback mode (server and client threads in one process).
run_conduit() { # cell file mode
	local test=stream size field args features
	case $1 in
	bw_64K | tput_64K | zc_64K | zc_tput_64K) size=65536 ;;
	bw_1M | owned_1M | zc_1M) size=1048576 ;;
	lat_64) test=pingpong size=64 ;;
	esac
	if [[ $test == stream ]]; then
		args=(-D "$seconds")
	else
		args=(-n "$lat_iters" -D 60)
	fi
	features=$(features_of "$3")
	if [[ $1 == owned_1M ]]; then
		args+=(--owned)
		features="all&scope=shared"
		[[ $3 == inband ]] && features+="&rendezvous_min=0"
	fi
	if [[ $1 == zc_* ]]; then
		args+=(--owned --peek)
		features=all # the default options
	fi
	timeout -k 5 120 "$bench" stream --loopback "${url}features=$features" -t "$test" -s "$size" "${args[@]}" -w 0.2 --timeout 20 \
		--json --no-progress >"$2" 2>"$2.err" || return 0
	if [[ $test == stream ]]; then
		# The receiver's completion-event wakeups per MiB go to a side file (the solicited
		# extension's effect); the cell's figure is the bandwidth.
		local mb w
		mb=$(sed -n 's/.*"mb_per_s":\([0-9.]*\).*/\1/p' "$2")
		w=$(sed -n 's/.*"bytes":\([0-9]*\).*"server_wakeups":\([0-9]*\).*/\1 \2/p' "$2")
		[[ -n $w ]] && awk -v c="$1" -v m="$3" -v w="$w" 'BEGIN { split(w, a, " "); if (a[1] > 0) printf "%s,%s,%.2f\n", c, m, a[2] / (a[1] / 1048576) }' >>"$wakeup_samples"
		# owned_1M: the share of the measured bytes the rendezvous carried (rv ~1, inband 0).
		if [[ $1 == owned_1M ]]; then
			sed -n 's/.*"bytes":\([0-9]*\).*"rendezvous_bytes":\([0-9]*\).*/\1 \2/p' "$2" |
				awk -v m="$3" '$1 > 0 { printf "rendezvous share %s %.3f\n", m, $2 / $1 }' >>"$out/rendezvous_share.txt"
		fi
		number_or_nan "$mb"
	else
		number_or_nan "$(sed -n 's/.*"one_way_us":{[^}]*"p50":\([0-9.]*\).*/\1/p' "$2")"
	fi
}

# A perftest pair over its TCP bootstrap; prints BW average (col 4) or t_typical (col 5).
run_perftest() { # cell file
	local bin args col srv
	case $1 in
	bw_64K | zc_64K) bin=ib_write_bw args=(-s 65536 -D "$seconds") col=4 ;;
	bw_1M | zc_1M) bin=ib_write_bw args=(-s 1048576 -n $((seconds * 48))) col=4 ;; # -D counts nothing > 256K on rxe
	lat_64) bin=ib_send_lat args=(-s 64 -n "$lat_iters") col=5 ;;
	owned_1M) bin=ib_read_bw args=(-s 1048576 -n $((seconds * 48))) col=4 ;;
	esac
	port=$((port + 1))
	timeout -k 5 120 "$bin" -d "$dev" -F "${args[@]}" -p "$port" >"$2.server" 2>&1 &
	srv=$!
	wait_tcp_listen "$port" || true
	timeout -k 5 120 "$bin" -d "$dev" -F "${args[@]}" -p "$port" "$addr" >"$2" 2>&1 || { sleep 1; kill "$srv" 2>/dev/null || true; }
	wait "$srv" 2>/dev/null || true
	number_or_nan "$(awk -v col=$col '/^ *#bytes/ { if (getline > 0) { print $col; exit } }' "$2")"
}

# rstream echo test: -C transfers of 64 KiB each way, -I times (about 32 MiB per second of
# --seconds at Soft-RoCE speeds); prints MB/s from its Gb/sec.
run_rstream() { # cell file
	local srv iters=$((seconds * 3)) gb
	port=$((port + 1))
	timeout -k 5 120 rstream -b "$addr" -p "$port" -S 65536 -C 100 -I "$iters" >"$2.server" 2>&1 &
	srv=$!
	sleep 1
	timeout -k 5 120 rstream -s "$addr" -p "$port" -S 65536 -C 100 -I "$iters" >"$2" 2>&1 || { sleep 1; kill "$srv" 2>/dev/null || true; }
	wait "$srv" 2>/dev/null || true
	gb=$(awk '/Gb\/sec/ { if (getline > 0) { print $7; exit } }' "$2")
	gb=$(number_or_nan "$gb")
	[[ $gb == nan ]] && { echo nan; return; }
	awk -v g="$gb" 'BEGIN { printf "%.2f\n", g * 1e9 / 8 / 1048576 }'
}

peer_of() { case $1 in owned_*) echo ib_read_bw ;; zc_tput_* | tput_*) echo rstream ;; zc_* | bw_*) echo ib_write_bw ;; lat_*) echo ib_send_lat ;; esac; }

run_one() { # cell tool rep
	local f=$out/raw/$1-$2-$3.out v
	case $2 in
	conduit-*) v=$(run_conduit "$1" "$f" "${2#conduit-}") ;;
	rstream) v=$(run_rstream "$1" "$f") ;;
	*) v=$(run_perftest "$1" "$f") ;;
	esac
	[[ $v == nan ]] && failures=$((failures + 1))
	echo "$1,$2,$3,$v" >>"$samples"
	printf '  %-10s %-12s rep %d  %s\n' "$1" "$2" "$3" "$v"
}

start=$SECONDS
for cell in $cells; do
	peer=$(peer_of "$cell")
	for ((rep = 1; rep <= reps; rep++)); do
		if ((rep % 2 == 0)); then run_one "$cell" "$peer" "$rep"; fi
		cell_modes=$modes
		[[ $cell == owned_1M ]] && cell_modes="rv inband"
		[[ $cell == zc_* ]] && cell_modes="zc"
		for m in $cell_modes; do run_one "$cell" "conduit-$m" "$rep"; done
		if ((rep % 2 == 1)); then run_one "$cell" "$peer" "$rep"; fi
	done
done
elapsed=$((SECONDS - start))

# Medians, ratios, targets (awk: python costs seconds under TCG).
sort -t, -k1,1 -k2,2 "$samples" | awk -F, -v elapsed="$elapsed" -v out="$out" -v modes="$modes" '
	NR == 1 && $1 == "cell" { next }
	$4 != "nan" { vals[$1 "," $2] = vals[$1 "," $2] " " $4 }
	{ cells[$1] = 1 }
	function range(s,    a, n, i, lo, hi) {
		n = split(s, a, " "); lo = hi = "nan"
		for (i = 1; i <= n; i++) { if (lo == "nan" || a[i] + 0 < lo + 0) lo = a[i]; if (hi == "nan" || a[i] + 0 > hi + 0) hi = a[i] }
		return lo ".." hi
	}
	function median(s,    a, n, i, j, t) {
		n = split(s, a, " ")
		if (n == 0) return "nan"
		for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	END {
		order["bw_64K"] = 1; order["bw_1M"] = 2; order["lat_64"] = 3; order["tput_64K"] = 4
		nm = split(modes, mode, " ")
		printf "\n| cell | mode | conduit-bench | peer | peer value | ratio | target | |\n|---|---|---|---|---|---|---|---|\n"
		for (k = 1; k <= 4; k++) for (c in cells) if (order[c] == k) for (j = 1; j <= nm; j++) {
			peer = c ~ /^bw/ ? "ib_write_bw" : c ~ /^lat/ ? "ib_send_lat" : "rstream"
			unit = c ~ /^lat/ ? " us" : " MB/s"
			m1 = median(vals[c ",conduit-" mode[j]]); m2 = median(vals[c "," peer])
			ratio = (m1 == "nan" || m2 == "nan" || m2 == 0) ? "nan" : sprintf("%.2f", m1 / m2)
			if (c ~ /^bw/) { tgt = ">= 0.90"; ok = ratio != "nan" && ratio >= 0.9 }
			else if (c ~ /^lat/) { tgt = "<= 1.30"; ok = ratio != "nan" && ratio <= 1.3 }
			else { tgt = ">= 1.00"; ok = ratio != "nan" && ratio >= 1.0 }
			printf "| %s | %s | %s%s | %s | %s%s | %s | %s | %s |\n", c, mode[j], m1, unit, peer, m2, unit, ratio, tgt, ok ? "PASS" : "MISS"
		}
		zorder["zc_64K"] = 1; zorder["zc_1M"] = 2; zorder["zc_tput_64K"] = 3
		header = 0
		for (k = 1; k <= 3; k++) for (c in cells) if (zorder[c] == k) {
			if (!header++) printf "\n| zero-copy cell (write_owned, default options) | conduit-bench | min..max | peer | peer value | min..max | ratio | target | |\n|---|---|---|---|---|---|---|---|---|\n"
			peer = c ~ /^zc_tput/ ? "rstream" : "ib_write_bw"
			m1 = median(vals[c ",conduit-zc"]); m2 = median(vals[c "," peer])
			ratio = (m1 == "nan" || m2 == "nan" || m2 == 0) ? "nan" : sprintf("%.2f", m1 / m2)
			want = c ~ /^zc_tput/ ? 1.0 : 0.95
			ok = ratio != "nan" && ratio + 0 >= want
			printf "| %s | %s MB/s | %s | %s | %s MB/s | %s | %s | >= %.2f | %s |\n", c, m1, range(vals[c ",conduit-zc"]), peer, m2, range(vals[c "," peer]), ratio, want, ok ? "PASS" : "MISS"
		}
		if ("owned_1M" in cells) {
			printf "\n| owned 1 MiB writes | median MB/s | min..max | vs ib_read_bw |\n|---|---|---|---|\n"
			split("conduit-rv conduit-inband ib_read_bw", tools, " ")
			pr = median(vals["owned_1M,ib_read_bw"])
			for (j = 1; j <= 3; j++) {
				s = vals["owned_1M," tools[j]]; n = split(s, a, " "); lo = hi = "nan"
				for (i = 1; i <= n; i++) { if (lo == "nan" || a[i] + 0 < lo + 0) lo = a[i]; if (hi == "nan" || a[i] + 0 > hi + 0) hi = a[i] }
				m = median(s)
				printf "| %s | %s | %s..%s | %s |\n", tools[j], m, lo, hi, (m == "nan" || pr == "nan" || pr == 0) ? "nan" : sprintf("%.2f", m / pr)
			}
		}
		printf "\nelapsed %d s; raw output in %s\n", elapsed, out
	}' | tee "$out/summary.md"
# The receiver's wakeups per MiB streamed, median per cell and mode.
printf '\nreceiver wakeups per MiB (completion events of the reading connection, median):\n' | tee -a "$out/summary.md"
awk -F, 'NR > 1 { v[$1 " " $2] = v[$1 " " $2] " " $3 }
	END {
		for (k in v) { n = split(v[k], a, " "); for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
			printf "  %-22s %s\n", k, n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
	}' "$wakeup_samples" | sort | tee -a "$out/summary.md"
if [[ -s $out/rendezvous_share.txt ]]; then
	printf '\nowned_1M: share of the measured bytes sent by rendezvous, per run:\n' | tee -a "$out/summary.md"
	sort "$out/rendezvous_share.txt" | uniq -c | tee -a "$out/summary.md"
fi
if ((failures > 0)); then
	echo "rdma_stream: $failures run(s) produced no number (see $out/raw)" >&2
	exit 1
fi
