# bench/lib.sh: sourced by the benchmark scripts that run inside the Soft-RoCE testbed.
#
# bench_enter_testbed NAME DEFAULT_TIMEOUT SCRIPT [ARGS...]
#   Inside the guest (CONDUIT_IN_TESTBED set) it returns at once.  On the host it makes
#   $results_root absolute, passes it in as CONDUIT_BENCH_RESULTS (it must lie inside the
#   repository, the guest's only writable share), runs testbed/run ... -- bash SCRIPT ARGS
#   and exits with its status.  The guest is killed after $CONDUIT_BENCH_GUEST_TIMEOUT
#   seconds (default DEFAULT_TIMEOUT).  Needs $REPO.
#   The host's load average (the guest cannot see it, and under TCG it moves every
#   figure) goes in as CONDUIT_BENCH_HOST_LOAD at the start; at the end it is printed and
#   appended to setup.txt and summary.txt of the run's results folder
#   ($results_root/NAME-<timestamp>/, if the script made one).
bench_enter_testbed() {
	[[ -n ${CONDUIT_IN_TESTBED:-} ]] && return 0
	local name=$1 timeout=$2 script=$3 rc=0 start_epoch start_load end_load dir f
	shift 3
	if [[ ! -x $REPO/testbed/run ]]; then
		echo "$name: not inside the testbed, and $REPO/testbed/run is missing" >&2
		exit 2
	fi
	results_root=$(realpath -m -- "$results_root")
	export CONDUIT_BENCH_RESULTS=$results_root
	start_epoch=$(date +%s)
	start_load="$(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%SZ)"
	export CONDUIT_BENCH_HOST_LOAD=$start_load
	echo "$name: starting the testbed guest (results under $results_root; host load: $start_load)" >&2
	"$REPO/testbed/run" --timeout "${CONDUIT_BENCH_GUEST_TIMEOUT:-$timeout}" -- bash "$script" "$@" || rc=$?
	end_load="$(cut -d' ' -f1-3 /proc/loadavg) at $(date -u +%H:%M:%SZ)"
	echo "$name: host load at the start $start_load, at the end $end_load" >&2
	# The folder this run made: the newest one created since the guest started.
	dir=$(find "$results_root" -maxdepth 1 -type d -name "$name-*" -newermt "@$start_epoch" 2>/dev/null | sort | tail -1)
	if [[ -n $dir ]]; then
		for f in setup.txt summary.txt; do
			[[ -f $dir/$f ]] && echo "host load (1/5/15 min): start $start_load, end $end_load" >>"$dir/$f"
		done
	fi
	exit "$rc"
}

# bench_cleanup_on_exit
#   For host scripts that start servers: on exit (any exit) kill every pid in the array
#   `pids` (the script appends to it), wait for them, and remove the folder `$work`.
bench_cleanup_on_exit() {
	pids=()
	trap 'for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"' EXIT
}

# free_port: prints a TCP port on 127.0.0.1 that was free a moment ago.
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
