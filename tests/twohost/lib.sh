# shellcheck shell=bash
# Sourced by every two-host scenario (tests/twohost/*.sh): skips outside a two-host run,
# names the binaries, and gives the checks and waits the scenarios share.
# Usage in a scenario: . "$(dirname "$0")/lib.sh" BUILD_DIR
set -euo pipefail
shopt -s inherit_errexit # a failing command inside $(...) fails the scenario too
# A scenario that stops on an unexpected error says where (ctest shows stdout).
trap 'echo "FAIL  $(basename "$0") stopped at line $LINENO: $BASH_COMMAND (exit $?)"' ERR

if [[ -z ${CONDUIT_TESTBED_DIR:-} || -z ${CONDUIT_TESTBED_GUEST:-} ]]; then
	if [[ ${CONDUIT_REQUIRE_TWOHOST:-0} == 1 ]]; then
		echo "FAIL: CONDUIT_REQUIRE_TWOHOST=1 but this is not a two-host run" >&2
		exit 1
	fi
	echo "skipped: needs two guests: testbed/run --hosts 2 -- ctest --test-dir build -L twohost"
	exit 77
fi

BUILD=$(cd "${1:?build dir}" && pwd)
G=$CONDUIT_TESTBED_GUEST
STREAM=$BUILD/tests/twohost/twohost_stream
KVCHECK=$BUILD/tests/twohost/twohost_kv
KV=$BUILD/tools/kv/conduit-kv
KVBENCH=$BUILD/tools/kv/conduit-kv-bench
for bin in "$STREAM" "$KVCHECK" "$KV" "$KVBENCH"; do
	[[ -x $bin ]] || { echo "FAIL: $bin is not built (cmake --build $BUILD)" >&2; exit 1; }
done
A=$CONDUIT_TESTBED_ADDR_A
B=$CONDUIT_TESTBED_ADDR_B
NAME=$(basename "$0" .sh)
WORK=$CONDUIT_TESTBED_SHARED/$NAME
rm -rf "$WORK"
mkdir -p "$WORK"
chmod 1777 "$WORK"

# The test timers: a keepalive every 500 ms, a silent peer dropped after 3 s (the defaults,
# 3000/10000, would make every fault case take 10+ s).
KEEPALIVE_TIMEOUT_MS=3000
# rx_initial=0: full-size receive areas from the start.  The scenarios count a server's MRs
# while connected and after the fault; an area growing in between (rx_initial, on traffic)
# would register a larger one and its spares, and the counts would no longer show a leak.
KA="keepalive_ms=500&keepalive_timeout_ms=$KEEPALIVE_TIMEOUT_MS&rx_initial=0"
KA_AUTO="rdma.keepalive_ms=500&rdma.keepalive_timeout_ms=$KEEPALIVE_TIMEOUT_MS&rdma.rx_initial=0"  # the same for auto://
# The documented bound for a failure to be seen: the keepalive timeout plus one keepalive
# period, plus slack for a loaded TCG guest (timers fire late under load).
DETECT_BOUND_MS=$((KEEPALIVE_TIMEOUT_MS + 500 + 2500))

failures=0
t0=$SECONDS
say() { echo "[$NAME +$((SECONDS - t0))s] $*"; }
pass() { echo "PASS  $*"; }
fail() {
	echo "FAIL  $*"
	failures=$((failures + 1))
}
# check DESCRIPTION COMMAND...: PASS if the command succeeds
check() { check_else : "$@"; }
# check_else EVIDENCE DESCRIPTION COMMAND...: as check; on a FAIL it also runs EVIDENCE (a
# function printing what a report needs to explain it)
check_else() {
	local evidence=$1 what=$2
	shift 2
	if "$@"; then pass "$what"; else fail "$what"; "$evidence"; fi
}
# A RESULT line per measured fault, collected for docs/FAILURES.md.
result() { echo "RESULT $NAME $*"; }

# field "key=value key2=..." KEY -> value (quoted values keep their spaces)
field() {
	local line=$1 key=$2
	if [[ $line =~ (^|[[:space:]])$key=\"([^\"]*)\" ]]; then
		printf '%s' "${BASH_REMATCH[2]}"
	elif [[ $line =~ (^|[[:space:]])$key=([^[:space:]]*) ]]; then
		printf '%s' "${BASH_REMATCH[2]}"
	fi
}

# wait_for HOST JOB PATTERN SECONDS: until the job's output has a line matching PATTERN
# (extended regex); prints the last such line. Fails after SECONDS.
wait_for() {
	local host=$1 job=$2 pattern=$3 limit=$4 deadline line
	deadline=$((SECONDS + limit))
	while ((SECONDS < deadline)); do
		line=$("$G" "$host" output "$job" 2>&1 | grep -E -- "$pattern" | tail -n 1 || true)
		if [[ -n $line ]]; then
			printf '%s\n' "$line"
			return 0
		fi
		sleep 0.3
	done
	echo "wait_for: no /$pattern/ from $host:$job within $limit s; its output:" >&2
	"$G" "$host" output "$job" 2>&1 | tail -n 20 | sed 's/^/    | /' >&2
	return 1
}

# A stream server in HOST as job NAME on URL; returns once it listens. Prints its pid.
start_stream_server() {
	local host=$1 job=$2 url=$3 line
	"$G" "$host" start "$job" -- "$STREAM" serve "$url" --timeout 1200
	line=$(wait_for "$host" "$job" '^listening ' 60) || return 1
	field "$line" pid
}

# qp_count HOST PID / mr_count HOST PID: that process's RC QPs / MRs (rdma resource)
# (bounded: `rdma` blocks while a process is stuck destroying a QP)
qp_count() { "$G" "$1" run --timeout 30 -- rdma resource show qp 2>/dev/null | grep -c " type RC .* pid $2 " || true; }
mr_count() { "$G" "$1" run --timeout 30 -- rdma resource show mr 2>/dev/null | grep -c " pid $2 " || true; }

# job_state HOST JOB: the state and kernel stack of each of the job's threads, for a job that did not end
# when it should have (evidence for a report).
job_state() {
	local pid
	pid=$("$G" "$1" pid "$2" 2>/dev/null) || return 0
	"$G" "$1" run --timeout 30 -- sh -c "for p in \$(pgrep -g $pid); do for t in /proc/\$p/task/*; do
		echo \"pid \$p task \${t##*/}: \$(grep State \$t/status) wchan \$(cat \$t/wchan)\"; cat \$t/stack; done; done" 2>&1 |
		sed "s/^/    $1:$2 | /" || true
}

# acks FILE [PATTERN]: lines of an acknowledgement log matching PATTERN (default: SETs)
acks() {
	local n
	n=$(grep -c -- "${2:-^set }" "$1" 2>/dev/null) || true
	echo "${n:-0}"
}
# wait_acks FILE N SECONDS: until the log holds N acknowledged SETs
wait_acks() {
	local deadline=$((SECONDS + $3))
	while (($(acks "$1") < $2)); do
		((SECONDS < deadline)) || return 1
		sleep 0.5
	done
}

# ms_since T: milliseconds from $EPOCHREALTIME value T until now (host clock; includes up to
# ~0.5 s of polling the guest's output)
ms_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%d", (b - a) * 1000 }'; }

# le A B: A <= B (integers)
le() { [[ -n $1 && -n $2 ]] && (($1 <= $2)); }

finish() {
	say "done: $failures failed check(s)"
	"$G" reset >/dev/null || true  # its stderr: why it had to reboot the guests, if it did
	((failures == 0))
}

say "resetting the guests"
"$G" reset
